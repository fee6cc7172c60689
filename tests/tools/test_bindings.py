#!/usr/bin/env python3
"""The ctypes binding (python/rbpeeklib/core) against the C header it
mirrors by hand (core/include/rbpeek.h and the rbpeek_profile.h it
includes), so that neither drifts unseen:

  functions  every RBPEEK_API function of the header has a signature in
             lib.signatures(), with as many arguments, each of a matching
             kind and size (a pointer for a pointer or a function pointer,
             an integer of the C type's width, a double), and a matching
             return; and the binding declares no function the header lacks
  structs    every ctypes mirror (a Structure naming its C struct in _c_)
             has the C struct's size and each member's offset, as a small
             C program compiled against the header prints them (sizeof,
             offsetof); and every struct the header's functions take or
             return by pointer, other than the opaque handles, has a mirror

usage: test_bindings.py
Exit status: 0 pass, 1 fail, 77 skip (no C compiler).
"""
import ctypes
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "core", "include", "rbpeek.h")
HEADERS = [HEADER, os.path.join(ROOT, "core", "include", "rbpeek_profile.h")]   # rbpeek.h includes the second
sys.path.insert(0, os.path.join(ROOT, "python"))

import importlib  # noqa: E402

cstructs = importlib.import_module("rbpeeklib.core.cstructs")
lib = importlib.import_module("rbpeeklib.core.lib")   # the module: the package hands on its lib() function

# C scalar types of the header, by size and kind.
INTS = {"int": 4, "int32_t": 4, "uint32_t": 4, "rbpeek_status": 4, "rbpeek_format": 4, "int64_t": 8,
        "uint64_t": 8, "size_t": 8, "long": 8, "unsigned long": 8}
# The header's function pointer types (typedef ... (*name)(...)): pointers.
FUNCTION_POINTERS = set(re.findall(r"typedef[^;(]*\(\s*\*\s*(rbpeek_\w+)\s*\)", "".join(open(h).read() for h in HEADERS)))


def declarations():
    """[(name, return type, [parameter types])] of the header's RBPEEK_API functions."""
    text = re.sub(r"/\*.*?\*/", " ", "".join(open(h).read() for h in HEADERS), flags=re.S)
    out = []
    for m in re.finditer(r"RBPEEK_API\s+([^;{]*?)\b(rbpeek_\w+)\s*\(([^)]*)\)\s*;", text):
        ret, name, params = m.group(1).strip(), m.group(2), m.group(3).strip()
        types = [] if params in ("", "void") else [re.sub(r"\s*\b\w+\s*$", "", p.strip()) if not p.strip().endswith("*")
                                                  else p.strip() for p in params.split(",")]
        # a parameter "const char *name" -> "const char *"; "int pid" -> "int"
        types = [t.strip() for t in types]
        out.append((name, ret, types))
    return out


def c_kind(ctype):
    """('ptr', 8) / ('int', n) / ('double', 8) / ('void', 0) for a C type."""
    t = re.sub(r"\bconst\b", "", ctype).strip()
    if "*" in t or t in FUNCTION_POINTERS:
        return ("ptr", 8)
    if t == "void":
        return ("void", 0)
    if t == "double":
        return ("double", 8)
    t = re.sub(r"\s+", " ", t)
    if t in INTS:
        return ("int", INTS[t])
    raise ValueError("unknown C type %r" % ctype)


def py_kind(ct):
    """The same for a ctypes type (None: void)."""
    if ct is None:
        return ("void", 0)
    if ct in (ctypes.c_void_p, ctypes.c_char_p) or issubclass(ct, (ctypes._Pointer, ctypes._CFuncPtr)):
        return ("ptr", 8)
    if ct is ctypes.c_double:
        return ("double", 8)
    if issubclass(ct, ctypes._SimpleCData):
        return ("int", ctypes.sizeof(ct))
    raise ValueError("unknown ctypes type %r" % ct)


def check_functions():
    sigs = lib.signatures()
    problems = []
    decls = declarations()
    if len(decls) < 50:
        problems.append("only %d RBPEEK_API functions found in %s: the parser is broken" % (len(decls), HEADER))
    names = set()
    for name, ret, params in decls:
        names.add(name)
        if name not in sigs:
            problems.append("%s: no ctypes signature in lib.signatures()" % name)
            continue
        res, args = sigs[name]
        if c_kind(ret) != py_kind(res):
            problems.append("%s: returns %s, the binding says %r" % (name, ret, res))
        if len(args) != len(params):
            problems.append("%s: %d parameters, the binding declares %d" % (name, len(params), len(args)))
            continue
        for i, (c, p) in enumerate(zip(params, args)):
            if c_kind(c) != py_kind(p):
                problems.append("%s: parameter %d is %s, the binding says %r" % (name, i + 1, c, p))
    for name in sigs:
        if name not in names:
            problems.append("%s: declared by the binding, not in rbpeek.h" % name)
    return problems, len(decls)


def mirrors():
    return [c for c in vars(cstructs).values()
            if isinstance(c, type) and issubclass(c, ctypes.Structure) and hasattr(c, "_c_")]


def c_layouts(structs):
    """{struct: {"size": n, member: offset}} from the compiler."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "rbpeek.h"', "int main(void)", "{",
             '    printf("{");']
    for i, cls in enumerate(structs):
        c = cls._c_
        lines.append('    printf("%s\\"%s\\": {\\"size\\": %%zu", sizeof(%s));' % ("," if i else "", c, c))
        for field in cls._fields_:
            lines.append('    printf(", \\"%s\\": %%zu", offsetof(%s, %s));' % (field[0], c, field[0]))
        lines.append('    printf("}");')
    lines += ['    printf("}\\n");', "    return 0;", "}"]
    work = tempfile.mkdtemp(prefix="rbpeek-bindings-")
    try:
        src, exe = os.path.join(work, "layouts.c"), os.path.join(work, "layouts")
        with open(src, "w") as f:
            f.write("\n".join(lines) + "\n")
        r = subprocess.run([cc, "-std=c11", "-I", os.path.dirname(HEADER), src, "-o", exe], capture_output=True,
                           text=True)
        if r.returncode:
            raise SystemExit("FAIL: the mirrors name members the C structs lack:\n" + r.stderr[-3000:])
        return json.loads(subprocess.run([exe], capture_output=True, text=True, check=True).stdout)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def passed_structs():
    """The rbpeek_* structs the header's functions take or return by pointer (not the opaque handles)."""
    text = "".join(open(h).read() for h in HEADERS)
    defined = set(re.findall(r"typedef struct (rbpeek_\w+) \{", text))
    used = set()
    for _name, ret, params in declarations():
        for t in [ret] + params:
            m = re.search(r"\b(rbpeek_\w+)\s*\*", t)
            if m and m.group(1) in defined:
                used.add(m.group(1))
    # members that point at further structs (rbpeek_thread.frames)
    return used | {"rbpeek_frame"}


def check_structs():
    structs = mirrors()
    layouts = c_layouts(structs)
    if layouts is None:
        return None, 0
    problems = []
    for cls in structs:
        want = layouts[cls._c_]
        if ctypes.sizeof(cls) != want["size"]:
            problems.append("%s (%s): ctypes size %d, C size %d" % (cls.__name__, cls._c_, ctypes.sizeof(cls),
                                                                   want["size"]))
        for field in cls._fields_:
            got = getattr(cls, field[0]).offset
            if got != want[field[0]]:
                problems.append("%s.%s: ctypes offset %d, C offset %d" % (cls.__name__, field[0], got,
                                                                         want[field[0]]))
    mirrored = {cls._c_ for cls in structs}
    for name in sorted(passed_structs() - mirrored):
        problems.append("struct %s is passed across the API but has no ctypes mirror in cstructs.py" % name)
    return problems, len(structs)


def main():
    fproblems, nfuncs = check_functions()
    sproblems, nstructs = check_structs()
    if sproblems is None:
        print("skip: no C compiler to print the structs' layouts")
        return 77
    for p in fproblems + sproblems:
        print("FAIL: " + p)
    if fproblems or sproblems:
        return 1
    print("%d functions and %d struct mirrors agree with rbpeek.h" % (nfuncs, nstructs))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
