"""rbpeek for GDB: `source gdb-plugin/rbpeek.py`, then `help ruby`.

This file only adapts GDB to the shared commands (python/rbpeeklib): it
reads memory and symbols through GDB's inferior, lists GDB's threads, and
turns every error into one line (gdb.GdbError) instead of a traceback. It
holds no knowledge of Ruby's structs.
"""

import os
import re
import signal
import sys

import gdb

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(os.path.expanduser(__file__))))
_PYTHON = os.path.join(_REPO, "python")
if sys.path[:1] != [_PYTHON]:
    sys.path.insert(0, _PYTHON)
# A copy of rbpeeklib loaded from elsewhere (an installed one, which gdb
# auto-loads with a Ruby: docs/install.md) gives way to this file's own, so
# the plugin sourced last is the one in use.
_other = getattr(sys.modules.get("rbpeeklib"), "__file__", None)
if _other and os.path.dirname(os.path.dirname(os.path.abspath(_other))) != os.path.abspath(_PYTHON):
    for _name in [n for n in sys.modules if n == "rbpeeklib" or n.startswith("rbpeeklib.")]:
        del sys.modules[_name]

from rbpeeklib.adapter import DebuggerAdapter, run_each  # noqa: E402
from rbpeeklib.commands import registry  # noqa: E402
from rbpeeklib.commands.sessions import Sessions  # noqa: E402
from rbpeeklib.core import RbpeekError, preload  # noqa: E402


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
        if not self._is_core() and self._process_gone(inf.pid):
            return None  # it exited, though gdb may not have seen that yet
        # A core's path too: `core-file` another core of the same process
        # keeps the inferior, its pid and its program.
        return ("gdb", inf.num, inf.pid, self._is_core(), inf.progspace.filename, self.core_path())

    def core_path(self):
        # gdb 13 has no attribute naming the core: "info target" does.
        if not self._is_core():
            return None
        try:
            text = gdb.execute("info target", to_string=True)
        except gdb.error:
            return None
        m = re.search(r"Local core dump file:\s*`(.+?)', file type", text)
        return m.group(1) if m else None

    def sysroot(self):
        # gdb's own "set sysroot", which it reads the core's shared
        # libraries from: the same files, for what rbpeek reads itself
        try:
            root = gdb.parameter("sysroot")
        except (gdb.error, RuntimeError):
            return None
        return root if root and not root.startswith("target:") and os.path.isdir(root) else None

    def live_pid(self):
        inf = self._inferior()
        if inf.pid and not self._is_core() and os.path.exists("/proc/%d/mem" % inf.pid):
            conn = getattr(inf, "connection", None)
            if conn is None or getattr(conn, "type", "native") == "native":
                return inf.pid
        return None

    def architecture(self):
        try:
            return self._inferior().architecture().name()
        except (gdb.error, RuntimeError, AttributeError):
            pass
        try:   # no frame yet, or a gdb without Inferior.architecture
            return gdb.selected_frame().architecture().name()
        except (gdb.error, RuntimeError, AttributeError):
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

    def evaluate(self, expr):
        # may-call-functions off: an expression that would call a function in
        # the target is refused by gdb instead of run
        try:
            old = gdb.parameter("may-call-functions")
        except (gdb.error, RuntimeError):
            old = None
        try:
            if old is not None:
                gdb.execute("set may-call-functions off", to_string=True)
            value = gdb.parse_and_eval(expr)
            return int(value.cast(gdb.lookup_type("unsigned long"))) & 0xFFFFFFFFFFFFFFFF
        except gdb.error as e:
            raise ValueError("cannot evaluate %r: %s" % (expr, e))
        finally:
            if old is not None:
                gdb.execute("set may-call-functions %s" % ("on" if old else "off"), to_string=True)

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

    def auxv(self):
        # gdb reads it from the target (over a gdb stub: qXfer:auxv:read)
        try:
            text = gdb.execute("info auxv", to_string=True)
        except gdb.error:
            return None
        out = {}
        for line in text.splitlines():
            m = re.match(r"^\s*(\d+)\s+AT_(PHDR|EXECFN|PAGESZ)\s.*?\s(0x[0-9a-fA-F]+|\d+)(\s+\".*)?$", line)
            if m:
                out[m.group(2).lower()] = int(m.group(3), 0)
        return out or None

    def debug_files(self):
        files = []
        for objfile in gdb.objfiles():
            path = objfile.filename or ""
            base = os.path.basename(path)
            if base.startswith("libruby") or base.startswith("ruby"):
                files.append(path)
        return files

    def thread_registers(self, tid, names):
        target = next((t for t in self._inferior().threads() if t.ptid[1] == tid), None)
        if target is None:
            return None
        orig = gdb.selected_thread()
        try:
            frame = gdb.selected_frame()
        except gdb.error:
            frame = None
        out = {}
        try:
            target.switch()
            newest = gdb.newest_frame()
            for spellings in names:
                for name in spellings:
                    try:
                        out[name] = int(newest.read_register(name)) & 0xFFFFFFFFFFFFFFFF
                        break
                    except (gdb.error, ValueError):
                        pass
        except gdb.error:
            return None
        finally:
            if orig is not None and orig.is_valid():
                orig.switch()
            if frame is not None and frame.is_valid():
                frame.select()
        return out

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

    # --- sampling (rbpeeklib/sampling/) ---------------------------------
    # The sampling signal is caught by a silent catchpoint: the stop is not
    # printed (a plain signal stop prints two lines and costs about twice as
    # much), and "handle ... nopass" keeps it from the target. Stop and exit
    # events say why each "continue" returned.

    def is_core(self):
        return self._is_core()

    def is_running(self):
        try:
            return any(t.is_running() for t in self._inferior().threads())
        except gdb.error:
            return False

    def _on_stop(self, event):
        self._sample_stop = event

    def _on_exit(self, event):
        self._sample_exit = event

    def sample_prepare(self, signo):
        name = signal.Signals(signo).name
        token = {"name": name, "handle": None, "catch": None, "pagination": None, "thread": gdb.selected_thread()}
        self._sample_signame = name
        self._sample_stop = self._sample_exit = None
        try:
            for line in gdb.execute("info signals %s" % name, to_string=True).splitlines():
                parts = line.split()
                if len(parts) >= 4 and parts[0] == name:
                    token["handle"] = " ".join(("stop" if parts[1] == "Yes" else "nostop",
                                                "print" if parts[2] == "Yes" else "noprint",
                                                "pass" if parts[3] == "Yes" else "nopass"))
            token["pagination"] = gdb.parameter("pagination")
            gdb.execute("set pagination off", to_string=True)
            gdb.execute("handle %s stop print nopass" % name, to_string=True)
            out = gdb.execute("catch signal %s" % name, to_string=True)
            m = re.search(r"Catchpoint (\d+)", out)
            if not m:
                raise RbpeekError("could not set a catchpoint for %s: %s" % (name, out.strip()))
            token["catch"] = int(m.group(1))
            gdb.execute("commands %d\nsilent\nend" % token["catch"], to_string=True)
            gdb.events.stop.connect(self._on_stop)
            gdb.events.exited.connect(self._on_exit)
            token["events"] = True
        except BaseException:
            self.sample_restore(token)
            raise
        return token

    @staticmethod
    def _process_gone(pid):
        """True once pid has exited (no /proc entry, or a zombie)."""
        try:
            with open("/proc/%d/stat" % pid) as f:
                return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
        except (OSError, IndexError):
            return True

    def sample_resume(self):
        self._sample_stop = self._sample_exit = None
        pid = self._inferior().pid
        try:
            gdb.execute("continue", to_string=True)
        except gdb.error as e:
            if self._sample_exit is None and self._inferior().pid:
                if not (pid and self._process_gone(pid)):
                    raise RbpeekError("cannot resume the target: %s" % e)
                # It exited while gdb resumed it ("Couldn't get registers: No
                # such process"); let gdb reap it so it sees the exit too.
                try:
                    gdb.execute("continue", to_string=True)
                except gdb.error:
                    pass
        if self._sample_exit is not None or not self._inferior().pid or (pid and self._process_gone(pid)):
            code = getattr(self._sample_exit, "exit_code", None)
            return "exited", ("exit status %d" % code) if code is not None else "it is gone"
        ev = self._sample_stop
        if isinstance(ev, gdb.SignalEvent):
            if ev.stop_signal == self._sample_signame:
                return "sample", None
            return "stopped", "signal %s" % ev.stop_signal
        if isinstance(ev, gdb.BreakpointEvent):
            return "stopped", "breakpoint %s" % ", ".join(str(b.number) for b in ev.breakpoints)
        return "stopped", "it stopped (%s)" % (type(ev).__name__ if ev is not None else "no stop event")

    def sample_restore(self, token):
        steps = []
        if token.get("events"):
            steps += [lambda: gdb.events.stop.disconnect(self._on_stop),
                      lambda: gdb.events.exited.disconnect(self._on_exit)]
        if token.get("catch") is not None:
            steps.append(lambda: gdb.execute("delete %d" % token["catch"], to_string=True))
        if token.get("handle"):
            steps.append(lambda: gdb.execute("handle %s %s" % (token["name"], token["handle"]), to_string=True))
        if token.get("pagination") is not None:
            steps.append(lambda: gdb.execute("set pagination %s" % ("on" if token["pagination"] else "off"),
                                             to_string=True))
        thread = token.get("thread")
        if thread is not None:
            steps.append(lambda: thread.is_valid() and thread.switch())
        run_each(steps)

    # --- hand-over (the traced fast path of ruby sample) ----------------

    def can_hand_over(self):
        inf = self._inferior()
        if not getattr(inf, "was_attached", True):
            # Detaching and attaching again would turn a process gdb started
            # (killed on quit, owning the terminal) into an attached one.
            return "gdb started this process (run): it stays under gdb"
        try:
            # A signal the stop is holding would be delivered by the detach,
            # with no debugger to see it; a continue delivers it under gdb.
            signo = int(gdb.parse_and_eval("$_siginfo.si_signo"))
        except (gdb.error, RuntimeError):
            signo = 0
        if signo and signo not in (signal.SIGSTOP, signal.SIGINT, signal.SIGTRAP):
            pol = self.signal_policy().get(signo)
            if pol is None or pol[1]:
                return "the target is stopped with %s pending, which gdb delivers" % signal.Signals(signo).name
        return None

    def signal_policy(self):
        out = {}
        try:
            text = gdb.execute("info signals", to_string=True)
        except gdb.error:
            return out
        for line in text.splitlines():
            parts = line.split()
            if len(parts) < 4 or not parts[0].startswith("SIG") or parts[1] not in ("Yes", "No"):
                continue
            num = None
            try:
                num = int(signal.Signals[parts[0]])
            except KeyError:
                m = re.match(r"SIG(\d+)$", parts[0])
                if m:
                    num = int(m.group(1))
            if num is not None and 0 < num < 65:
                out[num] = (parts[1] == "Yes", parts[3] == "Yes")
        return out

    def hand_over(self):
        t = gdb.selected_thread()
        token = {"tid": t.ptid[1] if t is not None else None}
        gdb.execute("detach", to_string=True)
        return token

    def take_back(self, token, pid):
        try:
            gdb.execute("attach %d" % pid, to_string=True)
        except gdb.error as e:
            raise RbpeekError("could not attach to process %d again: %s; attach with 'attach %d'" % (pid, e, pid))
        for t in self._inferior().threads():
            if token.get("tid") and t.ptid[1] == token["tid"]:
                t.switch()
                break

    def progress(self, text):
        gdb.write(text)
        gdb.flush()


_ADAPTER = GdbAdapter()
_SESSIONS = Sessions()


def _invoke(command, argv):
    try:
        command.invoke(_ADAPTER, argv)
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
        gdb.write(registry.prefix_help(_COMMANDS) + "\n")


RubyPrefix.__doc__ = registry.PREFIX_HELP


def _register(command):
    def invoke(self, arg, from_tty):
        self.dont_repeat()
        _invoke(command, arg)

    def init(self):
        gdb.Command.__init__(self, "ruby " + command.name, gdb.COMMAND_DATA, gdb.COMPLETE_NONE)

    cls = type("Ruby%sCommand" % command.name.capitalize(), (gdb.Command,),
               {"__doc__": command.help_text().rstrip("\n"), "__init__": init, "invoke": invoke})
    cls()


_COMMANDS = registry.all_commands(_SESSIONS)
RubyPrefix()
for _cmd in _COMMANDS:
    _register(_cmd)
preload()
