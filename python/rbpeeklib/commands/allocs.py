"""`ruby allocs`: how fast, and where, the live target allocates objects.

The rate (docs/allocations.md): the debugger lets go of the target (as
`ruby sample` does), the target runs untraced and unstopped for --duration
seconds or until Ctrl-C, and rbpeek reads the objspace's own allocation
counters (the ones GC.stat(:total_allocated_objects) and GC.count add up;
rbpeek_alloc_counts_read) now and then from /proc/PID/mem. The summary
gives the exact number of objects allocated, the rate, the GCs, and the
split by slot size (3.2+); --json writes it.

The sites (--sites, alloc_sites.py): the sampler stops the GVL holder at
--rate, keeps the samples taken in the object allocator (or a GC step it
started), and the exact total is divided by the sites' shares of those
samples. The exact alternative, a hardware watchpoint on the slot the N-th
next allocation takes (--every N), needs watchpoints that fire: where
rbpeek_watch_probe finds they do not (this project's build machine, a
virtual machine that accepts the debug registers and never traps), --every
is refused with its finding, and where they do, with "not built yet".
"""

import os
import time

from ..core import FORMATS, RbpeekError, formats, watch_probe
from ..sampling.signals import pending_stop_signal
from .alloc_sites import DEFAULT_DURATION, DEFAULT_RATE, check_forwards, run_sites, sites_text
from .base import Command, json_text, live_pid, parse_args, positive_float, write_file

POLL = 0.1                  # seconds between counter reads and Ctrl-C checks
PROGRESS_EVERY = 0.25       # seconds between progress lines on a terminal
PROGRESS_EVERY_PIPE = 5.0   # ... and when the output is not a terminal
EVERY_NOT_BUILT = "that sampler is not built yet (docs/allocations.md)"
SITES_HOW = "sites are sampled from the allocator with --sites (docs/allocations.md)"


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
    summary = "Allocation rate of the live target (exact, from its own counters); --sites: where it allocates."
    usage = """ruby allocs [--duration S] [--json [-o FILE]]
            [--sites [--rate HZ] %s]
            [--every N]
            [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Lets the live target run for --duration seconds or until Ctrl-C, and counts
the objects it allocates meanwhile from the GC's own counters (exact: what
GC.stat(:total_allocated_objects) counts). The summary gives the count, the
rate, the GCs and the split by slot size. Afterwards the target is as it
was: stopped under a debugger, running under the command line. Not
available on core files.

  --duration S       stop after S seconds (default: until Ctrl-C; with --sites
                     %g s, enough for a site of 25%% to within 5 points
                     in 90%% of runs)
  --json             the summary as JSON; -o FILE writes it to FILE
  --sites            also where it allocates: the thread holding the GVL is
                     stopped --rate times a second and its native stack
                     unwound; samples taken in the object allocator (or a GC
                     step it started) are kept, each at its Ruby stack, and
                     the exact count is divided by the sites' shares of them
                     (an estimate, with 90%% intervals, and how long to
                     sample for a closer one: sites whose allocations
                     take longer are overweighted)
  --rate HZ          --sites' samples a second (default %g)
%s
                     (with --sites) the stacks weighted by estimated
                     allocations
  --every N          one allocation in N, exactly, by a hardware watchpoint:
                     refused with the reason where the machine's watchpoints
                     do not fire (here: use --sites)
See docs/allocations.md.""" % (formats.synopsis(19), DEFAULT_DURATION, DEFAULT_RATE, formats.help_block())

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("--every", type=int, metavar="N")
            p.add_argument("--rate", type=positive_float, metavar="HZ")
            p.add_argument("--sites", action="store_true")
            p.add_argument("--duration", type=positive_float, metavar="S")
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
        if args.every is not None:
            support, probe_msg = watch_probe()
            raise RbpeekError("ruby allocs: --every N needs a hardware watchpoint on the slot the N-th next "
                              "allocation takes: %s%s; %s" % (probe_msg, "" if support != 0 else
                                                              ", but " + EVERY_NOT_BUILT, SITES_HOW))
        for opt in ("rate",) + tuple(f.name for f in FORMATS):
            if getattr(args, opt) is not None and not args.sites:
                raise RbpeekError("ruby allocs: --%s goes with --sites: %s" % (opt, SITES_HOW))

        pid = live_pid(dbg, "allocs", "no process", "'ruby heap' counts the objects a core holds")
        policy = dbg.signal_policy()
        why_not = dbg.can_hand_over() or pending_stop_signal(policy, pid)
        if why_not is not None:
            raise RbpeekError("ruby allocs lets the target run without the debugger, and here it cannot: %s "
                              "(attach to the process with 'gdb -p PID' or 'lldb -p PID' instead)" % why_not)

        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        session.alloc_counts()   # refuses a layout without the counters while the debugger still holds on
        failure, written = None, []
        if args.sites:
            result, end, written, failure = run_sites(self, dbg, args, session, pid, version, policy)
        else:
            dbg.progress("rbpeek: counting allocations of pid %d (Ruby %s) for %s; Ctrl-C ends it early\n"
                         % (pid, version, "%g s" % args.duration if args.duration else "as long as you like"))
            end, start, last, t0, t1, failure = self._count(dbg, session, pid, args.duration)
            result = self._result(pid, version, start, last, t0, t1, end, SITES_HOW)
            result["started_at"], result["ended_at"] = self.wall
        text = json_text(result) if args.json else self._text(result)
        if written and not args.json:
            text += "Wrote:     %s\n" % ", ".join(written)
        if args.output:
            write_file(args.output, text)
            text = "rbpeek: allocs ended: %s; wrote %s\n" % (end, ", ".join([args.output] + written))
        dbg.write_result(text, end.startswith("interrupted"))
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
                check_forwards(last, now_counts)
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
                "allocations": n,
                "duration_s": round(el, 6), "rate_per_s": n / el, "gc_count": gcs,
                "heaps": heaps, "samples": 0, "period": None, "sites": [], "sites_unavailable": sites_why}

    @staticmethod
    def _text(r):
        el, n = r["duration_s"], r["allocations"]
        lines = ["rbpeek: allocs ended: %s" % r["ended"],
                 "Allocated: %d objects in %.2f s: %s/s (exact: the GC's own counters, as "
                 "GC.stat(:total_allocated_objects) counts)" % (n, el, _fmt_count(r["rate_per_s"])) if n is not None
                 else "Allocated: not counted: the GC's counters could not be read at the end"]
        if r["gc_count"] is not None:
            lines.append("GC runs:   %d (%.1f/s)" % (r["gc_count"], r["gc_count"] / el if el else 0.0))
        if r["heaps"]:
            parts = ["%d B %s/s (%.1f%%)" % (h["slot_size"], _fmt_count(h["count"] / el),
                                            100.0 * h["count"] / n if n else 0.0)
                     for h in r["heaps"] if h["count"]]
            lines.append("By slot:   %s" % ("; ".join(parts) if parts else "none"))
        if r.get("method") == "allocator samples":
            lines.extend(sites_text(r))
        else:
            lines.append("Sites:     not asked for: %s" % r["sites_unavailable"])
        return "\n".join(lines) + "\n"
