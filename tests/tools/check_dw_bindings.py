#!/usr/bin/env python3
"""Runs a command under LD_DEBUG=bindings and checks that elfutils' libdw
and libdwarf, which export dwarf_* functions of the same names with other
signatures, never call into each other: every binding of a dwarf_* symbol
made for libdwarf (or librbpeek, its user) must land in libdwarf, every one
made for libdw (or librbpeek-unwind.so, its user) in libdw (docs/native.md:
why librbpeek's unwinder is an object of its own, loaded RTLD_DEEPBIND).

    check_dw_bindings.py [--want-libdwarf] [--want-libdw] -- COMMAND ...

The command's own exit status must be 0. --want-libdwarf: libdwarf must
have been called (a binding of one of its dwarf_* symbols seen), so that
the run proves something; --want-libdw: the unwinder's calls into libdw
(dwfl_*) must be seen. Exit 0 when all holds, 1 with the offending lines.
Prints the number of dwarf_* and dwfl_* bindings seen.
"""

import glob
import os
import re
import subprocess
import sys
import tempfile

LINE = re.compile(r"binding file (\S+) \[\d+\] to (\S+) \[\d+\]: normal symbol `([^'`]+)'")


def kind(path):
    base = os.path.basename(path)
    if base.startswith("libdwarf.so"):
        return "libdwarf"
    if base.startswith("libdw.so") or base.startswith("libdw-"):
        return "libdw"
    if base.startswith("librbpeek-unwind"):
        return "unwinder"
    return "other"


def check(files):
    bad, dwarf_calls, dwfl_calls, seen = [], 0, 0, set()
    for path in files:
        with open(path, errors="replace") as f:
            for line in f:
                m = LINE.search(line)
                if not m:
                    continue
                src, dst, sym = m.group(1), m.group(2), m.group(3).split("@")[0]
                ks, kd = kind(src), kind(dst)
                if sym.startswith("dwfl_") and ks == "unwinder" and kd == "libdw":
                    dwfl_calls += 1
                if not sym.startswith("dwarf_"):
                    continue
                if kd == "libdwarf":
                    dwarf_calls += 1
                seen.add((ks, kd))
                # libdwarf's dwarf_* are for libdwarf and librbpeek (its
                # user); libdw's for libdw, the unwinder, and whatever else
                # the host loaded it for (gdb itself).
                wrong = (kd == "libdwarf" and ks in ("libdw", "unwinder")) or \
                        (kd == "libdw" and (ks == "libdwarf" or os.path.basename(src).startswith("librbpeek.so")))
                if wrong:
                    bad.append(line.strip())
    return bad, dwarf_calls, dwfl_calls, seen


def main():
    args = sys.argv[1:]
    want_libdwarf = "--want-libdwarf" in args
    want_libdw = "--want-libdw" in args
    if "--" not in args:
        print(__doc__)
        return 2
    cmd = args[args.index("--") + 1:]
    tmp = tempfile.mkdtemp(prefix="rbpeek-bindings-")
    env = dict(os.environ, LD_DEBUG="bindings", LD_DEBUG_OUTPUT=os.path.join(tmp, "ld"))
    r = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
    if r.returncode != 0:
        print(r.stdout[-4000:])
        print("check_dw_bindings: the command failed (exit %d)" % r.returncode)
        return 1
    files = glob.glob(os.path.join(tmp, "ld.*"))
    bad, dwarf_calls, dwfl_calls, seen = check(files)
    for f in files:
        os.unlink(f)
    os.rmdir(tmp)
    print("dwarf_* bindings into libdwarf: %d; dwfl_* bindings of the unwinder into libdw: %d" % (dwarf_calls, dwfl_calls))
    if bad:
        print("check_dw_bindings: %d dwarf_* bindings cross between libdw and libdwarf:" % len(bad))
        for line in bad[:20]:
            print("  " + line)
        return 1
    if want_libdwarf and not dwarf_calls:
        print("check_dw_bindings: libdwarf was never called: the run proves nothing")
        return 1
    if want_libdw and not dwfl_calls:
        print("check_dw_bindings: the unwinder never called libdw: the run proves nothing")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
