"""ctypes binding to librbpeek, shared by the GDB and LLDB plugins.

This module knows the C API (core/include/rbpeek.h) and nothing about Ruby's
structs: every byte of interpreter state is decoded by the C core. It turns
status codes into RbpeekError exceptions carrying the session's one-line
message, and keeps Python callbacks alive for as long as the session that
uses them.
"""

import ctypes
import threading
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))


class RbpeekError(Exception):
    """A failure the user should see as one line."""


def _find_library():
    env = os.environ.get("RBPEEK_LIBRARY")
    if env:
        return env
    for build in ("build", "build-main"):
        cand = os.path.join(REPO_ROOT, build, "lib", "librbpeek.so")
        if os.path.exists(cand):
            return cand
    raise RbpeekError(
        "librbpeek.so not found: build it first (see README.md), or set RBPEEK_LIBRARY=/path/to/librbpeek.so")


READ_FN = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t)
LOOKUP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64))


class Frame(ctypes.Structure):
    _fields_ = [("label", ctypes.c_char_p), ("path", ctypes.c_char_p), ("absolute_path", ctypes.c_char_p),
                ("lineno", ctypes.c_int32), ("kind", ctypes.c_int32), ("iseq", ctypes.c_uint64)]


class Thread(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("is_main", ctypes.c_int32), ("status", ctypes.c_int32),
                ("native_tid", ctypes.c_int64), ("pthread_id", ctypes.c_uint64), ("thread_addr", ctypes.c_uint64),
                ("thread_value", ctypes.c_uint64), ("ractor_addr", ctypes.c_uint64), ("ractor_index", ctypes.c_int32),
                ("truncated", ctypes.c_int32), ("error", ctypes.c_char_p), ("nframes", ctypes.c_size_t),
                ("frames", ctypes.POINTER(Frame))]


class ReadStats(ctypes.Structure):
    _fields_ = [("requests", ctypes.c_uint64), ("source_reads", ctypes.c_uint64),
                ("source_bytes", ctypes.c_uint64), ("failures", ctypes.c_uint64)]


FORMAT_TEXT = 0
FORMAT_JSON = 1

_lib = None


def lib():
    """Loads librbpeek once and declares the signatures we use."""
    global _lib
    if _lib is not None:
        return _lib
    path = _find_library()
    try:
        # RTLD_DEEPBIND: gdb has elfutils' libdw loaded, which exports dwarf_*
        # functions with the same names as libdwarf's; without it, libdwarf's
        # calls into itself would land in libdw and DWARF parsing would fail.
        L = ctypes.CDLL(path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_DEEPBIND", 0))
    except OSError as e:
        raise RbpeekError("cannot load %s: %s" % (path, e))
    vp, u64, cp, st = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_char_p, ctypes.c_int
    sigs = {
        "rbpeek_status_name": (cp, [st]),
        "rbpeek_session_new": (vp, []),
        "rbpeek_session_free": (None, [vp]),
        "rbpeek_session_error": (cp, [vp]),
        "rbpeek_session_use_reader": (st, [vp, READ_FN, vp]),
        "rbpeek_session_use_pid": (st, [vp, ctypes.c_int]),
        "rbpeek_session_use_core": (st, [vp, cp]),
        "rbpeek_session_use_lookup": (st, [vp, LOOKUP_FN, vp]),
        "rbpeek_session_add_region": (st, [vp, u64, u64, u64, cp]),
        "rbpeek_session_set_vm": (st, [vp, u64]),
        "rbpeek_session_set_layout_file": (st, [vp, cp]),
        "rbpeek_session_set_ruby_version": (st, [vp, cp]),
        "rbpeek_session_add_debug_file": (st, [vp, cp]),
        "rbpeek_session_attach": (st, [vp]),
        "rbpeek_session_invalidate": (None, [vp]),
        "rbpeek_session_ruby_version": (cp, [vp]),
        "rbpeek_session_layout_source": (cp, [vp]),
        "rbpeek_session_warning": (cp, [vp]),
        "rbpeek_session_vm_addr": (u64, [vp]),
        "rbpeek_session_vm_source": (cp, [vp]),
        "rbpeek_session_describe": (st, [vp, ctypes.POINTER(ctypes.c_void_p)]),
        "rbpeek_session_read_stats": (None, [vp, ctypes.POINTER(ReadStats)]),
        "rbpeek_session_reset_read_stats": (None, [vp]),
        "rbpeek_snapshot_take": (st, [vp, ctypes.c_size_t, ctypes.POINTER(vp)]),
        "rbpeek_snapshot_free": (None, [vp]),
        "rbpeek_snapshot_thread_count": (ctypes.c_size_t, [vp]),
        "rbpeek_snapshot_thread": (ctypes.POINTER(Thread), [vp, ctypes.c_size_t]),
        "rbpeek_snapshot_render": (st, [vp, vp, st, ctypes.c_long, ctypes.POINTER(ctypes.c_void_p)]),
        "rbpeek_thread_status_name": (cp, [ctypes.c_int32]),
        "rbpeek_free": (None, [vp]),
    }
    # --- threads and locks (cmd_threads.py) ---
    sigs["rbpeek_locks_render_json"] = (st, [vp, vp, ctypes.POINTER(ctypes.c_void_p)])
    # --- heap (cmd_heap.py) ---
    sigs["rbpeek_heap_census"] = (st, [vp, ctypes.POINTER(vp)])
    sigs["rbpeek_census_free"] = (None, [vp])
    sigs["rbpeek_census_get_summary"] = (None, [vp, ctypes.POINTER(CensusSummary)])
    sigs["rbpeek_census_render"] = (st, [vp, st, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_heap_dump"] = (st, [vp, cp, ctypes.POINTER(HeapDumpStats)])
    # --- sampling (cmd_sample.py) ---
    sigs["rbpeek_profile_new"] = (vp, [])
    sigs["rbpeek_profile_free"] = (None, [vp])
    sigs["rbpeek_profile_error"] = (cp, [vp])
    sigs["rbpeek_profile_set_meta"] = (st, [vp, cp, cp])
    sigs["rbpeek_profile_total"] = (u64, [vp])
    sigs["rbpeek_profile_stack_count"] = (u64, [vp])
    sigs["rbpeek_profile_top"] = (st, [vp, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_profile_write_folded"] = (st, [vp, cp])
    sigs["rbpeek_profile_write_svg"] = (st, [vp, cp, ctypes.POINTER(SvgOptions)])
    sigs["rbpeek_profile_write_speedscope"] = (st, [vp, cp])
    sigs["rbpeek_profile_add_snapshot"] = (st, [vp, vp, ctypes.POINTER(SampleOptions), ctypes.POINTER(SampleResult)])
    sigs["rbpeek_snapshot_resolve_tids"] = (st, [vp, vp, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_int,
                                                 ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_size_t)])
    sigs["rbpeek_kicker_new"] = (vp, [ctypes.c_int, ctypes.c_int])
    sigs["rbpeek_kicker_arm"] = (None, [vp, u64])
    sigs["rbpeek_kicker_disarm"] = (ctypes.c_int, [vp, ctypes.POINTER(ctypes.c_uint64)])
    sigs["rbpeek_kicker_free"] = (None, [vp])
    sigs["rbpeek_trace_start"] = (st, [vp, vp, ctypes.POINTER(SampleOptions), ctypes.POINTER(TraceConfig),
                                       ctypes.POINTER(vp)])
    sigs["rbpeek_trace_wait"] = (ctypes.c_int, [vp, ctypes.c_int])
    sigs["rbpeek_trace_cancel"] = (None, [vp])
    sigs["rbpeek_trace_get_stats"] = (None, [vp, ctypes.POINTER(TraceStats)])
    sigs["rbpeek_trace_free"] = (None, [vp])
    missing = []
    for name, (res, args) in sigs.items():
        try:
            fn = getattr(L, name)
        except AttributeError:
            missing.append(name)
            continue
        fn.restype = res
        fn.argtypes = args
    if missing:
        raise RbpeekError("%s is older than the plugin (it lacks %s); rebuild it: cmake --build build"
                          % (path, ", ".join(missing[:3])))
    _lib = L
    return L


def _s(b):
    return b.decode("utf-8", "replace") if b is not None else None


class _Owned:
    """A C object this Python object owns: released by close(), on leaving a
    with-block, or when the Python object is collected, whichever is first."""

    _h = None
    _free_fn = ""  # the rbpeek_<object>_free function

    def close(self):
        h, self._h = self._h, None
        if h:
            getattr(lib(), self._free_fn)(h)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()


class Snapshot(_Owned):
    """Every Ruby thread and its frames at one moment (owns the C snapshot)."""

    _free_fn = "rbpeek_snapshot_free"

    def __init__(self, session, handle):
        self._session = session
        self._h = handle

    def threads(self):
        """A list of plain dicts, one per thread (the JSON schema's shape)."""
        L = lib()
        out = []
        for i in range(L.rbpeek_snapshot_thread_count(self._h)):
            t = L.rbpeek_snapshot_thread(self._h, i).contents
            frames = [{"label": _s(f.label), "path": _s(f.path), "absolute_path": _s(f.absolute_path),
                       "lineno": f.lineno, "kind": "cfunc" if f.kind == 1 else "ruby"}
                      for f in (t.frames[j] for j in range(t.nframes))]
            out.append({"index": i, "name": _s(t.name), "main": bool(t.is_main),
                        "native_tid": t.native_tid if t.native_tid > 0 else None,
                        "pthread_id": t.pthread_id, "status": _s(L.rbpeek_thread_status_name(t.status)),
                        "ractor": t.ractor_index, "truncated": bool(t.truncated), "error": _s(t.error),
                        "frames": frames})
        return out

    def locks(self):
        """Who waits on what, who holds which Mutex, deadlocks: the parsed
        JSON of rbpeek_locks_render_json (threads referred to by index)."""
        import json
        out = ctypes.c_void_p()
        self._session._check(lib().rbpeek_locks_render_json(self._session._h, self._h, ctypes.byref(out)))
        try:
            return json.loads(ctypes.string_at(out.value).decode("utf-8", "replace"))
        finally:
            lib().rbpeek_free(out)

    def render(self, fmt, thread_index=-1):
        out = ctypes.c_void_p()
        self._session._check(lib().rbpeek_snapshot_render(self._session._h, self._h, fmt, thread_index,
                                                          ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            lib().rbpeek_free(out)


class Session(_Owned):
    """One target. Memory comes from a pid, or from reader/lookup callbacks."""

    _free_fn = "rbpeek_session_free"

    def __init__(self):
        self._h = lib().rbpeek_session_new()
        if not self._h:
            raise RbpeekError("out of memory")
        self._keep = []  # ctypes callbacks must outlive the C session

    def error(self):
        return _s(lib().rbpeek_session_error(self._h)) or "unknown error"

    def _check(self, status):
        if status != 0:
            raise RbpeekError(self.error())

    def use_pid(self, pid):
        self._check(lib().rbpeek_session_use_pid(self._h, int(pid)))

    def use_core(self, path):
        self._check(lib().rbpeek_session_use_core(self._h, path.encode()))

    def use_reader(self, read):
        """read(addr, size) -> bytes (possibly short) or None."""

        def cb(_ctx, addr, buf, size):
            try:
                data = read(addr, size)
            except Exception:  # the debugger refused: unreadable memory
                return -1
            if not data:
                return -1
            n = min(len(data), size)
            ctypes.memmove(buf, bytes(data[:n]), n)
            return n

        fn = READ_FN(cb)
        self._keep.append(fn)
        self._check(lib().rbpeek_session_use_reader(self._h, fn, None))

    def use_lookup(self, lookup):
        """lookup(name) -> address or None. Asked only from the thread that
        set it: debuggers' APIs are not thread-safe, and the sampling thread
        of a traced run (Trace) must not call into one."""
        owner = threading.get_ident()

        def cb(_ctx, name, out):
            if threading.get_ident() != owner:
                return 1
            try:
                addr = lookup(name.decode())
            except Exception:
                return 1
            if not addr:
                return 1
            out[0] = addr
            return 0

        fn = LOOKUP_FN(cb)
        self._keep.append(fn)
        self._check(lib().rbpeek_session_use_lookup(self._h, fn, None))

    def add_region(self, start, end, offset, path):
        lib().rbpeek_session_add_region(self._h, start, end, offset, path.encode() if path else None)

    def add_debug_file(self, path):
        lib().rbpeek_session_add_debug_file(self._h, path.encode())

    def set_vm(self, addr):
        self._check(lib().rbpeek_session_set_vm(self._h, addr))

    def set_layout_file(self, path):
        self._check(lib().rbpeek_session_set_layout_file(self._h, path.encode()))

    def set_ruby_version(self, version):
        self._check(lib().rbpeek_session_set_ruby_version(self._h, version.encode()))

    def attach(self):
        self._check(lib().rbpeek_session_attach(self._h))

    def invalidate(self):
        lib().rbpeek_session_invalidate(self._h)

    def info(self):
        L = lib()
        return {"ruby_version": _s(L.rbpeek_session_ruby_version(self._h)),
                "layout_source": _s(L.rbpeek_session_layout_source(self._h)),
                "warning": _s(L.rbpeek_session_warning(self._h)),
                "vm_addr": L.rbpeek_session_vm_addr(self._h),
                "vm_source": _s(L.rbpeek_session_vm_source(self._h))}

    def describe(self):
        """What attach found and how (see rbpeek_session_describe)."""
        import json
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_session_describe(self._h, ctypes.byref(out)))
        try:
            return json.loads(ctypes.string_at(out.value).decode("utf-8", "replace"))
        finally:
            lib().rbpeek_free(out)

    def read_stats(self):
        st = ReadStats()
        lib().rbpeek_session_read_stats(self._h, ctypes.byref(st))
        return {"requests": st.requests, "source_reads": st.source_reads, "source_bytes": st.source_bytes,
                "failures": st.failures}

    def reset_read_stats(self):
        lib().rbpeek_session_reset_read_stats(self._h)

    def snapshot(self, max_frames=0):
        h = ctypes.c_void_p()
        self._check(lib().rbpeek_snapshot_take(self._h, max_frames, ctypes.byref(h)))
        return Snapshot(self, h.value)

    # --- heap (cmd_heap.py) ---
    def heap_census(self):
        """A census of the heap (owns the C census)."""
        h = ctypes.c_void_p()
        self._check(lib().rbpeek_heap_census(self._h, ctypes.byref(h)))
        return Census(h.value)

    def heap_dump(self, path):
        """Streams the heap to path in ObjectSpace.dump_all's format; returns counts."""
        st = HeapDumpStats()
        self._check(lib().rbpeek_heap_dump(self._h, path.encode(), ctypes.byref(st)))
        return {k: getattr(st, k) for k, _ in HeapDumpStats._fields_}


class CensusSummary(ctypes.Structure):
    _fields_ = [("pages", ctypes.c_uint64), ("rejected_pages", ctypes.c_uint64), ("slots", ctypes.c_uint64),
                ("live", ctypes.c_uint64), ("free_slots", ctypes.c_uint64), ("unreadable", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("bytes_visible", ctypes.c_uint64), ("nclasses", ctypes.c_size_t)]


class HeapDumpStats(ctypes.Structure):
    _fields_ = [("objects", ctypes.c_uint64), ("pages", ctypes.c_uint64), ("unreadable", ctypes.c_uint64),
                ("incomplete", ctypes.c_uint64), ("bytes_written", ctypes.c_uint64)]


class Census(_Owned):
    """Live objects by type and class, from rbpeek_heap_census."""

    _free_fn = "rbpeek_census_free"

    def __init__(self, handle):
        self._h = handle

    def summary(self):
        s = CensusSummary()
        lib().rbpeek_census_get_summary(self._h, ctypes.byref(s))
        return {k: getattr(s, k) for k, _ in CensusSummary._fields_}

    def render(self, fmt, top=0, by_bytes=False):
        out = ctypes.c_void_p()
        status = lib().rbpeek_census_render(self._h, fmt, top, 1 if by_bytes else 0, ctypes.byref(out))
        if status != 0:
            raise RbpeekError("heap census: cannot render (%s)" % _s(lib().rbpeek_status_name(status)))
        try:
            return ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            lib().rbpeek_free(out)


# --- sampling (cmd_sample.py) ---

class SampleOptions(ctypes.Structure):
    """rbpeek_sample_options: which threads a sample keeps, and how."""
    _fields_ = [("per_thread", ctypes.c_int), ("on_cpu", ctypes.c_int), ("only_tid", ctypes.c_int64),
                ("only_pthread", ctypes.c_uint64), ("pid", ctypes.c_int),
                ("tid_map", ctypes.POINTER(ctypes.c_uint64)), ("tid_map_pairs", ctypes.c_size_t)]


class TraceConfig(ctypes.Structure):
    """rbpeek_trace_config: the schedule and signal policy of a traced run."""
    _fields_ = [("interval_s", ctypes.c_double), ("max_samples", ctypes.c_uint64), ("duration_s", ctypes.c_double),
                ("max_frames", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("stop_signals", ctypes.c_ubyte * 65), ("pass_signals", ctypes.c_ubyte * 65)]


class TraceStats(ctypes.Structure):
    _fields_ = [("samples", ctypes.c_uint64), ("failed_samples", ctypes.c_uint64),
                ("failed_threads", ctypes.c_uint64), ("filtered", ctypes.c_uint64), ("tid_unknown", ctypes.c_uint64),
                ("not_stopped", ctypes.c_uint64), ("elapsed_s", ctypes.c_double), ("stop_s", ctypes.c_double),
                ("walk_s", ctypes.c_double), ("resume_s", ctypes.c_double), ("end", ctypes.c_int),
                ("signal", ctypes.c_int), ("exit_code", ctypes.c_int), ("signal_pending", ctypes.c_int),
                ("message", ctypes.c_char * 256)]


TRACE_ENDS = {0: "running", 1: "done", 2: "cancelled", 3: "exited", 4: "signal", 5: "exec", 6: "failed"}


class SampleResult(ctypes.Structure):
    _fields_ = [("added", ctypes.c_uint32), ("failed", ctypes.c_uint32), ("filtered", ctypes.c_uint32),
                ("empty", ctypes.c_uint32), ("tid_unknown", ctypes.c_uint32)]


class SvgOptions(ctypes.Structure):
    _fields_ = [("width", ctypes.c_int), ("min_width_px", ctypes.c_double), ("title", ctypes.c_char_p),
                ("inverted", ctypes.c_int)]


class Profile(_Owned):
    """Aggregated stack samples and their writers (owns the C profile)."""

    _free_fn = "rbpeek_profile_free"

    def __init__(self):
        self._h = lib().rbpeek_profile_new()
        if not self._h:
            raise RbpeekError("out of memory")

    def _check(self, status):
        if status != 0:
            raise RbpeekError(_s(lib().rbpeek_profile_error(self._h)) or "profile error %d" % status)

    def set_meta(self, key, value):
        self._check(lib().rbpeek_profile_set_meta(self._h, key.encode(), str(value).encode()))

    def total(self):
        return lib().rbpeek_profile_total(self._h)

    def stack_count(self):
        return lib().rbpeek_profile_stack_count(self._h)

    def top(self, by_self, n):
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_profile_top(self._h, 1 if by_self else 0, n, ctypes.byref(out)))
        try:
            return ctypes.string_at(out.value).decode("utf-8", "replace")
        finally:
            lib().rbpeek_free(out)

    def write_folded(self, path):
        self._check(lib().rbpeek_profile_write_folded(self._h, path.encode()))

    def write_svg(self, path, title=None):
        opt = SvgOptions(0, 0.0, title.encode() if title else None, 0)
        self._check(lib().rbpeek_profile_write_svg(self._h, path.encode(), ctypes.byref(opt)))

    def write_speedscope(self, path):
        self._check(lib().rbpeek_profile_write_speedscope(self._h, path.encode()))


class Sampler:
    """The per-sample hot path of `ruby sample`: drop the session's memory
    cache (the target has run since the last sample), walk every thread, and
    add the stacks to the profile: four C calls, whatever the stacks' depth."""

    def __init__(self, session, profile, options, max_frames=0):
        L = lib()
        self._session, self._profile = session, profile  # keep the C objects alive
        self._opts = options
        self._max = max_frames
        self._result = SampleResult()
        self._snap = ctypes.c_void_p()
        self._args = (session._h, profile._h)
        self._invalidate, self._take = L.rbpeek_session_invalidate, L.rbpeek_snapshot_take
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
            return None
        try:
            st = self._add(p, self._snap, self._opts_ref, self._result_ref)
        finally:
            self._free(self._snap)
            self._snap.value = None
        if st != 0:
            raise RbpeekError(_s(lib().rbpeek_profile_error(p)) or "cannot add a sample")
        return self._result

    def error(self):
        return self._session.error()


def resolve_tids(session, snapshot, pid=0, known_tids=()):
    """[(pthread_t, TID)] of the snapshot's threads (rbpeek_snapshot_resolve_tids):
    TIDs are checked against known_tids (e.g. the debugger's thread list),
    or when none are given, against /proc/PID/task of a live pid."""
    cap = max(1, lib().rbpeek_snapshot_thread_count(snapshot._h))
    arr = (ctypes.c_uint64 * (2 * cap))()
    known = (ctypes.c_int64 * max(1, len(known_tids)))(*known_tids)
    n = ctypes.c_size_t()
    session._check(lib().rbpeek_snapshot_resolve_tids(session._h, snapshot._h, known, len(known_tids), int(pid), arr,
                                                      cap, ctypes.byref(n)))
    return [(arr[2 * i], arr[2 * i + 1]) for i in range(n.value)]


class Trace(_Owned):
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


class Kicker(_Owned):
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
