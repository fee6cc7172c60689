"""`ruby heap`: a census of the Ruby heap, or a dump in ObjectSpace.dump_all's
format, read from outside the process (see docs/heap.md)."""

import json
import time

from ..core import FORMAT_JSON, FORMAT_TEXT
from .base import Command, RbpeekError, UsageError, add_output_options, json_text, parse_args, write_output


class HeapCommand(Command):
    name = "heap"
    summary = "Heap census (objects by type and class, with bytes), or a dump_all-style heap dump."
    usage = """ruby heap [--top N] [--by count|bytes] [--json] [-o FILE] [--dump FILE] [--stats]
          [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Walks every heap page of the target (one read per page) and counts live
objects by type (as ObjectSpace.count_objects does) and by class, with the
bytes they hold: slot size plus the memory the object owns (string and
array buffers, hash tables, ivar buffers...). Nothing runs in the target.

  --top N            class rows to show (default 20; with --json: all)
  --by count|bytes   rank classes by object count (default) or by bytes
  --json             the census as JSON (schema: docs/heap.md)
  -o, --output FILE  write to FILE instead of the debugger's output
  --dump FILE        instead of a census, write every live object to FILE,
                     one JSON object per line, as ObjectSpace.dump_all does
  --stats            one more line: objects, time taken, objects per second"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("--top", type=int, default=None)
            p.add_argument("--by", choices=("count", "bytes"), default="count")
            add_output_options(p)
            p.add_argument("--dump", metavar="FILE")
            p.add_argument("--stats", action="store_true")

        args = parse_args(self.name, argv, build)
        if args.top is not None and args.top < 1:
            raise UsageError(self.name, "--top must be at least 1")
        if args.dump and (args.json or args.output or args.top is not None):
            raise UsageError(self.name, "--dump writes its own file; it takes no --json, -o or --top")
        session = self.sessions.get(dbg, args)
        started = time.monotonic()
        if args.dump:
            st = session.heap_dump(args.dump)
            took = time.monotonic() - started
            dbg.write("rbpeek: wrote %d objects (%.1f MiB) to %s%s\n"
                      % (st["objects"], st["bytes_written"] / 1048576.0, args.dump,
                         self._caveats(st["unreadable"], st["incomplete"])))
            if args.stats:
                self._print_stats(dbg, st["objects"], st["pages"], took)
            return
        with session.heap_census() as census:
            took = time.monotonic() - started
            summary = census.summary()
            if args.json:
                text = census.render(FORMAT_JSON, args.top or 0, args.by == "bytes")
                if args.stats:  # timing goes into the document too, for benchmarks
                    doc = json.loads(text)
                    doc["stats"] = self._stats(summary["live"], summary["pages"], took)
                    text = json_text(doc)
            else:
                text = census.render(FORMAT_TEXT, args.top or 20, args.by == "bytes")
        write_output(dbg, text, args.output)
        if summary["unreadable"] and not args.json:
            dbg.write("rbpeek: warning:%s\n" % self._caveats(summary["unreadable"], 0))
        if args.stats:
            self._print_stats(dbg, summary["live"], summary["pages"], took)

    @staticmethod
    def _caveats(unreadable, incomplete):
        parts = []
        if unreadable:
            parts.append("%d slots unreadable or garbage, skipped" % unreadable)
        if incomplete:
            parts.append("%d objects with unreadable references" % incomplete)
        return " (%s)" % "; ".join(parts) if parts else ""

    @staticmethod
    def _stats(objects, pages, took):
        return {"objects": objects, "pages": pages, "seconds": round(took, 4),
                "objects_per_second": int(objects / took) if took > 0 else None}

    def _print_stats(self, dbg, objects, pages, took):
        st = self._stats(objects, pages, took)
        dbg.write("rbpeek: %d objects in %d pages, %.3f s, %s objects/s\n"
                  % (objects, pages, took, st["objects_per_second"]))

