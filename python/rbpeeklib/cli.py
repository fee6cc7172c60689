"""`rbpeek`: the shared commands without a debugger.

    rbpeek COMMAND (--pid PID | --core CORE [--exe PATH]) [OPTIONS]
    rbpeek COMMAND --help

Each COMMAND is the module that serves `ruby COMMAND` in gdb and lldb
(commands/registry.py), run here through the no-debugger adapter
(standalone.py), so options, text, JSON and output files are the same.
This file only picks the target out of the arguments, prints help, and
turns the outcome into an exit status: 0 done, 1 failed (one `rbpeek:`
line on stderr), 2 wrong usage, 130 interrupted outside sampling (a
sample ended by Ctrl-C still writes what it collected and exits 0).
"""

import os
import re
import sys

from .commands import COMMANDS, registry
from .commands.base import UsageError
from .commands.sessions import Sessions
from .core import RbpeekError
from .standalone import StandaloneAdapter

PROG = "rbpeek"
TARGET_USAGE = "(--pid PID... [--subprocesses] | --core CORE [--exe PATH] [--sysroot DIR])"
TARGET_HELP = """Target (one of):
  --pid PID          a live process: read through /proc/PID/mem (root, or
                     the same user with ptrace allowed); not stopped, except
                     by `sample`, which traces it while it samples. Given
                     more than once (sample, bt, threads, locks, heap, gc,
                     allocs): each process, grouped by process
  --subprocesses     with --pid: the process and its descendants (a
                     pre-forking server's master and workers); sample also
                     follows those forked while it runs
  --core CORE        a core file (gcore, or the kernel's); pages it lacks
                     are read from the files it mapped, at their paths
  --exe PATH         with --core: the Ruby executable, read for its DWARF
                     as `gdb PATH CORE` would
  --sysroot DIR      with --core: where the files the core names live on
                     this machine (DIR/lib/..., as gdb's `set sysroot`): a
                     core of another machine, an arm64 server's"""


def _main_help(commands):
    width = max(len(c.name) for c in commands)
    lines = ["usage: %s COMMAND %s [OPTIONS]" % (PROG, TARGET_USAGE), "",
             "Inspect a CRuby process or core file without running code in it, and without a debugger.", ""]
    lines += ["  %-*s  %s" % (width, c.name, c.summary) for c in commands]
    lines += ["  %-*s  %s" % (width, "top", "A live view of the hottest methods, refreshed every second (the command "
                                            "line only).")]
    lines += ["", "'%s COMMAND --help' shows the options of a command; they are those of the" % PROG,
              "debuggers' 'ruby COMMAND' (docs/usage.md)."]
    return "\n".join(lines) + "\n"


def command_help(command):
    """A command's usage text in the command line's terms."""
    text = re.sub(r"^ruby %s\b" % re.escape(command.name), "%s %s %s" % (PROG, command.name, TARGET_USAGE),
                  command.usage, count=1)
    # Continuation lines of the synopsis stay under the options' column.
    shift = len(PROG) - len("ruby")
    lines = text.split("\n")
    for i in range(1, len(lines)):
        if not lines[i].strip():
            break
        lines[i] = " " * shift + lines[i]
    text = "\n".join(lines).replace("the debugger's output", "standard output")
    return text + "\n\n" + TARGET_HELP + "\n"


def _take_option(argv, names):
    """Removes '--name VALUE' / '--name=VALUE' from argv: (value or None, rest).
    Given twice, or without a value: UsageError."""
    value, rest, i = None, [], 0
    while i < len(argv):
        a = argv[i]
        hit = next((n for n in names if a == n or a.startswith(n + "=")), None)
        if a == "--":
            rest += argv[i:]
            break
        if hit is None:
            rest.append(a)
            i += 1
            continue
        if value is not None:
            raise UsageError(None, "%s given twice" % hit)
        if a == hit:
            if i + 1 >= len(argv):
                raise UsageError(None, "%s needs a value" % hit)
            value = argv[i + 1]
            i += 2
        else:
            value = a[len(hit) + 1:]
            i += 1
    return value, rest


def _take_all(argv, names):
    """Every '--name VALUE' / '--name=VALUE' out of argv: ([values], rest)."""
    values = []
    while True:
        v, argv = _take_first(argv, names)
        if v is None:
            return values, argv
        values.append(v)


def _take_first(argv, names):
    """The first '--name VALUE' of several: (value, rest)."""
    for i, a in enumerate(argv):
        if a == "--":
            break
        hit = next((n for n in names if a == n or a.startswith(n + "=")), None)
        if hit is None:
            continue
        if a == hit:
            if i + 1 >= len(argv):
                raise UsageError(None, "%s needs a value" % hit)
            return argv[i + 1], argv[:i] + argv[i + 2:]
        return a[len(hit) + 1:], argv[:i] + argv[i + 1:]
    return None, argv


def parse_target(argv):
    """(StandaloneAdapter, the command's own arguments) from argv. Several
    --pid, or --subprocesses: the adapter's processes (the first pid is its
    own) and subprocesses say so."""
    pids, argv = _take_all(argv, ["--pid", "-p"])
    follow = "--subprocesses" in argv[:argv.index("--")] if "--" in argv else "--subprocesses" in argv
    if follow:
        argv = [a for a in argv if a != "--subprocesses"]
    pid = pids[0] if pids else None
    core, argv = _take_option(argv, ["--core", "-c"])
    exe, argv = _take_option(argv, ["--exe"])
    sysroot, argv = _take_option(argv, ["--sysroot"])
    if (pid is None) == (core is None):
        raise UsageError(None, "give the target: --pid PID (a live process) or --core CORE (a core file)")
    if exe is not None and core is None:
        raise UsageError(None, "--exe goes with --core (a live process names its own executable)")
    if sysroot is not None and core is None:
        raise UsageError(None, "--sysroot goes with --core (a live process's files are where it mapped them)")
    if follow and pid is None:
        raise UsageError(None, "--subprocesses goes with --pid (a core file is one process)")
    if pid is not None:
        nums = []
        for p in pids:
            if not p.isdigit() or int(p) <= 0:
                raise UsageError(None, "--pid wants a process id, not %r" % p)
            if not os.path.exists("/proc/%d" % int(p)):
                raise RbpeekError("no process %d" % int(p))
            if int(p) not in nums:
                nums.append(int(p))
        dbg = StandaloneAdapter(pid=nums[0])
        dbg.processes, dbg.subprocesses = nums, follow
        return dbg, argv
    if not os.path.isfile(core):
        raise RbpeekError("--core: no such file: %s" % core)
    if exe is not None and not os.path.isfile(exe):
        raise RbpeekError("--exe: no such file: %s" % exe)
    if sysroot is not None and not os.path.isdir(sysroot):
        raise RbpeekError("--sysroot: no such directory: %s" % sysroot)
    return StandaloneAdapter(core=os.path.abspath(core), exe=exe and os.path.abspath(exe),
                             sysroot=sysroot and os.path.abspath(sysroot)), argv


def _top(rest):
    """`rbpeek top`: the command line's own (a live view needs a terminal of
    its own, which a debugger's command has not)."""
    from .top import USAGE, run_top
    if "-h" in rest or "--help" in rest:
        sys.stdout.write(USAGE + "\n" + TARGET_HELP + "\n")
        return 0
    try:
        dbg, rest = parse_target(rest)
        if dbg.core:
            raise UsageError("top", "top watches a live process: give --pid PID")
        return run_top(dbg.processes, dbg.subprocesses, rest, sys.stdout, sys.stderr)
    except UsageError as e:
        sys.stderr.write(_usage_line(e, "top"))
        return 2
    except RbpeekError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    except KeyboardInterrupt:
        return 0


def _usage_line(e, name):
    where = "%s %s --help" % (PROG, name) if name else "%s --help" % PROG
    return "%s%s: %s (see '%s')\n" % (PROG, " " + name if name else "", e.message, where)


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help") and len(argv) == 1:
        sys.stdout.write(_main_help(registry.all_commands(Sessions())))
        return 0 if argv else 2
    if argv[0] == "help" and len(argv) == 2 and argv[1] in COMMANDS:
        argv = [argv[1], "--help"]
    name = argv[0]
    if name == "top":
        return _top(argv[1:])
    if name not in COMMANDS:
        sys.stderr.write("%s: no command %r; one of: %s (see '%s --help')\n"
                         % (PROG, name, ", ".join(COMMANDS), PROG))
        return 2
    command = registry.command_class(name)(Sessions())
    rest = argv[1:]
    if "-h" in rest or "--help" in rest:
        sys.stdout.write(command_help(command))
        return 0
    try:
        dbg, rest = parse_target(rest)
        many = getattr(dbg, "processes", None) and (len(dbg.processes) > 1 or dbg.subprocesses)
        if many and name != "sample":
            from .cli_multi import run_each
            return run_each(name, dbg.processes, dbg.subprocesses, rest, sys.stdout, sys.stderr)
        command.run(dbg, rest)
    except UsageError as e:
        sys.stderr.write(_usage_line(e, name))
        return 2
    except RbpeekError as e:
        sys.stderr.write("%s: %s\n" % (PROG, e))
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("%s: interrupted\n" % PROG)
        return 130
    except BrokenPipeError:
        # The reader went away (`rbpeek bt ... | head`): nothing left to say.
        try:
            sys.stdout = open(os.devnull, "w")
        except OSError:
            pass
        return 1
    except Exception as e:  # noqa: BLE001 - one line, never a traceback
        sys.stderr.write("%s: internal error: %s: %s (please report it)\n" % (PROG, type(e).__name__, e))
        return 1
    return 0
