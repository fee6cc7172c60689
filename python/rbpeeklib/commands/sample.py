"""`ruby sample`: an interrupt-and-walk sampling profiler.

The loop: let the target run for one interval, stop it, walk every Ruby
thread's stack with the C core, resume. rbpeek reads the stopped target's
memory directly through /proc/PID/mem. This command checks its arguments
and the target, picks one of two ways to stop and resume the target, and
writes what was collected; the machinery is in rbpeeklib/sampling/:

Traced (the default, sampling/traced.py): the debugger detaches, a C thread
becomes the target's tracer and runs the whole loop, and the debugger
attaches again at the end.

Through the debugger (sampling/via_debugger.py): with --via-debugger, for
gdb's own children, and whenever letting go of the target is not safe (a
signal is pending that the debugger stops for: sampling/signals.py). A
helper thread signals the target at each sample time while the debugger
waits in its "continue".

Whatever ends the loop (N samples, --duration, Ctrl-C, the target exiting or
stopping for a signal or a breakpoint, an error), the finally clauses put
the debugger back as it was (attached, signal handling, selected thread),
and what was collected is written (sampling/report.py).
"""

import os
import time

from ..core import FORMATS, Profile, SampleOptions, formats
from ..sampling.multi import MultiRun
from ..sampling.procs import refuse_if_traced
from ..sampling.report import (check_outputs, gc_figures, gc_lines, native_line, rate_figures, stacks_line,
                               summary_end, summary_text, write_outputs)
from ..sampling.states import process_entries, recorded_gvl_wait, states_lines, thread_entries
from ..sampling.signals import pending_stop_signal
from ..sampling.stats import Stats, fmt_rate
from ..sampling.traced import run_traced
from ..sampling.via_debugger import run_via_debugger
from .base import Command, RbpeekError, UsageError, json_text, live_pid, parse_args, positive_float, write_output
from .threadview import map_threads


# What a core file offers instead of sampling, for the refusal.
CORE_HINT = "a core is one moment: 'ruby bt -a' shows its stacks"


def _options(p):
    """The options of `ruby sample` (formats.py's table gives the files')."""
    p.add_argument("count", nargs="?", type=int, metavar="N")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--rate", type=positive_float, metavar="HZ")
    g.add_argument("--interval", type=positive_float, metavar="MS")
    p.add_argument("--duration", type=positive_float, metavar="S")
    p.add_argument("--threads", choices=("all", "current"), default="all")
    g2 = p.add_mutually_exclusive_group()
    g2.add_argument("--on-cpu", action="store_true")
    g2.add_argument("--idle", action="store_true")
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output", metavar="FILE")
    p.add_argument("--per-thread", action="store_true")
    for f in FORMATS:
        p.add_argument("--" + f.name, metavar="FILE")
    p.add_argument("--max-frames", type=int, default=0)
    p.add_argument("--via-debugger", action="store_true")
    p.add_argument("--nonblocking", action="store_true")
    p.add_argument("--stop-all", action="store_true")
    p.add_argument("--native", action="store_true")
    p.add_argument("--subprocesses", action="store_true")


def stacks_doc(profile, tallies, gc):
    """--json's "stacks": the stacks recorded (the folded file's sum), and
    the shares of them the summary's Stacks line gives."""
    n = profile.total()
    return {"recorded": n, "distinct": profile.stack_count(),
            "shares": {"gvl_wait": recorded_gvl_wait(tallies) / float(n) if n else 0.0,
                       "gc": gc / float(n) if n else 0.0}}


class SampleCommand(Command):
    name = "sample"
    summary = "Sampling profiler: stop the target N times a second, record every Ruby stack; flamegraph out."
    usage = """ruby sample [N] [--rate HZ | --interval MS] [--duration S] [--threads all|current]
            [--idle | --on-cpu] [--per-thread] [--max-frames N] [--native]
            [--via-debugger | --nonblocking | --stop-all] [--subprocesses] [--json [-o FILE]]
            %s
            [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Samples the live target: lets it run for one interval, stops the thread that
holds the GVL (the others cannot change their Ruby stacks), records the Ruby
stack of every thread, resumes it. Ends after N samples, after
--duration seconds, on Ctrl-C, or when the target exits or stops for another
reason (a breakpoint). The target is left stopped, as it was, and what was
collected is written. Not available on core files.

  N                  number of samples (default: until --duration or Ctrl-C)
  --rate HZ          samples per second (default 100)
  --interval MS      milliseconds between samples (instead of --rate)
  --duration S       stop after S seconds
  --threads WHICH    all (default) or current: only the selected thread
  --idle             keep idle threads: by default a thread blocked at the
                     sample (sleep, Mutex, Queue, ConditionVariable, join,
                     IO) is left out of the profile, as py-spy does; the
                     summary counts it either way
  --on-cpu           keep only threads running on a CPU at the sample: Ruby
                     status "run" and, for the kernel, not inside a system
                     call (so not blocked in I/O, sleep or a wait for the GVL)
  --per-thread       a root frame per thread: 'Thread "name" (tid N)'
%s
  --max-frames N     cut each stack after N frames
  --native           record each thread's whole stack: its machine frames (C
                     extensions, libc, the interpreter's C API) with its Ruby
                     frames merged in (docs/native.md); the VM's internal
                     frames are left out. The SVG colours machine frames
                     blue, pprof puts them in their modules' mappings. Not
                     with --nonblocking: a stack cannot be unwound while its
                     thread runs
  --via-debugger     stop and resume the target through the debugger (slower,
                     but its breakpoints stay active); by default the debugger
                     detaches while rbpeek traces the target itself, and then
                     attaches again
  --nonblocking      stop nothing: read the stacks while the target runs and
                     drop those that changed meanwhile (counted)
  --stop-all         stop every thread for each sample, not only the GVL holder
  --json             the summary as JSON (to standard output, or -o FILE):
                     processes, and every thread's samples and the share of
                     each state (running, gvl_wait, blocked, gc)
%s
Several processes: --subprocesses follows the process tree (children at
the start, and those forked during the run, which join within about one
period); the command line also takes --pid more than once. Each stack's
root frame names its process, "COMMAND (pid N)". Inside gdb or lldb the
debugger lets go of its process for the run, as for one process, and
takes it back after.

Frames are named "label (path:line)"; machine frames "symbol (module)" or
"module+0xoffset"; a sample taken while the GC runs ends in "[GC: marking]",
"[GC: sweeping]", "[GC: compacting]" or "[GC]", on top of the stack that
triggered it, and the summary gives the GC's share. See docs/sampling.md.""" % (formats.synopsis(12), formats.help_block(),
                                                                         formats.defaults_text())

    def run(self, dbg, argv):
        args = parse_args(self.name, argv, _options)
        interval = self._check_options(args)
        processes = getattr(dbg, "processes", None)
        if processes and (len(processes) > 1 or getattr(dbg, "subprocesses", False)):
            return self._run_many(dbg, args, interval, processes, dbg.subprocesses,
                                  self._check_many(args, processes[0]))
        if args.subprocesses:
            return self._run_tree(dbg, args, interval)
        pid, outputs = self._target(dbg, args)
        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        opts, only = self._sample_options(dbg, args, session, pid)
        profile, st = Profile(), Stats()
        policy, why_not = self._how(dbg, args, pid)
        # progress(), not write(): lldb shows a command's result only once it ends.
        dbg.progress(self._announcement(args, pid, version, interval))
        end, failure = self._sample(dbg, args, session, profile, opts, interval, pid, policy, why_not, st)
        rate = st.samples / st.elapsed() if st.elapsed() > 0 else 0.0
        facts = self._label(profile, args, pid, version, interval, rate, st)
        written = write_outputs(dbg, profile, outputs, facts)
        tallies = profile.thread_tallies()
        if args.json:
            self._write_json(dbg, args, self._json_doc(args, pid, version, st, rate, end, facts, tallies, written,
                                                       profile, interval), end)
        else:
            dbg.write_result(summary_text(st, profile, pid, version, interval, rate, end, written, args, only,
                                          states_lines(tallies), tallies), end.startswith("interrupted"))
        if failure is not None:
            raise failure if not isinstance(failure, RbpeekError) else RbpeekError(
                "ruby sample stopped after %d samples: %s" % (st.samples, failure))

    def _check_options(self, args):
        """The options' own checks (those of one process and of several);
        the time between samples."""
        if args.count is not None and args.count <= 0:
            raise UsageError(self.name, "N must be a positive number of samples")
        if args.max_frames < 0:
            raise UsageError(self.name, "--max-frames must be positive")
        if args.native and args.nonblocking:
            raise UsageError(self.name, "--native needs each thread stopped while its stack is unwound, and "
                                        "--nonblocking stops nothing: use one or the other")
        if args.nonblocking and (args.via_debugger or args.stop_all):
            raise UsageError(self.name, "--nonblocking stops nothing, so it goes with neither --via-debugger "
                                        "nor --stop-all")
        interval = 1.0 / args.rate if args.rate else (args.interval / 1000.0 if args.interval else 0.01)
        if interval < 1e-5:
            raise UsageError(self.name, "at most 100000 samples per second")
        if args.output and not args.json:
            raise UsageError(self.name, "-o writes the --json summary: give --json too (the profiles are "
                                        "written by --%s FILE and the like)" % FORMATS[0].name)
        return interval

    def _target(self, dbg, args):
        """The one process to sample, refused if it cannot be: its pid, and
        the output files to write."""
        if args.via_debugger and dbg.own_source():
            raise UsageError(self.name, "--via-debugger needs a debugger; without one rbpeek traces the target "
                                        "itself")
        pid = live_pid(dbg, "sample", "no process to sample", CORE_HINT)
        if dbg.own_source():
            # Under a debugger the debugger is the tracer, and lets go of the
            # target for rbpeek's; without one, a tracer is someone else's.
            busy = refuse_if_traced(pid)
            if busy:
                raise RbpeekError(busy)
        return pid, check_outputs(args, pid)

    def _sample_options(self, dbg, args, session, pid):
        """Which threads a sample keeps, and how (SampleOptions), and the
        one thread of --threads current (else None)."""
        opts = SampleOptions()
        opts.per_thread = 1 if args.per_thread else 0
        opts.on_cpu = 1 if args.on_cpu else 0
        opts.drop_idle = 0 if (args.idle or args.on_cpu) else 1
        opts.pid = pid
        only = None
        if args.threads == "current":
            only = self._current_thread(dbg, session, pid)
            opts.only_tid = only["native_tid"] or 0
            opts.only_pthread = only["pthread_id"] or 0
        return opts, only

    def _how(self, dbg, args, pid):
        """How the target is stopped: the debugger's signal policy, and why
        rbpeek cannot trace it itself (None: it can)."""
        policy = {} if args.via_debugger else dbg.signal_policy()
        why_not = "--via-debugger" if args.via_debugger else (dbg.can_hand_over() or
                                                              pending_stop_signal(policy, pid))
        if why_not is not None and args.nonblocking:
            raise UsageError(self.name, "--nonblocking needs rbpeek to trace the target itself, which it cannot "
                                        "here (%s): run it without --nonblocking" % why_not)
        return policy, why_not

    @staticmethod
    def _announcement(args, pid, version, interval):
        """The line that says sampling starts, and until when."""
        what = []
        if args.count:
            what.append("%d samples" % args.count)
        if args.duration:
            what.append("%g s" % args.duration)
        return ("rbpeek: sampling pid %d (Ruby %s) at %s Hz %s; Ctrl-C ends it early\n"
                % (pid, version, fmt_rate(1.0 / interval), "for " + " or ".join(what) if what else "until Ctrl-C"))

    @staticmethod
    def _sample(dbg, args, session, profile, opts, interval, pid, policy, why_not, st):
        """The sampling itself, traced by rbpeek or through the debugger:
        (how it ended, the failure that ended it or None)."""
        if why_not is None:
            return run_traced(dbg, session, profile, opts, args, interval, pid, policy, st)
        st.via = why_not
        return run_via_debugger(dbg, session, profile, opts, args, interval, pid, st)

    @staticmethod
    def _label(profile, args, pid, version, interval, rate, st):
        """The profile's meta data and title; the facts its writers take."""
        profile.set_meta("ruby_version", version)
        profile.set_meta("pid", pid)
        profile.set_meta("samples", st.samples)
        profile.set_meta("rate_hz", fmt_rate(rate))
        profile.set_meta("unit", "stacks")
        title = "ruby sample: pid %d, Ruby %s, %d samples at %s Hz, %d stacks recorded%s" % (
            pid, version, st.samples, fmt_rate(rate), profile.total(), " (on-CPU)" if args.on_cpu else "")
        profile.set_meta("title", title)
        return {"title": title, "period_s": interval, "on_cpu": args.on_cpu, "duration": st.elapsed(),
                "start": time.time() - (time.perf_counter() - st.t_start) if st.t_start else 0.0}

    @staticmethod
    def _json_doc(args, pid, version, st, rate, end, facts, tallies, written, profile, interval):
        """The --json summary of one process."""
        return {"end": end, "samples": st.samples, "duration_s": round(st.elapsed(), 3), "started": facts["start"],
                "rate_hz": round(rate, 1), "idle": bool(args.idle), "on_cpu": bool(args.on_cpu),
                "stacks": stacks_doc(profile, tallies, sum(st.gc[1:])),
                "rate": rate_figures(1.0 / interval, [st], len(tallies)).doc(),
                "processes": [{"pid": pid, "ruby_version": version, "samples": st.samples,
                               "states": (process_entries(tallies) or [{"states": {}}])[0]["states"]}],
                "threads": thread_entries(tallies), "gc": gc_figures(st, profile.total()), "written": written}

    @staticmethod
    def _write_json(dbg, args, doc, end):
        """The --json summary to -o FILE, or as the command's result."""
        if args.output:
            write_output(dbg, json_text(doc), args.output)
        else:
            dbg.write_result(json_text(doc) + "\n", end.startswith("interrupted"))

    def _run_tree(self, dbg, args, interval):
        """--subprocesses inside gdb or lldb: the debugger lets go of its
        process (as the traced loop does for one), rbpeek's tracers sample it
        and its descendants as on the command line, and the debugger takes
        it back (unless it exited meanwhile)."""
        pid = live_pid(dbg, "sample", "no process to sample", CORE_HINT)
        outputs = self._check_many(args, pid)
        why = dbg.can_hand_over()
        if why:
            raise RbpeekError("ruby sample --subprocesses has rbpeek's own tracers sample the processes, and %s"
                              % why)
        token = dbg.hand_over()
        try:
            return self._run_many(dbg, args, interval, [pid], True, outputs)
        finally:
            try:
                os.kill(pid, 0)
                dbg.take_back(token, pid)
            except ProcessLookupError:
                dbg.warn("rbpeek: process %d exited during the run\n" % pid)
            except (RbpeekError, OSError) as e:
                dbg.warn("rbpeek: %s\n" % e)

    def _check_many(self, args, pid):
        """What several processes refuse, said before anything is done (a
        debugger lets go of its process): the output files to write."""
        if args.threads != "all":
            raise UsageError(self.name, "--threads current names one thread of one process; with several "
                                        "processes every thread is sampled")
        if args.via_debugger:
            raise UsageError(self.name, "--via-debugger needs a debugger; several processes are sampled by "
                                        "rbpeek's own tracers")
        return check_outputs(args, pid)

    def _run_many(self, dbg, args, interval, pids, follow, outputs):
        """Several processes: one tracer each, the profiles merged, each
        stack under its process (sampling/multi.py)."""
        from ..standalone import StandaloneAdapter
        from .sessions import Sessions

        def open_session(pid):
            return Sessions().get(StandaloneAdapter(pid=pid), args)

        run = MultiRun(open_session, args, interval, follow, dbg)
        what = []
        if args.count:
            what.append("%d samples of each" % args.count)
        if args.duration:
            what.append("%g s" % args.duration)
        tree = (" and its subprocesses" if len(pids) == 1 else " and their subprocesses") if follow else ""
        run.start(pids)   # a named process refused is said before the run is announced
        announce = ("rbpeek: sampling pid %s%s at %s Hz %s; Ctrl-C ends it early\n"
                    % (", ".join(str(p) for p in pids), tree, fmt_rate(1.0 / interval),
                       "for " + " or ".join(what) if what else "until Ctrl-C"))
        end = run.run(lambda: dbg.progress(announce))
        profile = run.merged()
        elapsed = run.elapsed()
        samples = sum(m.stats.samples for m in run.members.values())
        versions = sorted({m.version for m in run.members.values()})
        profile.set_meta("unit", "stacks")
        title = "ruby sample: %d process%s (pid %s), Ruby %s, %d samples, %d stacks recorded%s" % (
            len(run.members), "" if len(run.members) == 1 else "es", ", ".join(str(p) for p in run.order), ", ".join(versions), samples, profile.total(),
            " (on-CPU)" if args.on_cpu else "")
        profile.set_meta("ruby_version", ", ".join(versions))
        profile.set_meta("pid", " ".join(str(p) for p in run.order))
        profile.set_meta("samples", samples)
        profile.set_meta("title", title)
        facts = {"title": title, "period_s": interval, "on_cpu": args.on_cpu, "duration": elapsed,
                 "start": time.time() - (time.perf_counter() - run.t0)}
        written = write_outputs(dbg, profile, outputs, facts)
        tallies = profile.thread_tallies()
        if args.json:
            procs = run.process_docs()
            states = {e["pid"]: e for e in process_entries(tallies)}
            threads = thread_entries(tallies)
            for d in procs:
                d["states"] = states.get(d["pid"], {}).get("states", {})
                d["threads"] = [t for t in threads if t["pid"] == d["pid"]]
            doc = {"end": end, "samples": samples, "duration_s": round(elapsed, 3), "idle": bool(args.idle),
                   "stacks": stacks_doc(profile, tallies, sum(run.gc_stats().gc[1:])),
                   "gc": gc_figures(run.gc_stats(), profile.total()),
                   "rate": rate_figures(1.0 / interval, [m.stats for m in run.members.values()],
                                        len(tallies)).doc(),
                   "started": facts["start"],
                   "on_cpu": bool(args.on_cpu), "processes": procs, "threads": threads,
                   "skipped": [{"pid": p, "why": w} for p, w in sorted(run.skipped.items())], "written": written}
            write_output(dbg, json_text(doc), args.output)
            return
        gc = run.gc_stats()
        lines = ["rbpeek: sampling ended: %s" % end] + run.process_lines()
        lines.append(rate_figures(1.0 / interval, [m.stats for m in run.members.values()], len(tallies)).line())
        lines.append(stacks_line(profile.total(), profile.stack_count(),
                                 "on-CPU only" if args.on_cpu else ("every thread" if args.idle else
                                                                    "idle threads left out"),
                                 recorded_gvl_wait(tallies), sum(gc.gc[1:])))
        lines.extend(gc_lines(gc, profile.total()))
        if args.native:
            lines.append(native_line(run.native_stats()))
        names = {m.pid: m.label for m in run.members.values()}
        lines.extend(states_lines(tallies, names))
        out = summary_end(lines, profile, written)
        dbg.write_result(out, end.startswith("interrupted"))

    @staticmethod
    def _current_thread(dbg, session, pid):
        sel = dbg.selected_thread()
        if sel is None:
            raise RbpeekError("--threads current: no thread is selected")
        with session.snapshot(1) as snap:
            # map_threads also places threads of Rubies that keep no TID,
            # under a debugger that cannot tell the pthread_t either.
            threads = map_threads(dbg, snap.threads(), session, snap)
            found = [t for t in threads if t.get("dbg_num") == sel["num"]]
        if found:
            return found[0]
        raise RbpeekError("--threads current: thread %s (tid %s) is not a Ruby thread; select one with "
                          "'thread N' (see 'ruby threads')" % (sel["num"], sel.get("tid")))
