"""`ruby frame N`: one Ruby frame of the selected thread in depth: where it
is, its self and method owner, and every local with its value (see
docs/inspect.md)."""

from .base import Command, RbpeekError, UsageError, json_text, parse_args, add_output_options, write_output
from .threadview import map_threads


class FrameCommand(Command):
    name = "frame"
    summary = "One Ruby frame of the selected thread in depth: location, self, method owner, locals."
    usage = """ruby frame N [--depth N] [--max-length N] [--json] [-o FILE]
          [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

N counts frames as `ruby bt` lists them, innermost first, from 0. The
values are printed as `ruby p` prints them, with its limits. A C frame has
no locals rbpeek can name (they are C variables)."""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("n", type=int)
            p.add_argument("--depth", type=int, default=8)
            p.add_argument("--max-length", type=int, default=100)
            add_output_options(p)

        args = parse_args(self.name, argv, build)
        if args.n < 0 or args.depth < 0 or args.max_length < 1:
            raise UsageError(self.name, "N and --depth must be >= 0, --max-length >= 1")
        session = self.sessions.get(dbg, args)
        with session.snapshot(0) as snap:
            threads = map_threads(dbg, snap.threads(), session, snap)
            sel = dbg.selected_thread()
            mine = [t for t in threads if sel is not None and t.get("dbg_num") == sel["num"]]
            if not mine:
                raise RbpeekError("the selected thread is not a Ruby thread; 'ruby bt -a' shows every Ruby thread")
            t = mine[0]
            if args.n >= len(t["frames"]):
                raise RbpeekError("no frame %d: the thread has %d Ruby-level frames" % (args.n, len(t["frames"])))
            f = dict(t["frames"][args.n])
            line = snap.frame_line(t["index"], args.n)
            if f["kind"] == "ruby":
                f.update(snap.frame_locals(t["index"], args.n, args.depth, args.max_length))
        if args.json:
            write_output(dbg, json_text(dict(f, frame=args.n)), args.output)
            return
        out = ["#%d %s" % (args.n, line)]
        if f["kind"] != "ruby":
            out.append("    (a C frame: its locals are C variables, which rbpeek cannot name)")
        else:
            out.append("    self  = %s" % f["self"])
            out.append("    owner = %s" % (f["owner"] or "(none: not in a method)"))
            out.extend("    %s = %s" % kv for kv in f["locals"].items())
            if not f["locals"]:
                out.append("    (no named locals)")
        write_output(dbg, "\n".join(out) + "\n", args.output)
