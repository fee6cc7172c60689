"""The one ctypes binding to librbpeek, shared by the GDB and LLDB plugins.

This package knows the C API (core/include/rbpeek.h) and nothing about
Ruby's structs: every byte of interpreter state is decoded by the C core.
Callers import from here, never from the modules inside.
"""

from .session import (FORMAT_JSON, FORMAT_TEXT, REPO_ROOT, TRACE_ENDS, Census, Kicker, Profile, RbpeekError,
                      SampleOptions, SampleResult, Sampler, Session, Snapshot, Trace, TraceConfig, TraceStats, lib,
                      resolve_tids)

__all__ = ["FORMAT_JSON", "FORMAT_TEXT", "REPO_ROOT", "TRACE_ENDS", "Census", "Kicker", "Profile", "RbpeekError",
           "SampleOptions", "SampleResult", "Sampler", "Session", "Snapshot", "Trace", "TraceConfig", "TraceStats",
           "lib", "resolve_tids"]
