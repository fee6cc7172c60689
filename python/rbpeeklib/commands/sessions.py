"""The session cache: one attached rbpeek session per target, shared by
every command, and made from the target options (--vm, --layout,
--ruby-version) of the command that asks for it."""

import os
import time

from ..core import RbpeekError, Session


class Sessions:
    """Keeps one attached session per target, re-validated on every command.

    Attaching parses DWARF and finds the VM, which need not be redone while
    the same process (or core) is being debugged with the same options; the
    memory cache is dropped on every command since the target may have run.
    """

    def __init__(self):
        self._key = None
        self._session = None
        self._reads_pid = False
        # Seconds the last get() took to open a new session (None: it reused
        # one), for `ruby bt --stats`: the first command's share of attaching.
        self.opened_in = None

    def get(self, dbg, args):
        self.opened_in = None
        sysroot = dbg.sysroot()
        key = (dbg.target_key(), args.vm, args.layout, args.ruby_version, sysroot)
        if key[0] is None:
            raise RbpeekError("no process or core file to inspect: attach to a Ruby process or load a core first")
        if self._session is not None and key == self._key:
            self._session.invalidate()
            if not self._reads_pid:
                self._session.set_kernel_tids(_kernel_tids(dbg))
            return self._session
        self._session = None
        started = time.perf_counter()
        s = Session()
        if sysroot:
            s.set_sysroot(sysroot)   # a core's files, when they live elsewhere here (another machine's)
        own = dbg.own_source()
        pid = dbg.live_pid()
        used_pid = False
        if own and own[0] == "core":
            s.use_core(own[1])   # the core library reads the core and its mapped files
        elif pid:
            try:
                s.use_pid(pid)  # direct /proc/PID/mem: far faster than the debugger's reads
                used_pid = True
            except RbpeekError:
                used_pid = False
        if own and not used_pid and own[0] == "pid":
            raise RbpeekError("cannot read the memory of process %d: %s" % (pid, s.error()))
        if not used_pid and not own:
            s.use_reader(dbg.read_memory)
        arch = dbg.architecture()
        if arch:
            s.set_arch(arch)   # an architecture rbpeek does not read is refused here, in one line
        if not used_pid and not own:
            regions = dbg.regions()
            for start, end, offset, path in regions:
                s.add_region(start, end, offset, path)
            auxv = None if any(r[3] for r in regions) or dbg.is_core() else dbg.auxv()
            if auxv and auxv.get("phdr") and auxv.get("execfn"):
                # a debugger that lists no files (gdb on qemu's gdb stub):
                # the dynamic linker's list names them
                s.add_linkmap_regions(auxv["phdr"], auxv["execfn"], auxv.get("pagesz", 0))
            core = dbg.core_file()
            if core:
                s.add_core_regions(core)
            path = dbg.core_path() if dbg.is_core() else None
            if path:
                try:
                    s.set_core_file(path)   # a truncated core says so
                except RbpeekError:
                    pass
        if not own:   # without a debugger, symbols come from the ELF images themselves
            s.use_lookup(dbg.lookup_symbol)
            # and registers (native stacks) from the core's notes or ptrace;
            # with one, from the debugger, which has the threads stopped
            s.use_registers(dbg.thread_registers)
        if not used_pid:
            # Which TIDs the target has, as its debugger or core says; a
            # live pid read directly is asked itself (/proc/PID/task).
            s.set_kernel_tids(_kernel_tids(dbg))
        for path in dbg.debug_files():
            s.add_debug_file(path)
        if args.vm:
            s.set_vm(args.vm)
        if args.layout == "dwarf":
            s.set_layout_dwarf(True)
        elif args.layout:
            if not os.path.exists(args.layout):
                raise RbpeekError("--layout: no such file: %s" % args.layout)
            s.set_layout_file(args.layout)
        if args.ruby_version:
            s.set_ruby_version(args.ruby_version)
        s.attach()
        warning = s.info()["warning"]
        if warning:
            dbg.warn("rbpeek: warning: %s\n" % warning)
        self._session, self._key, self._reads_pid = s, key, used_pid
        self.opened_in = time.perf_counter() - started
        return s

    def drop(self):
        self._session = None
        self._key = None


def _kernel_tids(dbg):
    """The TIDs of the target's threads as its debugger (or a core's
    NT_PRSTATUS notes, without one) lists them."""
    try:
        return [t["tid"] for t in dbg.threads() if t.get("tid")]
    except Exception:  # noqa: BLE001 - no list: the core then asks nobody
        return []
