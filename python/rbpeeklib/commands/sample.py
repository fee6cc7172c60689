"""`ruby sample`: an interrupt-and-walk sampling profiler.

The loop: let the target run for one interval, stop it, walk every Ruby
thread's stack with the C core, resume. rbpeek reads the stopped target's
memory directly through /proc/PID/mem. Two ways to stop and resume it:

Traced (the default, _run_traced): the debugger detaches (adapter.hand_over),
a C thread becomes the target's tracer and runs the whole loop
(core/src/tracer.c, rbpeek_trace_*), and the debugger attaches again at the
end (adapter.take_back). A stop and resume costs a fraction of a
debugger's, whose bookkeeping was most of a sample's cost
(docs/sampling.md). Here Python only shows progress and passes Ctrl-C on.

Through the debugger (_run_via_debugger: --via-debugger, and gdb's own
children): a helper thread (rbpeek_kicker, in C so that it never waits for
the GIL) sends the target a signal at each sample time while the debugger
waits in its "continue". The debugger is told (adapter.sample_prepare) to
stop on that signal silently and never pass it on. The signal is SIGURG
because its default action is to be ignored: if one is still in flight when
sampling ends (the target stopped for another reason at the same moment),
it reaches the target after the user's next continue, which ignores it,
instead of killing it as most signals would. Cheaper ways were measured
(docs/sampling.md): a debugger's own interrupt prints a stop report each
time, and in lldb an async Stop() from another thread costs about ten times
as much as the signal.

Whatever ends the loop (N samples, --duration, Ctrl-C, the target exiting or
stopping for a signal or a breakpoint, an error), the finally clauses put
the debugger back as it was (attached, signal handling, selected thread),
and what was collected is written.
"""

import argparse
import ctypes
import os
import random
import signal
import time

from .base import Command, parse_args
from .threadview import map_threads
from ..core import (TRACE_ENDS, Kicker, Profile, RbpeekError, SampleOptions, Sampler, Trace, TraceConfig,
                   resolve_tids)

SAMPLE_SIGNAL = signal.SIGURG
PROGRESS_EVERY = 0.25       # seconds between progress updates on a terminal
PROGRESS_EVERY_PIPE = 5.0   # ... and when the output is not a terminal
TID_MAP_REFRESH = 1.0       # seconds between pthread -> TID map refreshes
TRACE_POLL = 0.1            # seconds between progress and Ctrl-C checks while the C loop samples
BACKLOG = 5                 # intervals the sample schedule may fall behind before it restarts


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError("not a positive number: %r" % text)
    return v


def _pending_signals(pid):
    """Signal numbers pending in the kernel for process pid or any of its
    threads (/proc: ShdPnd, SigPnd), or an empty set if unreadable."""
    masks = 0
    paths = ["/proc/%d/status" % pid]
    try:
        paths += ["/proc/%d/task/%s/status" % (pid, t) for t in os.listdir("/proc/%d/task" % pid)]
    except OSError:
        pass
    for path in paths:
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith(("ShdPnd:", "SigPnd:")):
                        masks |= int(line.split()[1], 16)
        except (OSError, ValueError, IndexError):
            continue
    return {n for n in range(1, 65) if masks & (1 << (n - 1))}


def _pending_stop_signal(policy, pid):
    """Why the target must stay under the debugger when a signal it stops for
    (policy: the debugger's signal_policy) is already pending: detached, the
    target would take it unseen."""
    for num in sorted(_pending_signals(pid)):
        if policy.get(num, (True, True))[0]:
            return "%s is pending in the target, and the debugger stops for it" % _signame(num)
    return None


def _signame(num):
    try:
        return signal.Signals(num).name
    except ValueError:
        return "signal %d" % num


def _fmt_rate(hz):
    return ("%.0f" % hz) if hz >= 100 else ("%.1f" % hz)


class SampleCommand(Command):
    name = "sample"
    summary = "Sampling profiler: stop the target N times a second, record every Ruby stack; flamegraph out."
    usage = """ruby sample [N] [--rate HZ | --interval MS] [--duration S] [--threads all|current]
            [--on-cpu] [--per-thread] [--folded FILE] [--svg FILE] [--speedscope FILE]
            [--max-frames N] [--via-debugger] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Samples the live target: lets it run for one interval, stops it, records the
Ruby stack of every thread, resumes it. Ends after N samples, after
--duration seconds, on Ctrl-C, or when the target exits or stops for another
reason (a breakpoint). The target is left stopped, as it was, and what was
collected is written. Not available on core files.

  N                  number of samples (default: until --duration or Ctrl-C)
  --rate HZ          samples per second (default 100)
  --interval MS      milliseconds between samples (instead of --rate)
  --duration S       stop after S seconds
  --threads WHICH    all (default) or current: only the selected thread
  --on-cpu           keep only threads running on a CPU at the sample: Ruby
                     status "run" and, for the kernel, not inside a system
                     call (so not blocked in I/O, sleep or a wait for the GVL)
  --per-thread       a root frame per thread: 'Thread "name" (tid N)'
  --folded FILE      folded stacks ("root;...;leaf count"), for flamegraph.pl
  --svg FILE         an interactive SVG flamegraph
  --speedscope FILE  speedscope JSON (https://www.speedscope.app)
  --max-frames N     cut each stack after N frames
  --via-debugger     stop and resume the target through the debugger (slower,
                     but its breakpoints stay active); by default the debugger
                     detaches while rbpeek traces the target itself, and then
                     attaches again
Without --folded/--svg/--speedscope it writes rbpeek-PID-TIME.folded and
rbpeek-PID-TIME.svg in the current directory.
Frames are named "label (path:line)". See docs/sampling.md."""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("count", nargs="?", type=int, metavar="N")
            g = p.add_mutually_exclusive_group()
            g.add_argument("--rate", type=_positive_float, metavar="HZ")
            g.add_argument("--interval", type=_positive_float, metavar="MS")
            p.add_argument("--duration", type=_positive_float, metavar="S")
            p.add_argument("--threads", choices=("all", "current"), default="all")
            p.add_argument("--on-cpu", action="store_true")
            p.add_argument("--per-thread", action="store_true")
            p.add_argument("--folded", metavar="FILE")
            p.add_argument("--svg", metavar="FILE")
            p.add_argument("--speedscope", metavar="FILE")
            p.add_argument("--max-frames", type=int, default=0)
            p.add_argument("--via-debugger", action="store_true")

        args = parse_args(self.name, argv, build)
        if args.count is not None and args.count <= 0:
            raise RbpeekError("ruby sample: N must be a positive number of samples")
        if args.max_frames < 0:
            raise RbpeekError("ruby sample: --max-frames must be positive")
        interval = 1.0 / args.rate if args.rate else (args.interval / 1000.0 if args.interval else 0.01)
        if interval < 1e-5:
            raise RbpeekError("ruby sample: at most 100000 samples per second")

        if dbg.target_key() is None:
            raise RbpeekError("no process to sample: attach to a live Ruby process first")
        if dbg.is_core():
            raise RbpeekError("ruby sample needs a live process, and this is a core file "
                              "(a core is one moment: 'ruby bt -a' shows its stacks)")
        pid = dbg.live_pid()
        if not pid:
            raise RbpeekError("ruby sample needs a live process on this machine (its /proc/PID/mem); "
                              "this target is not one")
        if dbg.is_running():
            raise RbpeekError("the target is running: interrupt it first, then run 'ruby sample'")
        outputs = self._outputs(args, pid)

        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        opts = SampleOptions()
        opts.per_thread = 1 if args.per_thread else 0
        opts.on_cpu = 1 if args.on_cpu else 0
        opts.pid = pid
        only = None
        if args.threads == "current":
            only = self._current_thread(dbg, session, pid)
            opts.only_tid = only["native_tid"] or 0
            opts.only_pthread = only["pthread_id"] or 0
        profile = Profile()
        st = _Stats()
        limit = args.count
        what = []
        if limit:
            what.append("%d samples" % limit)
        if args.duration:
            what.append("%g s" % args.duration)
        policy = {} if args.via_debugger else dbg.signal_policy()
        why_not = "--via-debugger" if args.via_debugger else (dbg.can_hand_over() or
                                                              _pending_stop_signal(policy, pid))
        # progress(), not write(): lldb shows a command's result only once it ends.
        dbg.progress("rbpeek: sampling pid %d (Ruby %s) at %s Hz for %s; Ctrl-C ends it early\n"
                     % (pid, version, _fmt_rate(1.0 / interval), " or ".join(what) if what else "until Ctrl-C"))
        if why_not is None:
            end, failure = self._run_traced(dbg, session, profile, opts, args, interval, pid, policy, st)
        else:
            st.via = why_not
            end, failure = self._run_via_debugger(dbg, session, profile, opts, args, interval, pid, st)

        rate = st.samples / st.elapsed() if st.elapsed() > 0 else 0.0
        profile.set_meta("ruby_version", version)
        profile.set_meta("pid", pid)
        profile.set_meta("samples", st.samples)
        profile.set_meta("rate_hz", _fmt_rate(rate))
        title = "ruby sample: pid %d, Ruby %s, %d samples at %s Hz%s" % (
            pid, version, st.samples, _fmt_rate(rate), " (on-CPU)" if args.on_cpu else "")
        profile.set_meta("title", title)
        written = self._write(dbg, profile, outputs, title)
        summary = self._summary(st, profile, pid, version, interval, rate, end, written, args, only)
        if end.startswith("interrupted"):
            # lldb drops the result of an interrupted command: print it now.
            dbg.progress(summary)
        else:
            dbg.write(summary)
        if failure is not None:
            if isinstance(failure, RbpeekError):
                raise RbpeekError("ruby sample stopped after %d samples: %s" % (st.samples, failure))
            raise failure

    @staticmethod
    def _run_traced(dbg, session, profile, opts, args, interval, pid, policy, st):
        """The fast loop: the debugger detaches, a C thread traces the target
        itself and runs the whole loop (core/src/tracer.c), and the debugger
        attaches again at the end. Here: show progress, and pass Ctrl-C on."""
        cfg = TraceConfig()
        cfg.interval_s = interval
        cfg.max_samples = args.count or 0
        cfg.duration_s = args.duration or 0.0
        cfg.max_frames = args.max_frames
        cfg.seed = random.getrandbits(63) | 1
        for num, (stop, deliver) in policy.items():
            cfg.stop_signals[num] = 1 if stop else 0
            cfg.pass_signals[num] = 1 if deliver else 0
        # Anything the walk may ask the debugger for is asked now, while it
        # is attached; the sampling thread never calls into it.
        with session.snapshot(1):
            pass
        st.traced = True
        end = "?"
        failure = None
        trace = None
        progress = _Progress(dbg)
        token = dbg.hand_over()
        ts = None
        try:
            st.t_start = time.perf_counter()
            trace = Trace(session, profile, opts, cfg)
            while not trace.wait(TRACE_POLL):
                if dbg.interrupted():
                    end = "interrupted (Ctrl-C)"
                    trace.cancel()
                st.take(trace.stats())
                progress.update(st, time.perf_counter())
        except KeyboardInterrupt:
            end = "interrupted (Ctrl-C)"
        except Exception as e:  # written up by the caller, after the data is saved
            failure = e
            end = "stopped by an error"
        finally:
            if trace is not None:
                trace.cancel()   # if still running; it lets go of the target, then ends
                while not trace.wait(1.0):
                    pass
                ts = trace.stats()
                st.take(ts)
                trace.close()
            st.t_end = time.perf_counter()
            progress.done()
            if ts is None or TRACE_ENDS.get(ts.end) != "exited":
                try:
                    dbg.take_back(token, pid)
                    if ts is not None and TRACE_ENDS.get(ts.end) == "signal" and not ts.signal_pending:
                        # The signal sampling took from the target, sent
                        # again now that the debugger will see it.
                        os.kill(pid, ts.signal)
                except (RbpeekError, OSError) as e:
                    failure = failure or (e if isinstance(e, RbpeekError) else RbpeekError(str(e)))
        if ts is not None:
            why = TRACE_ENDS.get(ts.end)
            if why == "done":
                end = ("%d samples taken" % args.count if args.count and ts.samples >= args.count
                       else "%g s elapsed" % (args.duration or 0))
            elif why == "exited":
                end = "the target exited (%s)" % ("exit status %d" % ts.exit_code if not ts.signal
                                                  else "killed by %s" % _signame(ts.signal))
            elif why == "signal":
                end = ("the target received %s: it is stopped with the signal pending, "
                       "which the debugger reports on the next continue" % _signame(ts.signal))
            elif why == "exec":
                end = "the target called exec()"
            elif why == "failed" and failure is None:
                failure = RbpeekError(ts.message.decode("utf-8", "replace") or "the sampling thread failed")
                end = "stopped by an error"
        return end, failure

    @staticmethod
    def _run_via_debugger(dbg, session, profile, opts, args, interval, pid, st):
        """The loop through the debugger: it resumes the target and waits
        for it to stop on the signal the kicker sends at each sample time.
        Used when the debugger cannot let go of the target (gdb's own
        child), and with --via-debugger (breakpoints stay active)."""
        tid_map = _TidMap(dbg, session, opts, pid) if args.on_cpu else None
        sampler = Sampler(session, profile, opts, args.max_frames)
        limit = args.count
        end = "?"
        failure = None
        kicker = token = None
        progress = _Progress(dbg)
        rng = random.Random()
        try:
            kicker = Kicker(pid, SAMPLE_SIGNAL)
            token = dbg.sample_prepare(SAMPLE_SIGNAL)
            st.t_start = now = time.perf_counter()
            # Poisson sampling: sample times are a Poisson process of the
            # requested rate (exponentially distributed gaps), kept in
            # absolute time so that the debugger's cost per sample does not
            # lower the rate while it keeps up. How long the target runs
            # after a resume is then itself exponential, so the moments
            # right after a resume, when it runs slower on caches the
            # debugger evicted, are sampled as often as any other (a fixed
            # run time never samples them), and no periodic program can beat
            # in step with the samples. Gaps shorter than a sample costs are
            # made up by the longer ones that follow, up to BACKLOG
            # intervals; beyond that (the debugger cannot keep up, or
            # stalled) the schedule restarts rather than catch up in a burst.
            next_fire = now + rng.expovariate(1.0 / interval)
            while True:
                if limit and st.samples >= limit:
                    end = "%d samples taken" % limit
                    break
                if args.duration and now - st.t_start >= args.duration:
                    end = "%g s elapsed" % args.duration
                    break
                if dbg.interrupted():
                    end = "interrupted (Ctrl-C)"
                    break
                if next_fire < now - BACKLOG * interval:
                    next_fire = now
                fire = next_fire
                next_fire += rng.expovariate(1.0 / interval)
                kicker.arm(fire)
                t_resume = time.perf_counter()
                kind, desc = dbg.sample_resume()
                t_stopped = time.perf_counter()
                fired, fired_at = kicker.disarm()
                if kind == "exited":
                    end = "the target exited (%s)" % desc
                    break
                if kind != "sample":
                    # gdb passes Ctrl-C to the target as SIGINT; lldb stops
                    # it with SIGSTOP and flags the command as interrupted.
                    end = ("interrupted (Ctrl-C)" if dbg.interrupted() or (desc and "SIGINT" in desc)
                           else "the target stopped: %s" % desc)
                    break
                res = sampler.sample()
                t_walked = time.perf_counter()
                st.record(res, t_resume, fired_at if fired else t_resume, t_stopped, t_walked)
                if res is None:
                    st.note_error(sampler.error())
                elif tid_map is not None and res.tid_unknown:
                    tid_map.maybe_refresh(t_walked)
                now = t_walked
                progress.update(st, now)
        except KeyboardInterrupt:
            end = "interrupted (Ctrl-C)"
        except Exception as e:  # written up below, after the data is saved
            failure = e
            end = "stopped by an error"
        finally:
            st.t_end = time.perf_counter()
            if kicker is not None:
                kicker.close()
            progress.done()
            if token is not None:
                dbg.sample_restore(token)

        return end, failure

    # -- helpers ----------------------------------------------------------

    @staticmethod
    def _outputs(args, pid):
        outs = [(kind, path) for kind, path in (("folded", args.folded), ("svg", args.svg),
                                                 ("speedscope", args.speedscope)) if path]
        if not outs:
            base = "rbpeek-%d-%s" % (pid, time.strftime("%Y%m%d-%H%M%S"))
            outs = [("folded", base + ".folded"), ("svg", base + ".svg")]
        for _kind, path in outs:
            d = os.path.dirname(os.path.abspath(path))
            if not os.path.isdir(d):
                raise RbpeekError("cannot write %s: no such directory %s" % (path, d))
            if not os.access(d, os.W_OK) or (os.path.exists(path) and not os.access(path, os.W_OK)):
                raise RbpeekError("cannot write %s: permission denied" % path)
        return outs

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

    @staticmethod
    def _write(dbg, profile, outputs, title):
        written = []
        for kind, path in outputs:
            try:
                if kind == "folded":
                    profile.write_folded(path)
                elif kind == "svg":
                    profile.write_svg(path, title)
                else:
                    profile.write_speedscope(path)
                written.append(path)
            except RbpeekError as e:
                dbg.write("rbpeek: could not write %s: %s\n" % (path, e))
        return written

    @staticmethod
    def _summary(st, profile, pid, version, interval, rate, end, written, args, only):
        lines = ["rbpeek: sampling ended: %s" % end,
                 "Samples:   %d in %.2f s: %s Hz (asked for %s Hz)"
                 % (st.samples, st.elapsed(), _fmt_rate(rate), _fmt_rate(1.0 / interval))]
        scope = "all threads" if args.threads == "all" else "thread %s" % (only.get("dbg_num"))
        if args.on_cpu:
            scope += ", on-CPU only"
        lines.append("Stacks:    %d recorded (%s); %d distinct"
                     % (profile.total(), scope, profile.stack_count()))
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
        if args.on_cpu:
            lines.append("Off-CPU:   %d thread samples left out (blocked or waiting)%s"
                         % (st.filtered, "; %d judged by Ruby's status alone (TID unknown)" % st.tid_unknown
                            if st.tid_unknown else ""))
        if st.samples:
            n = st.samples
            share = st.running / st.elapsed() if st.elapsed() > 0 else 0.0
            if st.traced:
                lines.append("Cost:      per sample %.0f us stopping the threads, %.0f us walking the stacks, %.0f us "
                             "resuming them (traced by rbpeek); the target ran %.1f%% of the time"
                             % (1e6 * st.stop / n, 1e6 * st.walk / n, 1e6 * st.resume / n, 100.0 * share))
            else:
                lines.append("Cost:      per sample %.0f us walking the stacks, %.0f us for the debugger to stop "
                             "the target; resumed %.0f%% of the time (resuming included; stopped through the "
                             "debugger: %s)" % (1e6 * st.walk / n, 1e6 * st.stop / n, 100.0 * share, st.via))
            if share < 0.5 and n >= 20:
                lines.append("Note:      this rate is more than the debugger keeps up with: the target ran in "
                             "short bursts, so neighbouring samples saw nearly the same stack and count for less "
                             "than their number suggests (a lower --rate costs less and loses little)")
        out = "\n".join(lines) + "\n"
        if profile.total():
            out += "\n" + profile.top(True, 10) + "\n" + profile.top(False, 10)
        else:
            out += "(no Ruby stacks were recorded)\n"
        if written:
            out += "rbpeek: wrote %s\n" % ", ".join(written)
        return out


class _Stats:
    def __init__(self):
        self.samples = 0
        self.failed_samples = 0
        self.failed_threads = 0
        self.filtered = 0
        self.tid_unknown = 0
        self.not_stopped = 0
        self.last_error = ""
        self.loop_elapsed = None
        self.traced = False   # rbpeek traced the target itself (the fast path)
        self.via = None       # else why the debugger stopped it
        self.resume = 0.0     # traced: seconds resuming the threads
        self.walk = 0.0       # seconds walking
        self.stop = 0.0       # seconds from sending the signal to the debugger reporting the stop
        self.running = 0.0    # seconds from asking to resume to sending the signal
        self.t_start = self.t_end = None

    def record(self, res, t_resume, t_fired, t_stopped, t_walked):
        self.samples += 1
        if res is None:
            self.failed_samples += 1
        else:
            self.failed_threads += res.failed
            self.filtered += res.filtered
            self.tid_unknown += res.tid_unknown
        self.walk += t_walked - t_stopped
        self.running += max(0.0, t_fired - t_resume)
        self.stop += max(0.0, t_stopped - t_fired)

    def take(self, ts):
        """The counts of a traced run (rbpeek_trace_stats)."""
        self.samples = ts.samples
        self.failed_samples = ts.failed_samples
        self.failed_threads = ts.failed_threads
        self.filtered = ts.filtered
        self.tid_unknown = ts.tid_unknown
        self.not_stopped = ts.not_stopped
        self.walk, self.stop, self.resume = ts.walk_s, ts.stop_s, ts.resume_s
        self.running = max(0.0, ts.elapsed_s - ts.walk_s - ts.stop_s - ts.resume_s)
        self.loop_elapsed = ts.elapsed_s
        if ts.message:
            self.last_error = ts.message.decode("utf-8", "replace")

    def note_error(self, msg):
        self.last_error = msg

    def elapsed(self):
        if self.traced and self.loop_elapsed is not None:
            return self.loop_elapsed   # the C loop's own: without the debugger's detach and attach
        if self.t_start is None:
            return 0.0
        return (self.t_end or time.perf_counter()) - self.t_start


class _Progress:
    """'rbpeek: 523 samples, 99.7 Hz, 5.2 s' now and then: rewritten in place
    on a terminal, a line every few seconds otherwise."""

    def __init__(self, dbg):
        self.dbg = dbg
        try:
            self.tty = os.isatty(1)
        except OSError:
            self.tty = False
        self.every = PROGRESS_EVERY if self.tty else PROGRESS_EVERY_PIPE
        self.next = time.perf_counter() + self.every
        self.shown = False

    def update(self, st, now):
        if now < self.next:
            return
        self.next = now + self.every
        el = now - st.t_start
        text = "rbpeek: sampling: %d samples, %s Hz, %.1f s" % (st.samples, _fmt_rate(st.samples / el if el else 0),
                                                                 el)
        self.dbg.progress(("\r" + text + "   ") if self.tty else text + "\n")
        self.shown = True

    def done(self):
        if self.shown and self.tty:
            self.dbg.progress("\n")


class _TidMap:
    """(pthread_t, TID) pairs for --on-cpu on Rubies that keep no TID
    (before 3.1): from glibc's thread descriptors (resolve_tids), else from
    the debugger's thread list; refreshed when a thread was not found in it."""

    def __init__(self, dbg, session, opts, pid):
        self.dbg, self.session, self.opts, self.pid = dbg, session, opts, pid
        self.arr = None
        self.last = 0.0
        self.refresh(time.perf_counter())

    def refresh(self, now):
        self.last = now
        pairs = []
        try:
            with self.session.snapshot(1) as snap:
                pairs = [x for pair in resolve_tids(self.session, snap, pid=self.pid) for x in pair]
        except RbpeekError:
            pairs = []
        if not pairs:
            try:
                for t in self.dbg.threads():
                    if t.get("pthread") and t.get("tid"):
                        pairs += [t["pthread"], t["tid"]]
            except Exception:
                pairs = []
        self.arr = (ctypes.c_uint64 * max(1, len(pairs)))(*pairs)
        self.opts.tid_map = ctypes.cast(self.arr, ctypes.POINTER(ctypes.c_uint64))
        self.opts.tid_map_pairs = len(pairs) // 2

    def maybe_refresh(self, now):
        if now - self.last >= TID_MAP_REFRESH:
            self.refresh(now)

