"""rbpeek for LLDB: `command script import lldb-plugin/rbpeek.py`, then `help ruby`.

This file only adapts LLDB (SB API) to the shared commands
(python/rbpeeklib): memory and symbols through the selected process and
target, threads with their thread pointer read from the fs_base register,
and every error reported as one line in the command's result. It holds no
knowledge of Ruby's structs.
"""

import os
import re
import signal
import sys

import lldb

_REPO = os.path.dirname(os.path.dirname(os.path.abspath(os.path.expanduser(__file__))))
if os.path.join(_REPO, "python") not in sys.path:
    sys.path.insert(0, os.path.join(_REPO, "python"))

from rbpeeklib.adapter import DebuggerAdapter, run_each  # noqa: E402
from rbpeeklib.commands import registry  # noqa: E402
from rbpeeklib.commands.sessions import Sessions  # noqa: E402
from rbpeeklib.core import RbpeekError, preload  # noqa: E402
from rbpeeklib.elfcore import core_pid as _core_pid  # noqa: E402


class LldbAdapter(DebuggerAdapter):
    name = "lldb"

    def __init__(self, debugger, result):
        self.debugger = debugger
        self.result = result
        self.target = debugger.GetSelectedTarget()
        self.process = self.target.GetProcess() if self.target.IsValid() else lldb.SBProcess()

    def _is_core(self):
        return self.process.IsValid() and "core" in (self.process.GetPluginName() or "")

    def target_key(self):
        if not self.process.IsValid() or self.process.GetState() in (lldb.eStateInvalid, lldb.eStateUnloaded,
                                                                      lldb.eStateDetached, lldb.eStateExited):
            return None
        exe = self.target.GetExecutable()
        return ("lldb", self.process.GetUniqueID(), self.process.GetProcessID(), self._is_core(),
                exe.fullpath if exe.IsValid() else None)

    def live_pid(self):
        if self.process.IsValid() and not self._is_core():
            pid = self.process.GetProcessID()
            if pid and os.path.exists("/proc/%d/mem" % pid):
                return pid
        return None

    def architecture(self):
        triple = self.target.GetTriple() if self.target.IsValid() else None
        return triple or None

    def read_memory(self, addr, size):
        err = lldb.SBError()
        data = self.process.ReadMemory(addr, size, err)
        if err.Success() and data:
            return data
        # A core lacks read-only file-backed pages (text, rodata); the
        # target reads those from the loaded module's sections instead.
        sbaddr = self.target.ResolveLoadAddress(addr)
        if sbaddr.IsValid() and sbaddr.GetSection().IsValid():
            err = lldb.SBError()
            data = self.target.ReadMemory(sbaddr, size, err)
            if err.Success() and data:
                return data
        raise RbpeekError("unreadable memory at 0x%x" % addr)

    def lookup_symbol(self, name):
        for ctx in self.target.FindSymbols(name):
            sym = ctx.GetSymbol()
            if not sym.IsValid():
                continue
            addr = sym.GetStartAddress().GetLoadAddress(self.target)
            if addr not in (lldb.LLDB_INVALID_ADDRESS, 0):
                return addr
        return None

    def regions(self):
        out = []
        for module in self.target.module_iter():
            path = module.GetFileSpec().fullpath
            header = module.GetObjectFileHeaderAddress().GetLoadAddress(self.target)
            if path and header not in (lldb.LLDB_INVALID_ADDRESS, 0):
                # The image base (ELF header at file offset 0) finds the Ruby...
                out.append((header, header + 4096, 0, path))
                # ... and its loaded segments tell where its code lies
                # (native stacks: a pc's module), as /proc/PID/maps would.
                for section in module.section_iter():
                    if not (section.GetName() or "").startswith("PT_LOAD"):
                        continue
                    start = section.GetLoadAddress(self.target)
                    size = section.GetByteSize()
                    if start not in (lldb.LLDB_INVALID_ADDRESS, 0) and size:
                        out.append((start, start + size, section.GetFileOffset(), path))
        return out

    def sysroot(self):
        # the platform's ("platform select remote-linux --sysroot DIR"),
        # which lldb 16 tells only in "platform status"
        ret = lldb.SBCommandReturnObject()
        self.debugger.GetCommandInterpreter().HandleCommand("platform status", ret)
        m = re.search(r"^\s*Sysroot:\s*(\S.*?)\s*$", ret.GetOutput() or "", re.M)
        return m.group(1) if m and os.path.isdir(m.group(1)) else None

    def core_file(self):
        # For a core whose binaries are missing lldb lists no modules at
        # all: the core library then reads the mapped files' list itself.
        if not self._is_core() or any(True for _ in self.target.module_iter()):
            return None
        return self.core_path()

    def core_path(self):
        # lldb 16 has no call that names a core's file (SBProcess.GetCoreFile
        # came in lldb 19). It does keep the core mapped: the mapped ELF core
        # whose NT_PRSTATUS names this pid. It keeps a core it has let go of
        # mapped too, so with two cores of the same process (two gcores of a
        # hang, copies) which one is this target's cannot be told: None
        # (what the path serves, a truncated core's note, is then not given).
        if not self._is_core():
            return None
        pid = self.process.GetProcessID()
        try:
            with open("/proc/self/maps") as f:
                paths = {line.split(None, 5)[5].strip() for line in f if len(line.split(None, 5)) == 6}
        except OSError:
            return None
        found = [path for path in sorted(p for p in paths if p.startswith("/")) if _core_pid(path) == pid]
        return found[0] if len(found) == 1 else None

    def debug_files(self):
        files = []
        for module in self.target.module_iter():
            path = module.GetFileSpec().fullpath or ""
            base = os.path.basename(path)
            if base.startswith("libruby") or base.startswith("ruby"):
                files.append(path)
        return files

    @staticmethod
    def _describe(thread):
        pthread = None
        frame = thread.GetFrameAtIndex(0)
        if frame.IsValid():
            reg = frame.FindRegister("fs_base")
            if reg.IsValid():
                pthread = reg.GetValueAsUnsigned(0) or None
        return {"num": thread.GetIndexID(), "tid": thread.GetThreadID() or None, "pthread": pthread}

    def threads(self):
        return [self._describe(t) for t in self.process]

    def thread_registers(self, tid, names):
        thread = self.process.GetThreadByID(tid)
        frame = thread.GetFrameAtIndex(0) if thread.IsValid() else None
        if frame is None or not frame.IsValid():
            return None
        out = {}
        for spellings in names:
            for name in spellings:
                reg = frame.FindRegister(name)
                if reg.IsValid():
                    err = lldb.SBError()
                    v = reg.GetValueAsUnsigned(err, 0)
                    if err.Success():
                        out[name] = v
                        break
        return out

    def evaluate(self, expr):
        # No EvaluateExpression: it may compile and run code in the target.
        # An integer, a register ($rdi) or a variable path (a local, a.b[2],
        # a global) is read without running anything.
        try:
            return int(expr, 0) & 0xFFFFFFFFFFFFFFFF
        except ValueError:
            pass
        frame = self.process.GetSelectedThread().GetSelectedFrame() if self.process.IsValid() else None
        value = None
        if frame is not None and frame.IsValid():
            value = frame.FindRegister(expr[1:]) if expr.startswith("$") else frame.GetValueForVariablePath(expr)
        if (value is None or not value.IsValid()) and not expr.startswith("$"):
            value = self.target.FindFirstGlobalVariable(expr)
        if value is None or not value.IsValid():
            raise ValueError("cannot evaluate %r: lldb knows no register or variable by that name (give the "
                             "VALUE as 0x..., a $register or a variable)" % expr)
        err = lldb.SBError()
        n = value.GetValueAsUnsigned(err, 0)
        if not err.Success():
            raise ValueError("cannot evaluate %r: %s" % (expr, err.GetCString()))
        return n & 0xFFFFFFFFFFFFFFFF

    def selected_thread(self):
        t = self.process.GetSelectedThread()
        return self._describe(t) if t.IsValid() else None

    def write(self, text):
        self.result.AppendMessage(text.rstrip("\n"))

    def write_result(self, text, interrupted=False):
        # lldb drops the result of a command Ctrl-C ended: print that one now.
        if interrupted:
            self.progress(text)
        else:
            self.write(text)

    # --- sampling (rbpeeklib/sampling/) ---------------------------------
    # The process runs in synchronous mode (Continue() returns once it has
    # stopped again); the sampling signal is set to stop, not notify and be
    # suppressed (never delivered), and the stop reason of the stopped
    # threads says why each Continue() returned. (An async Stop() was
    # measured at about ten times the cost of the signal: docs/sampling-cost.md.)

    def is_core(self):
        return self._is_core()

    def is_running(self):
        return self.process.IsValid() and self.process.GetState() in (lldb.eStateRunning, lldb.eStateStepping)

    def sample_prepare(self, signo):
        sigs = self.process.GetUnixSignals()
        self._sample_signo = signo
        token = {"signo": signo, "async": self.debugger.GetAsync(), "signals": None,
                 "thread": self.process.GetSelectedThread().GetThreadID()}
        try:
            token["signals"] = (sigs.GetShouldStop(signo), sigs.GetShouldSuppress(signo), sigs.GetShouldNotify(signo))
            self.debugger.SetAsync(False)
            if not (sigs.SetShouldStop(signo, True) and sigs.SetShouldSuppress(signo, True)
                    and sigs.SetShouldNotify(signo, False)):
                raise RbpeekError("lldb would not let rbpeek handle signal %d" % signo)
        except BaseException:
            self.sample_restore(token)
            raise
        return token

    def _why_stopped(self, signo):
        threads = [self.process.GetSelectedThread()] + list(self.process)
        other = None
        for t in threads:
            if not t.IsValid():
                continue
            reason = t.GetStopReason()
            if reason == lldb.eStopReasonSignal:
                num = t.GetStopReasonDataAtIndex(0)
                if num == signo:
                    return "sample", None
                other = other or "signal %s" % (self.process.GetUnixSignals().GetSignalAsCString(num) or num)
            elif reason == lldb.eStopReasonBreakpoint:
                other = other or "breakpoint %d" % t.GetStopReasonDataAtIndex(0)
            elif reason not in (lldb.eStopReasonNone, lldb.eStopReasonInvalid):
                other = other or (t.GetStopDescription(200) or "stop reason %d" % reason)
        return "stopped", other or "it stopped"

    def sample_resume(self):
        err = self.process.Continue()
        state = self.process.GetState()
        if state == lldb.eStateExited:
            return "exited", "exit status %d" % self.process.GetExitStatus()
        if state in (lldb.eStateDetached, lldb.eStateInvalid, lldb.eStateUnloaded):
            return "exited", "it is gone"
        if state != lldb.eStateStopped:
            if err.Fail():
                raise RbpeekError("cannot resume the target: %s" % err.GetCString())
            return "stopped", "it is %s" % lldb.SBDebugger.StateAsCString(state)
        return self._why_stopped(self._sample_signo)

    def sample_restore(self, token):
        signo = token["signo"]
        sigs = self.process.GetUnixSignals()
        steps = []
        if token.get("signals"):
            stop, suppress, notify = token["signals"]
            steps += [lambda: sigs.SetShouldStop(signo, stop), lambda: sigs.SetShouldSuppress(signo, suppress),
                      lambda: sigs.SetShouldNotify(signo, notify)]
        steps.append(lambda: self.debugger.SetAsync(token["async"]))
        steps.append(lambda: self.is_running() and self.process.Stop())
        if token.get("thread"):
            steps.append(lambda: self.process.SetSelectedThreadByID(token["thread"]))
        run_each(steps)

    # --- hand-over (the traced fast path of ruby sample) ----------------

    def can_hand_over(self):
        # A signal the stop is holding must reach the target under lldb.
        for t in self.process:
            if t.GetStopReason() == lldb.eStopReasonSignal:
                signo = t.GetStopReasonDataAtIndex(0)
                if signo not in (signal.SIGSTOP, signal.SIGINT, signal.SIGTRAP) and \
                        not self.process.GetUnixSignals().GetShouldSuppress(signo):
                    return "the target is stopped with %s pending, which lldb delivers" % (
                        self.process.GetUnixSignals().GetSignalAsCString(signo) or signo)
        return None

    def signal_policy(self):
        sigs = self.process.GetUnixSignals()
        out = {}
        for i in range(sigs.GetNumSignals()):
            num = sigs.GetSignalAtIndex(i)
            if 0 < num < 65:
                out[num] = (sigs.GetShouldStop(num), not sigs.GetShouldSuppress(num))
        return out

    def hand_over(self):
        token = {"tid": self.process.GetSelectedThread().GetThreadID() or None, "async": self.debugger.GetAsync()}
        self.debugger.SetAsync(False)
        err = self.process.Detach()
        if err.Fail():
            self.debugger.SetAsync(token["async"])
            raise RbpeekError("lldb could not detach from the target: %s" % err.GetCString())
        return token

    def take_back(self, token, pid):
        err = lldb.SBError()
        try:
            process = self.target.AttachToProcessWithID(self.debugger.GetListener(), pid, err)
            if err.Fail() or not process.IsValid():
                raise RbpeekError("could not attach to process %d again: %s; attach with 'process attach -p %d'"
                                  % (pid, err.GetCString() or "unknown error", pid))
            self.process = process
            if token.get("tid"):
                process.SetSelectedThreadByID(token["tid"])
        finally:
            self.debugger.SetAsync(token["async"])

    def interrupted(self):
        try:
            return self.debugger.GetCommandInterpreter().WasInterrupted()
        except Exception:
            return False

    def progress(self, text):
        # Straight to the debugger's output (an SBFile: GetOutputFileHandle's
        # Python file is opened for reading in lldb 16).
        try:
            out = self.debugger.GetOutputFile()
            out.Write(text.encode("utf-8", "replace"))
            out.Flush()
        except Exception:
            pass


_SESSIONS = Sessions()


class _RubyCommand:
    """Base for the `ruby <name>` commands; subclasses are made below."""
    command = None

    def __init__(self, debugger, internal_dict):
        pass

    def get_short_help(self):
        return self.command.summary

    def get_long_help(self):
        return self.command.help_text()

    def __call__(self, debugger, args, exe_ctx, result):
        try:
            self.command.invoke(LldbAdapter(debugger, result), args)
            result.SetStatus(lldb.eReturnStatusSuccessFinishResult)
        except RbpeekError as e:
            result.SetError("rbpeek: %s" % e)
        except KeyboardInterrupt:
            result.SetError("rbpeek: interrupted")
        except Exception as e:  # never a traceback in the user's debugger
            result.SetError("rbpeek: internal error: %s: %s (please report it)" % (type(e).__name__, e))


def __lldb_init_module(debugger, internal_dict):
    module = __name__
    # lldb's default loads every module's symbol table and indexes the
    # DWARF of each that has some (libc with libc6-dbg) as it attaches,
    # before anything needs them: 0.2-0.3 CPU s of a puma worker's attach,
    # several wall seconds under load (docs/performance.md). Loaded lazily,
    # only what a command asks for is read; rbpeek asks for nothing (it reads
    # the ELF images itself), and lldb's own commands get the same answers.
    # Applies to the attaches after this import (from ~/.lldbinit, or -O);
    # `settings set target.preload-symbols true` after it restores lldb's.
    debugger.HandleCommand("settings set target.preload-symbols false")
    debugger.HandleCommand('command container add -h "%s" ruby'
                           % "Inspect a CRuby process or core file without running code in it.")
    for cmd in registry.all_commands(_SESSIONS):
        cls_name = "Ruby%sCommand" % cmd.name.capitalize()
        globals()[cls_name] = type(cls_name, (_RubyCommand,), {"command": cmd})
        debugger.HandleCommand("command script add -o -c %s.%s ruby %s" % (module, cls_name, cmd.name))
    preload()
