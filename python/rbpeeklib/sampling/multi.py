"""Sampling several processes at once (`rbpeek sample --pid A --pid B`,
`--subprocesses`): a pre-forking server's master and its workers.

Each process is sampled by a tracer of its own (the C loop of
sampling/traced.py, one thread each: a process has one tracer, and a
profile is filled by one thread), into a profile of its own whose every
stack starts with a root frame naming the process, "COMMAND (pid N)".
The profiles are merged into one at the end (rbpeek_profile_merge).

With --subprocesses the process tree is followed: the descendants that
exist at the start join with the named processes, and this loop looks
for new children of every sampled process once per sampling period
(/proc/PID/task/*/children), so that a worker forked during the run joins
within about one period plus the time to open it (the layout is found
again for each process; a forked child's is its parent's). A process that
exits leaves: its tracer ends as a single-process run ends when its
target exits, the others go on. A child that is not a Ruby process (a
shell, an exec'd program) is listed as skipped, once.

The run ends at --duration, after N samples of every process, on Ctrl-C,
or when every sampled process has exited.
"""

import random
import time

from ..core import STOP_MODES, TRACE_ENDS, Profile, RbpeekError, SampleOptions, Trace, TraceConfig
from .procs import children, command_line, refuse_if_traced, tree
from .signals import signame
from .stats import Stats, fmt_rate
from .traced import stop_mode

MAX_PROCESSES = 256         # processes sampled at once (a tracer thread each)
MIN_POLL = 0.005            # seconds: the shortest wait between looks for new children


def process_label(pid):
    """The root frame naming a process: its command line, shortened, and its pid."""
    return "%s (pid %d)" % (command_line(pid, 56) or "?", pid)


class Member:
    """One sampled process: its session, profile, tracer and outcome."""

    def __init__(self, pid, label, session, profile, opts, cfg, joined_at):
        self.pid, self.label = pid, label
        self.session, self.profile, self.opts, self.cfg = session, profile, opts, cfg
        self.joined_at = joined_at      # seconds after the start; 0 for those there at the start
        self.trace = None
        self.stats = Stats()
        self.stats.traced = True
        self.end = None
        self.version = session.info()["ruby_version"]


def _end_text(ts, args):
    why = TRACE_ENDS.get(ts.end)
    if why == "done":
        return ("%d samples taken" % args.count if args.count and ts.samples >= args.count
                else "%g s elapsed" % (args.duration or 0))
    if why == "exited":
        return "exited (%s)" % ("exit status %d" % ts.exit_code if not ts.signal else "killed by %s" % signame(ts.signal))
    if why == "signal":
        return "stopped by %s (left stopped with it pending)" % signame(ts.signal)
    if why == "exec":
        return "called exec()"
    if why == "failed":
        return "failed: %s" % (ts.message.decode("utf-8", "replace") or "the sampling thread failed")
    if why == "cancelled":
        return "ended with the run"
    return why or "?"


class MultiRun:
    """The run: members by pid, the processes skipped and why."""

    def __init__(self, open_session, args, interval, follow, dbg):
        self.open_session = open_session    # pid -> a Session (raises RbpeekError)
        self.args, self.interval, self.follow, self.dbg = args, interval, follow, dbg
        self.members = {}
        self.order = []
        self.skipped = {}
        self.t0 = None
        self.end = None

    def _config(self, remaining):
        a = self.args
        cfg = TraceConfig()
        cfg.interval_s = self.interval
        cfg.max_samples = a.count or 0
        cfg.duration_s = remaining or 0.0
        cfg.max_frames = a.max_frames
        cfg.seed = random.getrandbits(63) | 1
        cfg.stop_mode = STOP_MODES[stop_mode(a)]
        cfg.native = 1 if a.native else 0
        for num in range(1, 65):   # as a process runs untraced: every signal delivered, none stops sampling
            cfg.pass_signals[num] = 1
        return cfg

    def join(self, pid, named, at_start=False):
        """Starts sampling pid. A named process that cannot be sampled fails
        the run (before anything is written); a child is skipped, once."""
        if pid in self.members or pid in self.skipped:
            return
        try:
            if len(self.members) >= MAX_PROCESSES:
                raise RbpeekError("more than %d processes: not sampled" % MAX_PROCESSES)
            busy = refuse_if_traced(pid)
            if busy:
                raise RbpeekError(busy)
            label = process_label(pid)
            session = self.open_session(pid)
            opts = SampleOptions()
            opts.per_thread = 1 if self.args.per_thread else 0
            opts.on_cpu = 1 if self.args.on_cpu else 0
            opts.drop_idle = 0 if (self.args.idle or self.args.on_cpu) else 1
            opts.pid = pid
            opts.root_frame = label.encode("utf-8", "replace")
            remaining = None
            now = time.perf_counter()
            if self.args.duration:
                remaining = self.args.duration - (now - self.t0 if self.t0 else 0.0)
                if remaining <= 0.001:
                    return
            m = Member(pid, label, session, Profile(), opts, self._config(remaining),
                       0.0 if at_start or not self.t0 else now - self.t0)
            with session.snapshot(1):   # what the walk asks once, asked now
                pass
            m.trace = Trace(session, m.profile, opts, m.cfg)
            if m.joined_at:   # when its sampling began
                m.joined_at = time.perf_counter() - self.t0
        except RbpeekError as e:
            if named:
                raise RbpeekError("pid %d: %s" % (pid, e))
            self.skipped[pid] = "%s: %s" % (process_label(pid) if command_line(pid) else "pid %d" % pid, e)
            return
        self.members[pid] = m
        self.order.append(pid)

    def start(self, roots):
        """Joins the named processes (and, following, their trees), before
        the run is announced: a named process that cannot be sampled fails
        here, and the processes that had joined are let go untraced."""
        try:
            for r in roots:
                for pid in (tree(r) if self.follow else [r]):
                    self.join(pid, pid == r, at_start=True)
                    if self.t0 is None and self.members:
                        self.t0 = time.perf_counter()
        except BaseException:
            self._let_go(None)
            raise
        if self.t0 is None:
            self.t0 = time.perf_counter()

    def _let_go(self, before_close):
        """Ends every member's tracer (each target left running, untraced),
        calling before_close(member) once its tracer has stopped."""
        for m in self.members.values():
            m.trace.cancel()
        for m in self.members.values():
            while not m.trace.wait(1.0):
                pass
            if before_close:
                before_close(m)
            m.trace.close()

    def _take_stats(self, m):
        ts = m.trace.stats()
        m.stats.take(ts)
        m.end = _end_text(ts, self.args)

    def run(self, announce=None):
        """Samples the joined processes (start) until the run ends, first
        calling announce() (a progress line) within the run's own cleanup;
        returns why it ended."""
        poll = max(MIN_POLL, min(self.interval, 0.1))
        shown = 0.0
        try:
            if announce:
                announce()
            while True:
                if self.dbg.interrupted():
                    self.end = "interrupted (Ctrl-C)"
                    break
                live = [m for m in self.members.values() if not m.trace.wait(0)]
                if not live:
                    break
                if self.follow:
                    for m in live:
                        for c in children(m.pid):
                            if c not in self.members and c not in self.skipped:
                                self.join(c, False)
                now = time.perf_counter()
                if now - shown >= 1.0:
                    shown = now
                    n = sum(m.trace.stats().samples for m in self.members.values())
                    self.dbg.progress("\rrbpeek: sampling %d process%s: %d samples, %.1f s   "
                                      % (len(live), "" if len(live) == 1 else "es", n, now - self.t0))
                time.sleep(poll)
        except KeyboardInterrupt:
            self.end = "interrupted (Ctrl-C)"
        finally:
            self._let_go(self._take_stats)
            if shown:
                self.dbg.progress("\n")
        if self.end is None:
            a = self.args
            if all(m.end.startswith("exited") for m in self.members.values()):
                self.end = "every process exited"
            elif a.count and all(m.stats.samples >= a.count for m in self.members.values()):
                self.end = "%d samples taken of each process" % a.count
            else:
                self.end = "%g s elapsed" % (a.duration or 0) if a.duration else "every process ended"
        return self.end

    def merged(self):
        """One profile: every member's, in the order they joined."""
        p = Profile()
        for pid in self.order:
            p.merge(self.members[pid].profile)
        return p

    def elapsed(self):
        return max([m.stats.elapsed() + m.joined_at for m in self.members.values()] or [0.0])

    def process_docs(self):
        out = []
        for pid in self.order:
            m = self.members[pid]
            el = m.stats.elapsed()
            out.append({"pid": pid, "command": command_line_full(m), "label": m.label, "ruby_version": m.version,
                        "samples": m.stats.samples, "rate_hz": round(m.stats.samples / el, 1) if el > 0 else 0.0,
                        "joined_after_s": round(m.joined_at, 3), "end": m.end,
                        "stacks": m.profile.total()})
        return out

    def process_lines(self):
        lines = ["Processes: %d sampled%s" % (len(self.members), self._joined_text())]
        for pid in self.order:
            m = self.members[pid]
            el = m.stats.elapsed()
            rate = m.stats.samples / el if el > 0 else 0.0
            joined = " joined after %.2f s," % m.joined_at if m.joined_at else ""
            lines.append("  %s:%s %d samples at %s Hz, %d stacks; %s"
                         % (m.label, joined, m.stats.samples, fmt_rate(rate), m.profile.total(), m.end))
        for pid, why in sorted(self.skipped.items()):
            lines.append("  skipped %s" % why)
        return lines

    def gc_stats(self):
        """The GC's counts of every member summed (those of report.gc_line):
        the stacks recorded with the GC at work, by phase, and the samples
        that found a GVL's holder on a CPU."""
        st = Stats()
        for m in self.members.values():
            st.add_gc(m.stats)
        return st

    def native_stats(self):
        """--native: how every member's native stacks were had, summed (the
        counts of report.native_line)."""
        st = Stats()
        ways = [0, 0, 0, 0, 0]
        for m in self.members.values():
            st.unmerged += m.stats.unmerged
            st.unmerged_note = st.unmerged_note or m.stats.unmerged_note
            for k, v in enumerate(m.stats.native_ways or ()):
                ways[k] += v
        st.native_ways = tuple(ways)
        return st

    def _joined_text(self):
        later = sum(1 for m in self.members.values() if m.joined_at)
        gone = sum(1 for m in self.members.values() if m.end and m.end.startswith("exited"))
        parts = []
        if later:
            parts.append("%d joined during the run" % later)
        if gone:
            parts.append("%d exited" % gone)
        return " (%s)" % ", ".join(parts) if parts else ""


def command_line_full(m):
    return m.label.rsplit(" (pid ", 1)[0]
