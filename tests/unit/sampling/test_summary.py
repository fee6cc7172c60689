#!/usr/bin/env python3
"""The sampling summaries' text from given figures (python/rbpeeklib/
sampling/): what `ruby sample`'s summary and `rbpeek top`'s header say
about the stacks recorded.

  shares    the summary's Stacks line and top's header give the same
            shares of the same denominator, the stacks recorded (what the
            folded file adds up to), whatever the threads seen but not
            recorded (idle ones left out): issue 37, where both divided by
            every thread's samples

usage: test_summary.py      (ctest: unit.py_sampling)
Exit status: 0 pass, 1 fail.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "python"))

from rbpeeklib.sampling.report import stacks_line  # noqa: E402
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
        c.stacks, c.gc, c.samples, c.elapsed = self.STACKS, self.GC, 617, 6.2
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


if __name__ == "__main__":
    unittest.main()
