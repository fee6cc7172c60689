"""The `ruby ...` commands, written once for both debuggers.

Each command is one small class with a `name`, a one-line `summary`, a
`usage` text and `run(dbg, argv)`. `dbg` is an adapter (see adapter.py) that
the GDB or LLDB plugin provides: it reads memory, looks up symbols, lists the
debugger's threads and prints. Commands never touch Ruby structs: the C core
decodes everything.

Errors a user can cause or meet (no Ruby, no layout, bad memory, bad
arguments) are raised as RbpeekError and shown by the plugin as one line.
"""

import argparse
import json
import os
import shlex
import time

from ..core import RbpeekError, Session, resolve_tids


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as RbpeekError instead of exiting."""

    def error(self, message):
        raise RbpeekError("%s: %s (see 'help ruby %s')" % (self.prog, message, self.prog.split()[-1]))

    def exit(self, status=0, message=None):
        raise RbpeekError(message.strip() if message else "%s: invalid arguments" % self.prog)


def _parse_addr(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("not an address: %r (use e.g. 0x7f12345678)" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("not an address: %r" % text)
    return value


def _add_target_options(p):
    """Options that steer discovery, shared by every command."""
    p.add_argument("--vm", type=_parse_addr, metavar="ADDR", help="address of the rb_vm_t, skipping discovery")
    p.add_argument("--layout", metavar="FILE", help="struct layout file (made by rbpeek-layoutgen)")
    p.add_argument("--ruby-version", metavar="X.Y.Z", help="use the built-in layout for this Ruby version")


def parse_args(prog, argv, build):
    p = _Parser(prog="ruby " + prog, add_help=False)
    build(p)
    _add_target_options(p)
    if isinstance(argv, str):
        try:
            argv = shlex.split(argv)
        except ValueError as e:
            raise RbpeekError("ruby %s: %s" % (prog, e))
    return p.parse_args(argv)


class Sessions:
    """Keeps one attached session per target, re-validated on every command.

    Attaching parses DWARF and finds the VM, which need not be redone while
    the same process (or core) is being debugged with the same options; the
    memory cache is dropped on every command since the target may have run.
    """

    def __init__(self):
        self._key = None
        self._session = None

    def get(self, dbg, args):
        key = (dbg.target_key(), args.vm, args.layout, args.ruby_version)
        if key[0] is None:
            raise RbpeekError("no process or core file to inspect: attach to a Ruby process or load a core first")
        if self._session is not None and key == self._key:
            self._session.invalidate()
            return self._session
        self._session = None
        s = Session()
        pid = dbg.live_pid()
        used_pid = False
        if pid:
            try:
                s.use_pid(pid)  # direct /proc/PID/mem: far faster than the debugger's reads
                used_pid = True
            except RbpeekError:
                used_pid = False
        if not used_pid:
            s.use_reader(dbg.read_memory)
            for start, end, offset, path in dbg.regions():
                s.add_region(start, end, offset, path)
        s.use_lookup(dbg.lookup_symbol)
        for path in dbg.debug_files():
            s.add_debug_file(path)
        if args.vm:
            s.set_vm(args.vm)
        if args.layout:
            if not os.path.exists(args.layout):
                raise RbpeekError("--layout: no such file: %s" % args.layout)
            s.set_layout_file(args.layout)
        if args.ruby_version:
            s.set_ruby_version(args.ruby_version)
        s.attach()
        warning = s.info()["warning"]
        if warning:
            dbg.write("rbpeek: warning: %s\n" % warning)
        self._session, self._key = s, key
        return s

    def drop(self):
        self._session = None
        self._key = None


def map_threads(dbg, threads, session=None, snapshot=None):
    """Adds each Ruby thread's debugger thread number ("dbg_num") and TID.

    Ruby 3.1+ records the kernel TID; older Rubies only the pthread_t, which
    the debugger's threads are matched against by their thread pointer. A
    debugger that cannot tell a thread's pointer (lldb 16 shows no fs_base)
    leaves some unplaced: given the session and snapshot, their TIDs are
    then read from glibc's thread descriptors, checked against the TIDs the
    debugger lists (rbpeek_snapshot_resolve_tids).
    """
    dbg_threads = dbg.threads()
    by_tid, by_pthread = {}, {}
    for t in dbg_threads:
        if t.get("tid"):
            by_tid[t["tid"]] = t
        if t.get("pthread"):
            by_pthread[t["pthread"]] = t
    for rt in threads:
        d = by_tid.get(rt["native_tid"]) if rt["native_tid"] else None
        if d is None and rt["pthread_id"]:
            d = by_pthread.get(rt["pthread_id"])
        rt["dbg_num"] = d["num"] if d else None
        if rt["native_tid"] is None and d:
            rt["native_tid"] = d.get("tid")
    unplaced = [rt for rt in threads if rt["dbg_num"] is None and rt["pthread_id"]]
    if unplaced and session is not None and snapshot is not None and by_tid:
        try:
            tids = dict(resolve_tids(session, snapshot, known_tids=sorted(by_tid)))
        except RbpeekError:
            tids = {}
        for rt in unplaced:
            tid = tids.get(rt["pthread_id"])
            if tid in by_tid:
                rt["dbg_num"] = by_tid[tid]["num"]
                rt["native_tid"] = tid
    return threads


def frame_line(frame, new_quotes):
    """One frame as Ruby prints it in a backtrace."""
    loc = frame["path"] or "(unknown)"
    if frame["lineno"]:
        loc += ":%d" % frame["lineno"]
    quote = "'%s'" if new_quotes else "`%s'"
    return "%s:in %s" % (loc, quote % frame["label"])


def thread_title(t):
    parts = ["Thread"]
    if t.get("dbg_num") is not None:
        parts.append("%s" % t["dbg_num"])
    if t["name"]:
        parts.append('"%s"' % t["name"])
    attrs = []
    if t["main"]:
        attrs.append("main")
    attrs.append(t["status"])
    if t["native_tid"]:
        attrs.append("tid %d" % t["native_tid"])
    if t["ractor"]:
        attrs.append("ractor %d" % t["ractor"])
    return "%s (%s)" % (" ".join(parts), ", ".join(attrs))


def uses_new_quotes(version):
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (3, 4)


def write_output(dbg, text, path):
    if path:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise RbpeekError("cannot write %s: %s" % (path, e.strerror))
        dbg.write("rbpeek: wrote %s\n" % path)
    else:
        dbg.write(text if text.endswith("\n") else text + "\n")


class Command:
    name = ""
    summary = ""
    usage = ""

    def __init__(self, sessions):
        self.sessions = sessions

    def run(self, dbg, argv):
        raise NotImplementedError


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
  --stats            after the output, one line: frames walked, time taken,
                     and reads that reached the memory source
  --vm ADDR          use this rb_vm_t address instead of discovering it
  --layout FILE      use this struct layout (see rbpeek-layoutgen)
  --ruby-version V   use the built-in layout of Ruby V"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("-a", "--all", action="store_true")
            p.add_argument("--json", action="store_true")
            p.add_argument("-o", "--output")
            p.add_argument("--max-frames", type=int, default=0)
            p.add_argument("--stats", action="store_true")

        args = parse_args(self.name, argv, build)
        if args.max_frames < 0:
            raise RbpeekError("ruby bt: --max-frames must be positive")
        session = self.sessions.get(dbg, args)
        version = session.info()["ruby_version"]
        session.reset_read_stats()
        started = time.perf_counter()
        with session.snapshot(args.max_frames) as snap:
            walked = time.perf_counter() - started
            threads = map_threads(dbg, snap.threads(), session, snap)
        stats = session.read_stats()
        if not args.all:
            threads = [self._selected(dbg, threads)]
        if args.json:
            doc = {"ruby_version": version,
                   "threads": [{k: t[k] for k in ("name", "main", "native_tid", "status", "ractor", "truncated",
                                                   "error", "frames")} for t in threads]}
            write_output(dbg, json.dumps(doc, ensure_ascii=False, indent=1) + "\n", args.output)
            if args.stats:
                self._print_stats(dbg, threads, walked, stats)
            return
        new_quotes = uses_new_quotes(version)
        out = []
        for t in threads:
            out.append(thread_title(t) + ":")
            if not t["frames"] and not t["error"]:
                out.append("    (no Ruby frames)")
            out.extend("    " + frame_line(f, new_quotes) for f in t["frames"])
            if t["truncated"]:
                out.append("    ... (cut at %d frames; use --max-frames)" % len(t["frames"]))
            if t["error"]:
                out.append("    (walk stopped early: %s)" % t["error"])
            out.append("")
        write_output(dbg, "\n".join(out), args.output)
        if args.stats:
            self._print_stats(dbg, threads, walked, stats)

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


class InfoCommand(Command):
    name = "info"
    summary = "Ruby version, where the struct layout came from, VM address, symbols used."
    usage = """ruby info [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Shows what rbpeek found: the target's Ruby version, the source of the struct
layout (DWARF, a built-in table, or --layout), the VM address and how it was
found, the memory source, and read statistics."""

    def run(self, dbg, argv):
        args = parse_args(self.name, argv, lambda p: None)
        d = self.sessions.get(dbg, args).describe()
        memory = {"proc": "/proc/%s/mem (direct)" % dbg.live_pid(), "callback": "through the debugger",
                  "core": "core file"}.get(d["memory_source"], d["memory_source"])
        lines = ["Ruby version:  %s" % d["ruby_version"],
                 "Layout:        %s" % d["layout_source"],
                 "VM:            0x%x (%s)" % (d["vm"], d["vm_found_by"]),
                 "Memory:        %s" % memory]
        for name, sym in d["symbols"].items():
            where = "0x%x  (%s)" % (sym["address"], sym["found_by"]) if sym["address"] else "not found"
            lines.append("Symbol:        %-20s %s" % (name, where))
        if d["warning"]:
            lines.append("Warning:       %s" % d["warning"])
        dbg.write("\n".join(lines) + "\n")


def all_commands(sessions):
    """The command objects, in the order `help ruby` lists them. Each command
    family lives in its own module of this package and lists its classes in
    COMMANDS."""
    from . import threads
    classes = [BtCommand] + threads.COMMANDS + [InfoCommand]
    for module in ("sample", "heap"):
        try:
            classes += __import__("rbpeeklib.commands." + module, fromlist=["COMMANDS"]).COMMANDS
        except ImportError as e:
            if e.name != "rbpeeklib.commands." + module:
                raise
    return [c(sessions) for c in classes]


PREFIX_HELP = """Inspect a CRuby process or core file without running code in it.
'help ruby <command>' shows the options of a command."""


def prefix_help(commands):
    """`ruby` with no subcommand: one line per command."""
    width = max(len(c.name) for c in commands)
    lines = ["Inspect a CRuby process or core file without running code in it.", ""]
    lines += ["  ruby %-*s  %s" % (width, c.name, c.summary) for c in commands]
    lines += ["", "'help ruby <command>' shows the options of a command."]
    return "\n".join(lines)
