"""The fast sampling loop: the debugger detaches (adapter.hand_over), a C
thread becomes the target's tracer and runs the whole loop
(core/src/profile/tracer.c, rbpeek_trace_*), and the debugger attaches
again at the end (adapter.take_back). A stop and resume costs a fraction of
a debugger's, whose bookkeeping was most of a sample's cost
(docs/sampling-internals.md). Here Python only shows progress and passes Ctrl-C on.
"""

import os
import random
import time

from ..core import STOP_MODES, TRACE_ENDS, RbpeekError, Trace, TraceConfig
from .signals import signame
from .stats import Progress

TRACE_POLL = 0.1            # seconds between progress and Ctrl-C checks while the C loop samples


def stop_mode(args):
    """What each sample stops: "gvl" (the thread holding the GVL; the
    default), "all" (--stop-all) or "none" (--nonblocking)."""
    if getattr(args, "nonblocking", False):
        return "none"
    return "all" if getattr(args, "stop_all", False) else "gvl"


def run_traced(dbg, session, profile, opts, args, interval, pid, policy, st):
    """The fast loop: the debugger detaches, a C thread traces the target
    itself and runs the whole loop, and the debugger attaches again at the
    end. Here: show progress, and pass Ctrl-C on. Returns (how the loop
    ended, the exception that stopped it or None)."""
    cfg = TraceConfig()
    cfg.interval_s = interval
    cfg.max_samples = args.count or 0
    cfg.duration_s = args.duration or 0.0
    cfg.max_frames = args.max_frames
    cfg.seed = random.getrandbits(63) | 1
    cfg.stop_mode = STOP_MODES[stop_mode(args)]
    cfg.native = 1 if args.native else 0
    for num, (stop, deliver) in policy.items():
        cfg.stop_signals[num] = 1 if stop else 0
        cfg.pass_signals[num] = 1 if deliver else 0
    if getattr(args, "alloc_sites", None) is not None:   # ruby allocs --sites: the judge, on native stacks
        cfg.alloc_sites = args.alloc_sites.handle
        cfg.native = 1
    # Anything the walk may ask the debugger for is asked now, while it
    # is attached; the sampling thread never calls into it.
    with session.snapshot(1):
        pass
    st.traced = True
    st.stop_mode = stop_mode(args)
    end = "?"
    failure = None
    trace = None
    progress = Progress(dbg)
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
                                              else "killed by %s" % signame(ts.signal))
        elif why == "signal":
            end = ("the target received %s: it is stopped with the signal pending, "
                   "which the debugger reports on the next continue" % signame(ts.signal))
        elif why == "exec":
            end = "the target called exec()"
        elif why == "failed" and failure is None:
            failure = RbpeekError(ts.message.decode("utf-8", "replace") or "the sampling thread failed")
            end = "stopped by an error"
    return end, failure
