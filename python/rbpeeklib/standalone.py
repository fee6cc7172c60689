"""The adapter of the `rbpeek` command line (cli.py): the shared commands
with no debugger at all.

rbpeek reads the target by itself: a live process through /proc/PID/mem, a
core file (and the files it mapped) through the core library's own reader,
symbols from the mapped ELF images (Sessions.get, see own_source). Threads
are those the kernel lists (/proc/PID/task) or the core records
(NT_PRSTATUS), numbered from 1 in that order as a debugger numbers them;
the "selected" thread is the main thread of a live process and, in a core,
the thread that was current when it was made, as gdb and lldb select them.

A live process is not stopped: bt, threads, locks and heap read it while it
runs, so a busy process may show a stack torn mid-call (the walk then says
so). `sample` stops it for each sample: rbpeek traces it itself (the traced
loop of sampling/traced.py, which under a debugger follows a detach), with
every signal the target receives delivered to it as usual.
"""

import os
import sys

from .adapter import DebuggerAdapter
from .core import RbpeekError
from .elfcore import core_thread_ids


class StandaloneAdapter(DebuggerAdapter):
    name = "rbpeek"

    def __init__(self, pid=None, core=None, exe=None, out=None, err=None, sysroot=None):
        self.pid, self.core, self.exe, self._sysroot = pid, core, exe, sysroot
        self.out = out or sys.stdout
        self.err = err or sys.stderr

    def target_key(self):
        return ("pid", self.pid) if self.pid else ("core", self.core)

    def own_source(self):
        return ("pid", self.pid) if self.pid else ("core", self.core)

    def live_pid(self):
        return self.pid

    def read_memory(self, addr, size):
        raise RbpeekError("no debugger: the core library reads the target itself")

    def lookup_symbol(self, name):
        return None

    def sysroot(self):
        return self._sysroot

    def debug_files(self):
        # As `gdb EXE CORE`: the executable may carry DWARF (a static Ruby).
        return [self.exe] if self.exe else []

    def _tids(self):
        if self.core:
            return core_thread_ids(self.core)
        try:
            return sorted(int(t) for t in os.listdir("/proc/%d/task" % self.pid) if t.isdigit())
        except OSError:
            raise RbpeekError("process %d is gone" % self.pid)

    def threads(self):
        return [{"num": i + 1, "tid": tid, "pthread": None} for i, tid in enumerate(self._tids())]

    def selected_thread(self):
        threads = self.threads()
        if self.pid:
            threads = [t for t in threads if t["tid"] == self.pid] or threads
        return threads[0] if threads else None

    def write(self, text):
        self.out.write(text)
        self.out.flush()

    def warn(self, text):
        # Not into the command's output: `bt --json` must stay JSON.
        self.err.write(text)
        self.err.flush()

    def progress(self, text):
        self.err.write(text)
        self.err.flush()

    # --- sampling: no debugger to let go of the target, so rbpeek traces it
    # from the start (sampling/traced.py), passing every signal on and
    # stopping for none, as the target would run untraced.

    def is_core(self):
        return self.core is not None

    def is_running(self):
        return False   # running is how the traced loop expects to find it

    def can_hand_over(self):
        return None

    def signal_policy(self):
        return {num: (False, True) for num in range(1, 65)}

    def hand_over(self):
        return None

    def take_back(self, token, pid):
        pass
