"""What a sampling run leaves: the output files (checked to be writable
before sampling starts, written after it ends) and the summary printed at
the end."""

import math
import os
import time

from ..core import FORMATS, RbpeekError, share_interval
from .states import recorded_gvl_wait, shares_text
from .stats import fmt_rate


def check_outputs(args, pid):
    """[(format, path)] of the files to write (each format's --NAME FILE;
    by default the formats so marked, as rbpeek-PID-TIME.NAME), each checked
    to be writable before sampling starts."""
    outs = [(f.name, getattr(args, f.name)) for f in FORMATS if getattr(args, f.name)]
    if not outs:
        base = "rbpeek-%d-%s" % (pid, time.strftime("%Y%m%d-%H%M%S"))
        outs = [(f.name, "%s.%s" % (base, f.name)) for f in FORMATS if f.default]
    for _kind, path in outs:
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise RbpeekError("cannot write %s: no such directory %s" % (path, d))
        if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
            raise RbpeekError("cannot write %s: permission denied" % path)
    return outs


def write_outputs(dbg, profile, outputs, facts):
    """Writes each output; one that fails is reported and the rest still
    written. facts: what the formats' options take (Profile.write). Returns
    the paths written."""
    written = []
    for fmt, path in outputs:
        try:
            profile.write(fmt, path, facts)
            written.append(path)
        except RbpeekError as e:
            dbg.write("rbpeek: could not write %s: %s\n" % (path, e))
    return written


def dropped_line(st, when):
    """The share of stacks dropped as torn, and apart from it the stacks
    that changed once, were walked again and kept (retried)."""
    seen = st.added_threads + st.torn_threads
    kept = max(0, st.retried_threads - st.torn_threads)
    return ("Dropped:   %d of %d thread stacks (%.1f%%) %s (torn); %d more changed once and were read again "
            "(retried, kept)" % (st.torn_threads, seen, 100.0 * st.torn_threads / seen if seen else 0.0, when, kept))


def traced_cost_lines(st):
    """The Cost line of a traced run (and, --nonblocking, the share of
    stacks dropped as torn). "Held" is the wall time during which some
    thread of the target was stopped: what the target's running code can
    lose, whatever the number of parked threads."""
    n = st.samples
    el = st.elapsed()
    held = 100.0 * st.held / el if el > 0 else 0.0
    if st.stop_mode == "none":
        lines = ["Cost:      nothing stopped (--nonblocking): per sample %.0f us reading the stacks while the "
                 "target ran; the target was held 0.0%% of the time" % (1e6 * st.walk / n)]
        lines.append(dropped_line(st, "changed while they were read"))
        return lines
    if st.stop_mode == "gvl":
        what = ("the GVL holder only in %d of %d samples (%.1f threads stopped per sample on average; every "
                "thread when the GVL was free or changing hands)"
                % (n - st.full_stops, n, st.threads_stopped / float(n)))
    else:
        what = "every thread (--stop-all)"
    # The steps' times are the sampler's, not the target's: most of "stopping"
    # (reads before the stop) and "walking" (parked threads, after the
    # resume) run while the target runs. What the target loses is "held".
    busy = 100.0 * (1.0 - st.running / el) if el > 0 else 0.0
    seen = 100.0 * st.held_seen / el if el > 0 else 0.0
    lines = ["Cost:      per sample %.0f us stopping the threads, %.0f us walking the stacks, %.0f us "
             "resuming them (traced by rbpeek); the sampler was at work %.1f%% of the wall time; threads held "
             "stopped %.2f-%.2f%% of the wall time (from the stops seen, and from the stops asked for: a thread "
             "runs on until it stops)" % (1e6 * st.stop / n, 1e6 * st.walk / n, 1e6 * st.resume / n, busy,
                                          min(seen, held), held),
             "Stopped:   %s" % what]
    if st.stop_mode == "gvl":
        lines.append(dropped_line(st, "changed while they were read after the resume"))
        if st.ruby_reused:
            lines.append("Reused:    %d of %d thread stacks were an earlier sample's walk: their threads had not run "
                         "since (their schedstat said so), so their stacks had not changed"
                         % (st.ruby_reused, st.added_threads + st.torn_threads))
    return lines


GC_PHASES = ((1, "marking"), (2, "sweeping"), (3, "compacting"), (4, "phase not told"))


# The normal quantile of a 90% interval: the GC's share of the CPU time is
# a binomial proportion of the samples that found the GVL's holder on a CPU,
# an allocation site's share one of the allocator samples (commands/alloc_sites.py).
Z90 = 1.644854


def gc_figures(st, total=None):
    """The GC's figures of a run, for the summary and its JSON: its share of
    the stacks recorded (total: the profile's, which the folded file and
    the SVG's root count; the run's own stacks when not given; each such
    stack ends in its [GC: ...] frame), by phase; and its share of the CPU time of the thread it runs on, from the
    samples that found the GVL's holder on a CPU (None where no sample could
    tell: nothing stopped, or a debugger's own stops), with its 90% interval
    (docs/sampling.md, "The GC's share of the CPU time")."""
    if total is None:
        total = st.added_threads
    gc = sum(st.gc[1:])
    doc = {"stacks": total, "stacks_in_gc": gc,
           "share_of_stacks": round(float(gc) / total, 4) if total else None,
           "phases": {name: st.gc[k] for k, name in GC_PHASES if st.gc[k]}, "cpu": None}
    n, waited = getattr(st, "cpu_samples", 0), getattr(st, "cpu_waited", 0)
    if n:
        lo, hi = share_interval(st.cpu_gc, n, Z90)
        doc["cpu"] = {"samples": n, "in_gc": st.cpu_gc, "share": round(float(st.cpu_gc) / n, 4),
                      "interval90": [round(lo, 4), round(hi, 4)], "preempted": waited}
    elif waited:
        # Every sample found the holder preempted (a machine so loaded that
        # the program waits for a CPU most of the time): no share to give.
        doc["cpu"] = {"samples": 0, "in_gc": 0, "share": None, "interval90": None, "preempted": waited}
    return doc


def gc_cpu_unknown(cpu):
    """Why the GC's share of the CPU time is not given, where every sample
    found the GVL's holder preempted."""
    return ("its share of the CPU time not known: none of the samples found the GVL's holder on a CPU, %d found it "
            "preempted (the machine is loaded)" % cpu["preempted"])


def gc_line(st, total=None):
    """The GC's figures as the summary's line (gc_figures)."""
    f = gc_figures(st, total)
    total, gc = f["stacks"], f["stacks_in_gc"]
    if not total:
        return "GC:        no stacks recorded"
    cpu = f["cpu"]
    if cpu and not cpu["samples"]:
        of_cpu = "; " + gc_cpu_unknown(cpu)
    elif cpu:
        lo, hi = cpu["interval90"]
        of_cpu = ("; %.1f%% of the CPU time of the thread it runs on (90%%: %.1f-%.1f%%, from the %d samples that "
                  "found it on a CPU%s)" % (100.0 * cpu["share"], 100.0 * lo, 100.0 * hi, cpu["samples"],
                                            ", %d more found it preempted" % cpu["preempted"] if cpu["preempted"]
                                            else ""))
    else:
        of_cpu = ""
    if not gc:
        return "GC:        0%% of the stacks (the GC never ran at a sample)%s" % of_cpu
    parts = ["%s %.1f%%" % (name, 100.0 * st.gc[k] / total) for k, name in GC_PHASES if st.gc[k]]
    return "GC:        %.1f%% of the stacks (%d of %d): %s%s" % (100.0 * gc / total, gc, total, ", ".join(parts),
                                                               of_cpu)


def gc_cpu_short(st):
    """The GC's share of the CPU time of the thread it runs on, in short, for
    `top`'s header (gc_figures; "" where no sample could tell)."""
    cpu = gc_figures(st, 0)["cpu"]
    if not cpu:
        return ""
    if not cpu["samples"]:
        return "GC: " + gc_cpu_unknown(cpu)
    lo, hi = cpu["interval90"]
    return "GC %.1f%% of its thread's CPU time (90%%: %.1f-%.1f%%, %d samples on a CPU)" % (
        100.0 * cpu["share"], 100.0 * lo, 100.0 * hi, cpu["samples"])


# A share of the samples that found the GVL's holder waiting for a CPU from
# which the summary says the program competed for CPUs (contention_line).
CONTENDED = 0.2


def contention_line(st):
    """Where at least CONTENDED of the samples that could tell found the
    GVL's holder waiting for a CPU, a line saying so and what it does to the
    figures (docs/sampling.md, "Under CPU contention"); else None. A sample
    that stops the program moves it in the run queue, and where it competes
    for CPUs that shifts where the next samples find it (measured: 8-13
    points between two methods at load 3-4 on 2 CPUs)."""
    n, waited = getattr(st, "cpu_samples", 0), getattr(st, "cpu_waited", 0)
    if n + waited < 20 or waited < CONTENDED * (n + waited):
        return None
    return ("CPU:       the GVL's holder was waiting for a CPU at %d of %d samples (%.0f%%): the program competes "
            "for CPUs, and stopping it to sample shifts where it runs: its stacks' shares, and the GC's share of "
            "the CPU time, may be off by several points (docs/sampling.md, \"Under CPU contention\"; "
            "--nonblocking does not stop it)"
            % (waited, n + waited, 100.0 * waited / (n + waited)))


def gc_lines(st, total=None):
    """The summaries' GC line, and the CPU line after it where the holder
    competed for CPUs (one process's and several processes' summaries)."""
    contended = contention_line(st)
    return [gc_line(st, total)] + ([contended] if contended else [])


def native_line(st):
    """How the native stacks were had (traced) and what could not be merged."""
    parts = []
    if st.native_ways:
        held, peeked, stopped, none, reused = st.native_ways
        parts.append("registers of %d stacks read from a stopped thread, %d from /proc while it slept in the "
                     "kernel, %d stopped for it alone" % (held, peeked, stopped))
        if reused:
            parts.append("%d reused from the previous sample: the thread had not run" % reused)
        if none:
            parts.append("%d without registers (no machine frames)" % none)
    if st.unmerged:
        note = getattr(st, "unmerged_note", None)
        parts.append("%d stack%s could not be merged (recorded with their Ruby frames alone%s)"
                     % (st.unmerged, "" if st.unmerged == 1 else "s", "; the first: " + note if note else ""))
    return "Native:    %s" % ("; ".join(parts) if parts else "every stack merged")


def stacks_line(stacks, distinct, scope, gvl_wait, gc):
    """The summaries' Stacks line: the stacks recorded (the folded file's
    sum, the flamegraph's root), and what they were doing as shares of
    them."""
    return "Stacks:    %d recorded (%s); %d distinct; %s" % (stacks, scope, distinct, shares_text(stacks, gvl_wait, gc))


def summary_text(st, profile, pid, version, interval, rate, end, written, args, only, state_lines=(), tallies=()):
    """The text printed when sampling ends: how it ended, the rate, what was
    recorded and skipped, the cost per sample, and the top frames."""
    lines = ["rbpeek: sampling ended: %s" % end,
             "Samples:   %d in %.2f s: %s Hz (asked for %s Hz)"
             % (st.samples, st.elapsed(), fmt_rate(rate), fmt_rate(1.0 / interval)),
             rate_figures(1.0 / interval, [st], len(tallies)).line()]
    scope = "all threads" if args.threads == "all" else "thread %s" % (only.get("dbg_num"))
    if args.on_cpu:
        scope += ", on-CPU only"
    elif not getattr(args, "idle", False):
        scope += ", idle (blocked) ones left out: --idle keeps them"
    lines.append(stacks_line(profile.total(), profile.stack_count(), scope, recorded_gvl_wait(tallies),
                             sum(st.gc[1:])))
    skipped = []
    if st.failed_threads:
        skipped.append("%d thread walk%s failed (torn or unreadable stack)"
                       % (st.failed_threads, "" if st.failed_threads == 1 else "s"))
    if st.failed_samples:
        skipped.append("%d sample%s could not be walked at all (%s)"
                       % (st.failed_samples, "" if st.failed_samples == 1 else "s", st.last_error))
    if st.not_stopped:
        skipped.append("%d thread%s did not stop in time (sampled anyway)"
                       % (st.not_stopped, "" if st.not_stopped == 1 else "s"))
    lines.append("Skipped:   %s" % ("; ".join(skipped) if skipped else "none"))
    lines.extend(gc_lines(st, profile.total()))
    if getattr(args, "native", False):
        lines.append(native_line(st))
    if args.on_cpu:
        lines.append("Off-CPU:   %d thread samples left out (blocked or waiting)%s"
                     % (st.filtered, "; %d judged by Ruby's status alone (TID unknown)" % st.tid_unknown
                        if st.tid_unknown else ""))
    lines.extend(state_lines)
    if st.samples:
        n = st.samples
        share = st.running / st.elapsed() if st.elapsed() > 0 else 0.0
        if st.traced:
            lines.extend(traced_cost_lines(st))
        else:
            lines.append("Cost:      per sample %.0f us walking the stacks, %.0f us for the debugger to stop "
                         "the target; resumed %.0f%% of the time (resuming included; stopped through the "
                         "debugger: %s)" % (1e6 * st.walk / n, 1e6 * st.stop / n, 100.0 * share, st.via))
        if share < 0.5 and n >= 20:
            lines.append("Note:      this rate is more than the debugger keeps up with: the target ran in "
                         "short bursts, so neighbouring samples saw nearly the same stack and count for less "
                         "than their number suggests (a lower --rate costs less and loses little)")
    return summary_end(lines, profile, written)


def summary_end(lines, profile, written):
    """The summary's lines, then the top frames (by self, then by total)
    or that no stack was recorded, then the files written."""
    out = "\n".join(lines) + "\n"
    if profile.total():
        out += "\n" + profile.top(True, 10) + "\n" + profile.top(False, 10)
    else:
        out += "(no Ruby stacks were recorded)\n"
    if written:
        out += "rbpeek: wrote %s\n" % ", ".join(written)
    return out



# A process's samples in T seconds at R Hz: the tracer draws its gaps at
# random (exponential, tracer.c), so the count is Poisson, R*T on average
# with a standard deviation of sqrt(R*T). Fewer than SHORT_SD of them
# below is a rate that fell short, not chance.
SHORT_SD = 3.0
# The sampling threads' own work, in CPUs, from which it is said as a
# cause of a short rate with several processes: a quarter of the machine.
NEED_SHARE = 0.25


def rate_figures(asked_hz, stats, threads):
    """The Rate line's figures of a run: each process's Stats."""
    return RateFigures(asked_hz, [(st.samples, st.elapsed(), st.stop + st.walk + st.resume) for st in stats], threads)


class RateFigures:
    """What the Rate line is made of: the rate asked, each process's
    (samples, seconds sampled, seconds the sampler was at work on it), the
    Ruby threads sampled in all, the machine's CPUs and its load average."""

    def __init__(self, asked_hz, procs, threads, cpus=None, load=None):
        self.asked_hz, self.procs, self.threads = asked_hz, procs, threads
        self.cpus = cpus or len(os.sched_getaffinity(0))
        self.load = os.getloadavg()[0] if load is None else load

    def reached(self):
        return [n / el for n, el, _ in self.procs if el > 0]

    def short(self):
        """The processes sampled short of the rate asked beyond chance."""
        out = []
        for n, el, busy in self.procs:
            want = self.asked_hz * el
            if el > 0 and n < want - SHORT_SD * math.sqrt(want):
                out.append((n, el, busy))
        return out

    def why(self):
        """Why the rate fell short, each cause with its figures, and
        whether a lower rate would keep its schedule (the sampling's own
        work was a cause)."""
        short = self.short()
        if not short:
            return [], False
        period = 1.0 / self.asked_hz
        why = []
        per_sample = max([busy / n for n, _el, busy in short if n] or [0.0])
        if per_sample >= 0.5 * period:
            why.append("each sample kept the sampler busy up to %.2f ms of the %.2f ms period (stopping, walking "
                       "and resuming: the Cost line)" % (1e3 * per_sample, 1e3 * period))
        need = sum(self.asked_hz * busy / n for n, _el, busy in self.procs if n)
        if len(self.procs) > 1 and need >= NEED_SHARE * self.cpus:
            why.append("%d processes with %d Ruby threads in all: at %s Hz their %d sampling threads needed %.2f "
                       "of the %d CPUs" % (len(self.procs), self.threads, fmt_rate(self.asked_hz), len(self.procs),
                                          need, self.cpus))
        lower = bool(why)
        if self.load > self.cpus:
            why.append("the machine was loaded (load average %.1f on %d CPUs): a sampling thread waited for a CPU "
                       "past its samples' times" % (self.load, self.cpus))
        if not why:
            why.append("the sampling thread ran late for no cause seen here (load average %.1f on %d CPUs)"
                       % (self.load, self.cpus))
        return why, lower

    def line(self):
        """The summary's Rate line: the rate reached, and when it fell short
        of the rate asked (beyond chance), why."""
        rates = self.reached()
        if not rates:
            return "Rate:      no sample taken (asked for %s Hz)" % fmt_rate(self.asked_hz)
        lo, hi = min(rates), max(rates)
        got = fmt_rate(lo) if len(rates) == 1 else "%s-%s" % (fmt_rate(lo), fmt_rate(hi))
        text = "Rate:      %s Hz reached%s of the %s Hz asked" % (
            got, "" if len(rates) == 1 else " by the %d processes" % len(rates), fmt_rate(self.asked_hz))
        why, lower = self.why()
        if not why:
            return text
        n = len(self.short())
        who = "" if len(self.procs) == 1 else " (%d of the processes)" % n
        return "%s: short%s, as %s%s" % (text, who, "; ".join(why), "; a lower --rate keeps its schedule" if lower
                                         else "")

    def doc(self):
        """The same for --json."""
        return {"asked_hz": self.asked_hz, "reached_hz": [round(r, 1) for r in self.reached()],
                "short": bool(self.short()), "why": self.why()[0], "load_average": round(self.load, 2),
                "cpus": self.cpus}
