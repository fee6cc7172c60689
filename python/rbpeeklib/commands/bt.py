"""`ruby bt`: Ruby-level backtraces of the selected thread or of all of
them, as the target Ruby prints its own, or as JSON; with --native, each
thread's whole stack, its machine frames merged with its Ruby frames
(docs/native.md). The core prints them (rbpeek_snapshot_render_bt); this
command picks the threads, says how the debugger numbers them, and for a
live process without a debugger has the core stop it for the moment."""

import time

from ..core import BT_NATIVE, BT_NATIVE_ALL, FORMAT_JSON, FORMAT_TEXT
from .base import Command, RbpeekError, UsageError, add_output_options, parse_args, write_output
from .threadview import map_threads


class BtCommand(Command):
    name = "bt"
    summary = "Ruby-level backtrace of the selected thread (-a: every Ruby thread)."
    usage = """ruby bt [-a] [--native | --native-all] [--json] [-o FILE] [--max-frames N] [--vm ADDR] [--layout FILE]
        [--ruby-version X.Y.Z]

Prints the Ruby backtrace of the selected thread, innermost frame first, the
way the target Ruby prints its own backtraces. Nothing runs in the target.

  -a, --all          every Ruby thread of every ractor
  --native           the whole stack: the thread's machine frames (C
                     extensions, libc, the interpreter) with its Ruby frames
                     merged in where the VM runs them, a C method at its C
                     function; "[native] symbol (module) at file:line" lines,
                     and YJIT's code as "[JIT] method (path) at 0xPC"
                     (docs/native.md). A live process without a debugger is
                     stopped (ptrace) for the moment it takes
  --native-all       --native, with the VM's internal frames (rb_vm_exec,
                     vm_call_cfunc..., the interpreter's unnamed functions)
  --json             JSON: {"ruby_version", "threads": [{"name", "main",
                     "native_tid", "status", "frames": [{"label", "path",
                     "absolute_path", "lineno", "kind"}]}]}; with --native,
                     frames of kind "native" ({"label": symbol or null,
                     "module", "pc", "offset", "file", "line"}), "jit"
                     ({"label": the Ruby method it runs or null, "path",
                     "module": null, "pc"}), "gc", and
                     "cfunc" ones standing at their C function with its
                     "symbol", and per thread "native": {"merged", "cut",
                     "note"}
  -o, --output FILE  write to FILE instead of the debugger's output
  --max-frames N     stop each stack after N frames (default 100000)
  --locals           each Ruby frame's locals (names from its iseq, values
                     printed as `ruby p` prints them), self and method owner;
                     in JSON "locals": {name: inspect}, "self", "owner"
  --depth N, --max-length N   the limits of those values (as for `ruby p`)
  --stats            after the output, one line: frames walked, time taken,
                     and reads that reached the memory source; on the first
                     command of a target, the time opening rbpeek's session
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
            p.add_argument("--native", action="store_true")
            p.add_argument("--native-all", action="store_true")

        args = parse_args(self.name, argv, build)
        if args.max_frames < 0:
            raise UsageError(self.name, "--max-frames must be positive")
        if args.locals and (args.depth < 0 or args.max_length < 1):
            raise UsageError("bt", "--depth must be >= 0 and --max-length >= 1")
        session = self.sessions.get(dbg, args)
        session.reset_read_stats()
        native = args.native or args.native_all
        started = time.perf_counter()
        with self._snapshot(dbg, session, args.max_frames, native) as snap:
            walked = time.perf_counter() - started
            threads = map_threads(dbg, snap.threads(frames=False), session, snap)
            if not args.all:
                threads = [self._selected(dbg, threads)]
            show = (BT_NATIVE_ALL if args.native_all else BT_NATIVE) if native else 0
            text = snap.render_bt(FORMAT_JSON if args.json else FORMAT_TEXT, threads,
                                  (args.depth, args.max_length) if args.locals else None, show)
        stats = session.read_stats()
        write_output(dbg, text, args.output)
        if args.stats:
            self._print_stats(dbg, threads, walked, stats, self.sessions.opened_in)

    @staticmethod
    def _snapshot(dbg, session, max_frames, native):
        """The snapshot, with native stacks when asked: registers from the
        debugger, or from the core's notes, or, for a live process the
        command line reads itself, from ptrace stops held for the moment."""
        if not native:
            return session.snapshot(max_frames)
        tids = [t["tid"] for t in dbg.threads() if t.get("tid")]
        if tids:
            session.set_thread_ids(tids)
        own = dbg.own_source()
        if own and own[0] == "pid":
            session.hold()
            try:
                return session.snapshot_native(max_frames)
            finally:
                session.release()
        return session.snapshot_native(max_frames)

    @staticmethod
    def _print_stats(dbg, threads, walked, stats, opened_in):
        frames = sum(t["nframes"] for t in threads) or 1
        # The first command of a target also opened rbpeek's session
        # (symbols, layout, VM: docs/performance.md's first `ruby bt`).
        opened = "; session opened in %.1f ms" % (opened_in * 1e3) if opened_in is not None else ""
        dbg.write("rbpeek: walked %d threads, %d frames in %.1f ms (%.2f us/frame); %d reads reached the memory "
                  "source (%.3f/frame, %d KiB), %d cache requests%s\n"
                  % (len(threads), frames, walked * 1e3, walked * 1e6 / frames, stats["source_reads"],
                     stats["source_reads"] / frames, stats["source_bytes"] // 1024, stats["requests"], opened))

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
