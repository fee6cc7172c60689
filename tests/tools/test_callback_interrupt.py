#!/usr/bin/env python3
"""The binding's callbacks (python/rbpeeklib/core/session.py) and a
debugger's Ctrl-C: gdb raises it as KeyboardInterrupt in whatever Python
code runs, also a memory read, a symbol lookup or a register read the core
asked for through a callback, where ctypes would print a traceback into
the debugger and drop the interrupt (it once did, in a symbol lookup, and
`ruby sample` ran on for its whole duration). Each callback, called as the
core calls it, must fail quietly (nothing on stderr), and the next call
into the core through the session must raise KeyboardInterrupt, once.

usage: test_callback_interrupt.py
Exit status: 0 pass, 1 fail.
"""
import contextlib
import ctypes
import io
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from rbpeeklib.core import session as sessions  # noqa: E402


def interrupt(*_args):
    raise KeyboardInterrupt


def check(name, register, call):
    s = sessions.Session()
    register(s)
    fn = s._keep[-1]   # the ctypes function pointer the core was given
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        got = call(fn)
    failures = []
    if err.getvalue():
        failures.append("%s: the callback printed %r" % (name, err.getvalue()))
    try:
        s._check(0)
        failures.append("%s: the interrupt was dropped" % name)
    except KeyboardInterrupt:
        pass
    try:
        s._check(0)
    except KeyboardInterrupt:
        failures.append("%s: the interrupt was raised twice" % name)
    return got, failures


def main():
    failures = []
    buf = ctypes.create_string_buffer(8)
    got, f = check("read", lambda s: s.use_reader(interrupt), lambda fn: fn(None, 0x1000, buf, 8))
    failures += f + (["read: returned %r, not -1 (unreadable)" % got] if got != -1 else [])
    out = (ctypes.c_uint64 * 1)()
    got, f = check("lookup", lambda s: s.use_lookup(interrupt), lambda fn: fn(None, b"rb_cClass", out))
    failures += f + (["lookup: returned %r, not 1 (not found)" % got] if got != 1 else [])
    regs = (ctypes.c_uint64 * 32)()
    got, f = check("registers", lambda s: s.use_registers(interrupt), lambda fn: fn(None, 1, regs))
    failures += f + (["registers: returned %r, not 0 (none known)" % got] if got != 0 else [])
    for line in failures:
        print("FAIL: " + line)
    if failures:
        return 1
    print("3 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
