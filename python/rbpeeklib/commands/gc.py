"""`ruby gc`: the GC's counters and state (GC.stat's names), read from the
objspace without running anything in the target (see docs/inspect.md)."""

from ..core import FORMAT_JSON, FORMAT_TEXT
from .base import Command, add_output_options, parse_args, write_output


class GcCommand(Command):
    name = "gc"
    summary = "GC state and counters, named as GC.stat names them; mid-GC phase, GC.disable, GC.stress."
    usage = """ruby gc [--json] [-o FILE] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Reads the objspace: count, major_gc_count, minor_gc_count, heap pages and
slots (live, free, final), total allocated and freed objects, malloc and
oldmalloc increase, and per heap (size pool) its slot size, pages and slots.
Says whether a GC is running (or stopped between incremental steps) and in
which phase, whether GC.disable is in force, and GC.stress's value.

  --json             JSON with GC.stat's keys (schema: docs/inspect.md)
  -o, --output FILE  write to FILE instead of the debugger's output"""

    def run(self, dbg, argv):
        args = parse_args(self.name, argv, add_output_options)
        session = self.sessions.get(dbg, args)
        text = session.gc_render(FORMAT_JSON if args.json else FORMAT_TEXT)
        write_output(dbg, text, args.output)
