"""The interface each debugger plugin implements for the shared commands.

It is deliberately small and knows nothing of Ruby: memory, symbols,
threads, output. Anything Ruby-specific belongs in the C core.
"""


class DebuggerAdapter:
    name = "debugger"

    def target_key(self):
        """A hashable identity of the current target (process or core), or
        None when there is nothing to inspect. A new key means a new session."""
        raise NotImplementedError

    def live_pid(self):
        """The pid when the target is a live local process, else None."""
        raise NotImplementedError

    def own_source(self):
        """("pid", PID) or ("core", PATH) when there is no debugger and rbpeek
        reads the target by itself (the rbpeek command line, cli.py): the
        session then uses the core library's own readers and ELF symbols.
        None under a debugger."""
        return None

    def architecture(self):
        """The target's architecture as the debugger names it (gdb's
        "i386:x86-64", "aarch64"; lldb's triple), or None. The core judges
        it: this adapter knows no list of architectures."""
        return None

    def read_memory(self, addr, size):
        """bytes of target memory; raises on unreadable memory."""
        raise NotImplementedError

    def lookup_symbol(self, name):
        """Load address of a global symbol, or None."""
        raise NotImplementedError

    def regions(self):
        """[(start, end, file_offset, path)] of mapped memory, for ELF/DWARF
        discovery when memory is read through the debugger."""
        return []

    def debug_files(self):
        """Paths of loaded libruby/ruby images (they may carry DWARF)."""
        return []

    def auxv(self):
        """The target's auxiliary vector as {"phdr", "execfn", "pagesz"}
        (AT_PHDR, AT_EXECFN, AT_PAGESZ), or None: what finds its files
        when regions() names none."""
        return None

    def core_file(self):
        """The core file's path when the target is a core whose mapped files
        the debugger cannot list (its binaries are not on this machine), so
        the core library reads the list from the core itself; else None."""
        return None

    def core_path(self):
        """The path of the core file the debugger has open, or None (a live
        target, or a debugger that cannot tell)."""
        return None

    def sysroot(self):
        """Where the target's files are on this machine when they are not
        where the target names them (gdb's "set sysroot", the command
        line's --sysroot: a core of another machine), or None."""
        return None

    def evaluate(self, expr):
        """The integer value of a debugger expression (an address, a
        register, a C variable) as a 64-bit VALUE, evaluated without calling
        any function in the target; raises ValueError with the reason.
        Without a debugger, only integer literals are understood."""
        try:
            return int(expr, 0) & 0xFFFFFFFFFFFFFFFF
        except ValueError:
            raise ValueError("not a number: %r (without a debugger, give the VALUE as 0x...)" % expr)

    def threads(self):
        """[{"num": debugger thread number, "tid": kernel TID, "pthread": pthread_t or None}]"""
        raise NotImplementedError

    def selected_thread(self):
        """The selected thread in the same shape as threads(), or None."""
        raise NotImplementedError

    def thread_registers(self, tid, names):
        """The registers of the stopped thread with kernel TID tid, for
        native stacks: {"rax": int, ..., "rsp": int, "rip": int}, as many
        as the debugger knows of names (the target machine's registers as
        the core lists them, each a tuple of spellings: ("x29", "fp")), each
        under the spelling the debugger knew, or None when it has no such
        thread. Must leave the debugger's selection as it was."""
        return None

    def write(self, text):
        raise NotImplementedError

    def write_result(self, text, interrupted=False):
        """A long command's result (sample, allocs), interrupted when Ctrl-C
        ended it: the command's output, like write. lldb overrides it."""
        self.write(text)

    def warn(self, text):
        """A warning about the target (a truncated core), apart from the
        command's output: the debugger's output, standard error without one."""
        self.write(text)

    # --- sampling (rbpeeklib/sampling/) ---------------------------------
    # `ruby sample` stops and resumes the target many times a second. The
    # stop comes from a signal the command sends itself (see
    # sampling/via_debugger.py);
    # the debugger's job is to catch that signal silently, never pass it on,
    # and report why each resume ended.

    def is_core(self):
        """True when the target is a core file."""
        return False

    def is_running(self):
        """True when the target is running (not stopped under the debugger)."""
        return False

    def sample_prepare(self, signo):
        """Makes signal signo stop the target without printing anything and
        without ever being delivered to it. Returns a token for sample_restore."""
        raise NotImplementedError

    def sample_resume(self):
        """Resumes the target and returns once it has stopped again:
        ("sample", None) when it stopped for the signal of sample_prepare,
        ("exited", description) when it exited, ("stopped", description) for
        any other stop (a breakpoint, a signal, the user's interrupt)."""
        raise NotImplementedError

    def sample_restore(self, token):
        """Undoes sample_prepare (signal handling, selected thread) and makes
        sure the target is stopped, as it was before. Must not raise."""
        raise NotImplementedError

    # The fast path: the debugger lets go of the target while rbpeek traces
    # it itself (core/src/profile/tracer.c), and attaches again afterwards.

    def can_hand_over(self):
        """None when hand_over may be used, else why not (one line)."""
        return "this debugger cannot let go of the target"

    def signal_policy(self):
        """{signo: (stop, pass)} as the debugger handles the target's signals."""
        return {}

    def hand_over(self):
        """Detaches from the live target, leaving it to rbpeek; returns a
        token for take_back (the selected thread...)."""
        raise NotImplementedError

    def take_back(self, token, pid):
        """Attaches to pid again and restores what hand_over noted; raises
        RbpeekError when it cannot."""
        raise NotImplementedError

    def interrupted(self):
        """True when the user asked the running command to stop (Ctrl-C),
        for debuggers that report it by polling rather than by exception."""
        return False

    def progress(self, text):
        """Shows a transient status line while a long command runs ("" ends it)."""


def run_each(steps):
    """Runs every step of an undo (sample_restore), each on its own: one
    failing must not skip the others, and none may raise into the debugger."""
    for step in steps:
        try:
            step()
        except Exception:  # noqa: BLE001 - an undo step must never escape
            pass
