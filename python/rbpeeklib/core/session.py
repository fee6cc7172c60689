"""Session and Snapshot: one target (a pid, or the debugger's reader and
symbol lookup), and every Ruby thread with its frames at one moment.

Python callbacks handed to the C session are kept alive for as long as
the session that uses them.
"""

import ctypes

from .cstructs import (FRAME_KINDS, LOOKUP_FN, NATIVE_LINES, READ_FN, REGS_FN, AllocCounts, BtOptions,
                       HeapDumpStats, InspectOptions, ReadStats)
from .heap import Census
from .lib import Owned, RbpeekError, decode, lib, take_json, take_text


class Snapshot(Owned):
    """Every Ruby thread and its frames at one moment (owns the C snapshot)."""

    _free_fn = "rbpeek_snapshot_free"

    def __init__(self, session, handle):
        self._session = session
        self._h = handle

    def threads(self, frames=True):
        """A list of plain dicts, one per thread (the JSON schema's shape),
        each with its number of frames ("nframes") and, unless frames is
        False, the frames themselves."""
        L = lib()
        out = []
        for i in range(L.rbpeek_snapshot_thread_count(self._h)):
            t = L.rbpeek_snapshot_thread(self._h, i).contents
            d = {"index": i, "name": decode(t.name), "main": bool(t.is_main),
                 "native_tid": t.native_tid if t.native_tid > 0 else None,
                 "ruby_tid": t.ruby_tid if t.ruby_tid > 0 else None,
                 "pthread_id": t.pthread_id, "status": decode(L.rbpeek_thread_status_name(t.status)),
                 "ractor": t.ractor_index, "truncated": bool(t.truncated), "error": decode(t.error),
                 "nframes": t.nframes}
            if frames:
                d["frames"] = [{"label": decode(f.label), "path": decode(f.path),
                                "absolute_path": decode(f.absolute_path),
                                "lineno": None if f.lineno_unknown else f.lineno,
                                "kind": "cfunc" if f.kind == 1 else "ruby"}
                               for f in (t.frames[j] for j in range(t.nframes))]
            out.append(d)
        return out

    def frame_line(self, thread_index, frame_index):
        """One frame as the target Ruby prints it in a backtrace (rbpeek_frame_render)."""
        L = lib()
        t = L.rbpeek_snapshot_thread(self._h, thread_index).contents
        if not 0 <= frame_index < t.nframes:
            raise RbpeekError("no frame %d in thread %d" % (frame_index, thread_index))
        out = ctypes.c_void_p()
        self._session._check(L.rbpeek_frame_render(self._session._h, ctypes.byref(t.frames[frame_index]),
                                                   ctypes.byref(out)))
        return take_text(out)

    def render_bt(self, fmt, threads, locals_limits=None, show=0):
        """`ruby bt`'s text or JSON, printed by the core (rbpeek_snapshot_render_bt):
        threads, dicts of threads() in the order to print, numbered by their
        "dbg_num" and with their "native_tid" (map_threads fills both in);
        locals_limits (depth, max_length): each Ruby frame's locals too;
        show: BT_NATIVE / BT_NATIVE_ALL (a snapshot_native's native stacks)."""
        L = lib()
        n = L.rbpeek_snapshot_thread_count(self._h)
        numbers = (ctypes.c_int64 * max(1, n))(*([-1] * n))
        tids = (ctypes.c_int64 * max(1, n))()
        for t in threads:
            if t.get("dbg_num") is not None:
                numbers[t["index"]] = t["dbg_num"]
            tids[t["index"]] = t["native_tid"] or 0
        which = (ctypes.c_size_t * max(1, len(threads)))(*(t["index"] for t in threads))
        opt = BtOptions(which, len(threads), numbers, tids)
        if locals_limits:
            opt.locals, opt.locals_depth, opt.locals_max_length = 1, locals_limits[0], locals_limits[1]
        opt.show = show
        out = ctypes.c_void_p()
        self._session._check(L.rbpeek_snapshot_render_bt(self._session._h, self._h, fmt, ctypes.byref(opt),
                                                         ctypes.byref(out)))
        return take_text(out)

    def thread_locals(self, thread_index, depth, max_length):
        """Per frame of a thread: {"self", "owner", "locals"}, or None for a C
        frame (rbpeek_thread_locals: one pass, the heap read once)."""
        L = lib()
        opt = InspectOptions(depth, max_length, 0)
        out = ctypes.c_void_p()
        self._session._check(L.rbpeek_thread_locals(self._session._h, L.rbpeek_snapshot_thread(self._h, thread_index),
                                                    ctypes.byref(opt), ctypes.byref(out)))
        return take_json(out)

    def frame_locals(self, thread_index, frame_index, depth, max_length):
        """A Ruby frame's {"self", "owner", "locals": {name: inspect}} (rbpeek_frame_locals)."""
        L = lib()
        t = L.rbpeek_snapshot_thread(self._h, thread_index).contents
        if not 0 <= frame_index < t.nframes:
            raise RbpeekError("no frame %d in thread %d" % (frame_index, thread_index))
        opt = InspectOptions(depth, max_length, 0)
        out = ctypes.c_void_p()
        self._session._check(L.rbpeek_frame_locals(self._session._h, ctypes.byref(t.frames[frame_index]),
                                                   ctypes.byref(opt), ctypes.byref(out)))
        return take_json(out)

    def locks(self):
        """Who waits on what, who holds which Mutex, deadlocks: the parsed
        JSON of rbpeek_locks_render_json (threads referred to by index)."""
        out = ctypes.c_void_p()
        self._session._check(lib().rbpeek_locks_render_json(self._session._h, self._h, ctypes.byref(out)))
        return take_json(out)

    def native_stack(self, thread_index):
        """A thread's native stack merged with its Ruby frames (a snapshot
        taken by Session.snapshot_native), as plain dicts: {"merged", "note",
        "cut", "frames": [{"kind", "internal", "ruby": {label, path, lineno}
        or None, "native": {pc, module, module_offset, symbol, symbol_offset,
        file, line} or None, "label"}], "native": [...]}; None without."""
        L = lib()
        p = L.rbpeek_snapshot_native(self._h, thread_index)
        if not p:
            return None
        ns = p.contents

        def native(nf):
            return {"pc": nf.pc, "module": decode(nf.module), "module_offset": nf.module_offset,
                    "symbol": decode(nf.symbol), "symbol_offset": nf.symbol_offset, "file": decode(nf.file),
                    "line": nf.line}

        frames = []
        for k in range(ns.nframes):
            f = ns.frames[k]
            ruby = None
            if f.ruby:
                r = f.ruby.contents
                ruby = {"label": decode(r.label), "path": decode(r.path),
                        "lineno": None if r.lineno_unknown else r.lineno}
            frames.append({"kind": FRAME_KINDS[f.kind] if 0 <= f.kind < len(FRAME_KINDS) else "?",
                           "internal": bool(f.internal), "ruby": ruby,
                           "native": native(f.native.contents) if f.native else None, "label": decode(f.label)})
        return {"merged": bool(ns.merged), "note": decode(ns.note), "cut": decode(ns.cut), "frames": frames,
                "native": [native(ns.native[k]) for k in range(ns.nnative)]}

    def render(self, fmt, thread_index=-1):
        out = ctypes.c_void_p()
        self._session._check(lib().rbpeek_snapshot_render(self._session._h, self._h, fmt, thread_index,
                                                          ctypes.byref(out)))
        return take_text(out)


class Session(Owned):
    """One target. Memory comes from a pid, or from reader/lookup callbacks."""

    _free_fn = "rbpeek_session_free"

    def __init__(self):
        self._h = lib().rbpeek_session_new()
        if not self._h:
            raise RbpeekError("out of memory")
        self._keep = []  # ctypes callbacks must outlive the C session
        self._interrupted = False

    def error(self):
        return decode(lib().rbpeek_session_error(self._h)) or "unknown error"

    def _check(self, status):
        self.raise_pending_interrupt()
        if status != 0:
            raise RbpeekError(self.error())

    def _interrupt_in_callback(self):
        """gdb raises Ctrl-C as KeyboardInterrupt in whatever Python code
        runs, also a callback the core made (a memory read, a symbol
        lookup); ctypes would print its traceback into the debugger and
        drop it. The callback fails instead, and the interrupt is raised
        again once the core has returned (raise_pending_interrupt)."""
        self._interrupted = True

    def raise_pending_interrupt(self):
        if self._interrupted:
            self._interrupted = False
            raise KeyboardInterrupt

    def use_pid(self, pid):
        self._check(lib().rbpeek_session_use_pid(self._h, int(pid)))

    def use_core(self, path):
        self._check(lib().rbpeek_session_use_core(self._h, path.encode()))

    def use_reader(self, read):
        """read(addr, size) -> bytes (possibly short) or None."""

        def cb(_ctx, addr, buf, size):
            try:
                data = read(addr, size)
            except KeyboardInterrupt:
                self._interrupt_in_callback()
                return -1
            except Exception:  # the debugger refused: unreadable memory
                return -1
            if not data:
                return -1
            n = min(len(data), size)
            ctypes.memmove(buf, bytes(data[:n]), n)
            return n

        fn = READ_FN(cb)
        self._keep.append(fn)
        self._check(lib().rbpeek_session_use_reader(self._h, fn, None))

    def use_lookup(self, lookup):
        """lookup(name) -> address or None. Asked only from the thread that
        set it: debuggers' APIs are not thread-safe, and the sampling thread
        of a traced run (Trace) must not call into one."""
        import threading  # deferred: only under a debugger (the command line's symbols are the ELF files')
        owner = threading.get_ident()

        def cb(_ctx, name, out):
            if threading.get_ident() != owner:
                return 1
            try:
                addr = lookup(name.decode())
            except KeyboardInterrupt:
                self._interrupt_in_callback()
                return 1
            except Exception:
                return 1
            if not addr:
                return 1
            out[0] = addr
            return 0

        fn = LOOKUP_FN(cb)
        self._keep.append(fn)
        self._check(lib().rbpeek_session_use_lookup(self._h, fn, None))

    def set_kernel_tids(self, tids):
        """The kernel's list of the target's threads (a debugger's, a core's
        NT_PRSTATUS), for a source that is not a live pid read directly."""
        tids = [int(t) for t in tids if t]
        arr = (ctypes.c_int64 * max(1, len(tids)))(*tids)
        self._check(lib().rbpeek_session_set_kernel_tids(self._h, arr, len(tids)))

    def set_core_file(self, path):
        """The core file the debugger reads: a truncated one is said."""
        self._check(lib().rbpeek_session_set_core_file(self._h, path.encode()))

    def set_sysroot(self, path):
        """Where a core's files are looked for first (gdb's sysroot)."""
        self._check(lib().rbpeek_session_set_sysroot(self._h, path.encode() if path else None))

    def set_arch(self, name):
        """The target's architecture as the debugger names it; the core
        refuses one it does not read (RbpeekError, one line)."""
        self._check(lib().rbpeek_session_set_arch(self._h, name.encode()))

    def add_region(self, start, end, offset, path):
        lib().rbpeek_session_add_region(self._h, start, end, offset, path.encode() if path else None)

    def add_core_regions(self, core_path):
        self._check(lib().rbpeek_session_add_core_regions(self._h, core_path.encode()))

    def add_linkmap_regions(self, phdr, execfn, pagesz):
        """The files the dynamic linker's list names, from the auxiliary
        vector's AT_PHDR, AT_EXECFN and AT_PAGESZ (a debugger that lists
        no mappings)."""
        self._check(lib().rbpeek_session_add_linkmap_regions(self._h, phdr, execfn, pagesz))

    def add_debug_file(self, path):
        lib().rbpeek_session_add_debug_file(self._h, path.encode())

    def set_vm(self, addr):
        self._check(lib().rbpeek_session_set_vm(self._h, addr))

    def set_layout_file(self, path):
        self._check(lib().rbpeek_session_set_layout_file(self._h, path.encode()))

    def set_layout_dwarf(self, on):
        """The layout from the target's DWARF only (--layout dwarf)."""
        self._check(lib().rbpeek_session_set_layout_dwarf(self._h, 1 if on else 0))

    def set_ruby_version(self, version):
        self._check(lib().rbpeek_session_set_ruby_version(self._h, version.encode()))

    def attach(self):
        self._check(lib().rbpeek_session_attach(self._h))

    def invalidate(self):
        lib().rbpeek_session_invalidate(self._h)

    def info(self):
        L = lib()
        return {"ruby_version": decode(L.rbpeek_session_ruby_version(self._h)),
                "layout_source": decode(L.rbpeek_session_layout_source(self._h)),
                "warning": decode(L.rbpeek_session_warning(self._h)),
                "vm_addr": L.rbpeek_session_vm_addr(self._h),
                "vm_source": decode(L.rbpeek_session_vm_source(self._h))}

    def describe(self):
        """What attach found and how (see rbpeek_session_describe)."""
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_session_describe(self._h, ctypes.byref(out)))
        return take_json(out)

    def read_stats(self):
        st = ReadStats()
        lib().rbpeek_session_read_stats(self._h, ctypes.byref(st))
        return {"requests": st.requests, "source_reads": st.source_reads, "source_bytes": st.source_bytes,
                "failures": st.failures}

    def reset_read_stats(self):
        lib().rbpeek_session_reset_read_stats(self._h)

    def register_names(self):
        """The target machine's registers that native stacks take, in the
        core's order: each a tuple of the names a debugger may give it
        (("x29", "fp") on aarch64), as far as the machine is known."""
        names = decode(lib().rbpeek_session_register_names(self._h)) or ""
        return [tuple(n.split("|")) for n in names.split()]

    def use_registers(self, registers):
        """registers(tid, names) -> {"rax": ..., "rip": ...} or None: where
        a debugger's stopped threads' registers come from, for native
        stacks; names is register_names() (each register's spellings), the
        answer's keys the first spelling of each the debugger knows. Asked
        only from the thread that set it, as use_lookup's function."""
        import threading  # deferred, as in use_lookup
        owner = threading.get_ident()

        def cb(_ctx, tid, out):
            if threading.get_ident() != owner:
                return 0
            try:
                names = self.register_names()
                regs = registers(tid, names) or {}
            except KeyboardInterrupt:
                self._interrupt_in_callback()
                return 0
            except Exception:
                return 0
            known = 0
            for i, spellings in enumerate(names):
                v = next((regs[n] for n in spellings if regs.get(n) is not None), None)
                if v is not None:
                    out[i] = v & 0xFFFFFFFFFFFFFFFF
                    known |= 1 << i
            return known

        fn = REGS_FN(cb)
        self._keep.append(fn)
        self._check(lib().rbpeek_session_use_registers(self._h, fn, None))

    def set_thread_ids(self, tids):
        """The debugger's TIDs of the target's threads (for Rubies that keep
        none: rbpeek_session_set_thread_ids)."""
        tids = list(tids)
        arr = (ctypes.c_int64 * max(1, len(tids)))(*tids)
        self._check(lib().rbpeek_session_set_thread_ids(self._h, arr, len(tids)))

    def hold(self):
        """Stops every thread of the live pid source (ptrace) until release()."""
        self._check(lib().rbpeek_session_hold(self._h))

    def release(self):
        lib().rbpeek_session_release(self._h)

    def snapshot_native(self, max_frames=0, lines=True):
        """A snapshot whose threads also have their native stacks merged
        (Snapshot.native_stack)."""
        h = ctypes.c_void_p()
        self._check(lib().rbpeek_snapshot_take_native(self._h, max_frames, NATIVE_LINES if lines else 0,
                                                      ctypes.byref(h)))
        return Snapshot(self, h.value)

    def snapshot(self, max_frames=0):
        h = ctypes.c_void_p()
        self._check(lib().rbpeek_snapshot_take(self._h, max_frames, ctypes.byref(h)))
        return Snapshot(self, h.value)

    # --- heap (a Census, or a dump) ---
    def heap_census(self):
        """A census of the heap (owns the C census)."""
        h = ctypes.c_void_p()
        self._check(lib().rbpeek_heap_census(self._h, ctypes.byref(h)))
        return Census(h.value)

    def gc_render(self, fmt):
        """The GC's counters and state as text or JSON (rbpeek_gc_render)."""
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_gc_render(self._h, fmt, ctypes.byref(out)))
        return take_text(out)

    def page_render(self, addr, fmt):
        """The heap page holding addr, slot by slot, as text or JSON (rbpeek_page_render)."""
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_page_render(self._h, addr, fmt, ctypes.byref(out)))
        return take_text(out)

    def alloc_counts(self):
        """The allocation counters, read now (the target may be running):
        {"total", "gc_count" (None if unknown), "heaps": [(slot_size, count)]}."""
        c = AllocCounts()
        self._check(lib().rbpeek_alloc_counts_read(self._h, ctypes.byref(c)))
        return {"total": c.total, "gc_count": None if c.gc_count == 2 ** 64 - 1 else c.gc_count,
                "heaps": [(c.slot_size[i], c.per_heap[i]) for i in range(c.nheaps)]}

    def inspect_value(self, value, depth, max_length, raw, fmt):
        """A VALUE as Ruby's #inspect prints it (rbpeek_value_inspect)."""
        opt = InspectOptions(depth, max_length, 1 if raw else 0)
        out = ctypes.c_void_p()
        self._check(lib().rbpeek_value_inspect(self._h, value, ctypes.byref(opt), fmt, ctypes.byref(out)))
        return take_text(out)

    def heap_dump(self, path):
        """Streams the heap to path in ObjectSpace.dump_all's format; returns counts."""
        st = HeapDumpStats()
        self._check(lib().rbpeek_heap_dump(self._h, path.encode(), ctypes.byref(st)))
        return {k: getattr(st, k) for k, _ in HeapDumpStats._fields_}


def resolve_tids(session, snapshot, pid=0, known_tids=()):
    """[(pthread_t, TID)] of the snapshot's threads (rbpeek_snapshot_resolve_tids):
    TIDs are checked against known_tids (e.g. the debugger's thread list),
    or when none are given, against /proc/PID/task of a live pid."""
    cap = max(1, lib().rbpeek_snapshot_thread_count(snapshot._h))
    arr = (ctypes.c_uint64 * (2 * cap))()
    known = (ctypes.c_int64 * max(1, len(known_tids)))(*known_tids)
    n = ctypes.c_size_t()
    session._check(lib().rbpeek_snapshot_resolve_tids(session._h, snapshot._h, known, len(known_tids), int(pid), arr,
                                                      cap, ctypes.byref(n)))
    return [(arr[2 * i], arr[2 * i + 1]) for i in range(n.value)]
