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
             has the C struct's size, each member's offset and each
             member's type (the C type its ctypes type stands for: width
             and sign, pointer and what to, array and its length), as a
             small C program compiled against the header prints them
             (sizeof, offsetof, __builtin_types_compatible_p); and every
             struct the header's functions take or return by pointer,
             other than the opaque handles, has a mirror
  constants  every constant of cstructs.py has the value of the C constant
             it copies (the same C program prints them): each enum copied
             as a list of names (THREAD_STATES, FRAME_KINDS, STOP_MODES,
             TRACE_ENDS) names every member of its C enum, no more, by its
             value; the callback types take and return what the header's
             typedefs do (the registers' names and order are the core's
             own, rbpeek_session_register_names: the binding copies none);
             and a constant this test does not know fails

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
        out.append((name, ret, param_types(params)))
    return out


def param_types(params):
    """The types of a C parameter list: "const char *name" -> "const char *",
    "int pid" -> "int"; "void" -> none."""
    if params in ("", "void"):
        return []
    return [(re.sub(r"\s*\b\w+\s*$", "", p.strip()) if not p.strip().endswith("*") else p.strip()).strip()
            for p in params.split(",")]


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


def opaque_handles():
    """The header's opaque handle types (typedef struct X X; with no body)."""
    text = "".join(open(h).read() for h in HEADERS)
    return set(re.findall(r"typedef struct (rbpeek_\w+) \1;", text)) - set(re.findall(r"struct (rbpeek_\w+) \{", text))


# The C type a ctypes scalar stands for (c_int32 is c_int, c_int64 c_long,
# c_uint64 and c_size_t c_ulong: x86-64's int32_t, int64_t, uint64_t, size_t).
C_SCALARS = {ctypes.c_int: "int", ctypes.c_uint: "unsigned int", ctypes.c_long: "long",
             ctypes.c_ulong: "unsigned long", ctypes.c_double: "double", ctypes.c_ubyte: "unsigned char",
             ctypes.c_char: "char"}


def c_types(ct):
    """The C types a member of ctypes type ct may have (a pointer's target
    may be const)."""
    if ct in C_SCALARS:
        return [C_SCALARS[ct]]
    if ct is ctypes.c_char_p:
        return ["char *", "const char *"]
    if ct is ctypes.c_void_p:   # void *, or a handle the binding does not look into
        return [q + t + " *" for t in ["void"] + ["struct " + h for h in sorted(opaque_handles())]
                for q in ("", "const ")]
    if issubclass(ct, ctypes._Pointer):
        target = ct._type_
        inner = [target._c_] if hasattr(target, "_c_") else c_types(target)
        return [q + t + " *" for t in inner for q in ("", "const ")]
    if issubclass(ct, ctypes.Array):
        return ["%s[%d]" % (t, ct._length_) for t in c_types(ct._type_)]
    raise ValueError("no C type known for ctypes %r" % ct)


def c_declaration(struct, member):
    """The member's declaration in the header, for a message."""
    text = re.sub(r"/\*.*?\*/", " ", "".join(open(h).read() for h in HEADERS), flags=re.S)
    body = re.search(r"struct %s \{(.*?)\} %s;" % (struct, struct), text, re.S)
    decl = body and re.search(r"([^;{}]*\b%s\s*(\[[^]]*\])?);" % member, body.group(1))
    return " ".join(decl.group(1).split()) if decl else "?"


def c_constants():
    """The header's constants: enum members and #defines of a number."""
    text = re.sub(r"/\*.*?\*/", " ", "".join(open(h).read() for h in HEADERS), flags=re.S)
    enums = re.findall(r"^\s*(RBPEEK_[A-Z0-9_]+)\s*=", text, re.M)
    defines = re.findall(r"^#define (RBPEEK_[A-Z0-9_]+)\s+[0-9]", text, re.M)
    return enums + defines


def c_program(structs):
    """A C program that prints, as JSON, each mirror's C size and member
    offsets, whether each member's C type is the one its ctypes type
    stands for, and every constant of the header."""
    lines = ["#include <stddef.h>", "#include <stdio.h>", '#include "rbpeek.h"', "int main(void)", "{",
             '    printf("{\\"layouts\\": {");']
    for i, cls in enumerate(structs):
        c = cls._c_
        lines.append('    printf("%s\\"%s\\": {\\"size\\": %%zu", sizeof(%s));' % ("," if i else "", c, c))
        for field in cls._fields_:
            lines.append('    printf(", \\"%s\\": %%zu", offsetof(%s, %s));' % (field[0], c, field[0]))
        lines.append('    printf("}");')
    lines.append('    printf("}, \\"types\\": {");')
    sep = ""
    for cls in structs:
        for name, ct in cls._fields_:
            member = "__typeof__(((%s *)0)->%s)" % (cls._c_, name)
            test = " || ".join("__builtin_types_compatible_p(%s, %s)" % (member, t) for t in c_types(ct))
            lines.append('    printf("%s\\"%s.%s\\": %%d", (int)(%s));' % (sep, cls._c_, name, test))
            sep = ","
    lines.append('    printf("}, \\"constants\\": {");')
    for i, name in enumerate(c_constants()):
        lines.append('    printf("%s\\"%s\\": %%lld", (long long)(%s));' % ("," if i else "", name, name))
    lines += ['    printf("}}\\n");', "    return 0;", "}"]
    return "\n".join(lines) + "\n"


def c_facts(structs):
    """{"layouts": {struct: {"size": n, member: offset}}, "types": {"struct.member": 1 if the
    types agree}, "constants": {name: value}} from the compiler; None without one."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    work = tempfile.mkdtemp(prefix="rbpeek-bindings-")
    try:
        src, exe = os.path.join(work, "facts.c"), os.path.join(work, "facts")
        with open(src, "w") as f:
            f.write(c_program(structs))
        r = subprocess.run([cc, "-std=gnu11", "-I", os.path.dirname(HEADER), src, "-o", exe], capture_output=True,
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


def check_structs(structs, facts):
    layouts = facts["layouts"]
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
            if not facts["types"]["%s.%s" % (cls._c_, field[0])]:
                alike = c_types(field[1])
                problems.append("%s.%s: ctypes %s (C %s%s), but the C member is `%s`"
                                % (cls.__name__, field[0], field[1].__name__, " or ".join(alike[:2]),
                                   " or a handle's pointer" if len(alike) > 2 else "", c_declaration(cls._c_, field[0])))
    mirrored = {cls._c_ for cls in structs}
    for name in sorted(passed_structs() - mirrored):
        problems.append("struct %s is passed across the API but has no ctypes mirror in cstructs.py" % name)
    return problems, len(structs)


# Each constant of cstructs.py and what it copies from the header: a
# constant (VALUES), an enum as names by value (ENUMS: the members' names
# after the prefix, lowercased), an enum's count (COUNTS), a callback type
# (CALLBACKS).
VALUES = {"FORMAT_TEXT": "RBPEEK_FORMAT_TEXT", "FORMAT_JSON": "RBPEEK_FORMAT_JSON",
          "NATIVE_LINES": "RBPEEK_NATIVE_LINES", "BT_NATIVE": "RBPEEK_BT_NATIVE", "BT_NATIVE_ALL": "RBPEEK_BT_NATIVE_ALL"}
ENUMS = {"THREAD_STATES": "RBPEEK_STATE_", "FRAME_KINDS": "RBPEEK_FRAME_", "STOP_MODES": "RBPEEK_STOP_",
         "TRACE_ENDS": "RBPEEK_TRACE_"}
COUNTS = {"THREAD_STATES": "RBPEEK_THREAD_STATES"}
CALLBACKS = {"READ_FN": "rbpeek_read_fn", "LOOKUP_FN": "rbpeek_lookup_fn", "REGS_FN": "rbpeek_regs_fn"}


def by_value(v):
    """An enum as the binding copies it (names in value order, {name:
    value} or {value: name}) as {value: name}."""
    if isinstance(v, dict):
        return {(k if isinstance(k, int) else n): (n if isinstance(k, int) else k) for k, n in v.items()}
    return dict(enumerate(v))


def check_callbacks():
    text = re.sub(r"/\*.*?\*/", " ", "".join(open(h).read() for h in HEADERS), flags=re.S)
    problems = []
    for py, c in CALLBACKS.items():
        m = re.search(r"typedef\s+([^;(]*?)\s*\(\s*\*\s*%s\s*\)\s*\(([^)]*)\)\s*;" % c, text)
        if not m:
            problems.append("%s: the header has no typedef %s" % (py, c))
            continue
        fn = getattr(cstructs, py)
        params = param_types(m.group(2).strip())
        if c_kind(m.group(1)) != py_kind(fn._restype_):
            problems.append("%s: returns %s, %s %s" % (py, fn._restype_, c, m.group(1)))
        if len(params) != len(fn._argtypes_) or any(c_kind(a) != py_kind(b) for a, b in zip(params, fn._argtypes_)):
            problems.append("%s takes %s, %s takes (%s)" % (py, [t.__name__ for t in fn._argtypes_], c,
                                                           ", ".join(params)))
    return problems


def check_constants(constants):
    """Each constant of cstructs.py against the header's (constants: the
    compiler's values of every RBPEEK_ constant)."""
    problems = []
    mine = {k: v for k, v in vars(cstructs).items() if re.fullmatch(r"[A-Z][A-Z0-9_]*", k)}
    known = set(VALUES) | set(ENUMS) | set(COUNTS) | set(CALLBACKS)
    for name in sorted(set(mine) - known):
        problems.append("cstructs.%s: a constant this test does not know: name the C constant it copies "
                        "(VALUES, ENUMS, ... in test_bindings.py)" % name)
    for py, c in VALUES.items():
        if mine.get(py) != constants.get(c):
            problems.append("cstructs.%s is %r, %s is %r" % (py, mine.get(py), c, constants.get(c)))
    for py, prefix in ENUMS.items():
        want = {v: n[len(prefix):].lower() for n, v in constants.items() if n.startswith(prefix)}
        got = by_value(mine.get(py, ()))
        if not want or got != want:
            problems.append("cstructs.%s is %s; the header's %s* are %s" % (py, sorted(got.items()), prefix,
                                                                           sorted(want.items())))
    for py, c in COUNTS.items():
        if len(mine.get(py, ())) != constants.get(c):
            problems.append("cstructs.%s has %d names, %s is %r" % (py, len(mine.get(py, ())), c, constants.get(c)))
    return problems + check_callbacks(), len(mine)


def main():
    fproblems, nfuncs = check_functions()
    structs = mirrors()
    facts = c_facts(structs)
    if facts is None:
        print("skip: no C compiler to print the structs' layouts and the constants")
        return 77
    sproblems, nstructs = check_structs(structs, facts)
    cproblems, nconstants = check_constants(facts["constants"])
    for p in fproblems + sproblems + cproblems:
        print("FAIL: " + p)
    if fproblems or sproblems or cproblems:
        return 1
    print("%d functions, %d struct mirrors (%d members: offset and type) and %d constants agree with rbpeek.h"
          % (nfuncs, nstructs, sum(len(c._fields_) for c in structs), nconstants))
    print("1 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
