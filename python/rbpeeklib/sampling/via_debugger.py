"""The sampling loop through the debugger (--via-debugger, and gdb's own
children): a helper thread (rbpeek_kicker, in C so that it never waits for
the GIL) sends the target a signal at each sample time while the debugger
waits in its "continue". The debugger is told (adapter.sample_prepare) to
stop on that signal silently and never pass it on. The signal is SIGURG
because its default action is to be ignored: if one is still in flight when
sampling ends (the target stopped for another reason at the same moment),
it reaches the target after the user's next continue, which ignores it,
instead of killing it as most signals would. Cheaper ways were measured
(docs/sampling-cost.md): a debugger's own interrupt prints a stop report each
time, and in lldb an async Stop() from another thread costs about ten times
as much as the signal.
"""

import ctypes
import signal
import time

from ..core import Kicker, RbpeekError, Sampler, Schedule, resolve_tids
from .stats import Progress

SAMPLE_SIGNAL = signal.SIGURG
TID_MAP_REFRESH = 1.0       # seconds between pthread -> TID map refreshes


def run_via_debugger(dbg, session, profile, opts, args, interval, pid, st):
    """The loop through the debugger: it resumes the target and waits
    for it to stop on the signal the kicker sends at each sample time.
    Used when the debugger cannot let go of the target (gdb's own
    child), and with --via-debugger (breakpoints stay active). Returns
    (how the loop ended, the exception that stopped it or None)."""
    tid_map = TidMap(dbg, session, opts, pid) if args.on_cpu else None
    sampler = Sampler(session, profile, opts, args.max_frames, native=args.native)
    limit = args.count
    end = "?"
    failure = None
    kicker = token = None
    progress = Progress(dbg)
    try:
        kicker = Kicker(pid, SAMPLE_SIGNAL)
        token = dbg.sample_prepare(SAMPLE_SIGNAL)
        st.t_start = now = time.perf_counter()
        # The sample times are the tracer's (rbpeek_schedule): the target's
        # run from each resume to the next sample is exponential, of a mean
        # shortened by the samples' mean cost. Here the resume is the
        # debugger's continue, just after the kicker is armed.
        schedule = Schedule(interval)
        fired_at = None
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
            t_resume = time.perf_counter()
            kicker.arm(schedule.next(fired_at, t_resume))
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
            if res is not None and res.unmerged and not st.unmerged_note:
                st.unmerged_note = sampler.unmerged_note
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
    except Exception as e:  # written up by the caller, after the data is saved
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


class TidMap:
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
