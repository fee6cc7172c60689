"""`ruby COMMAND --help` (and -h) inside gdb and lldb: every command prints
its help, the same text as `help ruby COMMAND`, instead of refusing
--help as an unknown argument (issue 26: `ruby sample --help` was
refused). No target is needed; the debugger must run the next command
after each. An unknown option still gives one `rbpeek:` line.

    test_plugin_help.py gdb|lldb          it.plugin_help.<debugger>
"""

import os
import sys

import harness
from harness import Failure

sys.path.insert(0, os.path.join(harness.REPO, "python"))
from rbpeeklib.commands import registry  # noqa: E402
from rbpeeklib.commands.sessions import Sessions  # noqa: E402


def run_alone(dbg, commands):
    """The debugger with the plugin and no target (harness.run_debugger
    always has one)."""
    import subprocess
    if dbg == "gdb":
        argv = ["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "source " + harness.GDB_PLUGIN]
        for c in commands:
            argv += ["-ex", c]
    else:
        argv = [harness.LLDB, "--no-lldbinit", "-b", "-o", "command script import " + harness.LLDB_PLUGIN]
        for c in commands:
            argv += ["-o", c]
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL, env=env,
                       errors="replace")
    return r.returncode, r.stdout + r.stderr


def test(dbg, workdir):
    commands = registry.all_commands(Sessions())
    script = []
    for c in commands:
        for flag in ("--help", "-h"):
            script += ["ruby %s %s" % (c.name, flag), "%s MARK-%s%s" % ("echo" if dbg == "gdb" else "script print('",
                                                                         c.name, flag)]
    script += ["ruby sample --bogus-option"]
    if dbg == "lldb":
        script = [s + "')" if s.startswith("script print(") else s for s in script]
    else:
        script = [s + "\\n" if s.startswith("echo ") else s for s in script]
    rc, out = run_alone(dbg, script)
    harness.assert_no_traceback(out)
    pos = 0
    for c in commands:
        first = c.usage.splitlines()[0]
        for flag in ("--help", "-h"):
            mark = "MARK-%s%s" % (c.name, flag)
            end = out.find(mark, pos)
            if end < 0:
                raise Failure("%s: no output after 'ruby %s %s' (the debugger stopped?):\n%s"
                              % (dbg, c.name, flag, out[pos:pos + 2000]))
            chunk = out[pos:end]
            if c.summary not in chunk or "Usage: " + first not in chunk:
                raise Failure("%s: 'ruby %s %s' did not print its help:\n%s" % (dbg, c.name, flag, chunk[-2000:]))
            if "rbpeek:" in chunk:
                raise Failure("%s: 'ruby %s %s' printed an error:\n%s" % (dbg, c.name, flag, chunk[-2000:]))
            pos = end + len(mark)
    rest = out[pos:]
    errors = [l for l in rest.splitlines() if "rbpeek:" in l]
    if len(errors) != 1 or "unrecognized arguments: --bogus-option" not in errors[0]:
        raise Failure("%s: an unknown option did not give one rbpeek: line:\n%s" % (dbg, rest[-2000:]))
    harness.log("%s: --help and -h of %d commands print their help" % (dbg, len(commands)))


if __name__ == "__main__":
    which = sys.argv[1]
    harness.main(lambda workdir: test(which, workdir))
