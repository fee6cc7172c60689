"""The C objects of `ruby sample`: the Profile that aggregates stacks and
writes them out, the per-sample Sampler, the traced loop (Trace) and the
signal timer of the loop through the debugger (Kicker)."""

import ctypes

from .cstructs import THREAD_STATES, AllocSitesStats, FrameCount, SampleResult, ThreadTally, TraceStats
from .formats import BY_NAME
from .lib import Owned, RbpeekError, decode, lib, take_json, take_text


class Profile(Owned):
    """Aggregated stack samples and their writers (owns the C profile)."""

    _free_fn = "rbpeek_profile_free"

    def __init__(self):
        self._h = lib().rbpeek_profile_new()
        if not self._h:
            raise RbpeekError("out of memory")

    def _check(self, status):
        if status != 0:
            raise RbpeekError(decode(lib().rbpeek_profile_error(self._h)) or "profile error %d" % status)

    def set_meta(self, key, value):
        self._check(lib().rbpeek_profile_set_meta(self._h, key.encode(), str(value).encode()))

    def total(self):
        return lib().rbpeek_profile_total(self._h)

    def stack_count(self):
        return lib().rbpeek_profile_stack_count(self._h)

    def merge(self, other):
        """Adds other's stacks and thread tallies to this profile."""
        self._check(lib().rbpeek_profile_merge(self._h, other._h))

    def thread_tallies(self):
        """Every thread the samples saw: dicts of pid, tid, name, main,
        samples, states (running, gvl_wait, blocked, gc: sample counts) and
        recorded (of those, by state, the samples whose stack the profile
        recorded)."""
        L = lib()
        out = []
        t = ThreadTally()
        for i in range(L.rbpeek_profile_thread_count(self._h)):
            if L.rbpeek_profile_thread_tally(self._h, i, ctypes.byref(t)) != 0:
                break
            out.append({"pid": t.pid, "tid": t.tid, "name": decode(t.name) or None, "main": bool(t.is_main),
                        "samples": t.samples, "states": dict(zip(THREAD_STATES, list(t.states))),
                        "recorded": dict(zip(THREAD_STATES, list(t.recorded)))})
        return out

    def top(self, by_self, n):
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_profile_top(self._h, 1 if by_self else 0, n, ctypes.byref(out)))
        return take_text(out)

    def frame_counts(self, by_method):
        """(name, self, total) of every frame, as top() counts them;
        by_method merges a method's lines into one "label (path)"."""
        rows, n = ctypes.POINTER(FrameCount)(), ctypes.c_size_t()
        self._check(lib().rbpeek_profile_frame_counts(self._h, 1 if by_method else 0, ctypes.byref(rows),
                                                      ctypes.byref(n)))
        try:
            return [(decode(rows[i].name), rows[i].self, rows[i].total) for i in range(n.value)]
        finally:
            lib().rbpeek_free(rows)

    def scale_to(self, total):
        """Scales the counts to sum to about total (estimated allocations)."""
        self._check(lib().rbpeek_profile_scale_to(self._h, int(total)))

    def write(self, fmt, path, facts=None):
        """Writes the profile to path in format fmt (a name of formats.py's
        table): facts is what the sampler knows ("title", "period_s",
        "on_cpu", "start", "duration"), which the format's options take."""
        f = BY_NAME[fmt]
        args = [self._h, path.encode()]
        if f.options:
            args.append(ctypes.byref(f.fill(facts or {})))
        self._check(getattr(lib(), f.writer)(*args))


class Sampler:
    """The per-sample hot path of `ruby sample`: drop the session's memory
    cache (the target has run since the last sample), walk every thread, and
    add the stacks to the profile: four C calls, whatever the stacks' depth."""

    def __init__(self, session, profile, options, max_frames=0, native=False):
        L = lib()
        self._session, self._profile = session, profile  # keep the C objects alive
        self._opts = options
        self._max = max_frames
        self._result = SampleResult()
        self.unmerged_note = None   # the last sample's first stack not merged: why
        self._snap = ctypes.c_void_p()
        self._args = (session._h, profile._h)
        self._invalidate = L.rbpeek_session_invalidate
        if native:   # with each thread's native stack (no source lines: a profile names functions)
            take_native = L.rbpeek_snapshot_take_native
            self._take = lambda s, m, out: take_native(s, m, 0, out)
        else:
            self._take = L.rbpeek_snapshot_take
        self._add, self._free = L.rbpeek_profile_add_snapshot, L.rbpeek_snapshot_free
        self._opts_ref, self._result_ref = ctypes.byref(options), ctypes.byref(self._result)
        self._snap_ref = ctypes.byref(self._snap)

    def sample(self):
        """One sample of the stopped target. Returns the SampleResult, or
        None when no snapshot could be taken at all (the session's error says
        why). Raises RbpeekError only when the profile cannot grow."""
        s, p = self._args
        self._invalidate(s)
        if self._take(s, self._max, self._snap_ref) != 0:
            self._session.raise_pending_interrupt()
            return None
        try:
            st = self._add(p, self._snap, self._opts_ref, self._result_ref)
            # The note's text is the snapshot's: copied before it is freed.
            note, self._result.unmerged_note = self._result.unmerged_note, None
            self.unmerged_note = decode(note) if note else None
        finally:
            self._free(self._snap)
            self._snap.value = None
        self._session.raise_pending_interrupt()
        if st != 0:
            raise RbpeekError(decode(lib().rbpeek_profile_error(p)) or "cannot add a sample")
        return self._result

    def error(self):
        return self._session.error()


class Trace(Owned):
    """rbpeek_trace: the sampling loop run by a C thread that traces the
    target itself (the debugger must have detached). session and profile
    belong to it until it has ended."""

    _free_fn = "rbpeek_trace_free"

    def __init__(self, session, profile, options, config):
        self._keep = (session, profile, options, config)
        h = ctypes.c_void_p()
        session._check(lib().rbpeek_trace_start(session._h, profile._h, ctypes.byref(options), ctypes.byref(config),
                                                ctypes.byref(h)))
        self._h = h.value

    def wait(self, seconds):
        """True once the loop has ended (and let go of the target)."""
        return bool(lib().rbpeek_trace_wait(self._h, int(seconds * 1000)))

    def cancel(self):
        lib().rbpeek_trace_cancel(self._h)

    def stats(self):
        st = TraceStats()
        lib().rbpeek_trace_get_stats(self._h, ctypes.byref(st))
        return st


class AllocSites(Owned):
    """rbpeek_alloc_sites: the judge of `ruby allocs --sites`' samples (in
    the allocator, or not) and its count of sites; given to a Trace through
    TraceConfig.alloc_sites, read once the trace has ended."""

    _free_fn = "rbpeek_alloc_sites_free"

    def __init__(self):
        self._h = lib().rbpeek_alloc_sites_new()
        if not self._h:
            raise RbpeekError("out of memory")

    @property
    def handle(self):
        return self._h

    def stats(self):
        st = AllocSitesStats()
        lib().rbpeek_alloc_sites_get_stats(self._h, ctypes.byref(st))
        return {name: getattr(st, name) for name, _t in AllocSitesStats._fields_}

    def sites(self, profile):
        """{batches, batched, sites: [{label, path, lineno, kind, samples, types: [{class, samples}],
        batch_samples}]}, the sites most samples first (rbpeek_alloc_sites_json)."""
        out = ctypes.c_void_p()
        if lib().rbpeek_alloc_sites_json(self._h, profile._h, ctypes.byref(out)) != 0:
            raise RbpeekError("cannot list the allocation sites (out of memory)")
        return take_json(out)


def share_interval(k, n, z):
    """(lo, hi): Wilson's score interval of the share k/n at the normal
    quantile z (rbpeek_share_interval; n may be an effective number)."""
    lo, hi = ctypes.c_double(), ctypes.c_double()
    lib().rbpeek_share_interval(float(k), float(n), float(z), ctypes.byref(lo), ctypes.byref(hi))
    return lo.value, hi.value


def is_allocator(symbol):
    """Whether symbol names one of the object allocator's functions."""
    return bool(lib().rbpeek_alloc_sites_is_allocator(symbol.encode()))


class Kicker(Owned):
    """rbpeek_kicker: sends process pid the signal signo at a moment given in
    time.monotonic() seconds (CLOCK_MONOTONIC), from a C thread that never
    needs the GIL."""

    _free_fn = "rbpeek_kicker_free"

    def __init__(self, pid, signo):
        L = lib()
        self._h = L.rbpeek_kicker_new(int(pid), int(signo))
        if not self._h:
            raise RbpeekError("cannot signal process %d: it is gone, or out of resources" % pid)
        self._arm, self._disarm = L.rbpeek_kicker_arm, L.rbpeek_kicker_disarm
        self._fired = ctypes.c_uint64()
        self._fired_ref = ctypes.byref(self._fired)

    def arm(self, deadline):
        self._arm(self._h, int(deadline * 1e9))

    def disarm(self):
        """(fired, the time.monotonic() moment it fired)."""
        if self._disarm(self._h, self._fired_ref):
            return True, self._fired.value * 1e-9
        return False, 0.0


class Schedule(Owned):
    """rbpeek_schedule: the sample times (the tracer's rule, for the loop
    through the debugger), in time.monotonic() seconds."""

    _free_fn = "rbpeek_schedule_free"

    def __init__(self, interval, seed=0):
        self._h = lib().rbpeek_schedule_new(float(interval), int(seed))
        if not self._h:
            raise RbpeekError("cannot schedule samples %r s apart" % interval)
        self._next = lib().rbpeek_schedule_next

    def next(self, fired, resumed):
        """The next sample's deadline for a target resumed at resumed, whose
        last sample fired at fired (None: none yet)."""
        return self._next(self._h, int(fired * 1e9) if fired else 0, int(resumed * 1e9)) * 1e-9
