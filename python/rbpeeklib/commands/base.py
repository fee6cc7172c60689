"""What every `ruby ...` command is built on: the Command class, argument
parsing that reports a mistake as one line, the target options every
command takes, and writing a command's output.

Each command is one small class in a module of its own, with a `name`, a
one-line `summary`, a `usage` text and `run(dbg, argv)`. `dbg` is an adapter
(see adapter.py) that the GDB or LLDB plugin provides: it reads memory,
looks up symbols, lists the debugger's threads and prints. Commands never
touch Ruby structs: the C core decodes everything.

Errors a user can cause or meet (no Ruby, no layout, bad memory, bad
arguments) are raised as RbpeekError and shown by the plugin as one line.
"""

import argparse
import re

from ..core import RbpeekError

__all__ = ["Command", "RbpeekError", "UsageError", "add_output_options", "evaluate_words", "json_text", "live_pid",
           "parse_args", "positive_float", "wants_help", "write_file", "write_output"]


class UsageError(RbpeekError):
    """A command given wrong arguments. Shown as one line like any
    RbpeekError; the command line (cli.py) also exits with status 2 for it
    and points to its own --help instead of the debugger's help."""

    def __init__(self, command, message):
        self.command, self.message = command, message
        super().__init__("ruby %s: %s (see 'help ruby %s')" % (command, message, command))


class _Formatter(argparse.HelpFormatter):
    """A fixed width: argparse would otherwise import shutil to ask the
    terminal's, which costs the first command tens of milliseconds."""

    def __init__(self, prog):
        super().__init__(prog, width=100)


class _Parser(argparse.ArgumentParser):
    """argparse that reports errors as UsageError instead of exiting."""

    def error(self, message):
        raise UsageError(self.prog.split()[-1], message)

    def exit(self, status=0, message=None):
        raise UsageError(self.prog.split()[-1], message.strip() if message else "invalid arguments")


def _parse_addr(text):
    try:
        value = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError("not an address: %r (use e.g. 0x7f12345678)" % text)
    if value <= 0:
        raise argparse.ArgumentTypeError("not an address: %r" % text)
    return value


def live_pid(dbg, command, nothing, core_hint):
    """The pid of the debugger's live process on this machine, stopped, for
    a command that lets it run (sample, allocs); else RbpeekError in one
    line: nothing says what is missing, core_hint what to use on a core."""
    if dbg.target_key() is None:
        raise RbpeekError("%s: attach to a live Ruby process first" % nothing)
    if dbg.is_core():
        raise RbpeekError("ruby %s needs a live process, and this is a core file (%s)" % (command, core_hint))
    pid = dbg.live_pid()
    if not pid:
        raise RbpeekError("ruby %s needs a live process on this machine (its /proc/PID/mem); this target is not one"
                          % command)
    if dbg.is_running():
        raise RbpeekError("the target is running: interrupt it first, then run 'ruby %s'" % command)
    return pid


def positive_float(text):
    """argparse type: a finite number above zero (a rate, a duration)."""
    try:
        v = float(text)
    except ValueError:
        v = 0.0
    if not 0 < v < float("inf"):
        raise argparse.ArgumentTypeError("not a positive number: %r" % text)
    return v


def _add_target_options(p):
    """Options that steer discovery, shared by every command."""
    p.add_argument("--vm", type=_parse_addr, metavar="ADDR", help="address of the rb_vm_t, skipping discovery")
    p.add_argument("--layout", metavar="FILE",
                   help="struct layout file (made by rbpeek-layoutgen), or 'dwarf': the target's own DWARF")
    p.add_argument("--ruby-version", metavar="X.Y.Z", help="use the built-in layout for this Ruby version")


_PARSERS = {}


def parse_args(prog, argv, build):
    """The command's arguments. Its parser is built once (build adds the
    command's own options) and kept: building one costs more than a warm
    `ruby bt -a` of a deep stack."""
    p = _PARSERS.get(prog)
    if p is None:
        p = _Parser(prog="ruby " + prog, add_help=False, formatter_class=_Formatter)
        build(p)
        _add_target_options(p)
        _PARSERS[prog] = p
    if isinstance(argv, str):
        import shlex  # deferred: only a debugger gives the words as one string
        try:
            argv = shlex.split(argv)
        except ValueError as e:
            raise UsageError(prog, str(e))
    return p.parse_args(argv)


def add_output_options(p):
    """--json and -o/--output, for the commands that print a document."""
    p.add_argument("--json", action="store_true")
    p.add_argument("-o", "--output")


def evaluate_words(dbg, prog, words):
    """The value of an expression given as the command's remaining words
    (an address, a register, a C variable), evaluated by the debugger."""
    try:
        return dbg.evaluate(" ".join(words))
    except ValueError as e:
        raise RbpeekError("ruby %s: %s" % (prog, e))


# What the core's JSON writer escapes and Python's json module writes as it
# is: DEL, and a lone surrogate (a byte that was not UTF-8, decoded with
# surrogateescape), which no UTF-8 can carry. Outside strings a document
# is ASCII, so these can only stand inside one.
_NOT_AS_IS = re.compile("[\x7f\ud800-\udfff]")


def _escape(m):
    return "\\u007f" if m.group() == "\x7f" else "\\ufffd"


def json_text(doc):
    """A document as JSON, as every command writes it: byte for byte the
    core's writer in the commands' style (base/json.c, RBP_JSON_INDENT1:
    one space a level, ": " after a key, UTF-8 kept, its escapes: DEL as
    \\u007f, a byte that is not UTF-8 as \\ufffd), and one final newline.
    tests/tools/test_json_text.py holds the two together."""
    import json  # deferred: bt's JSON is the core's, and a text output needs none
    return _NOT_AS_IS.sub(_escape, json.dumps(doc, ensure_ascii=False, indent=1)) + "\n"


def write_file(path, text):
    """Writes a command's output file; RbpeekError saying why it cannot."""
    try:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError as e:
        raise RbpeekError("cannot write %s: %s" % (path, e.strerror))


def write_output(dbg, text, path):
    """Writes a command's output to path (saying so), or to the debugger."""
    if path:
        write_file(path, text)
        dbg.write("rbpeek: wrote %s\n" % path)
    else:
        dbg.write(text if text.endswith("\n") else text + "\n")


def wants_help(argv):
    """True when the command's words ask for its help (-h or --help, before
    any "--"); words that do not parse are not a request for help."""
    if isinstance(argv, str):
        import shlex  # deferred, as in parse_args
        try:
            argv = shlex.split(argv)
        except ValueError:
            return False
    for word in argv:
        if word == "--":
            return False
        if word in ("-h", "--help"):
            return True
    return False


class Command:
    """One `ruby <name>` command. Subclasses set the name, a one-line summary
    and the usage text, and implement run(dbg, argv). The plugins call
    invoke(), which answers -h/--help with the help text (the same text as
    `help ruby <name>`) instead of running the command."""

    name = ""
    summary = ""
    usage = ""

    def __init__(self, sessions):
        self.sessions = sessions

    def help_text(self):
        """`help ruby <name>` and `ruby <name> --help`."""
        return self.summary + "\n\nUsage: " + self.usage + "\n"

    def invoke(self, dbg, argv):
        if wants_help(argv):
            dbg.write(self.help_text())
            return
        self.run(dbg, argv)

    def run(self, dbg, argv):
        raise NotImplementedError
