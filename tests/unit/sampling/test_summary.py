#!/usr/bin/env python3
"""The sampling summaries' text from given figures (python/rbpeeklib/
sampling/): what `ruby sample`'s summary and `rbpeek top`'s header say
about the stacks recorded.

  shares    the summary's Stacks line and top's header give the same
            shares of the same denominator, the stacks recorded (what the
            folded file adds up to), whatever the threads seen but not
            recorded (idle ones left out): issue 37, where both divided by
            every thread's samples
  gc cpu    the GC's share of the CPU time: summed over processes and
            top's periods, the same figure in the summary and top's header
  native    the Native line: how each stack's registers were had, the
            stacks whose frames were reused from the sample before (the
            thread had not run) said only when there are some
  rate      the Rate line: the rate reached, and when short beyond
            chance, why (the stops, the processes' sampling threads, the
            machine's load): issue 37

usage: test_summary.py      (ctest: unit.py_sampling)
Exit status: 0 pass, 1 fail.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

from rbpeeklib.sampling.report import (contention_line, gc_cpu_short, gc_figures, gc_line, native_line,  # noqa: E402
                                       stacks_line)
from rbpeeklib.sampling.stats import Stats  # noqa: E402
from rbpeeklib.sampling.states import STATES, recorded_gvl_wait, shares_text  # noqa: E402
from rbpeeklib.top import Counts, Top  # noqa: E402


def tally(pid, tid, states, recorded):
    full = dict.fromkeys(STATES, 0)
    full.update(states)
    rec = dict.fromkeys(STATES, 0)
    rec.update(recorded)
    return {"pid": pid, "tid": tid, "name": None, "main": tid == pid, "samples": sum(full.values()),
            "states": full, "recorded": rec}


class Args:
    rate = 100.0
    lines = False


class Shares(unittest.TestCase):
    # A worker sampled 617 times: its main thread recorded at each sample
    # (18 times in the GC, 28 waiting for the GVL), and an idle thread
    # seen at each sample and never recorded (idle threads left out).
    TALLIES = [tally(7, 7, {"running": 571, "gvl_wait": 28, "gc": 18}, {"running": 571, "gvl_wait": 28, "gc": 18}),
               tally(7, 8, {"blocked": 617}, {})]
    STACKS, GC = 617, 18

    def test_of_the_stacks_recorded(self):
        text = shares_text(self.STACKS, 28, self.GC)
        self.assertEqual(text, "GVL wait 4.5%, GC 2.9% of the 617 stacks recorded")
        self.assertEqual(shares_text(0, 0, 0), "no stacks recorded")

    def test_summary_and_top_agree(self):
        line = stacks_line(self.STACKS, 31, "idle threads left out", recorded_gvl_wait(self.TALLIES), self.GC)
        c = Counts()
        c.stacks, c.samples, c.elapsed = self.STACKS, 617, 6.2
        c.gc.gc[1] = self.GC
        c.add_tallies(self.TALLIES)
        top = Top.__new__(Top)
        top.args, top.sources, top.counts, top.by_own, top.hold = Args(), {}, c, True, False
        head = top.lines(400, 10)[0]
        want = shares_text(self.STACKS, 28, self.GC)
        self.assertIn(want, line)
        self.assertIn(want, head)
        self.assertTrue(line.startswith("Stacks:    617 recorded (idle threads left out); 31 distinct; "), line)
        self.assertTrue(head.startswith("rbpeek top: 617 samples, "), head)
        # Not of every thread's samples (1234, the idle thread's too):
        # GVL wait 2.3%, GC 1.5%, as both said before.
        self.assertNotIn("2.3%", head + line)
        self.assertNotIn("1.5%", head + line)


class GcCpu(unittest.TestCase):
    """The GC's share of the CPU time of the thread it runs on: the sample
    summary of one process, of several (their counts summed) and `top`'s
    header (its periods' counts summed) give one figure from one place
    (report.gc_figures)."""

    @staticmethod
    def run_stats(gc, on_cpu, in_gc, waited):
        st = Stats()
        st.gc[1] = gc
        st.cpu_samples, st.cpu_gc, st.cpu_waited = on_cpu, in_gc, waited
        return st

    def test_summed(self):
        a, b = self.run_stats(10, 300, 120, 5), self.run_stats(6, 100, 40, 1)
        total = Stats()
        total.add_gc(a)
        total.add_gc(b)
        self.assertEqual((total.gc[1], total.cpu_samples, total.cpu_gc, total.cpu_waited), (16, 400, 160, 6))
        doc = gc_figures(total, 100)
        self.assertEqual(doc["cpu"]["share"], 0.4)
        lo, hi = doc["cpu"]["interval90"]
        # Wilson's 90% interval of 160/400: +-4.0 points
        self.assertAlmostEqual(lo, 0.3603, places=3)
        self.assertAlmostEqual(hi, 0.4410, places=3)
        self.assertIn("40.0% of the CPU time of the thread it runs on (90%: 36.0-44.1%, from the 400 samples",
                      gc_line(total, 100))

    def test_top_header(self):
        c = Counts()
        c.stacks, c.samples, c.elapsed = 400, 400, 4.0
        c.gc.add_gc(self.run_stats(16, 400, 160, 6))
        top = Top.__new__(Top)
        top.args, top.sources, top.counts, top.by_own, top.hold = Args(), {}, c, True, False
        second = top.lines(400, 10)[1]
        self.assertEqual(second, "GC 40.0% of its thread's CPU time (90%: 36.0-44.1%, 400 samples on a CPU)")
        self.assertEqual(gc_cpu_short(Stats()), "")
        loaded = self.run_stats(16, 0, 0, 400)
        self.assertEqual(gc_figures(loaded, 100)["cpu"],
                         {"samples": 0, "in_gc": 0, "share": None, "interval90": None, "preempted": 400})
        self.assertIn("its share of the CPU time not known: none of the samples found the GVL's holder on a CPU, 400 "
                      "found it preempted", gc_line(loaded, 100))
        self.assertTrue(gc_cpu_short(loaded).startswith("GC: its share of the CPU time not known"))

    def test_contention(self):
        """The summary says where the holder waited for a CPU at a fifth of
        the samples or more, and only there (several processes: summed)."""
        self.assertIsNone(contention_line(self.run_stats(0, 400, 0, 99)))   # 19.8%
        self.assertIsNone(contention_line(Stats()))                         # nothing told
        self.assertIsNone(contention_line(self.run_stats(0, 5, 0, 10)))     # too few to say
        line = contention_line(self.run_stats(0, 300, 0, 100))
        self.assertTrue(line.startswith("CPU:       the GVL's holder was waiting for a CPU at 100 of 400 samples "
                                        "(25%)"), line)
        total = Stats()
        total.add_gc(self.run_stats(0, 300, 0, 50))
        total.add_gc(self.run_stats(0, 100, 0, 50))
        self.assertIn("at 100 of 500 samples (20%)", contention_line(total))


class Native(unittest.TestCase):
    def test_reused_said_when_some(self):
        st = Stats()
        st.native_ways = (564, 134, 3, 0, 8803)
        line = native_line(st)
        self.assertIn("registers of 564 stacks read from a stopped thread, 134 from /proc while it slept in the "
                      "kernel, 3 stopped for it alone", line)
        self.assertIn("; 8803 reused from the previous sample: the thread had not run", line)
        st.native_ways = (564, 8937, 3, 0, 0)
        self.assertNotIn("reused", native_line(st))
        # Stacks not merged: how many, and why the first was not.
        st.unmerged, st.unmerged_note = 2, "3 VM entries on the machine stack for 2 segments"
        self.assertIn("; 2 stacks could not be merged (recorded with their Ruby frames alone; the first: 3 VM "
                      "entries on the machine stack for 2 segments)", native_line(st))
        st.unmerged_note = None
        self.assertIn("; 2 stacks could not be merged (recorded with their Ruby frames alone)", native_line(st))


class Rate(unittest.TestCase):
    """The Rate line: the rate reached, and when short of the rate asked
    beyond chance (3 standard deviations of the Poisson count), why."""

    def test_within_chance(self):
        # 970 samples in 10 s at 100 Hz: 1000 +- 32, chance
        from rbpeeklib.sampling.report import RateFigures
        line = RateFigures(100.0, [(970, 10.0, 0.5)], 3, cpus=2, load=0.5).line()
        self.assertEqual(line, "Rate:      97.0 Hz reached of the 100 Hz asked")

    def test_stops_longer_than_the_period(self):
        from rbpeeklib.sampling.report import RateFigures
        line = RateFigures(100.0, [(600, 10.0, 600 * 0.012)], 3, cpus=2, load=0.5).line()
        self.assertIn("60.0 Hz reached of the 100 Hz asked: short, as each sample kept the sampler busy up to "
                      "12.00 ms of the 10.00 ms period", line)
        self.assertTrue(line.endswith("; a lower --rate keeps its schedule"), line)

    def test_load_and_processes(self):
        # The run: 4 processes at 55-73 Hz, load 14 on 2 CPUs.
        from rbpeeklib.sampling.report import RateFigures
        procs = [(550, 10.0, 550 * 0.002), (730, 10.0, 730 * 0.002), (700, 10.0, 1.4), (990, 10.0, 2.0)]
        f = RateFigures(100.0, procs, 13, cpus=2, load=14.0)
        line = f.line()
        self.assertIn("55.0-99.0 Hz reached by the 4 processes of the 100 Hz asked: short (3 of the processes)",
                      line)
        self.assertIn("4 processes with 13 Ruby threads in all: at 100 Hz their 4 sampling threads needed 0.80 "
                      "of the 2 CPUs", line)
        self.assertIn("the machine was loaded (load average 14.0 on 2 CPUs)", line)
        self.assertTrue(f.doc()["short"])
        # Loaded alone: no lower --rate advised, it would not help.
        line = RateFigures(100.0, [(600, 10.0, 0.6)], 3, cpus=2, load=14.0).line()
        self.assertNotIn("lower --rate", line)
        self.assertIn("the machine was loaded", line)


if __name__ == "__main__":
    unittest.main()
