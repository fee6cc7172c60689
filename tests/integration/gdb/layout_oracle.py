"""Runs inside gdb (loaded on a libruby or ruby with DWARF): computes every
member of core/src/layout/layout_fields.def from gdb's own type information and
compares it with a layout file. An oracle independent of libdwarf and of
rbpeek's extractor. Inputs come from gdb convenience variables:
$rbpeek_def (layout_fields.def) and $rbpeek_layout (the table).
Prints 'ORACLE <agree> <differ>' and one MISMATCH line per difference."""

import re

import gdb

DEF = gdb.convenience_variable("rbpeek_def").string()
LAYOUT = gdb.convenience_variable("rbpeek_layout").string()


def lookup(name):
    for cand in ("struct " + name, "union " + name, name):
        try:
            t = gdb.lookup_type(cand).strip_typedefs()
        except gdb.error:
            continue
        if t.code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION) and t.sizeof > 0 and t.fields():
            return t
    return None


def find(t, name, base):
    """A member by name, searching anonymous members; (field, bit position)."""
    for f in t.fields():
        if f.name == name:
            return f, base + f.bitpos
    for f in t.fields():
        if f.name is None and f.type.strip_typedefs().code in (gdb.TYPE_CODE_STRUCT, gdb.TYPE_CODE_UNION):
            r = find(f.type.strip_typedefs(), name, base + f.bitpos)
            if r:
                return r
    return None


def expected(kind, type_name, path):
    t = lookup(type_name)
    if t is None:
        return None
    if kind == "SIZE":
        return (0, t.sizeof)
    cur, bits, found = t, 0, None
    for part in path.split("."):
        found = find(cur, part, bits)
        if not found:
            return None
        f, bits = found
        cur = f.type.strip_typedefs()
    f, bits = found
    if f.bitsize:
        return (bits // 8, f.type.sizeof, bits % 8, f.bitsize)
    return (bits // 8, f.type.sizeof)


table = {}
with open(LAYOUT) as fh:
    for line in fh:
        words = line.split("#")[0].split()
        if len(words) >= 3 and words[0] != "ruby":
            table[words[0]] = tuple(int(x) for x in words[1:])
with open(DEF) as fh:
    entries = re.findall(r'^RBP_(FIELD|SIZE)\s*\((\w+),\s*"([^"]+)"(?:,\s*"([^"]+)")?\)', fh.read(), re.M)
agree = differ = 0
for kind, fid, type_name, path in entries:
    want, got = expected(kind, type_name, path), table.get(fid)
    if want == got:
        agree += 1
    else:
        differ += 1
        print("MISMATCH %s: table %s, gdb %s" % (fid, got, want))
print("ORACLE %d %d" % (agree, differ))
