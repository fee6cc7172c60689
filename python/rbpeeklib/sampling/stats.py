"""What a sampling run counts (Stats: samples, failures, where the time
went) and the progress line shown while it runs (Progress)."""

import os
import time

PROGRESS_EVERY = 0.25       # seconds between progress updates on a terminal
PROGRESS_EVERY_PIPE = 5.0   # ... and when the output is not a terminal


def fmt_rate(hz):
    """A rate in Hz as the messages show it."""
    return ("%.0f" % hz) if hz >= 100 else ("%.1f" % hz)


class Stats:
    """The counts and timings of one run, from either loop."""

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
        self.stop_mode = None  # traced: "gvl", "all" or "none" (sampling/traced.py)
        self.added_threads = 0
        self.torn_threads = 0  # --nonblocking: stacks that changed while read, dropped
        self.retried_threads = 0  # stacks walked again because they changed while read (torn ones too)
        self.full_stops = 0    # samples that stopped every thread
        self.threads_stopped = 0
        self.held = 0.0        # traced: seconds some thread of the target was held stopped (from the stop's request)
        self.held_seen = 0.0   # ... from the moment every stop asked for was seen: at least this long
        self.gc = [0] * 5      # stacks recorded with the GC at work on top, by phase (rbpeek_gc_phase)
        # traced, threads stopped: the GVL holders found on a CPU, of which the GC
        # was at work on; and those found preempted (rbpeek_trace_stats)
        self.cpu_samples = self.cpu_gc = self.cpu_waited = 0
        self.unmerged = 0      # --native: stacks whose Ruby frames could not be placed (recorded alone)
        self.unmerged_note = None  # ... the first one's note: why
        self.native_ways = None  # traced --native: (held, peeked, stopped, none, reused) registers
        self.ruby_reused = 0   # traced: stacks of threads not run since an earlier sample, its walk reused
        self.gvl_free = 0      # traced, allocation sites: samples at which no thread held a GVL (nothing stopped)

    def record(self, res, t_resume, t_fired, t_stopped, t_walked):
        self.samples += 1
        if res is None:
            self.failed_samples += 1
        else:
            self.failed_threads += res.failed
            self.filtered += res.filtered
            self.tid_unknown += res.tid_unknown
            self.added_threads += res.added
            self.unmerged += res.unmerged
            for k in range(1, 5):
                self.gc[k] += res.gc[k]
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
        self.added_threads = ts.added_threads
        self.torn_threads = ts.torn_threads
        self.retried_threads = ts.retried_threads
        self.full_stops = ts.full_stops
        self.threads_stopped = ts.threads_stopped
        self.held = ts.held_s
        self.held_seen = ts.held_seen_s
        self.gc = [ts.gc[k] for k in range(5)]
        self.cpu_samples, self.cpu_gc, self.cpu_waited = ts.cpu_samples, ts.cpu_gc, ts.cpu_waited
        self.unmerged = ts.native_unmerged
        self.unmerged_note = ts.unmerged_note.decode("utf-8", "replace") or None
        self.native_ways = (ts.native_held, ts.native_peeked, ts.native_stopped, ts.native_none,
                            ts.native_reused)
        self.gvl_free = ts.gvl_free
        self.ruby_reused = ts.ruby_reused
        if ts.message:
            self.last_error = ts.message.decode("utf-8", "replace")

    def add_gc(self, other):
        """Adds another run's GC counts (by phase, and those of the samples
        that found the GVL's holder on a CPU) to these: the figures of
        several processes, or of `top`'s periods, are of their sums."""
        self.gc = [a + b for a, b in zip(self.gc, other.gc)]
        self.cpu_samples += other.cpu_samples
        self.cpu_gc += other.cpu_gc
        self.cpu_waited += other.cpu_waited

    def note_error(self, msg):
        self.last_error = msg

    def elapsed(self):
        if self.traced and self.loop_elapsed is not None:
            return self.loop_elapsed   # the C loop's own: without the debugger's detach and attach
        if self.t_start is None:
            return 0.0
        return (self.t_end or time.perf_counter()) - self.t_start


class Progress:
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
        text = "rbpeek: sampling: %d samples, %s Hz, %.1f s" % (st.samples, fmt_rate(st.samples / el if el else 0),
                                                                 el)
        self.dbg.progress(("\r" + text + "   ") if self.tty else text + "\n")
        self.shown = True

    def done(self):
        if self.shown and self.tty:
            self.dbg.progress("\n")
