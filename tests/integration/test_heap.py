"""`ruby heap` (census and --dump) against the target's own ObjectSpace view.

    test_heap.py RUBY [COMBO...]      e.g. test_heap.py 3.4.5, test_heap.py 3.4.5 lldb.core

The target (programs/heap_population.rb, at half its full size: SCALE 0.5)
builds a heap of about 400,000 objects with a known population, records ObjectSpace.count_objects, each
own class's instance count, memsize_of_all and ObjectSpace.dump_all, then
parks with GC disabled. It is started once per Ruby and gcore'd once
(matrix.py); in every combination, gdb and lldb live and on the core and
the command line (`rbpeek heap --pid`, `--core --exe`), `ruby heap --json`
and `ruby heap --dump` must agree with that record:

  census  instance counts of the program's own classes: exact (by the name
          Ruby gives the class: Module#name, or inspect for the anonymous
          one); every count_objects entry (TOTAL, FREE, T_*): within 0.5%;
          the bytes of the objects memsize_of_all counts: within 10% of it;
          no unreadable slots or skipped pages.
  dump    of the objects in both dumps: type and class agree for >= 99%;
          references agree (as sets) for >= 99% of T_OBJECT, T_ARRAY,
          T_HASH, T_STRUCT, T_CLASS, T_MODULE, T_ICLASS objects together,
          and for >= 99% of each of the first four; a string's bytesize,
          value and encoding agree for >= 99% of strings; and the dump
          finds >= 99% of the objects Ruby's has.

Every line of rbpeek's dump is read by a strict JSON parser (UTF-8
strictly decoded, no lone surrogate). Ruby's dump is parsed once; a dump
byte-identical to one already compared (the heap of a parked target does
not change) has that comparison's verdict. In gdb and lldb on the core, a
damaged copy of the core (made once) is then censused too: garbage written
over the slots of two heap pages and over the header of a third must give
a census (and a dump) that completes, counts unreadable slots and a
skipped page, and prints no traceback; and a String whose bytes are not
UTF-8, marked 7-bit in that copy, must be dumped with each bad byte as
U+FFFD, every line still strict JSON (issue 24; a damaged dump
byte-identical to the other debugger's has its verdict). The live target
must be left running.
"""

import collections
import hashlib
import json
import os
import random
import re
import sys

import harness
from harness import Failure
import matrix

REF_TYPES = ("OBJECT", "ARRAY", "HASH", "STRUCT", "CLASS", "MODULE", "ICLASS")
STRICT_REF_TYPES = ("OBJECT", "ARRAY", "HASH", "STRUCT")


def ruby27_escapes(value):
    """A string value as Ruby 2.7's dump_all would have read back: it writes
    control characters as "\\u%04d" of their DECIMAL code (fixed in 3.0), so
    byte 19 comes back as U+0019. rbpeek writes the correct escape; to
    compare with 2.7's own dump, ours is put through the same mistake."""
    if value is None:
        return None
    return "".join(chr(int("%04d" % ord(c), 16)) if ord(c) < 0x20 and c not in "\0\b\t\f\n\r" else c
                   for c in value)


def load_dump(path, mimic_27=False, strict=False):
    """address -> (type, class, hash of the reference set, hash of the string
    fields or None). Hashes keep an 800,000-object dump small in memory.
    strict: every line must be JSON a strict parser reads (rbpeek's dump;
    Ruby's own may hold bytes that are not UTF-8)."""
    out = {}
    with open(path, "rb") as f:
        for n, raw in enumerate(f, 1):
            try:
                o = harness.strict_json(raw) if strict else json.loads(raw.decode("utf-8", "surrogateescape"))
            except ValueError as e:
                raise Failure("%s line %d is not %sJSON: %s: %r" % (path, n, "strict " if strict else "", e, raw[:200]))
            t = o.get("type")
            if t == "ROOT":
                continue
            if "address" not in o or t is None:
                raise Failure("%s line %d lacks address or type: %r" % (path, n, raw[:200]))
            refs = hash(frozenset(o.get("references", ())))
            value = ruby27_escapes(o.get("value")) if mimic_27 else o.get("value")
            strf = hash((o.get("bytesize"), value, o.get("encoding"))) if t == "STRING" else None
            out[int(o["address"], 16)] = (sys.intern(t), o.get("class"), refs, strf)
    return out


def compare_dumps(ruby, ours):
    both = ruby.keys() & ours.keys()
    if len(both) < 0.99 * len(ruby):
        raise Failure("the dump has only %d of the %d objects in Ruby's dump_all" % (len(both), len(ruby)))
    tc_ok = 0
    refs = collections.Counter()
    refs_ok = collections.Counter()
    strings = strings_ok = 0
    bad = collections.defaultdict(list)
    for a in both:
        r, m = ruby[a], ours[a]
        if r[0] == m[0] and r[1] == m[1]:
            tc_ok += 1
        else:
            bad["type/class"].append(a)
        if r[0] in REF_TYPES:
            refs[r[0]] += 1
            if r[2] == m[2]:
                refs_ok[r[0]] += 1
            else:
                bad["refs " + r[0]].append(a)
        if r[0] == "STRING":
            strings += 1
            if r[3] == m[3]:
                strings_ok += 1
            else:
                bad["string"].append(a)
    lines = ["%d objects in both dumps (Ruby's: %d, ours: %d)" % (len(both), len(ruby), len(ours)),
             "type and class agree: %d (%.3f%%)" % (tc_ok, 100.0 * tc_ok / len(both))]
    for t in REF_TYPES:
        if refs[t]:
            lines.append("references of %-6s agree: %6d of %6d (%.3f%%)"
                         % (t, refs_ok[t], refs[t], 100.0 * refs_ok[t] / refs[t]))
    if strings:
        lines.append("string bytesize/value/encoding agree: %d of %d (%.3f%%)"
                     % (strings_ok, strings, 100.0 * strings_ok / strings))
    for line in lines:
        harness.log("  " + line)
    problems = []
    if tc_ok < 0.99 * len(both):
        problems.append("type/class agree for only %d of %d objects" % (tc_ok, len(both)))
    total_refs, total_ok = sum(refs.values()), sum(refs_ok.values())
    if total_ok < 0.99 * total_refs:
        problems.append("references agree for only %d of %d objects of %s" % (total_ok, total_refs, REF_TYPES))
    for t in STRICT_REF_TYPES:
        if refs[t] and refs_ok[t] < 0.99 * refs[t]:
            problems.append("references of %s agree for only %d of %d" % (t, refs_ok[t], refs[t]))
    if strings and strings_ok < 0.99 * strings:
        problems.append("string fields agree for only %d of %d strings" % (strings_ok, strings))
    if problems:
        examples = ["%s: 0x%x" % (k, v[0]) for k, v in sorted(bad.items()) if v]
        raise Failure("; ".join(problems) + " (examples: %s)" % ", ".join(examples[:8]))


def compare_census(expected, counts, census):
    problems = []
    by_name = {}
    for c in census["classes"]:
        by_name.setdefault(c["name"], c)
    for own in expected["own_classes"]:
        got = by_name.get(own["name"], {}).get("count", 0)
        if got != own["count"]:
            problems.append("%s: %d objects, Ruby counts %d" % (own["name"], got, own["count"]))
    ours = census["count_objects"]
    for key, want in sorted(counts.items()):
        got = ours.get(key, 0)
        if abs(got - want) > 0.005 * want:
            problems.append("count_objects %s: %d, Ruby says %d (off by %.2f%%)"
                            % (key, got, want, 100.0 * abs(got - want) / max(want, 1)))
    for key in ours:
        if key not in counts and ours[key]:
            problems.append("count_objects %s: %d, Ruby has none" % (key, ours[key]))
    memsize = expected["memsize_of_all"]
    mine = census["bytes"]["memsize_of_all_comparable"]
    gap = (mine - memsize) / float(memsize)
    harness.log("  bytes: %d, memsize_of_all %d (%+.2f%%)" % (mine, memsize, 100 * gap))
    if abs(gap) > 0.10:
        problems.append("bytes %d are %.1f%% off memsize_of_all %d" % (mine, 100 * gap, memsize))
    heap = census["heap"]
    if heap["unreadable"] or heap["rejected_pages"]:
        problems.append("a healthy heap gave %d unreadable slots and %d skipped pages"
                        % (heap["unreadable"], heap["rejected_pages"]))
    if problems:
        raise Failure("census mismatches:\n  " + "\n  ".join(problems))



def scribble(path, segs, addr, length, rng):
    for vaddr, offset, filesz in segs:
        if vaddr <= addr and addr + length <= vaddr + filesz:
            with open(path, "r+b") as f:
                f.seek(offset + addr - vaddr)
                f.write(bytes(rng.getrandbits(8) | 0x01 for _ in range(length)))  # never 0: no "free" slots
            return
    raise Failure("0x%x is not in the core's memory" % addr)


CODERANGE_MASK = 3 << 20    # ENC_CODERANGE_MASK: FL_USER8 | FL_USER9
CODERANGE_7BIT = 1 << 20


def mark_7bit(path, segs, addr):
    """Sets the coderange bits of the String at addr to 7BIT in the core at
    path, as a damaged heap may have them."""
    for vaddr, offset, filesz in segs:
        if vaddr <= addr and addr + 8 <= vaddr + filesz:
            with open(path, "r+b") as f:
                f.seek(offset + addr - vaddr)
                flags = int.from_bytes(f.read(8), "little")
                f.seek(offset + addr - vaddr)
                f.write(((flags & ~CODERANGE_MASK) | CODERANGE_7BIT).to_bytes(8, "little"))
            return
    raise Failure("0x%x is not in the core's memory" % addr)


def check_damaged_string(dump, addr):
    """Issue 24: the String marked 7-bit over bytes that are not UTF-8 is in
    the dump with its value, each invalid byte as U+FFFD, and every line of
    the dump reads as strict JSON (load_dump checks)."""
    lines = load_dump(dump, strict=True)
    if int(addr, 16) not in lines:
        raise Failure("the damaged String 0x%s is not in the dump" % addr)
    with open(dump, "rb") as f:
        mine = [harness.strict_json(l) for l in f if b'"address":"%s"' % addr.encode() in l]
    want = "not \ufffd\ufffd utf-8 \ufffd\ufffd"
    if len(mine) != 1 or mine[0].get("value") != want:
        raise Failure("the damaged String's line: %r, want its value %r" % (mine, want))
    harness.log("a String marked 7-bit over bytes that are not UTF-8: dumped as %r" % want)


def damaged_copy(core, census, workdir, not_utf8):
    """A copy of the core with garbage over the slots of two populated heap
    pages and over the header of a third (the same pages every time), and
    the String at not_utf8 marked 7-bit."""
    damaged = os.path.join(workdir, "damaged.core")
    harness.copy_core(core, damaged)
    segs = harness.core_segments(damaged)
    mark_7bit(damaged, segs, int(not_utf8, 16))
    pages = [p for p in census["heap"]["page_list"] if p["live"] > 50]
    if len(pages) < 3:
        raise Failure("too few populated pages to damage")
    rng = random.Random(4)
    hit = rng.sample(pages, 3)
    for p in hit[:2]:
        slot = p["slot_size"]
        scribble(damaged, segs, int(p["start"], 16) + 8 * slot, 20 * slot, rng)
    scribble(damaged, segs, int(hit[2]["header"], 16), 48, rng)
    return damaged


def corruption_check(c, census):
    """The census and dump of the damaged copy (made once, for both
    debuggers) complete, count the damage and print no traceback."""
    not_utf8 = c.target.expected()["not_utf8"]
    damaged = c.matrix.shared("damaged core", lambda: damaged_copy(c.core, census, c.target.workdir, not_utf8))
    out_json = c.path("damaged.json")
    out_dump = c.path("damaged.jsonl")
    rc, output = c.run_debugger(["ruby heap --json -o " + out_json, "ruby heap --dump " + out_dump],
                                core=damaged, timeout=900)
    harness.assert_no_traceback(output)
    if not os.path.exists(out_json) or not os.path.exists(out_dump):
        raise Failure("no census or dump from the damaged core; debugger output:\n" + output[-3000:])
    d = harness.read_json(out_json)
    heap = d["heap"]
    harness.log("damaged core: %d unreadable slots, %d skipped pages, %d live"
                % (heap["unreadable"], heap["rejected_pages"], heap["live"]))
    if heap["unreadable"] < 2 or heap["rejected_pages"] < 1:
        raise Failure("damage not reported: %d unreadable slots, %d skipped pages"
                      % (heap["unreadable"], heap["rejected_pages"]))
    if heap["live"] < 0.9 * census["heap"]["live"]:
        raise Failure("the damaged census stopped early: %d live of %d" % (heap["live"], census["heap"]["live"]))
    if "unreadable" not in output:
        raise Failure("the dump of the damaged core did not mention unreadable slots:\n" + output[-2000:])
    # Both debuggers dump the same damaged copy: a dump byte-identical to
    # one already read has that reading's verdict, as in check_dump.
    digest = sha256(out_dump)
    first = c.matrix.shared(("damaged dump", digest), lambda: (check_damaged_string(out_dump, not_utf8), c.label)[1])
    if first != c.label:
        harness.log("damaged dump byte-identical (sha256 %s) to %s's, read above" % (digest[:16], first))


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_dump(c, path):
    """The dump against Ruby's dump_all (parsed once for all combinations).
    The target is parked with its GC disabled, so every front end usually
    writes the same bytes: a dump identical to one already compared has
    that comparison's verdict (compare_dumps depends on nothing else), and
    is not parsed again."""
    target = c.target
    digest = sha256(path)

    def compare():
        ruby = c.matrix.shared("ruby dump", lambda: load_dump(os.path.join(target.workdir, "dump.jsonl")))
        mimic = target.expected()["ruby_version"].startswith("2.")
        compare_dumps(ruby, load_dump(path, mimic_27=mimic, strict=True))
        return c.label
    first = c.matrix.shared(("dump", digest), compare)
    if first != c.label:
        harness.log("dump byte-identical (sha256 %s) to %s's, compared with Ruby's above" % (digest[:16], first))


def check(c):
    target = c.target
    out_json = c.path("census.json")
    out_dump = c.path("rbpeek.jsonl")
    if c.debugger == "cli":
        census = harness.strict_json(harness.cli(["heap", "--json"] + c.where())[0])
        out, _ = harness.cli(["heap", "--dump", out_dump] + c.where())
        if not re.search(r"rbpeek: wrote \d+ objects", out):
            raise Failure("rbpeek heap --dump said: %s" % out)
    else:
        rc, output = c.run_debugger(["ruby heap --json -o %s --stats" % out_json,
                                     "ruby heap --dump %s --stats" % out_dump], timeout=900)
        harness.assert_no_traceback(output)
        for path in (out_json, out_dump):
            if not os.path.exists(path):
                raise Failure("%s not written; debugger output:\n%s" % (path, output[-3000:]))
        for line in output.splitlines():
            if line.startswith("rbpeek: ") and "objects" in line:
                harness.log(line)
        census = harness.read_json(out_json)
    with open(os.path.join(target.workdir, "counts.json"), encoding="utf-8") as f:
        counts = json.load(f)
    expected = target.expected()
    if census["ruby_version"] != expected["ruby_version"]:
        raise Failure("version: rbpeek says %s, Ruby says %s" % (census["ruby_version"], expected["ruby_version"]))
    compare_census(expected, counts, census)
    check_dump(c, out_dump)
    if c.mode == "core" and c.debugger != "cli":
        corruption_check(c, census)
    harness.log("census and dump agree with Ruby's own")


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    # Half the full population: every kind of object and page is there, and
    # each comparison's bound is relative, so it is as strict (issue 27).
    with m.start("heap_population.rb", timeout=600, env={"HEAP_POPULATION_SCALE": "0.5"}) as target:
        m.prefetch("ruby dump", lambda: load_dump(os.path.join(target.workdir, "dump.jsonl")))
        m.run(target, check, combos=matrix.WITH_CLI, parallel=True)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
