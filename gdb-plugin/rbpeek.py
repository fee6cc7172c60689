"""rbpeek for GDB: `source gdb-plugin/rbpeek.py`, then `help ruby`.

This file only adapts GDB to the shared commands (python/rbpeeklib): it
reads memory and symbols through GDB's inferior, lists GDB's threads, and
turns every error into one line (gdb.GdbError) instead of a traceback. It
holds no knowledge of Ruby's structs.
"""

import os
import sys

import gdb

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(os.path.expanduser(__file__))))
if os.path.join(_REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(_REPO, "python"))

from rbpeeklib import commands as _commands  # noqa: E402
from rbpeeklib.adapter import DebuggerAdapter  # noqa: E402
from rbpeeklib.core import RbpeekError  # noqa: E402


class GdbAdapter(DebuggerAdapter):
    name = "gdb"

    def _inferior(self):
        return gdb.selected_inferior()

    def _is_core(self):
        inf = self._inferior()
        conn = getattr(inf, "connection", None)
        return conn is not None and getattr(conn, "type", "") == "core"

    def target_key(self):
        inf = self._inferior()
        if not inf.pid and not self._is_core():
            return None
        return ("gdb", inf.num, inf.pid, self._is_core(), inf.progspace.filename)

    def live_pid(self):
        inf = self._inferior()
        if inf.pid and not self._is_core() and os.path.exists("/proc/%d/mem" % inf.pid):
            conn = getattr(inf, "connection", None)
            if conn is None or getattr(conn, "type", "native") == "native":
                return inf.pid
        return None

    def read_memory(self, addr, size):
        return self._inferior().read_memory(addr, size).tobytes()

    def lookup_symbol(self, name):
        try:
            # &'sym' resolves minimal (ELF) symbols too, so stripped Rubies work;
            # taking an address never runs code in the target.
            value = gdb.parse_and_eval("&'%s'" % name)
            return int(value.cast(gdb.lookup_type("unsigned long")))
        except gdb.error:
            return None

    def regions(self):
        try:
            text = gdb.execute("info proc mappings", to_string=True)
        except gdb.error:
            return []
        out = []
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 4 or not parts[0].startswith("0x"):
                continue
            try:
                start, end, _size, offset = (int(p, 16) for p in parts[:4])
            except ValueError:
                continue
            path = parts[-1] if parts[-1].startswith("/") else None
            out.append((start, end, offset, path))
        return out

    def debug_files(self):
        files = []
        for objfile in gdb.objfiles():
            path = objfile.filename or ""
            base = os.path.basename(path)
            if base.startswith("libruby") or base.startswith("ruby"):
                files.append(path)
        return files

    def _describe(self, thread, fs_bases):
        try:
            pthread = int.from_bytes(thread.handle(), "little")
        except (gdb.error, RuntimeError, TypeError, AttributeError):
            pthread = fs_bases.get(thread.num)
        return {"num": thread.num, "tid": thread.ptid[1] or None, "pthread": pthread}

    def _fs_bases(self, threads):
        """pthread_t is the thread pointer (fs_base on x86-64); read it from
        each thread's registers when GDB has no libthread_db handle."""
        try:
            threads[0].handle()
            return {}
        except (gdb.error, RuntimeError, IndexError, AttributeError):
            pass
        orig = gdb.selected_thread()
        out = {}
        try:
            for t in threads:
                t.switch()
                try:
                    out[t.num] = int(gdb.parse_and_eval("$fs_base"))
                except gdb.error:
                    pass
        finally:
            if orig is not None:
                orig.switch()
        return out

    def threads(self):
        ts = list(self._inferior().threads())
        fs = self._fs_bases(ts)
        return [self._describe(t, fs) for t in ts]

    def selected_thread(self):
        t = gdb.selected_thread()
        if t is None:
            return None
        return self._describe(t, self._fs_bases([t]))

    def write(self, text):
        gdb.write(text)


_ADAPTER = GdbAdapter()
_SESSIONS = _commands.Sessions()


def _invoke(command, argv):
    try:
        command.run(_ADAPTER, argv)
    except RbpeekError as e:
        raise gdb.GdbError("rbpeek: %s" % e)
    except KeyboardInterrupt:
        raise gdb.GdbError("rbpeek: interrupted")
    except gdb.GdbError:
        raise
    except Exception as e:  # never a traceback in the user's debugger
        raise gdb.GdbError("rbpeek: internal error: %s: %s (please report it)" % (type(e).__name__, e))


class RubyPrefix(gdb.Command):
    def __init__(self):
        super().__init__("ruby", gdb.COMMAND_DATA, gdb.COMPLETE_NONE, True)

    def invoke(self, arg, from_tty):
        gdb.write(_commands.prefix_help(_COMMANDS) + "\n")


RubyPrefix.__doc__ = _commands.PREFIX_HELP


def _register(command):
    def invoke(self, arg, from_tty):
        self.dont_repeat()
        _invoke(command, arg)

    def init(self):
        gdb.Command.__init__(self, "ruby " + command.name, gdb.COMMAND_DATA, gdb.COMPLETE_NONE)

    cls = type("Ruby%sCommand" % command.name.capitalize(), (gdb.Command,),
               {"__doc__": command.summary + "\n\nUsage: " + command.usage, "__init__": init, "invoke": invoke})
    cls()


_COMMANDS = _commands.all_commands(_SESSIONS)
RubyPrefix()
for _cmd in _COMMANDS:
    _register(_cmd)
