"""`ruby allocs`: how fast, and (where the hardware allows) where, the live
target allocates objects.

What it does today (docs/allocations.md): the debugger lets go of the
target (as `ruby sample` does), the target runs untraced and unstopped for
--duration seconds or until Ctrl-C, and rbpeek reads the objspace's own
allocation counters (the ones GC.stat(:total_allocated_objects) and
GC.count add up; rbpeek_alloc_counts_read) now and then from
/proc/PID/mem. The summary gives the exact number of objects allocated,
the rate, the GCs, and the split by slot size (3.2+); --json writes it.

Sampling allocation *sites* needs a hardware watchpoint on the heap slot a
chosen allocation will take (nothing written into the target). The command
first asks the machine whether watchpoints fire at all
(rbpeek_watch_probe); where they do not (this project's build machine, a
virtual machine that accepts the debug registers and never traps), or where
the site sampler is not there yet, it says so in one line, and the options
that need sites (--every, --rate, and the profile formats' --folded,
--svg...) are refused with that line.
"""

import json
import os
import time

from ..core import FORMATS, RbpeekError, formats, watch_probe
from ..sampling.signals import pending_stop_signal
from .base import Command, parse_args
from .sample import _positive_float

POLL = 0.1                  # seconds between counter reads and Ctrl-C checks
PROGRESS_EVERY = 0.25       # seconds between progress lines on a terminal
PROGRESS_EVERY_PIPE = 5.0   # ... and when the output is not a terminal
SITES_NOT_BUILT = ("allocation-site sampling (a watchpoint on the slot a chosen allocation takes) is not "
                   "built yet: see docs/allocations.md")


def _fmt_count(n):
    for div, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if n >= div:
            return "%.2f%s" % (n / div, unit)
    return "%d" % n


def _target_alive(pid):
    """False once the process is gone or a zombie."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class AllocsCommand(Command):
    name = "allocs"
    summary = "Allocation rate of the live target (exact, from its own counters); sites where watchpoints work."
    usage = """ruby allocs [--duration S] [--json [-o FILE]] [--every N | --rate R]
            %s
            [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Lets the live target run, untraced, for --duration seconds or until Ctrl-C,
and counts the objects it allocates meanwhile from the GC's own counters
(exact: what GC.stat(:total_allocated_objects) counts). The summary gives
the count, the rate, the GCs and the split by slot size. Afterwards the
target is as it was: stopped under a debugger, running under the command
line. Not available on core files.

  --duration S       stop after S seconds (default: until Ctrl-C)
  --json             the summary as JSON; -o FILE writes it to FILE
  --every N, --rate R, %s
                     allocation sites, sampled one in N (or R a second):
                     refused with the reason where the machine's hardware
                     watchpoints do not fire or the site sampler is missing
See docs/allocations.md.""" % (formats.synopsis(12), ", ".join("--%s FILE" % f.name for f in FORMATS))

    def run(self, dbg, argv):
        def build(p):
            g = p.add_mutually_exclusive_group()
            g.add_argument("--every", type=int, metavar="N")
            g.add_argument("--rate", type=_positive_float, metavar="R")
            p.add_argument("--duration", type=_positive_float, metavar="S")
            for f in FORMATS:
                p.add_argument("--" + f.name, metavar="FILE")
            p.add_argument("--json", action="store_true")
            p.add_argument("-o", dest="output", metavar="FILE")

        args = parse_args(self.name, argv, build)
        if args.every is not None and args.every <= 0:
            raise RbpeekError("ruby allocs: --every N needs a positive number of allocations")
        if args.output and not args.json:
            raise RbpeekError("ruby allocs: -o FILE goes with --json")
        if args.output:
            d = os.path.dirname(os.path.abspath(args.output))
            if not os.path.isdir(d) or not os.access(d, os.W_OK):
                raise RbpeekError("ruby allocs: cannot write %s (no such directory, or not writable)" % args.output)
        support, probe_msg = watch_probe()
        sites_why = probe_msg if support != 0 else SITES_NOT_BUILT
        for opt in ("every", "rate") + tuple(f.name for f in FORMATS):
            if getattr(args, opt) is not None:
                raise RbpeekError("ruby allocs: --%s needs sampled allocation sites, and none can be sampled: %s"
                                  % (opt, sites_why))

        if dbg.target_key() is None:
            raise RbpeekError("no process: attach to a live Ruby process first")
        if dbg.is_core():
            raise RbpeekError("ruby allocs needs a live process, and this is a core file "
                              "('ruby heap' counts the objects a core holds)")
        pid = dbg.live_pid()
        if not pid:
            raise RbpeekError("ruby allocs needs a live process on this machine (its /proc/PID/mem); "
                              "this target is not one")
        if dbg.is_running():
            raise RbpeekError("the target is running: interrupt it first, then run 'ruby allocs'")
        why_not = dbg.can_hand_over() or pending_stop_signal(dbg.signal_policy(), pid)
        if why_not is not None:
            raise RbpeekError("ruby allocs lets the target run without the debugger, and here it cannot: %s "
                              "(attach to the process with 'gdb -p PID' or 'lldb -p PID' instead)" % why_not)

        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        session.alloc_counts()   # refuses a layout without the counters while the debugger still holds on
        dbg.progress("rbpeek: counting allocations of pid %d (Ruby %s) for %s; Ctrl-C ends it early\n"
                     % (pid, version, "%g s" % args.duration if args.duration else "as long as you like"))
        end, start, last, t0, t1, failure = self._count(dbg, session, pid, args.duration)
        result = self._result(pid, version, start, last, t0, t1, end, sites_why)
        result["started_at"], result["ended_at"] = self.wall
        text = json.dumps(result, indent=1) + "\n" if args.json else self._text(result)
        if args.output:
            with open(args.output, "w") as f:
                f.write(text)
            text = "rbpeek: allocs ended: %s; wrote %s\n" % (end, args.output)
        if end.startswith("interrupted"):
            dbg.progress(text)   # lldb drops the result of an interrupted command
        else:
            dbg.write(text)
        if failure is not None:
            raise failure

    def _count(self, dbg, session, pid, duration):
        """Lets the target run and reads its counters until the end; returns
        (how it ended, first reading, last reading, their times, failure)."""
        try:
            tty = os.isatty(1)
        except OSError:
            tty = False
        every = PROGRESS_EVERY if tty else PROGRESS_EVERY_PIPE
        end, failure, shown = "?", None, False
        start = last = None
        t0 = t1 = time.perf_counter()
        token = dbg.hand_over()
        exited = False
        self.wall = [time.time(), time.time()]
        try:
            start = session.alloc_counts()
            t0 = t1 = time.perf_counter()
            self.wall = [time.time(), time.time()]
            last = start
            shown_at = t0
            while True:
                if dbg.interrupted():
                    end = "interrupted (Ctrl-C)"
                    break
                time.sleep(POLL)
                if not _target_alive(pid):
                    exited = True
                    end = "the target exited"
                    break
                now_counts = session.alloc_counts()
                now = time.perf_counter()
                if now_counts["total"] < last["total"]:
                    raise RbpeekError("the allocation counter went backwards (%d, then %d): the layout does not "
                                      "fit this Ruby's objspace" % (last["total"], now_counts["total"]))
                last, t1 = now_counts, now
                self.wall[1] = time.time()
                if duration and t1 - t0 >= duration:
                    end = "%g s elapsed" % duration
                    break
                if t1 - shown_at >= every:
                    shown_at = t1
                    rate = (last["total"] - start["total"]) / (t1 - t0)
                    line = "rbpeek: allocs: %s objects in %.1f s, %s/s" % (
                        _fmt_count(last["total"] - start["total"]), t1 - t0, _fmt_count(rate))
                    dbg.progress(("\r" + line + "   ") if tty else line + "\n")
                    shown = True
        except KeyboardInterrupt:
            end = "interrupted (Ctrl-C)"
        except RbpeekError as e:
            if not _target_alive(pid):
                exited, end = True, "the target exited"
            else:
                failure, end = e, "stopped by an error"
        finally:
            if shown and tty:
                dbg.progress("\n")
            if not exited:
                try:
                    dbg.take_back(token, pid)
                except (RbpeekError, OSError) as e:
                    failure = failure or (e if isinstance(e, RbpeekError) else RbpeekError(str(e)))
        if start is None:
            raise failure or RbpeekError("ruby allocs: the target ended before its counters could be read")
        return end, start, last, t0, t1, failure

    @staticmethod
    def _result(pid, version, start, last, t0, t1, end, sites_why):
        el = max(t1 - t0, 1e-9)
        n = last["total"] - start["total"]
        heaps = []
        for (slot, a), (_s, b) in zip(start["heaps"], last["heaps"]):
            heaps.append({"slot_size": slot, "count": b - a})
        gcs = None
        if start["gc_count"] is not None and last["gc_count"] is not None:
            gcs = last["gc_count"] - start["gc_count"]
        return {"pid": pid, "ruby_version": version, "ended": end,
                "allocations_estimated": n, "allocations_exact": True,
                "duration_s": round(el, 6), "rate_per_s": n / el, "gc_count": gcs,
                "heaps": heaps, "samples": 0, "period": None, "sites": [], "sites_unavailable": sites_why}

    @staticmethod
    def _text(r):
        el, n = r["duration_s"], r["allocations_estimated"]
        lines = ["rbpeek: allocs ended: %s" % r["ended"],
                 "Allocated: %d objects in %.2f s: %s/s (exact: the GC's own counters, as "
                 "GC.stat(:total_allocated_objects) counts)" % (n, el, _fmt_count(r["rate_per_s"]))]
        if r["gc_count"] is not None:
            lines.append("GC runs:   %d (%.1f/s)" % (r["gc_count"], r["gc_count"] / el if el else 0.0))
        if r["heaps"]:
            parts = ["%d B %s/s (%.1f%%)" % (h["slot_size"], _fmt_count(h["count"] / el),
                                            100.0 * h["count"] / n if n else 0.0)
                     for h in r["heaps"] if h["count"]]
            lines.append("By slot:   %s" % ("; ".join(parts) if parts else "none"))
        lines.append("Sites:     not sampled: %s" % r["sites_unavailable"])
        return "\n".join(lines) + "\n"
