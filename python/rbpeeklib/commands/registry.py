"""The `ruby ...` commands, in the order `help ruby` shows them (the
package's COMMANDS: each name is a module of this package holding the
command's class), and the help of the `ruby` prefix. Only the plugins and
the command line import this module."""

import importlib

from . import COMMANDS
from .base import Command


def command_class(name):
    """The Command class of name (one of COMMANDS), importing its module
    alone: the command line runs one command and loads no other."""
    module = importlib.import_module("." + name, __package__)
    found = [c for c in vars(module).values()
             if isinstance(c, type) and issubclass(c, Command) and c is not Command and c.name == name]
    if len(found) != 1:
        raise ImportError("commands/%s.py must define one Command named %r" % (name, name))
    return found[0]


def command_classes():
    """The Command class of each name in COMMANDS, in that order."""
    return [command_class(name) for name in COMMANDS]


def all_commands(sessions):
    """The command objects, in the order `help ruby` lists them, sharing
    one session cache (sessions.Sessions)."""
    return [c(sessions) for c in command_classes()]


PREFIX_HELP = """Inspect a CRuby process or core file without running code in it.
'help ruby <command>' shows the options of a command."""


def prefix_help(commands):
    """`ruby` with no subcommand: one line per command."""
    width = max(len(c.name) for c in commands)
    lines = ["Inspect a CRuby process or core file without running code in it.", ""]
    lines += ["  ruby %-*s  %s" % (width, c.name, c.summary) for c in commands]
    lines += ["", "'help ruby <command>' shows the options of a command."]
    return "\n".join(lines)
