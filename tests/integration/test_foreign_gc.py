"""`ruby gc` and `ruby p` on rbspy's cores of Rubies that cannot be built here.

    test_foreign_gc.py VERSION

The cores (../shared/testdata/rbspy-cores/, see test_foreign_cores.py) come
without binaries and without any recording of GC.stat, so `ruby gc` is
checked against what the same core shows independently and against what
gc.c guarantees of its counters:
  - count = minor_gc_count + major_gc_count (a core taken in a sleep is not
    inside a GC); total_freed_objects + heap_final_slots <= total_allocated;
    heap_live_slots = allocated - freed - final, heap_free_slots the rest of
    heap_available_slots; oldmalloc_increase_bytes >= malloc_increase_bytes;
  - against the heap walker (`ruby heap` reads every page, not the
    objspace's counters): the same number of pages in the page table and in
    the heaps, the same slots per slot size, and live slots equal to the
    census's live objects (per heap where the Ruby counts per heap; on 4.0
    once the counts still held in the Ractors' newobj caches are added);
  - the state: not inside a GC, a known phase, GC enabled and not stressed
    (the programs never touch GC.disable or GC.stress);
  - gdb, lldb and the command line print the same document.
On 3.0, whose ivar names come from the class's iv_index_tbl, `ruby p` of
RubyGems' objects must show the instance variables RubyGems 3.2 (3.0.0's)
sets, with values of the right kind, each one a reference the heap dump
found in the object's ivar array.
"""

import os
import re
import subprocess
import sys

import harness
from harness import Failure
from test_foreign_cores import debugger_json, unpack_core


def cli_json(core, *args):
    rc, out, err = harness.run_cli(list(args) + ["--core", core], raw=True)
    if rc != 0:
        raise Failure("rbpeek %s failed (%d): %s" % (" ".join(args), rc, err.strip()))
    return harness.strict_json(out)


def gc_documents(core, workdir):
    """`ruby gc --json` from gdb, lldb and the command line: one document."""
    gdb = debugger_json("gdb", core, workdir, "ruby gc --json")
    lldb = debugger_json("lldb", core, workdir, "ruby gc --json")
    cli = cli_json(core, "gc", "--json")
    if not gdb == lldb == cli:
        raise Failure("ruby gc differs between gdb, lldb and the command line:\n%s\n%s\n%s" % (gdb, lldb, cli))
    return gdb


def check_counters(gc, version):
    if gc.get("ruby_version") != version:
        raise Failure("gc: version %r, not %s" % (gc.get("ruby_version"), version))
    problems = []
    if gc["count"] != gc["minor_gc_count"] + gc["major_gc_count"]:
        problems.append("count %d != minor %d + major %d" % (gc["count"], gc["minor_gc_count"], gc["major_gc_count"]))
    if gc["count"] < 1:
        problems.append("no GC counted in a Ruby that booted RubyGems")
    alloc, freed, final = gc["total_allocated_objects"], gc["total_freed_objects"], gc["heap_final_slots"]
    if freed + final > alloc:
        problems.append("freed %d + final %d > allocated %d" % (freed, final, alloc))
    if gc["heap_live_slots"] != alloc - freed - final:
        problems.append("live %d != allocated - freed - final" % gc["heap_live_slots"])
    if gc["heap_live_slots"] + gc["heap_free_slots"] + final != gc["heap_available_slots"]:
        problems.append("live + free + final != available %d" % gc["heap_available_slots"])
    if gc["oldmalloc_increase_bytes"] < gc["malloc_increase_bytes"]:
        problems.append("oldmalloc_increase %d < malloc_increase %d"
                        % (gc["oldmalloc_increase_bytes"], gc["malloc_increase_bytes"]))
    heaps = gc["heaps"]
    slots = sum(h["heap_eden_slots"] + h.get("heap_tomb_slots", 0) for h in heaps)
    pages = sum(h["heap_eden_pages"] + h.get("heap_tomb_pages", 0) for h in heaps)
    if slots != gc["heap_available_slots"] or pages != gc["heap_allocated_pages"]:
        problems.append("heaps hold %d pages of %d slots; the objspace says %d of %d"
                        % (pages, slots, gc["heap_allocated_pages"], gc["heap_available_slots"]))
    if any("total_allocated_objects" in h for h in heaps):
        if sum(h["total_allocated_objects"] for h in heaps) != alloc or \
                sum(h["total_freed_objects"] for h in heaps) != freed:
            problems.append("the heaps' object counters do not add up to the totals")
    # the state: a core taken in Kernel#sleep, by programs that leave the GC alone
    if gc["during_gc"] or gc["phase"] not in ("none", "marking", "sweeping") or gc["disabled"] or gc["stress"]:
        problems.append("state: during_gc %s, phase %s, disabled %s, stress %s"
                        % (gc["during_gc"], gc["phase"], gc["disabled"], gc["stress"]))
    if problems:
        raise Failure("ruby gc on %s: %s" % (version, "; ".join(problems)))


def check_against_census(gc, census):
    """The objspace's counters against the heap walker's own count."""
    h = census["heap"]
    problems = []
    if h["rejected_pages"] or h["unreadable"]:
        problems.append("the census rejected %d pages" % h["rejected_pages"])
    if h["pages"] != gc["heap_allocated_pages"] or h["slots"] != gc["heap_available_slots"]:
        problems.append("census %d pages of %d slots, gc %d of %d"
                        % (h["pages"], h["slots"], gc["heap_allocated_pages"], gc["heap_available_slots"]))
    # the walker counts a slot awaiting its finalizer (T_ZOMBIE) as live.
    # (4.0 counts an allocation first in the allocating Ractor's newobj
    # cache, and its heap's total_allocated_objects only at the next GC:
    # `ruby gc` adds the caches' counts, so it matches the walker there too.)
    if h["live"] != gc["heap_live_slots"] + gc["heap_final_slots"]:
        problems.append("census %d live objects, gc %d live + %d final"
                        % (h["live"], gc["heap_live_slots"], gc["heap_final_slots"]))
    by_size = {s["slot_size"]: s for s in h["slot_sizes"]}
    for heap in gc["heaps"]:
        s = by_size.get(heap["slot_size"])
        pages = heap["heap_eden_pages"] + heap.get("heap_tomb_pages", 0)
        slots = heap["heap_eden_slots"] + heap.get("heap_tomb_slots", 0)
        if s is None:
            if pages:
                problems.append("gc has %d pages of %d-byte slots, the census none" % (pages, heap["slot_size"]))
            continue
        if (s["pages"], s["slots"]) != (pages, slots):
            problems.append("%d-byte slots: census %d pages of %d slots, gc %d of %d"
                            % (heap["slot_size"], s["pages"], s["slots"], pages, slots))
        in_use = heap.get("total_allocated_objects", 0) - heap.get("total_freed_objects", 0)
        if "total_allocated_objects" in heap and s["live"] != in_use:
            problems.append("%d-byte slots: census %d live, gc %d allocated - %d freed"
                            % (heap["slot_size"], s["live"], heap["total_allocated_objects"],
                               heap["total_freed_objects"]))
    if len(by_size) != len([x for x in gc["heaps"] if x["heap_eden_pages"] + x.get("heap_tomb_pages", 0)]):
        problems.append("slot sizes: census %s, gc %s" % (sorted(by_size), [x["slot_size"] for x in gc["heaps"]]))
    if problems:
        raise Failure("ruby gc against the heap census: " + "; ".join(problems))


def check_gc(version, workdir):
    core = unpack_core(version, workdir)
    gc = gc_documents(core, workdir)
    check_counters(gc, version)
    census = cli_json(core, "heap", "--json")
    check_against_census(gc, census)
    harness.log("gc: %d GCs (%d minor), %d pages, %d live of %d slots, phase %s: consistent, and as the heap "
                "walker counts them" % (gc["count"], gc["minor_gc_count"], gc["heap_allocated_pages"],
                                        gc["heap_live_slots"], gc["heap_available_slots"], gc["phase"]))
    return core


# RubyGems 3.2 (Ruby 3.0.0's): the ivars each class's initialize sets, in
# that order, then those its other methods may set later (memoized
# prerelease?, canonical_segments, release, bump), with the kind of value
# each holds. An object shows its ivars in its class's iv_index_tbl order.
RUBYGEMS_IVARS = {
    "Gem::Version": ([("@version", r'"[0-9A-Za-z.]+"'), ("@segments", r"nil|\[.*\]")],
                     {"@prerelease": r"true|false", "@canonical_segments": r"\[.*\]|…",
                      "@release": r"#<Gem::Version:0x[0-9a-f]+.*", "@bump": r"#<Gem::Version:0x[0-9a-f]+.*"}),
    "Gem::Dependency": ([("@name", r'"[^"]+"(…)?'), ("@requirement", r"#<Gem::Requirement:0x[0-9a-f]+.*"),
                         ("@type", r":runtime|:development"), ("@prerelease", r"true|false"),
                         ("@version_requirements", r"#<Gem::Requirement:0x[0-9a-f]+.*")], {}),
    "Gem::Requirement": ([("@requirements", r"\[.*\]")], {}),
}


def ivars_of(inspect):
    """[(name, value)] of `#<Class:0x... @a=1, @b=[2, 3]>`, split at the
    top level only (values nest <...>, [...], {...} and quoted strings)."""
    m = re.match(r"#<[\w:]+:0x[0-9a-f]+ (.*)>$", inspect, re.S)
    if not m:
        return []
    out, depth, quote, cur = [], 0, False, ""
    body = m.group(1)
    i = 0
    while i < len(body):
        c = body[i]
        if quote:
            if c == "\\":
                cur += body[i:i + 2]
                i += 2
                continue
            quote = c != '"'
        elif c == '"':
            quote = True
        elif c in "<[{":
            depth += 1
        elif c in ">]}":
            depth -= 1
        elif c == "," and depth == 0 and body[i + 1:i + 3] == " @":
            out.append(cur)
            cur, i = "", i + 2
            continue
        cur += c
        i += 1
    out.append(cur)
    return [tuple(part.split("=", 1)) for part in out if "=" in part]


def check_ivars(core, workdir):
    """3.0's instance variable names (the class's iv_index_tbl of
    rb_iv_index_tbl_entry) on RubyGems' objects, by gdb and the command line."""
    dump = os.path.join(workdir, "dump.jsonl")
    rc, _out, err = harness.run_cli(["heap", "--dump", dump, "--core", core])
    if rc != 0:
        raise Failure("rbpeek heap --dump failed: %s" % err.strip())
    with open(dump, "rb") as f:
        objects = [harness.strict_json(l) for l in f if b'"type":"OBJECT"' in l]
    seen = {}
    for o in objects:
        if len(seen) >= 3 * len(RUBYGEMS_IVARS):
            break
        p = cli_json(core, "p", o["address"], "--depth", "1", "--json")
        cls = p["class"]
        if cls not in RUBYGEMS_IVARS or sum(1 for c in seen.values() if c == cls) >= 3:
            continue
        first, later = RUBYGEMS_IVARS[cls]
        got = ivars_of(p["inspect"])
        names = [n for n, _ in got]
        kinds = dict(first, **later)
        if names[:len(first)] != [n for n, _ in first] or len(set(names)) != len(names) or \
                any(n not in kinds for n in names):
            raise Failure("p %s: %s's ivars read %s; RubyGems sets %s, then maybe %s\n  %s"
                          % (o["address"], cls, names, [n for n, _ in first], sorted(later), p["inspect"]))
        for name, value in got:
            kind = kinds[name]
            if not re.fullmatch(kind, value.strip()):
                raise Failure("p %s: %s=%s is not what RubyGems keeps there (%s)" % (o["address"], name, value, kind))
        # each heap value shown is one the dump found among the object's references
        for ref in re.findall(r"#<[\w:]+:0x0*([0-9a-f]+)", " ".join(v for _, v in got)):
            if "0x" + ref not in o["references"]:
                raise Failure("p %s: shows 0x%s, which is not among its references %s" % (o["address"], ref,
                                                                                        o["references"]))
        if len(seen) == 0:  # once in gdb too, where EXPR is evaluated by the debugger
            doc = debugger_json("gdb", core, workdir, "ruby p --depth 1 --json %s" % o["address"])
            if doc["inspect"] != p["inspect"]:
                raise Failure("p %s: gdb shows %s, the command line %s" % (o["address"], doc["inspect"],
                                                                         p["inspect"]))
        seen[o["address"]] = cls
    for cls in RUBYGEMS_IVARS:
        if cls not in seen.values():
            raise Failure("no %s among the core's %d plain objects" % (cls, len(objects)))
    harness.log("p: %d RubyGems objects (%s) show the ivars RubyGems sets, in its order"
                % (len(seen), ", ".join(sorted(set(seen.values())))))


def core_3_0_0(workdir):
    core = check_gc("3.0.0", workdir)
    check_ivars(core, workdir)


def core_4_0_0(workdir):
    check_gc("4.0.0", workdir)


CORE_TESTS = {"3.0.0": core_3_0_0, "4.0.0": core_4_0_0}


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in CORE_TESTS:
        sys.exit("usage: test_foreign_gc.py (%s)" % "|".join(sorted(CORE_TESTS)))
    harness.main(CORE_TESTS[sys.argv[1]])
