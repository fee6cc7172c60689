"""The `ruby ...` commands, written once for both debuggers.

base.py        the Command class, argument parsing, option and output helpers
sessions.py    the session cache the commands share
threadview.py  Ruby threads in the debugger's terms (bt, threads, locks, sample)
lockview.py    the core's locks document as text and JSON (threads, locks)
bt.py, threads.py, locks.py, info.py, sample.py, heap.py   one command each
registry.py    the list of commands; only the plugins import it

This file imports nothing, so that importing a command never imports the
registry.
"""
