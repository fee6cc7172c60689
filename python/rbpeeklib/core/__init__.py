"""The one ctypes binding to librbpeek, shared by the GDB and LLDB plugins.

This package knows the C API (core/include/rbpeek.h) and nothing about
Ruby's structs: every byte of interpreter state is decoded by the C core.
Callers import from here, never from the modules inside:

lib.py       finding and loading the library, its signatures, RbpeekError, Owned
cstructs.py  ctypes mirrors of the API's structs and constants
session.py   Session (one target) and Snapshot (its threads and frames)
heap.py      Census (the heap census)
profile.py   Profile, Sampler, Trace, Kicker, Schedule (`ruby sample`)
formats.py   the profile's output formats, one row each (options, help, writer)
"""

from . import formats
from .cstructs import (BT_NATIVE, BT_NATIVE_ALL, FORMAT_JSON, FORMAT_TEXT, STOP_MODES, THREAD_STATES,
                       TRACE_ENDS, SampleOptions, SampleResult, TraceConfig, TraceStats)
from .formats import FORMATS
from .heap import Census
from .lib import REPO_ROOT, RbpeekError, lib, library_path, preload, watch_probe
from .profile import AllocSites, Kicker, Profile, Sampler, Schedule, Trace, is_allocator, share_interval
from .session import Session, Snapshot, resolve_tids

__all__ = ["BT_NATIVE", "BT_NATIVE_ALL", "FORMATS", "FORMAT_JSON", "FORMAT_TEXT", "REPO_ROOT",
           "STOP_MODES", "THREAD_STATES", "TRACE_ENDS", "AllocSites", "Census", "Kicker", "Profile", "RbpeekError",
           "SampleOptions", "SampleResult", "Sampler", "Schedule", "Session", "Snapshot", "Trace", "TraceConfig", "TraceStats",
           "formats", "is_allocator", "lib", "library_path", "preload", "resolve_tids", "share_interval", "watch_probe"]
