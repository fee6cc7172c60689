"""`ruby threads`: one line per Ruby thread (see also `ruby locks`)."""

import json

from .commands import Command, frame_line, map_threads, parse_args, uses_new_quotes, write_output


class ThreadsCommand(Command):
    name = "threads"
    summary = "One line per Ruby thread: number, name, native TID, status, top frame."
    usage = """ruby threads [--json] [-o FILE] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Lists every Ruby thread: the debugger's thread number (so 'thread N' selects
it), its Ruby name, native TID, Ruby status and innermost Ruby frame."""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("--json", action="store_true")
            p.add_argument("-o", "--output")

        args = parse_args(self.name, argv, build)
        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        with session.snapshot(64) as snap:
            threads = map_threads(dbg, snap.threads())
        if args.json:
            doc = {"ruby_version": version,
                   "threads": [{"debugger_thread": t["dbg_num"], "name": t["name"], "main": t["main"],
                                "native_tid": t["native_tid"], "status": t["status"], "ractor": t["ractor"],
                                "top_frame": t["frames"][0] if t["frames"] else None} for t in threads]}
            write_output(dbg, json.dumps(doc, ensure_ascii=False, indent=1) + "\n", args.output)
            return
        new_quotes = uses_new_quotes(version)
        lines = []
        for t in threads:
            num = "#%s" % t["dbg_num"] if t["dbg_num"] is not None else "#?"
            name = "main" if t["main"] and not t["name"] else ('"%s"' % t["name"] if t["name"] else "-")
            tid = "tid %s" % t["native_tid"] if t["native_tid"] else "tid ?"
            top = frame_line(t["frames"][0], new_quotes) if t["frames"] else "(no Ruby frames)"
            lines.append("%-4s %-16s %-11s %-6s %s" % (num, name, tid, t["status"], top))
        write_output(dbg, "\n".join(lines), args.output)


COMMANDS = [ThreadsCommand]
