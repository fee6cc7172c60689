"""The list of `ruby ...` commands, in the order `help ruby` shows them,
and the help of the `ruby` prefix. Only the plugins import this module."""

from .allocs import AllocsCommand
from .bt import BtCommand
from .frame import FrameCommand
from .gc import GcCommand
from .heap import HeapCommand
from .info import InfoCommand
from .p import PCommand
from .page import PageCommand
from .locks import LocksCommand
from .sample import SampleCommand
from .threads import ThreadsCommand

COMMANDS = [BtCommand, ThreadsCommand, LocksCommand, InfoCommand, SampleCommand, AllocsCommand, HeapCommand,
            GcCommand, PCommand, FrameCommand, PageCommand]


def all_commands(sessions):
    """The command objects, in the order `help ruby` lists them, sharing
    one session cache (sessions.Sessions)."""
    return [c(sessions) for c in COMMANDS]


PREFIX_HELP = """Inspect a CRuby process or core file without running code in it.
'help ruby <command>' shows the options of a command."""


def prefix_help(commands):
    """`ruby` with no subcommand: one line per command."""
    width = max(len(c.name) for c in commands)
    lines = ["Inspect a CRuby process or core file without running code in it.", ""]
    lines += ["  ruby %-*s  %s" % (width, c.name, c.summary) for c in commands]
    lines += ["", "'help ruby <command>' shows the options of a command."]
    return "\n".join(lines)
