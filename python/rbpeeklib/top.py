"""`rbpeek top --pid PID [--pid PID...] [--subprocesses]`: a live view of
where the target's threads spend their time, as py-spy's `top`, refreshed
every second in the terminal.

Each refresh period every process is sampled by a tracer of its own (the C
loop of sampling/traced.py, for one period: rbpeek_trace with a duration),
then let go; what the period collected is added to the counts kept here,
and the screen redrawn. A profile belongs to its tracer while it runs, so
the view is built between periods; the target runs untraced for the
moment between two (microseconds). The sessions are kept from one period
to the next. With --subprocesses, children forked meanwhile join at the
next period; processes that exit leave.

The screen: a header (samples, rate, processes, threads, the shares of
the stacks recorded waiting for the GVL and in GC, as `sample`'s summary
gives them), then the methods by own
share (the frame was the innermost) or total share (it was on the stack),
each "label (path)" (with --lines a row per line, "label (path:line)"). Keys: o sorts by own, t by total, space holds
the screen (sampling goes on), q quits. q and Ctrl-C leave every target
running and untraced.
"""

import curses
import os
import random
import time

from .commands.base import UsageError, parse_args, positive_float
from .commands.sessions import Sessions
from .core import STOP_MODES, TRACE_ENDS, Profile, RbpeekError, SampleOptions, Trace, TraceConfig
from .sampling.procs import children, command_line, refuse_if_traced, tree
from .sampling.report import gc_cpu_short
from .sampling.states import STATES, recorded_gvl_wait, shares_text
from .sampling.stats import Stats, fmt_rate
from .standalone import StandaloneAdapter

USAGE = """rbpeek top --pid PID [--pid PID...] [--subprocesses] [--rate HZ] [--refresh S] [--lines]
           [--idle | --on-cpu]

A live view of the target's Ruby methods, refreshed every --refresh seconds
(default 1): a header (samples, rate, processes, threads, the shares of
the stacks recorded waiting for the GVL and in GC), then the methods by own
share (innermost frame) or total share (anywhere on the stack), since the
start. Idle (blocked) threads are left out unless --idle; --on-cpu keeps
only threads on a CPU.

Keys: o  sort by own share        t  sort by total share
      space  hold the screen (sampling goes on)      q  quit
q and Ctrl-C leave every target running and untraced.

  --rate HZ      samples per second (default 100)
  --refresh S    seconds between refreshes (default 1)
  --lines        a row per line of a method, "label (path:line)"; by
                 default a row per method, "label (path)"
"""


def _build(p):
    p.add_argument("--rate", type=positive_float, default=100.0)
    p.add_argument("--refresh", type=positive_float, default=1.0)
    p.add_argument("--lines", action="store_true")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--idle", action="store_true")
    g.add_argument("--on-cpu", action="store_true")


def parse(argv):
    """top's options, on the commands' parser (with their --vm, --layout
    and --ruby-version)."""
    args = parse_args("top", argv, _build)
    if args.rate > 10000:
        raise UsageError("top", "at most 10000 samples per second")
    return args


class Source:
    """One process: its session, kept from one period to the next."""

    def __init__(self, pid, args):
        self.pid = pid
        self.label = "%s (pid %d)" % (command_line(pid, 40) or "?", pid)
        busy = refuse_if_traced(pid)
        if busy:
            raise RbpeekError(busy)
        self.session = Sessions().get(StandaloneAdapter(pid=pid), args)
        self.version = self.session.info()["ruby_version"]
        self.opts = SampleOptions()
        self.opts.pid = pid
        self.opts.on_cpu = 1 if args.on_cpu else 0
        self.opts.drop_idle = 0 if (args.idle or args.on_cpu) else 1
        with self.session.snapshot(1):
            pass
        self.gone = None


class Counts:
    """What the periods collected, kept here: samples per frame (own and
    total), thread tallies by (pid, tid), the stacks recorded and of them
    those waiting for the GVL and those in the GC (the header's shares, as
    the summary of `sample` gives them)."""

    def __init__(self):
        self.own, self.total = {}, {}
        self.stacks = 0
        self.gvl_wait = 0
        self.gc = Stats()    # the GC's counts of every period (Stats.add_gc)
        self.samples = 0
        self.threads = {}
        self.elapsed = 0.0

    def add_profile(self, prof, lines=False):
        """One period's samples: each frame's (with lines) or method's own
        and total counts, as the profile's frame table names them."""
        self.stacks += prof.total()
        for name, own, total in prof.frame_counts(by_method=not lines):
            self.own[name] = self.own.get(name, 0) + own
            self.total[name] = self.total.get(name, 0) + total

    def add_tallies(self, tallies):
        self.gvl_wait += recorded_gvl_wait(tallies)
        for t in tallies:
            key = (t["pid"], t["tid"])
            e = self.threads.setdefault(key, dict.fromkeys(STATES, 0))
            for k in STATES:
                e[k] += t["states"][k]

    def shares_text(self):
        return shares_text(self.stacks, self.gvl_wait, sum(self.gc.gc[1:]))


class Top:
    def __init__(self, pids, follow, args):
        self.args, self.follow = args, follow
        self.sources = {}
        self.skipped = {}
        self.counts = Counts()
        self.by_own = True
        self.hold = False
        self.quit = False
        self.t0 = time.time()
        for r in pids:
            for pid in (tree(r) if follow else [r]):
                self._join(pid, named=(pid == r))

    def _join(self, pid, named):
        if pid in self.sources or pid in self.skipped:
            return
        try:
            self.sources[pid] = Source(pid, self.args)
        except RbpeekError as e:
            if named:
                raise RbpeekError("pid %d: %s" % (pid, e))
            self.skipped[pid] = str(e)

    def _config(self):
        cfg = TraceConfig()
        cfg.interval_s = 1.0 / self.args.rate
        cfg.duration_s = self.args.refresh
        cfg.seed = random.getrandbits(63) | 1
        cfg.stop_mode = STOP_MODES["gvl"]
        for num in range(1, 65):
            cfg.pass_signals[num] = 1
        return cfg

    def period(self, screen):
        """One period: every process sampled for --refresh seconds, keys
        read meanwhile; then the counts updated."""
        traces = []
        for src in list(self.sources.values()):
            prof = Profile()
            try:
                traces.append((src, prof, Trace(src.session, prof, src.opts, self._config())))
            except RbpeekError as e:
                src.gone = str(e)
        t_start = time.perf_counter()
        try:
            while not all(tr.wait(0) for _s, _p, tr in traces):
                self._keys(screen)
                if self.quit:
                    break
        finally:
            for _s, _p, tr in traces:
                tr.cancel()
            for src, prof, tr in traces:
                while not tr.wait(1.0):
                    pass
                st = tr.stats()
                self.counts.samples += st.samples
                self.counts.gc.add_gc(st)   # the stacks that end in a [GC: ...] frame, and the on-CPU samples
                if TRACE_ENDS.get(st.end) in ("exited", "exec", "failed", "signal"):
                    src.gone = TRACE_ENDS.get(st.end)
                tr.close()
                self.counts.add_profile(prof, self.args.lines)
                self.counts.add_tallies(prof.thread_tallies())
        self.counts.elapsed += time.perf_counter() - t_start
        for pid in [p for p, s in self.sources.items() if s.gone]:
            del self.sources[pid]
        if self.follow:
            for pid in list(self.sources):
                for c in children(pid):
                    self._join(c, named=False)

    def _keys(self, screen):
        ch = screen.getch()   # waits up to the screen's timeout
        if ch in (ord("q"), ord("Q")):
            self.quit = True
        elif ch in (ord("o"), ord("O")):
            self.by_own = True
            self.draw(screen, force=True)
        elif ch in (ord("t"), ord("T")):
            self.by_own = False
            self.draw(screen, force=True)
        elif ch == ord(" "):
            self.hold = not self.hold
            self.draw(screen, force=True)

    def lines(self, width, height):
        c = self.counts
        procs = len(self.sources)
        versions = sorted({s.version for s in self.sources.values()})
        rate = c.samples / c.elapsed / max(1, procs) if c.elapsed else 0.0
        head = ("rbpeek top: %d samples, %s Hz, %d process%s, %d threads; %s  (Ruby %s)"
                % (c.samples, fmt_rate(rate), procs, "" if procs == 1 else "es", len(c.threads), c.shares_text(),
                   ", ".join(versions) or "?"))
        keys = ("sorted by %s%s;  o: own  t: total  space: %s  q: quit"
                % ("own" if self.by_own else "total", ", HELD" if self.hold else "",
                   "go on" if self.hold else "hold"))
        who = ", ".join(s.label for s in list(self.sources.values())[:3])
        if len(self.sources) > 3:
            who += ", ... (%d more)" % (len(self.sources) - 3)
        out = [head, gc_cpu_short(c.gc) or "GC: no sample found a GVL's holder on a CPU yet", keys,
               who or "(no process left)", "",
               "  %%Own  %%Total  %7s  %7s  Method (path%s)" % ("Own(s)", "Total(s)", ":line" if self.args.lines else "")]
        n = c.stacks or 1
        period = 1.0 / self.args.rate
        key = c.own if self.by_own else c.total
        rows = sorted(c.total, key=lambda f: (-key.get(f, 0), -c.total[f], f))
        for fr in rows[:max(0, height - len(out) - 1)]:
            o, t = c.own.get(fr, 0), c.total[fr]
            out.append("%6.1f  %6.1f  %7.2f  %7.2f  %s" % (100.0 * o / n, 100.0 * t / n, o * period, t * period, fr))
        return [l[:width - 1] for l in out]

    def draw(self, screen, force=False):
        if self.hold and not force:
            return
        h, w = screen.getmaxyx()
        screen.erase()
        for i, line in enumerate(self.lines(w, h)[:h]):
            try:
                screen.addstr(i, 0, line)
            except curses.error:
                pass
        screen.refresh()

    def run(self, screen):
        curses.curs_set(0) if hasattr(curses, "curs_set") else None
        screen.timeout(50)
        self.draw(screen, force=True)
        while not self.quit and self.sources:
            self.period(screen)
            self.draw(screen)


def run_top(pids, follow, argv, stdout, stderr):
    """The `top` command of the command line; returns the exit status."""
    if "-h" in argv or "--help" in argv:
        stdout.write(USAGE)
        return 0
    args = parse(argv)
    if not pids:
        raise UsageError("top", "give the process: --pid PID")
    if not (os.isatty(0) and os.isatty(1)):
        raise RbpeekError("top draws on a terminal, and standard input or output is not one: "
                          "'rbpeek sample --duration S' writes a profile instead")
    top = Top(pids, follow, args)
    try:
        curses.wrapper(top.run)
    except KeyboardInterrupt:
        pass   # the finally clauses of period() let go of every target
    c = top.counts
    stderr.write("rbpeek top: %d samples of %d process%s in %.1f s; every target left running\n"
                 % (c.samples, len(top.sources), "" if len(top.sources) == 1 else "es", c.elapsed))
    return 0
