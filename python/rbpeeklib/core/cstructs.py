"""ctypes mirrors of the C API's structs, callback types and constants
(core/include/rbpeek.h) that the binding passes across, field for field;
each mirror names its C struct (_c_), and tests/tools/test_bindings.py
checks its size and every member's offset and type against the
compiler's, and every constant here against the header's (a new constant
needs its C name there). Nothing here calls into the library."""

import ctypes

READ_FN = ctypes.CFUNCTYPE(ctypes.c_long, ctypes.c_void_p, ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t)
LOOKUP_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint64))


class Frame(ctypes.Structure):
    _c_ = "rbpeek_frame"
    _fields_ = [("label", ctypes.c_char_p), ("path", ctypes.c_char_p), ("absolute_path", ctypes.c_char_p),
                ("lineno", ctypes.c_int32), ("kind", ctypes.c_int32), ("iseq", ctypes.c_uint64),
                ("first_lineno", ctypes.c_int32), ("self", ctypes.c_uint64), ("ep", ctypes.c_uint64),
                ("instantiates", ctypes.c_uint64), ("lineno_unknown", ctypes.c_int32)]


class Thread(ctypes.Structure):
    _c_ = "rbpeek_thread"
    _fields_ = [("name", ctypes.c_char_p), ("is_main", ctypes.c_int32), ("status", ctypes.c_int32),
                ("native_tid", ctypes.c_int64), ("pthread_id", ctypes.c_uint64), ("thread_addr", ctypes.c_uint64),
                ("thread_value", ctypes.c_uint64), ("ractor_addr", ctypes.c_uint64), ("ractor_index", ctypes.c_int32),
                ("truncated", ctypes.c_int32), ("error", ctypes.c_char_p), ("nframes", ctypes.c_size_t),
                ("frames", ctypes.POINTER(Frame)), ("torn", ctypes.c_int32),
                ("retried", ctypes.c_int32), ("ruby_tid", ctypes.c_int64), ("gc", ctypes.c_int32),
                ("gvl", ctypes.c_int32)]


class BtOptions(ctypes.Structure):
    """rbpeek_bt_options: which threads `ruby bt` prints, how the debugger
    numbers them, and the locals."""
    _c_ = "rbpeek_bt_options"
    _fields_ = [("threads", ctypes.POINTER(ctypes.c_size_t)), ("nthreads", ctypes.c_size_t),
                ("numbers", ctypes.POINTER(ctypes.c_int64)), ("tids", ctypes.POINTER(ctypes.c_int64)),
                ("locals", ctypes.c_int32), ("locals_depth", ctypes.c_int32), ("locals_max_length", ctypes.c_uint64),
                ("show", ctypes.c_uint32)]


# --- native stacks (docs/native.md) ---

# uint64_t fn(void *ctx, int64_t tid, uint64_t *regs): the target machine's registers, in the order
# rbpeek_session_register_names gives (Session.register_names)
REGS_FN = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(ctypes.c_uint64))
FRAME_KINDS = ("ruby", "cfunc", "native", "gc", "jit", "gvl")
NATIVE_LINES = 1
BT_NATIVE, BT_NATIVE_ALL = 1, 2   # rbpeek_bt_options.show


class NativeFrame(ctypes.Structure):
    _c_ = "rbpeek_native_frame"
    _fields_ = [("pc", ctypes.c_uint64), ("module", ctypes.c_char_p), ("module_offset", ctypes.c_uint64),
                ("symbol", ctypes.c_char_p), ("symbol_offset", ctypes.c_uint64), ("file", ctypes.c_char_p),
                ("line", ctypes.c_int32), ("activation", ctypes.c_int32), ("function", ctypes.c_uint64)]


class StackFrame(ctypes.Structure):
    _c_ = "rbpeek_stack_frame"
    _fields_ = [("kind", ctypes.c_int32), ("internal", ctypes.c_int32), ("ruby", ctypes.POINTER(Frame)),
                ("native", ctypes.POINTER(NativeFrame)), ("label", ctypes.c_char_p)]


class NativeStack(ctypes.Structure):
    _c_ = "rbpeek_native_stack"
    _fields_ = [("nframes", ctypes.c_size_t), ("frames", ctypes.POINTER(StackFrame)), ("merged", ctypes.c_int32),
                ("note", ctypes.c_char_p), ("cut", ctypes.c_char_p), ("nnative", ctypes.c_size_t),
                ("native", ctypes.POINTER(NativeFrame))]


class ReadStats(ctypes.Structure):
    _c_ = "rbpeek_read_stats"
    _fields_ = [("requests", ctypes.c_uint64), ("source_reads", ctypes.c_uint64),
                ("source_bytes", ctypes.c_uint64), ("failures", ctypes.c_uint64)]


FORMAT_TEXT = 0
FORMAT_JSON = 1


# --- heap ---

class CensusSummary(ctypes.Structure):
    _c_ = "rbpeek_census_summary"
    _fields_ = [("pages", ctypes.c_uint64), ("rejected_pages", ctypes.c_uint64), ("slots", ctypes.c_uint64),
                ("live", ctypes.c_uint64), ("free_slots", ctypes.c_uint64), ("unreadable", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("bytes_visible", ctypes.c_uint64), ("nclasses", ctypes.c_size_t)]


class CensusClass(ctypes.Structure):
    """rbpeek_census_class: one class row of a census."""
    _c_ = "rbpeek_census_class"
    _fields_ = [("name", ctypes.c_char_p), ("address", ctypes.c_uint64), ("count", ctypes.c_uint64),
                ("bytes", ctypes.c_uint64), ("internal", ctypes.c_int32)]


class HeapDumpStats(ctypes.Structure):
    _c_ = "rbpeek_heap_dump_stats"
    _fields_ = [("objects", ctypes.c_uint64), ("pages", ctypes.c_uint64), ("unreadable", ctypes.c_uint64),
                ("incomplete", ctypes.c_uint64), ("bytes_written", ctypes.c_uint64)]


class AllocCounts(ctypes.Structure):
    _c_ = "rbpeek_alloc_counts"
    _fields_ = [("total", ctypes.c_uint64), ("gc_count", ctypes.c_uint64), ("nheaps", ctypes.c_uint32),
                ("slot_size", ctypes.c_uint32 * 8), ("per_heap", ctypes.c_uint64 * 8)]


class InspectOptions(ctypes.Structure):
    """rbpeek_inspect_options: the limits of `ruby p`."""
    _c_ = "rbpeek_inspect_options"
    _fields_ = [("depth", ctypes.c_int32), ("max_length", ctypes.c_uint64), ("raw", ctypes.c_int32),
                ("max_bytes", ctypes.c_uint64)]


# --- sampling ---

class SampleOptions(ctypes.Structure):
    """rbpeek_sample_options: which threads a sample keeps, and how."""
    _c_ = "rbpeek_sample_options"
    _fields_ = [("per_thread", ctypes.c_int), ("on_cpu", ctypes.c_int), ("only_tid", ctypes.c_int64),
                ("only_pthread", ctypes.c_uint64), ("pid", ctypes.c_int),
                ("tid_map", ctypes.POINTER(ctypes.c_uint64)), ("tid_map_pairs", ctypes.c_size_t),
                ("drop_idle", ctypes.c_int), ("root_frame", ctypes.c_char_p)]


# rbpeek_thread_state, in the order of rbpeek_thread_tally.states: the
# names of the states everywhere (the summaries, their JSON, top).
THREAD_STATES = ("running", "gvl_wait", "blocked", "gc")


class ThreadTally(ctypes.Structure):
    """rbpeek_thread_tally: one thread the samples saw, and its states."""
    _c_ = "rbpeek_thread_tally"
    _fields_ = [("pid", ctypes.c_int64), ("tid", ctypes.c_int64), ("name", ctypes.c_char_p), ("is_main", ctypes.c_int32),
                ("samples", ctypes.c_uint64), ("states", ctypes.c_uint64 * 4), ("recorded", ctypes.c_uint64 * 4)]


class FrameCount(ctypes.Structure):
    """rbpeek_frame_count: a frame's (or a method's) self and total samples."""
    _c_ = "rbpeek_frame_count"
    _fields_ = [("name", ctypes.c_char_p), ("self", ctypes.c_uint64), ("total", ctypes.c_uint64)]


class TraceConfig(ctypes.Structure):
    """rbpeek_trace_config: the schedule and signal policy of a traced run."""
    _c_ = "rbpeek_trace_config"
    _fields_ = [("interval_s", ctypes.c_double), ("max_samples", ctypes.c_uint64), ("duration_s", ctypes.c_double),
                ("max_frames", ctypes.c_int), ("seed", ctypes.c_uint64),
                ("stop_signals", ctypes.c_ubyte * 65), ("pass_signals", ctypes.c_ubyte * 65),
                ("stop_mode", ctypes.c_int), ("native", ctypes.c_int), ("alloc_sites", ctypes.c_void_p)]


STOP_MODES = {"gvl": 0, "all": 1, "none": 2}


class TraceStats(ctypes.Structure):
    _c_ = "rbpeek_trace_stats"
    _fields_ = [("samples", ctypes.c_uint64), ("failed_samples", ctypes.c_uint64),
                ("failed_threads", ctypes.c_uint64), ("filtered", ctypes.c_uint64), ("tid_unknown", ctypes.c_uint64),
                ("not_stopped", ctypes.c_uint64), ("elapsed_s", ctypes.c_double), ("stop_s", ctypes.c_double),
                ("walk_s", ctypes.c_double), ("resume_s", ctypes.c_double), ("end", ctypes.c_int),
                ("signal", ctypes.c_int), ("exit_code", ctypes.c_int), ("signal_pending", ctypes.c_int),
                ("message", ctypes.c_char * 256), ("added_threads", ctypes.c_uint64),
                ("torn_threads", ctypes.c_uint64), ("full_stops", ctypes.c_uint64),
                ("threads_stopped", ctypes.c_uint64), ("held_s", ctypes.c_double),
                ("retried_threads", ctypes.c_uint64), ("native_held", ctypes.c_uint64),
                ("native_peeked", ctypes.c_uint64), ("native_stopped", ctypes.c_uint64),
                ("native_none", ctypes.c_uint64), ("native_unmerged", ctypes.c_uint64),
                ("gc", ctypes.c_uint64 * 5), ("cpu_samples", ctypes.c_uint64), ("cpu_gc", ctypes.c_uint64),
                ("cpu_waited", ctypes.c_uint64), ("gvl_free", ctypes.c_uint64),
                ("native_reused", ctypes.c_uint64), ("held_seen_s", ctypes.c_double),
                ("unmerged_note", ctypes.c_char * 200), ("ruby_reused", ctypes.c_uint64)]


TRACE_ENDS = {0: "running", 1: "done", 2: "cancelled", 3: "exited", 4: "signal", 5: "exec", 6: "failed"}


class SampleResult(ctypes.Structure):
    _c_ = "rbpeek_sample_result"
    _fields_ = [("added", ctypes.c_uint32), ("failed", ctypes.c_uint32), ("filtered", ctypes.c_uint32),
                ("empty", ctypes.c_uint32), ("tid_unknown", ctypes.c_uint32), ("gc", ctypes.c_uint32 * 5),
                ("unmerged", ctypes.c_uint32), ("unmerged_note", ctypes.c_char_p)]


class PprofOptions(ctypes.Structure):
    _c_ = "rbpeek_pprof_options"
    _fields_ = [("period_ns", ctypes.c_uint64), ("on_cpu", ctypes.c_int), ("time_nanos", ctypes.c_int64),
                ("duration_nanos", ctypes.c_int64)]


class SvgOptions(ctypes.Structure):
    _c_ = "rbpeek_svg_options"
    _fields_ = [("width", ctypes.c_int), ("min_width_px", ctypes.c_double), ("title", ctypes.c_char_p),
                ("inverted", ctypes.c_int), ("ci_samples", ctypes.c_double), ("ci_z", ctypes.c_double)]


class AllocSitesStats(ctypes.Structure):
    """rbpeek_alloc_sites_stats: what `ruby allocs --sites` did with the stacks it saw."""
    _c_ = "rbpeek_alloc_sites_stats"
    _fields_ = [("stacks", ctypes.c_uint64), ("allocator", ctypes.c_uint64), ("allocator_gc", ctypes.c_uint64),
                ("gc_elsewhere", ctypes.c_uint64), ("unmerged", ctypes.c_uint64), ("no_native", ctypes.c_uint64),
                ("sites", ctypes.c_uint64), ("not_run", ctypes.c_uint64), ("typed", ctypes.c_uint64)]
