"""`ruby bt`: Ruby-level backtraces of the selected thread or of all of
them, as the target Ruby prints its own, or as JSON."""

import time

from .base import Command, RbpeekError, UsageError, add_output_options, json_text, parse_args, write_output
from .threadview import frame_line, map_threads, progname_if_needed, thread_title, uses_new_quotes


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
  --layout FILE      use this struct layout (see rbpeek-layoutgen)
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
        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        session.reset_read_stats()
        started = time.perf_counter()
        with session.snapshot(args.max_frames) as snap:
            walked = time.perf_counter() - started
            threads = map_threads(dbg, snap.threads(), session, snap)
            if not args.all:
                threads = [self._selected(dbg, threads)]
            if args.locals:
                self._add_locals(snap, threads, args)
        stats = session.read_stats()
        if args.json:
            doc = {"ruby_version": version,
                   "threads": [{k: t[k] for k in ("name", "main", "native_tid", "status", "ractor", "truncated",
                                                   "error", "frames")} for t in threads]}
            write_output(dbg, json_text(doc), args.output)
            if args.stats:
                self._print_stats(dbg, threads, walked, stats)
            return
        new_quotes = uses_new_quotes(version)
        progname = progname_if_needed(session, (f for t in threads for f in t["frames"]))
        out = []
        for t in threads:
            out.append(thread_title(t) + ":")
            if not t["frames"] and not t["error"]:
                out.append("    (no Ruby frames)")
            for f in t["frames"]:
                out.append("    " + frame_line(f, new_quotes, progname))
                if "locals" in f:
                    out.append("        self = %s%s" % (f["self"], "  (in %s)" % f["owner"] if f.get("owner") else ""))
                    out.extend("        %s = %s" % kv for kv in f["locals"].items())
                elif "locals_error" in f:
                    out.append("        (locals: %s)" % f["locals_error"])
            if t["truncated"]:
                out.append("    ... (cut at %d frames; use --max-frames)" % len(t["frames"]))
            if t["error"]:
                out.append("    (walk stopped early: %s)" % t["error"])
            out.append("")
        write_output(dbg, "\n".join(out), args.output)
        if args.stats:
            self._print_stats(dbg, threads, walked, stats)

    @staticmethod
    def _add_locals(snap, threads, args):
        if args.depth < 0 or args.max_length < 1:
            raise UsageError("bt", "--depth must be >= 0 and --max-length >= 1")
        for t in threads:
            try:
                per_frame = snap.thread_locals(t["index"], args.depth, args.max_length)
            except RbpeekError as e:
                per_frame = [{"error": str(e)}] * len(t["frames"])
            for f, loc in zip(t["frames"], per_frame):
                if f["kind"] != "ruby" or loc is None:
                    continue
                if "locals" not in loc:
                    f["locals_error"] = loc.get("error", "unreadable")
                    continue
                f["self"], f["owner"], f["locals"] = loc["self"], loc["owner"], loc["locals"]
                if "error" in loc:
                    f["locals_error"] = loc["error"]

    @staticmethod
    def _print_stats(dbg, threads, walked, stats):
        frames = sum(len(t["frames"]) for t in threads) or 1
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
                if not t["frames"] and not t["error"]:
                    raise RbpeekError("thread %s is a Ruby thread with no Ruby frames right now "
                                      "('ruby bt -a' shows every Ruby thread)" % sel["num"])
                return t
        raise RbpeekError("thread %s (tid %s) is not a Ruby thread; 'ruby bt -a' shows every Ruby thread"
                          % (sel["num"], sel.get("tid")))
