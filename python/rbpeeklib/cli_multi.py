"""Several processes from the command line: `rbpeek COMMAND --pid A --pid B`
and `--subprocesses` (a process and its descendants: a pre-forking
server's master and workers).

`sample` samples them all at once, into one profile (sampling/multi.py).
bt, threads, locks, heap, gc and allocs run once per process, each with a
session of its own, and their outputs are grouped by process: in text
under a title "== COMMAND (pid N) ==", in JSON as one document
{"processes": [{"pid", "command", "result" | "error"}]}, where result is
the document the command gives for one process. allocs, which counts for
a while, counts in every process at the same time.

A named process that cannot be read fails the command (after the others
are printed); a descendant that is not a Ruby process is listed as
skipped.
"""

import io
import json
import threading

from .commands import registry
from .commands.base import UsageError, json_text, write_file
from .commands.sessions import Sessions
from .core import FORMATS, RbpeekError
from .sampling.procs import command_line, tree
from .standalone import StandaloneAdapter

PER_PROCESS = ("bt", "threads", "locks", "heap", "gc", "allocs")
AT_ONCE = ("allocs",)       # these run in every process at the same time
# the options that write one process's file: heap's dump, allocs' site profiles
ONE_FILE = ("--dump",) + tuple("--" + f.name for f in FORMATS)


def _take_output(argv):
    """-o/--output FILE out of argv: (path or None, rest)."""
    path, rest, i = None, [], 0
    while i < len(argv):
        a = argv[i]
        if a in ("-o", "--output") and i + 1 < len(argv):
            path = argv[i + 1]
            i += 2
            continue
        if a.startswith("--output="):
            path = a[len("--output="):]
        else:
            rest.append(a)
        i += 1
    return path, rest


def _one(name, pid, argv):
    """Runs COMMAND on one process: (stdout text, stderr text, error or None)."""
    out, err = io.StringIO(), io.StringIO()
    dbg = StandaloneAdapter(pid=pid, out=out, err=err)
    command = next(c for c in registry.all_commands(Sessions()) if c.name == name)
    try:
        command.run(dbg, argv)
        error = None
    except RbpeekError as e:
        error = str(e)
    return out.getvalue(), err.getvalue(), error


def run_each(name, pids, follow, argv, stdout, stderr):
    """Runs command NAME on each process and prints the outputs grouped by
    process. Returns the exit status: 0, or 1 if a named process failed."""
    if name not in PER_PROCESS:
        raise UsageError(name, "%s reads one process: give one --pid (several processes: %s and sample)"
                         % (name, ", ".join(PER_PROCESS)))
    one_file = [a.split("=")[0] for a in argv if a.split("=")[0] in ONE_FILE]
    if one_file:
        raise UsageError(name, "%s writes one process's file: give one --pid for it" % one_file[0])
    path, argv = _take_output(argv)
    as_json = "--json" in argv
    order = []
    for r in pids:
        for p in (tree(r) if follow else [r]):
            if p not in order:
                order.append(p)
    results = {}

    def work(pid):
        results[pid] = _one(name, pid, argv)

    if name in AT_ONCE:
        threads = [threading.Thread(target=work, args=(p,), daemon=True) for p in order]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    else:
        for p in order:
            work(p)
    failed = False
    docs, chunks, notes = [], [], []
    for pid in order:
        out, err, error = results[pid]
        cmd = command_line(pid, 56) or "?"
        named = pid in pids
        if error and not named:
            notes.append("rbpeek: skipped pid %d (%s): %s" % (pid, cmd, error))
            continue
        failed = failed or bool(error)
        if as_json:
            d = {"pid": pid, "command": cmd}
            if error:
                d["error"] = error
            else:
                try:
                    d["result"] = json.loads(out)
                except ValueError:
                    d["error"] = "not JSON: %s" % out[:200]
            docs.append(d)
        else:
            chunks.append("== %s (pid %d) ==\n%s%s" % (cmd, pid, out if out.endswith("\n") or not out else out + "\n",
                                                       "rbpeek: %s\n" % error if error else ""))
        if err:
            stderr.write(err)
    text = json_text({"processes": docs}) if as_json else "\n".join(chunks)
    if path:
        write_file(path, text)
        stderr.write("rbpeek: wrote %s\n" % path)
    else:
        stdout.write(text)
    for n in notes:
        stderr.write(n + "\n")
    return 1 if failed else 0
