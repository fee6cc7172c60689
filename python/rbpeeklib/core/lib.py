"""Loading librbpeek and declaring the C functions the binding calls; the
error type, and the base of every wrapper that owns a C object.

A status code other than 0 becomes an RbpeekError carrying the C side's
one-line message.
"""

import ctypes
import os

from .cstructs import (LOOKUP_FN, READ_FN, REGS_FN, AllocCounts, AllocSitesStats, BtOptions, CensusClass, FrameCount,
                       CensusSummary, Frame, HeapDumpStats, InspectOptions, NativeStack, ReadStats, SampleOptions,
                       SampleResult, Thread, ThreadTally, TraceConfig, TraceStats)
from .formats import FORMATS

_HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(_HERE)))


class RbpeekError(Exception):
    """A failure the user should see as one line."""


def _find_library():
    env = os.environ.get("RBPEEK_LIBRARY")
    if env:
        return env
    # Installed (cmake --install, the .deb): install_paths.py, written at
    # install time, names the library relative to this directory.
    try:
        from . import install_paths
    except ImportError:
        install_paths = None
    if install_paths is not None:
        path = os.path.normpath(os.path.join(_HERE, install_paths.LIBRARY))
        if not os.path.exists(path):
            raise RbpeekError("the installed librbpeek is missing (%s): reinstall rbpeek, "
                              "or set RBPEEK_LIBRARY=/path/to/librbpeek.so" % path)
        return path
    for build in ("build", "build-main"):
        cand = os.path.join(REPO_ROOT, build, "lib", "librbpeek.so")
        if os.path.exists(cand):
            return cand
    raise RbpeekError(
        "librbpeek.so not found: build it first (see README.md), or set RBPEEK_LIBRARY=/path/to/librbpeek.so")


def library_path():
    """The librbpeek file in use (or that would be loaded): `ruby info` shows it."""
    return _lib_path or _find_library()


def signatures():
    """{C function: (restype, argtypes)} of every function of rbpeek.h the
    binding calls (tests/tools/test_bindings.py holds this against the
    header: every RBPEEK_API function has its entry, of matching types)."""
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
        "rbpeek_session_set_kernel_tids": (st, [vp, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t]),
        "rbpeek_session_set_core_file": (st, [vp, cp]),
        "rbpeek_session_set_arch": (st, [vp, cp]),
        "rbpeek_session_set_sysroot": (st, [vp, cp]),
        "rbpeek_session_add_region": (st, [vp, u64, u64, u64, cp]),
        "rbpeek_session_add_core_regions": (st, [vp, cp]),
        "rbpeek_session_add_linkmap_regions": (st, [vp, u64, u64, u64]),
        "rbpeek_session_set_vm": (st, [vp, u64]),
        "rbpeek_session_set_layout_file": (st, [vp, cp]),
        "rbpeek_session_set_ruby_version": (st, [vp, cp]),
        "rbpeek_session_set_layout_dwarf": (st, [vp, ctypes.c_int]),
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
        "rbpeek_snapshot_take_running": (st, [vp, ctypes.c_size_t, ctypes.POINTER(vp)]),
        "rbpeek_snapshot_free": (None, [vp]),
        "rbpeek_snapshot_thread_count": (ctypes.c_size_t, [vp]),
        "rbpeek_snapshot_thread": (ctypes.POINTER(Thread), [vp, ctypes.c_size_t]),
        "rbpeek_snapshot_render": (st, [vp, vp, st, ctypes.c_long, ctypes.POINTER(ctypes.c_void_p)]),
        "rbpeek_snapshot_render_bt": (st, [vp, vp, st, ctypes.POINTER(BtOptions), ctypes.POINTER(ctypes.c_void_p)]),
        "rbpeek_frame_render": (st, [vp, ctypes.POINTER(Frame), ctypes.POINTER(ctypes.c_void_p)]),
        "rbpeek_thread_status_name": (cp, [ctypes.c_int32]),
        "rbpeek_free": (None, [vp]),
    }
    # --- native stacks ---
    sigs["rbpeek_session_use_registers"] = (st, [vp, REGS_FN, vp])
    sigs["rbpeek_session_register_names"] = (cp, [vp])
    sigs["rbpeek_session_hold"] = (st, [vp])
    sigs["rbpeek_session_set_thread_ids"] = (st, [vp, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t])
    sigs["rbpeek_session_release"] = (None, [vp])
    sigs["rbpeek_snapshot_take_native"] = (st, [vp, ctypes.c_size_t, ctypes.c_uint32, ctypes.POINTER(vp)])
    sigs["rbpeek_snapshot_native"] = (ctypes.POINTER(NativeStack), [vp, ctypes.c_size_t])
    sigs["rbpeek_gc_phase_label"] = (cp, [ctypes.c_int32])
    sigs["rbpeek_gvl_wait_label"] = (cp, [])
    # --- threads and locks ---
    sigs["rbpeek_locks_render_json"] = (st, [vp, vp, ctypes.POINTER(ctypes.c_void_p)])
    # --- heap ---
    sigs["rbpeek_heap_census"] = (st, [vp, ctypes.POINTER(vp)])
    sigs["rbpeek_census_free"] = (None, [vp])
    sigs["rbpeek_census_get_summary"] = (None, [vp, ctypes.POINTER(CensusSummary)])
    sigs["rbpeek_census_type"] = (u64, [vp, ctypes.c_int, ctypes.POINTER(u64)])
    sigs["rbpeek_census_class_at"] = (ctypes.POINTER(CensusClass), [vp, ctypes.c_size_t])
    sigs["rbpeek_census_render"] = (st, [vp, st, ctypes.c_size_t, ctypes.c_int, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_gc_render"] = (st, [vp, st, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_page_render"] = (st, [vp, u64, st, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_thread_locals"] = (st, [vp, vp, ctypes.POINTER(InspectOptions), ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_frame_locals"] = (st, [vp, vp, ctypes.POINTER(InspectOptions), ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_value_inspect"] = (st, [vp, u64, ctypes.POINTER(InspectOptions), st, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_heap_dump"] = (st, [vp, cp, ctypes.POINTER(HeapDumpStats)])
    # --- allocations ---
    sigs["rbpeek_alloc_counts_read"] = (st, [vp, ctypes.POINTER(AllocCounts)])
    sigs["rbpeek_watch_probe"] = (ctypes.c_int, [ctypes.c_char_p, ctypes.c_size_t])
    # --- sampling ---
    sigs["rbpeek_profile_new"] = (vp, [])
    sigs["rbpeek_profile_free"] = (None, [vp])
    sigs["rbpeek_profile_error"] = (cp, [vp])
    sigs["rbpeek_profile_set_meta"] = (st, [vp, cp, cp])
    sigs["rbpeek_profile_add_stack"] = (st, [vp, ctypes.POINTER(cp), ctypes.c_size_t, u64])
    sigs["rbpeek_profile_meta"] = (cp, [vp, cp])
    sigs["rbpeek_profile_read_folded"] = (st, [vp, cp])
    sigs["rbpeek_profile_skipped_lines"] = (u64, [vp])
    sigs["rbpeek_profile_total"] = (u64, [vp])
    sigs["rbpeek_profile_stack_count"] = (u64, [vp])
    sigs["rbpeek_profile_thread_count"] = (ctypes.c_size_t, [vp])
    sigs["rbpeek_profile_thread_tally"] = (st, [vp, ctypes.c_size_t, ctypes.POINTER(ThreadTally)])
    sigs["rbpeek_profile_merge"] = (st, [vp, vp])
    sigs["rbpeek_profile_top"] = (st, [vp, ctypes.c_int, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_profile_frame_counts"] = (st, [vp, ctypes.c_int, ctypes.POINTER(ctypes.POINTER(FrameCount)),
                                                ctypes.POINTER(ctypes.c_size_t)])
    for fmt in FORMATS:   # the writers, one per output format (formats.py)
        sigs[fmt.writer] = (st, fmt.argtypes())
    sigs["rbpeek_profile_add_snapshot"] = (st, [vp, vp, ctypes.POINTER(SampleOptions), ctypes.POINTER(SampleResult)])
    sigs["rbpeek_snapshot_resolve_tids"] = (st, [vp, vp, ctypes.POINTER(ctypes.c_int64), ctypes.c_size_t, ctypes.c_int,
                                                 ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t,
                                                 ctypes.POINTER(ctypes.c_size_t)])
    sigs["rbpeek_kicker_new"] = (vp, [ctypes.c_int, ctypes.c_int])
    sigs["rbpeek_kicker_arm"] = (None, [vp, u64])
    sigs["rbpeek_kicker_disarm"] = (ctypes.c_int, [vp, ctypes.POINTER(ctypes.c_uint64)])
    sigs["rbpeek_kicker_now"] = (u64, [])
    sigs["rbpeek_kicker_free"] = (None, [vp])
    sigs["rbpeek_schedule_new"] = (vp, [ctypes.c_double, u64])
    sigs["rbpeek_schedule_next"] = (u64, [vp, u64, u64])
    sigs["rbpeek_schedule_free"] = (None, [vp])
    sigs["rbpeek_trace_start"] = (st, [vp, vp, ctypes.POINTER(SampleOptions), ctypes.POINTER(TraceConfig),
                                       ctypes.POINTER(vp)])
    sigs["rbpeek_trace_wait"] = (ctypes.c_int, [vp, ctypes.c_int])
    sigs["rbpeek_trace_cancel"] = (None, [vp])
    sigs["rbpeek_trace_get_stats"] = (None, [vp, ctypes.POINTER(TraceStats)])
    sigs["rbpeek_trace_free"] = (None, [vp])
    sigs["rbpeek_alloc_sites_new"] = (vp, [])
    sigs["rbpeek_alloc_sites_free"] = (None, [vp])
    sigs["rbpeek_alloc_sites_add_snapshot"] = (st, [vp, vp, vp, ctypes.POINTER(SampleOptions),
                                                    ctypes.POINTER(SampleResult)])
    sigs["rbpeek_alloc_sites_get_stats"] = (None, [vp, ctypes.POINTER(AllocSitesStats)])
    sigs["rbpeek_alloc_sites_json"] = (st, [vp, vp, ctypes.POINTER(ctypes.c_void_p)])
    sigs["rbpeek_alloc_sites_is_allocator"] = (ctypes.c_int, [cp])
    sigs["rbpeek_share_interval"] = (None, [ctypes.c_double, ctypes.c_double, ctypes.c_double,
                                            ctypes.POINTER(ctypes.c_double), ctypes.POINTER(ctypes.c_double)])
    sigs["rbpeek_profile_scale_to"] = (st, [vp, u64])
    return sigs


_lib = None
_lib_path = None


def lib():
    """Loads librbpeek once and declares the signatures we use."""
    global _lib, _lib_path
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
    missing = []
    for name, (res, args) in signatures().items():
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
    _lib, _lib_path = L, path
    return L


def preload():
    """Loads the library now, when a plugin registers its commands, so that
    the first command does not wait for the dynamic loader; a failure is
    left for that command to report in its one line."""
    try:
        lib()
    except RbpeekError:
        pass


def take_text(out):
    """The text of a string the library allocated into the c_void_p out,
    which is then freed."""
    try:
        return ctypes.string_at(out.value).decode("utf-8", "replace")
    finally:
        lib().rbpeek_free(out)


def take_json(out):
    """The document of a JSON string the library allocated into out (take_text)."""
    import json  # deferred: most commands print the core's text and parse no JSON
    return json.loads(take_text(out))


def decode(b):
    """A C string as text (None stays None)."""
    return b.decode("utf-8", "replace") if b is not None else None


class Owned:
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



def watch_probe():
    """(support, message) from rbpeek_watch_probe: support 0 when hardware
    watchpoints fire on this machine (rbpeek_watch_support)."""
    buf = ctypes.create_string_buffer(256)
    support = lib().rbpeek_watch_probe(buf, len(buf))
    return support, decode(buf.value)
