"""rbpeek's Python side, shared by the GDB and LLDB plugins.

core.py      ctypes binding to librbpeek (the C core does all decoding)
commands.py  the `ruby ...` commands, written once against adapter.py
adapter.py   what a debugger plugin must provide
"""
