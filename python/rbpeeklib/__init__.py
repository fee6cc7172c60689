"""rbpeek's Python side, shared by the GDB and LLDB plugins. Each layer
imports only the ones below it:

commands/   the `ruby ...` commands, one module each, on base.py; registry.py
            lists them for the plugins (the only importers of it)
sampling/   the loops and the report of `ruby sample`
adapter.py  what a debugger plugin must provide (the commands' `dbg`)
core/       the one ctypes binding to librbpeek (the C core does all decoding)
"""
