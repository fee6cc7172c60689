"""The threads an ELF core file records: the TID in each NT_PRSTATUS note,
in the core's order (the first is the thread that was current when the core
was made, the one debuggers select). Used where no debugger lists a core's
threads: the lldb plugin (a core's pid) and the command line (cli.py)."""

import struct

MAX_NOTES_BYTES = 1 << 24   # bounds the read of a damaged core's note segment
MAX_THREADS = 1 << 16


def core_thread_ids(path):
    """[TID, ...] of an ELF core's NT_PRSTATUS notes (pr_pid sits at byte 32
    of x86-64's and aarch64's alike); [] for anything that is not a readable
    ELF64 little-endian core."""
    tids = []
    try:
        with open(path, "rb") as f:
            eh = f.read(64)
            if len(eh) < 64 or eh[:4] != b"\x7fELF" or eh[4] != 2 or eh[5] != 1 or \
                    struct.unpack_from("<H", eh, 16)[0] != 4:   # ELFCLASS64, little-endian, ET_CORE
                return []
            phoff, = struct.unpack_from("<Q", eh, 32)
            phentsize, phnum = struct.unpack_from("<HH", eh, 54)
            if phentsize < 56:
                return []
            for i in range(phnum):
                f.seek(phoff + i * phentsize)
                p_type, _flags, off, _va, _pa, filesz = struct.unpack("<IIQQQQ", f.read(40))
                if p_type != 4:  # PT_NOTE
                    continue
                f.seek(off)
                notes, pos = f.read(min(filesz, MAX_NOTES_BYTES)), 0
                while pos + 12 <= len(notes) and len(tids) < MAX_THREADS:
                    namesz, descsz, ntype = struct.unpack_from("<III", notes, pos)
                    desc = pos + 12 + ((namesz + 3) & ~3)
                    if ntype == 1 and descsz >= 36 and desc + 36 <= len(notes):  # NT_PRSTATUS: pr_pid at 32
                        tids.append(struct.unpack_from("<i", notes, desc + 32)[0])
                    pos = desc + ((descsz + 3) & ~3)
    except (OSError, struct.error):
        return tids
    return tids


def core_pid(path):
    """The TID of the core's first NT_PRSTATUS note (the thread that was
    current), which names the core's process for the lldb plugin, or None."""
    tids = core_thread_ids(path)
    return tids[0] if tids else None
