"""The `ruby ...` commands, written once for both debuggers and the
command line.

base.py        the Command class, argument parsing, option and output helpers
sessions.py    the session cache the commands share
threadview.py  Ruby threads in the debugger's terms (bt, threads, locks, frame, sample)
lockview.py    the core's locks document as text and JSON (threads, locks)
registry.py    the command objects, in COMMANDS' order; only the plugins import it

One module per command, named as the command, each one small class:
bt.py       Ruby backtraces of one thread or all (printed by the core)
threads.py  one line per Ruby thread: state, what it waits on, top frame
locks.py    Mutex owners and waiters, deadlocks, the GVL
info.py     version, layout source, VM address, symbols
sample.py   the sampling profiler (sampling/), its output formats (core/formats.py)
allocs.py   the allocation rate, from the GC's own counters
heap.py     the heap census and dump
gc.py       GC.stat's counters and the GC's state
p.py        a VALUE as Ruby's #inspect prints it
frame.py    one frame in depth: self, method owner, locals
page.py     one heap page, slot by slot

A new command is a module here and its name in COMMANDS (in the order
`help ruby` lists them); docs/design.md says what else (its docs).

This file imports nothing, so that importing a command never imports the
registry.
"""

COMMANDS = ("bt", "threads", "locks", "info", "sample", "allocs", "heap", "gc", "p", "frame", "page")
