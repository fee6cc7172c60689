"""`ruby bt`: Ruby-level backtraces of the selected thread or of all of
them, as the target Ruby prints its own, or as JSON. The core prints them
(rbpeek_snapshot_render_bt); this command picks the threads and says how
the debugger numbers them."""

import time

from ..core import FORMAT_JSON, FORMAT_TEXT
from .base import Command, RbpeekError, UsageError, add_output_options, parse_args, write_output
from .threadview import map_threads


class BtCommand(Command):
    name = "bt"
    summary = "Ruby-level backtrace of the selected thread (-a: every Ruby thread)."
    usage = """ruby bt [-a] [--json] [-o FILE] [--max-frames N] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Prints the Ruby backtrace of the selected thread, innermost frame first, the
way the target Ruby prints its own backtraces. Nothing runs in the target.

  -a, --all          every Ruby thread of every ractor
  --json             JSON: {"ruby_version", "threads": [{"name", "main",
                     "native_tid", "status", "frames": [{"label", "path",
                     "absolute_path", "lineno", "kind"}]}]}
  -o, --output FILE  write to FILE instead of the debugger's output
  --max-frames N     stop each stack after N frames (default 100000)
  --locals           each Ruby frame's locals (names from its iseq, values
                     printed as `ruby p` prints them), self and method owner;
                     in JSON "locals": {name: inspect}, "self", "owner"
  --depth N, --max-length N   the limits of those values (as for `ruby p`)
  --stats            after the output, one line: frames walked, time taken,
                     and reads that reached the memory source
  --vm ADDR          use this rb_vm_t address instead of discovering it
  --layout FILE      use this struct layout (see rbpeek-layoutgen); --layout
                     dwarf: the target's own DWARF, not the built-in table
  --ruby-version V   use the built-in layout of Ruby V"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("-a", "--all", action="store_true")
            add_output_options(p)
            p.add_argument("--max-frames", type=int, default=0)
            p.add_argument("--stats", action="store_true")
            p.add_argument("--locals", action="store_true")
            p.add_argument("--depth", type=int, default=8)
            p.add_argument("--max-length", type=int, default=100)

        args = parse_args(self.name, argv, build)
        if args.max_frames < 0:
            raise UsageError(self.name, "--max-frames must be positive")
        if args.locals and (args.depth < 0 or args.max_length < 1):
            raise UsageError("bt", "--depth must be >= 0 and --max-length >= 1")
        session = self.sessions.get(dbg, args)
        session.reset_read_stats()
        started = time.perf_counter()
        with session.snapshot(args.max_frames) as snap:
            walked = time.perf_counter() - started
            threads = map_threads(dbg, snap.threads(frames=False), session, snap)
            if not args.all:
                threads = [self._selected(dbg, threads)]
            text = snap.render_bt(FORMAT_JSON if args.json else FORMAT_TEXT, threads,
                                  (args.depth, args.max_length) if args.locals else None)
        stats = session.read_stats()
        write_output(dbg, text, args.output)
        if args.stats:
            self._print_stats(dbg, threads, walked, stats)

    @staticmethod
    def _print_stats(dbg, threads, walked, stats):
        frames = sum(t["nframes"] for t in threads) or 1
        dbg.write("rbpeek: walked %d threads, %d frames in %.1f ms (%.2f us/frame); %d reads reached the memory "
                  "source (%.3f/frame, %d KiB), %d cache requests\n"
                  % (len(threads), frames, walked * 1e3, walked * 1e6 / frames, stats["source_reads"],
                     stats["source_reads"] / frames, stats["source_bytes"] // 1024, stats["requests"]))

    @staticmethod
    def _selected(dbg, threads):
        sel = dbg.selected_thread()
        if sel is None:
            raise RbpeekError("no thread is selected")
        for t in threads:
            if t.get("dbg_num") == sel["num"]:
                if not t["nframes"] and not t["error"]:
                    raise RbpeekError("thread %s is a Ruby thread with no Ruby frames right now "
                                      "('ruby bt -a' shows every Ruby thread)" % sel["num"])
                return t
        raise RbpeekError("thread %s (tid %s) is not a Ruby thread; 'ruby bt -a' shows every Ruby thread"
                          % (sel["num"], sel.get("tid")))
