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

    def threads(self):
        """[{"num": debugger thread number, "tid": kernel TID, "pthread": pthread_t or None}]"""
        raise NotImplementedError

    def selected_thread(self):
        """The selected thread in the same shape as threads(), or None."""
        raise NotImplementedError

    def write(self, text):
        raise NotImplementedError
