#!/usr/bin/env python3
"""Built-in layout tables for every CRuby release, made from public facts.

    tools/rbpeek-factsgen.py [--facts DIR] [--out DIR] [--check] [VERSION ...]

The facts are bindgen renderings of each release's own headers, one Rust
file per release (../shared/facts/ruby-structs/ruby_X_Y_Z.rs). This tool
reads them as data: it parses the struct, union and alias declarations,
resolves every member of core/src/layout/layout_fields.def to a place in them
(through bindgen's anonymous members, renamed keywords and bitfield
accessors), and has rustc compute offsets and sizes, since rustc lays out a
#[repr(C)] struct exactly as the C compiler did. One Rust program covers
every release, so the whole run is one compile.

Members that the facts cannot give (gc.c's objspace and heap pages, RClass
and its classext, id tables, thread_sync.c's waiters: private structs that
bindgen left opaque or never saw) come from the release line's supplement,
layouts/lines/X.Y.layout, which says where each of its values comes from.

Every table is written as layouts/X.Y.Z.layout in rbpeek's layout format,
in two groups marked by `source` lines so that rbpeek can say where each
member came from. The facts are x86-64's; the same facts with the few
glibc types that differ on aarch64 declared as aarch64's glibc declares
them make aarch64's tables (MACHINES), layouts/aarch64/X.Y.Z.layout, for
the lines that have an aarch64 supplement (layouts/lines/aarch64/X.Y.layout,
from the DWARF of an arm64 build). --check regenerates into memory and fails if a committed
table differs (what a unit test and a maintainer run after editing a
supplement or layout_fields.def).
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FIELDS_DEF = os.path.join(ROOT, "core", "src", "layout", "layout_fields.def")
DEFAULT_FACTS = os.path.join(os.path.dirname(ROOT), "shared", "facts", "ruby-structs")
RUST_KEYWORDS = {"self", "type", "proc", "ref", "fn", "mod", "match", "loop", "move", "box", "in",
                 "impl", "where", "use", "struct", "enum", "trait", "crate", "super", "async",
                 "await", "dyn", "static", "const", "mut", "let", "priv", "final", "override",
                 "macro", "yield", "unsafe", "extern", "virtual", "abstract", "become", "do",
                 "typeof", "unsized", "try", "as", "break", "continue", "else", "false", "for",
                 "if", "pub", "return", "true", "while"}


# Structs that CRuby declares with the same fields as another, where bindgen
# rendered only the other: method.h says of rb_callable_method_entry_struct
# "same fields with rb_method_entry_t".
TWINS = {"rb_callable_method_entry_struct": "rb_method_entry_struct"}

# Structs declared inside another (C gives them their own tag; bindgen
# names them after the enclosing struct and member, a name that changed
# when 4.0 named the enclosing one): the tag as DWARF and the C source know
# it, and the names bindgen gave it, first found wins.
NESTED = {"rb_iseq_param_keyword": ("rb_iseq_constant_body__bindgen_ty_1_rb_iseq_param_keyword",
                                    "rb_iseq_constant_body_rb_iseq_parameters_rb_iseq_param_keyword")}

# rb_jmpbuf_t is glibc's sigjmp_buf (200 bytes) in the facts' configuration,
# but a build that uses __builtin_setjmp (2.7's and 3.0's default on x86-64
# Linux, as our own 2.7.4 build shows) makes it VALUE[5], 40 bytes. Members
# after it in the same struct (rb_thread_t.name on 2.7 and 3.0) therefore
# have two possible offsets; the table lists the other as an `alt` line and
# rbpeek settles which one the target uses at attach.
JMPBUF_BUILTIN_SIZE = 40

# The machines tables are made for. The facts are bindgen's renderings of
# x86-64 headers; of the glibc types they declare (sigset_t, the pthread
# mutex, condition variable and list, pthread_t, jmp_buf), two differ on
# aarch64, as glibc's sysdeps declare them: __jmp_buf is 22 unsigned long
# long words (sysdeps/aarch64/bits/setjmp.h; x86-64's 8 longs), and
# pthread_mutex_t is 48 bytes (__SIZEOF_PTHREAD_MUTEX_T in
# sysdeps/aarch64/nptl/bits/pthreadtypes-arch.h; x86-64's 40). Everything
# else is LP64's primitive types, which rustc lays out alike for both
# ABIs, so an aarch64 table is the same facts with those two types
# replaced (each replacement must apply exactly once per file: facts that
# declare them otherwise stop the generator). jmpbuf_glibc: sizeof
# sigjmp_buf (JMPBUF_FOLLOWERS' other placement); build: whose DWARF made
# the line supplements (their header says). Another machine's table says
# so in its "machine" line and in its source lines ("source facts
# ruby_3_1_2.rs aarch64", "source line 3.1 aarch64"), which `ruby info`
# shows.
MACHINES = {
    "x86-64": {"dir": "", "jmpbuf_glibc": 200, "types": [], "note": "", "build": "own"},
    "aarch64": {"dir": "aarch64", "jmpbuf_glibc": 312, "build": "arm64 (scripts/build-arm64-ruby.sh)",
                "note": "aarch64's glibc types: __jmp_buf 22 words, pthread_mutex_t 48 bytes",
                "types": [(r"pub type __jmp_buf = \[::std::os::raw::c_long; 8usize\];",
                           "pub type __jmp_buf = [::std::os::raw::c_ulonglong; 22usize];"),
                          (r"(pub union pthread_mutex_t \{[^}]*?__size: \[::std::os::raw::c_char; )40(usize\])",
                           r"\g<1>48\2")]},
}

# Members of private structs (so not in the facts) that follow an
# rb_jmpbuf_t: rb_fiber_struct.status comes after cont.jmpbuf (cont.c). Our
# DWARF builds use __builtin_setjmp (2.7.4's rb_thread_t.name shows it), as
# Debian's do; a build with glibc's jmp_buf (Ubuntu's gcc, -fcf-protection)
# puts them 160 bytes further, so a supplement made from our DWARF lists
# that placement too, as an `alt` line for attach to settle.
JMPBUF_FOLLOWERS = ("fiber_status",)

# Notes written into a supplement before a member, for private structs
# whose members were also read off the release's own source (by hand, when
# the member was added): why the DWARF's word can be trusted.
SUPPLEMENT_NOTES = {
    "method_recv": "struct METHOD (a Method's or UnboundMethod's data) is private to proc.c, so the\n"
                   "facts lack it: {recv, klass, iclass, me} to 3.1, {recv, klass, iclass, owner, me}\n"
                   "from 3.3 (each a VALUE but me), as proc.c of %(ver)s declares it and its DWARF confirms.",
}


def read_fields_def(path=FIELDS_DEF):
    """[(id, type, member or None)] in the order of layout_fields.def."""
    out = []
    text = re.sub(r"/\*.*?\*/", "", open(path).read(), flags=re.S)
    for m in re.finditer(r'RBP_(FIELD|SIZE)\s*\(\s*(\w+)\s*,\s*"([^"]+)"\s*(?:,\s*"([^"]+)")?\s*\)', text):
        out.append((m.group(2), m.group(3), m.group(4) if m.group(1) == "FIELD" else None))
    return out


class Facts:
    """The declarations of one bindgen file: aggregates, aliases, bitfields."""

    def __init__(self, text):
        self.aggs = {}      # name -> (kind, [(field, type)])
        self.aliases = {}   # name -> type
        self.bitfields = {} # struct -> {name: (unit field, bit offset, bit width, return type)}
        for m in re.finditer(r"^pub (struct|union) (\w+)\s*\{(.*?)^\}", text, re.S | re.M):
            kind, name, body = m.groups()
            fields = []
            for fm in re.finditer(r"^\s*(?:pub\s+)?(\w+)\s*:\s*(.*?),\s*$", body, re.S | re.M):
                fields.append((fm.group(1), " ".join(fm.group(2).split())))
            self.aggs[name] = (kind, fields)
        for m in re.finditer(r"^pub type (\w+)\s*=\s*([^;]+);", text, re.M):
            self.aliases[m.group(1)] = " ".join(m.group(2).split())
        for m in re.finditer(r"^impl (\w+) \{(.*?)^\}", text, re.S | re.M):
            bits = {}
            for fm in re.finditer(r"pub fn (\w+)\(&self\) -> ([^{]+?)\s*\{\s*unsafe \{[^}]*?"
                                  r"self\.(_bitfield_\d+)\.get\((\d+)usize,\s*(\d+)u8\)", m.group(2), re.S):
                name, ret, unit, bit, width = fm.groups()
                bits[name] = (unit, int(bit), int(width), " ".join(ret.split()))
            if bits:
                self.bitfields.setdefault(m.group(1), {}).update(bits)

    def aggregate(self, name, depth=0):
        """The struct or union a type name stands for, through aliases; None if unknown."""
        while name in self.aliases and depth < 16:
            name, depth = self.aliases[name], depth + 1
        return name if name in self.aggs else None

    def opaque(self, agg):
        fields = self.aggs[agg][1]
        return not fields or any(f in ("_unused", "_address") for f, _ in fields)

    def _member(self, agg, name, depth=0):
        """Finds member name of agg, looking through anonymous members.
        Returns (place suffix, type, bitfield or None) or None."""
        if depth > 8:
            return None
        fields = self.aggs[agg][1]
        for cand in (name, name + "_") if name in RUST_KEYWORDS else (name,):
            for f, t in fields:
                if f == cand:
                    return "." + f, t, None
        bits = self.bitfields.get(agg, {})
        bit = bits.get(name) or (bits.get(name + "_") if name in RUST_KEYWORDS else None)
        if bit:
            return "", None, bit
        for f, t in fields:
            if f.startswith("__bindgen_anon_"):
                inner = self.aggregate(t)
                hit = inner and self._member(inner, name, depth + 1)
                if hit:
                    return ("." + f + hit[0],) + hit[1:]
        return None

    def after_jmpbuf(self, agg, member):
        """True if member's first component follows an rb_jmpbuf_t in agg:
        its offset then depends on how Ruby was configured (see JMPBUF_ALT)."""
        first = member.split(".")[0] if member else None
        seen = False
        for f, t in self.aggs[agg][1]:
            if f in (first, first + "_"):
                return seen
            seen = seen or t == "rb_jmpbuf_t"
        return False

    def kind_after(self, agg, comps):
        """'struct' or 'union': the aggregate reached from agg through the
        member names comps (None if a component is not an aggregate)."""
        cur = agg
        for c in comps:
            t = next((t for f, t in self.aggs[cur][1] if f == c), None)
            cur = self.aggregate(t) if t else None
            if cur is None:
                return None
        return self.aggs[cur][0]

    def resolve(self, type_name, member):
        """'covered' with (root aggregate, place, bitfield) when the facts know
        where member lives; 'absent' when they know it does not exist;
        'unknown' when the struct is opaque or missing here."""
        agg = self.aggregate(type_name) or self.aggregate(TWINS.get(type_name, ""))
        for nested in NESTED.get(type_name, ()):
            agg = agg or self.aggregate(nested)
        if agg is None or self.opaque(agg):
            return "unknown", None
        if member is None:
            return "covered", (agg, None, None)
        place, cur = "", agg
        parts = member.split(".")
        for i, part in enumerate(parts):
            if self.opaque(cur):
                return "unknown", None
            hit = self._member(cur, part)
            if hit is None:
                return "absent", None
            suffix, ftype, bit = hit
            place += suffix
            if bit:
                return ("covered", (agg, place, bit)) if i == len(parts) - 1 else ("absent", None)
            if i < len(parts) - 1:
                cur = self.aggregate(ftype)
                if cur is None:
                    return "absent", None
        return "covered", (agg, place, None)


def version_of(filename):
    m = re.match(r"ruby_(\d+)_(\d+)_(\d+)\.rs$", filename)
    return "%s.%s.%s" % m.groups() if m else None


def vkey(v):
    return tuple(int(x) for x in v.split("."))


def overlaps(facts, plan_places, computed):
    """Pairs of members of one struct that share bytes without being
    alternatives of a union: a generator or facts defect, never a layout."""
    spans = {}
    for fid, (agg, comps, bit) in plan_places.items():
        vals = computed.get(fid, "").split()
        if len(vals) < 3:
            continue
        off, size = int(vals[1]), int(vals[2])
        lo = off * 8 + (int(vals[3]) if bit else 0)
        hi = lo + (int(vals[4]) if bit else size * 8)
        spans.setdefault(agg, []).append((fid, comps, lo, hi))
    bad = []
    for agg, members in spans.items():
        for i, (fa, ca, la, ha) in enumerate(members):
            for fb, cb, lb, hb in members[i + 1:]:
                if la >= hb or lb >= ha or la == ha or lb == hb:
                    continue
                k = 0
                while k < min(len(ca), len(cb)) and ca[k] == cb[k]:
                    k += 1
                if facts.kind_after(agg, ca[:k]) == "union":
                    continue
                bad.append("%s and %s overlap in %s" % (fa, fb, agg))
    return bad


def layout_only(text):
    """A bindgen file with what layouts do not need taken out: the inherent
    and Debug impls (bitfield accessors, formatting) and the derives
    beyond Copy and Clone (which unions need). rustc spent most of its time
    type- and borrow-checking those bodies, some 16,000 functions over the
    70 releases. The files are rustfmt's: a top-level item starts in
    column 0 and ends at a `}` in column 0."""
    keep = lambda m: m.group(0) if re.search(r"\b(Clone|Copy)\b", m.group(1)) else ""
    text = re.sub(r"^(impl\b[^\n]*)\{[^\n]*\}[ \t]*\n", keep, text, flags=re.M)
    text = re.sub(r"^(impl\b[^\n]*)\{\n.*?^\}[ \t]*\n", keep, text, flags=re.S | re.M)
    def derives(m):
        kept = [d for d in (x.strip() for x in m.group(1).split(",")) if d in ("Copy", "Clone")]
        return "#[derive(%s)]" % ", ".join(kept) if kept else ""
    return re.sub(r"#\[derive\(([^)]*)\)\]", derives, text)


def for_machine(text, machine, path):
    """The facts text with the machine's own glibc types (MACHINES)."""
    for pattern, repl in MACHINES[machine]["types"]:
        text, n = re.subn(pattern, repl, text)
        if n != 1:
            sys.exit("rbpeek-factsgen: %s declares %r %d times, not once: the facts changed, check MACHINES"
                     % (path, pattern, n))
    return text


def rust_program(releases, fields, machine="x86-64"):
    """One program printing 'VERSION id offset size [bit_offset bit_size]' per
    covered member; also returns each release's plan (what the facts say of
    each member) and places (where each covered member is)."""
    # Each member's line goes through row()/rowb(): a println! per member
    # (some 20,000 of them) took rustc 37 s to compile; two take it a few.
    out = ["#![allow(warnings)]",
           "fn sz<T>(_: *const T) -> usize { std::mem::size_of::<T>() }",
           'fn row(k: &str, off: usize, size: usize) { println!("{} {} {}", k, off, size); }',
           'fn rowb(k: &str, o: usize, size: usize, width: usize) '
           '{ println!("{} {} {} {} {}", k, o / 8, size, o % 8, width); }']
    plan, places = {}, {}
    for ver, path, facts in releases:
        mod = "r_" + ver.replace(".", "_")
        out.append("mod %s {\n%s\n}" % (mod, for_machine(layout_only(open(path).read()), machine, path)))
        lines = ["fn dump_%s() { unsafe {" % mod[2:]]
        plan[ver], places[ver] = {}, {}
        for fid, tname, member in fields:
            state, where = facts.resolve(tname, member)
            plan[ver][fid] = state
            if state != "covered":
                continue
            agg, place, bit = where
            if member is not None:
                places[ver][fid] = (agg, [c for c in place.split(".") if c] + ([bit[0]] if bit else []), bit)
            ty = "%s::%s" % (mod, agg)
            if member is None:
                lines.append('row("%s %s", 0, std::mem::size_of::<%s>());' % (ver, fid, ty))
                continue
            lines.append("{ let m = std::mem::MaybeUninit::<%s>::uninit(); let p = m.as_ptr();" % ty)
            if bit:
                unit, boff, width, ret = bit
                rty = ret if ret.startswith("::") or ret in ("u8", "u16", "u32", "u64", "i8", "i16",
                                                             "i32", "i64", "bool", "usize") else mod + "::" + ret
                lines.append('  let o = (std::ptr::addr_of!((*p)%s.%s) as usize - p as usize) * 8 + %d;'
                             % (place, unit, boff))
                lines.append('  rowb("%s %s", o, std::mem::size_of::<%s>(), %d); }' % (ver, fid, rty, width))
            else:
                lines.append('  let q = std::ptr::addr_of!((*p)%s);' % place)
                lines.append('  row("%s %s", q as *const u8 as usize - p as usize, sz(q));' % (ver, fid))
                if facts.after_jmpbuf(agg, member):
                    lines.append('  row("%s alt %s", q as *const u8 as usize - p as usize + %d'
                                 ' - std::mem::size_of::<%s::rb_jmpbuf_t>(), sz(q));'
                                 % (ver, fid, JMPBUF_BUILTIN_SIZE, mod))
                lines.append("}")
        lines.append("} }")
        out.extend(lines)
    out.append("fn main() {")
    out.extend("  dump_%s();" % ver.replace(".", "_") for ver, _, _ in releases)
    out.append("}")
    return "\n".join(out) + "\n", plan, places


def run_rust(source):
    rustc = shutil.which("rustc") or os.path.expanduser("~/.cargo/bin/rustc")
    if not os.path.exists(rustc):
        sys.exit("rbpeek-factsgen: rustc not found (it computes the offsets): install rustc or put it on PATH")
    with tempfile.TemporaryDirectory() as tmp:
        src, exe = os.path.join(tmp, "facts.rs"), os.path.join(tmp, "facts")
        open(src, "w").write(source)
        r = subprocess.run([rustc, "--edition", "2021", "-o", exe, src], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit("rbpeek-factsgen: rustc failed:\n" + r.stderr[-4000:])
        return subprocess.run([exe], capture_output=True, text=True, check=True).stdout


def read_supplement(path):
    """A line supplement: {'fields': {id: text}, 'alts': {id: text}, 'absent': set}.
    An `alt ID ...` line gives a member's other placement when it follows an
    rb_jmpbuf_t (see JMPBUF_BUILTIN_SIZE); rbpeek settles it at attach.
    Comments (the values' provenance) are for readers of the file."""
    sup = {"fields": {}, "alts": {}, "absent": set()}
    if not os.path.exists(path):
        return sup
    for line in open(path):
        body = line.split("#", 1)[0].split()
        if not body:
            continue
        if body[0] == "absent":
            sup["absent"].update(body[1:])
        elif body[0] == "alt" and len(body) >= 4:
            sup["alts"][body[1]] = " ".join(body)
        else:
            sup["fields"][body[0]] = " ".join(body)
    return sup


def render(ver, facts_file, fields, plan, computed, sup, sup_path, machine="x86-64"):
    """The text of layouts/[MACHINE/]VER.layout."""
    out = ["# rbpeek layout for Ruby %s (fields: core/src/layout/layout_fields.def)" % ver,
           "# generated by tools/rbpeek-factsgen.py; do not edit, edit the generator or",
           "# %s and regenerate" % os.path.relpath(sup_path, ROOT),
           "ruby " + ver]
    mine = " " + machine if MACHINES[machine]["dir"] else ""
    if mine:
        out.append("machine " + machine)
        out.append("# the facts with " + MACHINES[machine]["note"])
    out.append("source facts %s%s" % (os.path.basename(facts_file), mine))
    missing = []
    for fid, _, _ in fields:
        if plan[fid] == "covered" and fid in computed:
            out.append(computed[fid])
            if "alt " + fid in computed:
                out.append("# %s follows rb_jmpbuf_t: %d bytes smaller with __builtin_setjmp" % (fid, 
                           int(computed[fid].split()[1]) - int(computed["alt " + fid].split()[2])))
                out.append(computed["alt " + fid])
    line = ".".join(ver.split(".")[:2])
    out.append("source line %s%s" % (line, mine))
    for fid, _, _ in fields:
        if plan[fid] != "unknown" or fid in sup["absent"]:
            continue
        if fid in sup["fields"]:
            out.append(sup["fields"][fid])
            if fid in sup["alts"]:
                out.append("# %s follows rb_jmpbuf_t: its other placement, settled at attach" % fid)
                out.append(sup["alts"][fid])
        else:
            missing.append(fid)
    return "\n".join(out) + "\n", missing


def table_machine(lines):
    """The machine a layout's lines name (x86-64 without a "machine" line)."""
    name = next((l[1] for l in lines if len(l) == 2 and l[0] == "machine"), "x86-64")
    if name not in MACHINES:
        sys.exit("rbpeek-factsgen: no tables are made for machine %s (MACHINES)" % name)
    return name


def sup_path_of(out, machine, ver):
    return os.path.join(out, "lines", MACHINES[machine]["dir"], ".".join(ver.split(".")[:2]) + ".layout")


def write_supplement(table, facts_dir, out):
    """layouts/lines/[MACHINE/]X.Y.layout from a DWARF-made table of one X.Y.Z
    release (of the machine its "machine" line names)."""
    lines = [l.split("#", 1)[0].split() for l in open(table)]
    ver = next((l[1] for l in lines if len(l) == 2 and l[0] == "ruby"), None)
    if not ver:
        sys.exit("rbpeek-factsgen: %s names no 'ruby X.Y.Z'" % table)
    machine = table_machine(lines)
    glibc = MACHINES[machine]["jmpbuf_glibc"]
    dwarf = {l[0]: " ".join(l) for l in lines if len(l) >= 3}
    facts = Facts(open(os.path.join(facts_dir, "ruby_%s.rs" % ver.replace(".", "_"))).read())
    line = ".".join(ver.split(".")[:2])
    body, absent = [], []
    for fid, tname, member in read_fields_def():
        if facts.resolve(tname, member)[0] != "unknown":
            continue
        if fid in dwarf:
            if fid in SUPPLEMENT_NOTES:
                body += ["# " + l for l in (SUPPLEMENT_NOTES[fid] % {"ver": ver}).split("\n")]
            body.append(dwarf[fid])
            if fid in JMPBUF_FOLLOWERS:
                name, off, rest = dwarf[fid].split(" ", 2)
                body.append("# %s follows rb_jmpbuf_t: %d bytes further with glibc's jmp_buf" %
                            (fid, glibc - JMPBUF_BUILTIN_SIZE))
                body.append("alt %s %d %s" % (name, int(off) + glibc - JMPBUF_BUILTIN_SIZE, rest))
        else:
            absent.append(fid)
    dest = sup_path_of(out, machine, ver)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    with open(dest, "w") as f:
        f.write("# Ruby %s line%s: the members that the facts leave opaque (private structs of\n"
                "# gc.c, class.c, thread_sync.c, id_table.c, symbol.c and the like), from the\n"
                "# DWARF of our %s build of %s (%s). Made by\n"
                "#   tools/rbpeek-factsgen.py --supplement-from %s\n"
                "# rbpeek checks these against the target at attach (heap page invariants, the\n"
                "# ID table's operator names), so a patch release that moved one is refused,\n"
                "# not misread.\n" % (line, " on " + machine if MACHINES[machine]["dir"] else "",
                                      MACHINES[machine]["build"], ver, os.path.relpath(table, ROOT),
                                      os.path.relpath(table, ROOT)))
        f.write("\n".join(body) + "\n")
        if absent:
            f.write("absent " + " ".join(absent) + "\n")
    print("wrote %s: %d members, %d absent" % (os.path.relpath(dest, ROOT), len(body), len(absent)))
    return 0


def make_tables(machine, releases, fields, out, check):
    """The tables of releases for machine, written (or, check, compared
    with the committed ones); returns how many are stale."""
    source, plan, places = rust_program(releases, fields, machine)
    computed = {}
    for line in run_rust(source).splitlines():
        ver, rest = line.split(" ", 1)
        key = " ".join(rest.split()[:2]) if rest.startswith("alt ") else rest.split()[0]
        computed.setdefault(ver, {})[key] = rest
    stale = 0
    for ver, path, facts in releases:
        bad = overlaps(facts, places[ver], computed.get(ver, {}))
        if bad:
            sys.exit("rbpeek-factsgen: %s: %s" % (ver, "; ".join(bad)))
        sup_path = sup_path_of(out, machine, ver)
        text, missing = render(ver, path, fields, plan[ver], computed.get(ver, {}), read_supplement(sup_path),
                               sup_path, machine)
        if missing:
            print("%s: not in the facts nor in %s: %s" % (ver, os.path.relpath(sup_path, ROOT),
                                                         " ".join(missing)), file=sys.stderr)
        dest = os.path.join(out, MACHINES[machine]["dir"], ver + ".layout")
        if check:
            old = open(dest).read() if os.path.exists(dest) else None
            if old != text:
                print("%s: differs from what the generator makes now" % os.path.relpath(dest, ROOT))
                stale += 1
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with open(dest, "w") as f:
            f.write(text)
    return stale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", default=DEFAULT_FACTS, help="folder of ruby_X_Y_Z.rs files")
    ap.add_argument("--out", default=os.path.join(ROOT, "layouts"), help="where tables go")
    ap.add_argument("--check", action="store_true", help="compare with the committed tables, write nothing")
    ap.add_argument("--supplement-from", metavar="TABLE",
                    help="write the line supplement of TABLE's release from TABLE (a DWARF-made layout): "
                         "the members the facts leave opaque, and nothing else")
    ap.add_argument("versions", nargs="*", help="only these releases (default: every one in --facts)")
    a = ap.parse_args()
    if a.supplement_from:
        return write_supplement(a.supplement_from, a.facts, a.out)

    files = sorted((f for f in os.listdir(a.facts) if version_of(f)), key=lambda f: vkey(version_of(f)))
    releases = [(version_of(f), os.path.join(a.facts, f), Facts(open(os.path.join(a.facts, f)).read()))
                for f in files if not a.versions or version_of(f) in a.versions]
    if not releases:
        sys.exit("rbpeek-factsgen: no ruby_X_Y_Z.rs facts in %s" % a.facts)
    fields = read_fields_def()
    stale = total = 0
    for machine in MACHINES:
        # another machine's tables: the lines with that machine's supplement
        mine = [r for r in releases if not MACHINES[machine]["dir"] or os.path.exists(sup_path_of(a.out, machine, r[0]))]
        if mine:
            stale += make_tables(machine, mine, fields, a.out, a.check)
            total += len(mine)
    if a.check:
        print("%d tables checked, %d stale" % (total, stale))
        return 1 if stale else 0
    print("wrote %d tables to %s" % (total, os.path.relpath(a.out, ROOT)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
