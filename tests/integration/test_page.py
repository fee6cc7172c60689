"""`ruby page ADDR` against the target's own view of its heap pages.

    test_page.py RUBY [COMBO...]      e.g. test_page.py 3.4.5, test_page.py 3.4.5 cli.core

One parked program per Ruby (programs/page_scenarios.rb) records, for
objects of many types (some kept through three full GCs, some made after
GC.disable), what ObjectSpace.dump says of each: address, type, class, slot
size, and the GC flags the Ruby reads from the page's own bitmaps (marked,
old, uncollectible, marking, wb_protected, pinned); and GC::INTERNAL_CONSTANTS.
Then, in gdb and lldb, live and on one gcore'd core, and through the command
line (--pid and --core), each combination reported on its own (matrix.py),
`ruby page ADDR --json` of every page holding a recorded object must show:

  - the object's slot with its type, class (the klass word) and the same
    flags: marked, uncollectible, marking, wb_unprotected = not wb_protected,
    pinned where reported, old = age 3;
  - the slot size ObjectSpace.dump gives (3.2+), and a slot count that
    fills the page (HEAP_PAGE_OBJ_LIMIT base slots of this size, less one
    for alignment at most);
  - a free list of free slots of the page only, which reaches every free
    slot except on the one page per slot size the allocator is taking
    slots from (it holds that page's list); the page's free_slots counter
    is shown but not compared (only sweeping updates it);
and `ruby page 0x10` must be refused in one line ("not in any of the").

The live target must be left running after each live run.
"""

import json
import os
import sys

import harness
from harness import Failure
import matrix


def load_objects(target):
    objs = []
    with open(os.path.join(target.workdir, "objects.txt"), encoding="utf-8", errors="replace") as f:
        for line in f:
            if not line.strip():
                continue
            label, dump = line.rstrip("\n").split("\t", 1)
            d = json.loads(dump)
            d["label"] = label
            objs.append(d)
    consts = {}
    with open(os.path.join(target.workdir, "constants.txt")) as f:
        for line in f:
            k, v = line.rstrip("\n").split("\t", 1)
            consts[k] = v
    return objs, consts


def page_size(consts):
    # 2.7 does not list HEAP_PAGE_SIZE; its pages are 16 KiB
    return int(consts.get("HEAP_PAGE_SIZE", 16384))


def check_page(doc, objs, consts, where):
    problems = []
    by_addr = {int(s["address"], 16): s for s in doc["slots"]}
    base = int(consts.get("BASE_SLOT_SIZE", consts.get("RVALUE_SIZE", 40)))
    limit = int(consts["HEAP_PAGE_OBJ_LIMIT"])
    size = doc["slot_size"]
    lo, hi = limit * base // size - 1, (limit + 1) * base // size
    if not lo <= doc["total_slots"] <= hi:
        problems.append("%u slots of %u bytes: a page holds %d to %d" % (doc["total_slots"], size, lo, hi))
    for o in objs:
        s = by_addr.get(int(o["address"], 16))
        if s is None:
            problems.append("%s (%s): no slot there" % (o["label"], o["address"]))
            continue
        if s["type"] != "T_" + o["type"]:
            problems.append("%s: type %s, ObjectSpace.dump says %s" % (o["label"], s["type"], o["type"]))
            continue
        if "class" in o and int(s["klass"], 16) != int(o["class"], 16):
            problems.append("%s: klass %s, ObjectSpace.dump says %s" % (o["label"], s["klass"], o["class"]))
        if "slot_size" in o and o["slot_size"] != size:
            problems.append("%s: slot size %d, ObjectSpace.dump says %d" % (o["label"], size, o["slot_size"]))
        flags = o.get("flags", {})
        want = {"marked": flags.get("marked", False), "uncollectible": flags.get("uncollectible", False),
                "marking": flags.get("marking", False), "wb_unprotected": not flags.get("wb_protected", False),
                "old": flags.get("old", False)}
        if "pinned" in s:
            want["pinned"] = flags.get("pinned", False)
        for k, v in want.items():
            if s.get(k) != v:
                problems.append("%s: %s is %s, ObjectSpace.dump says %s (flags %s)" % (o["label"], k, s.get(k), v,
                                                                                       flags))
    free = sum(1 for s in doc["slots"] if s["type"] == "free")
    listed = sum(1 for s in doc["slots"] if s.get("on_freelist"))
    if doc["freelist_note"]:
        problems.append("free list: %s" % doc["freelist_note"])
    if listed != doc["freelist_length"]:
        problems.append("free list of %d, but %d slots marked on it" % (doc["freelist_length"], listed))
    if problems:
        raise Failure("%s: ruby page %s: %s" % (where, doc["page"], "; ".join(problems[:10])))
    return len(objs), listed < free


def check_free_lists(docs, where):
    """Every free slot of a page is on its free list, except on the page
    each heap allocates from, whose list the allocator holds (at most one
    per slot size; the GC is disabled, so none is being swept)."""
    short = {}
    for doc in docs:
        free = sum(1 for s in doc["slots"] if s["type"] == "free")
        if doc["freelist_length"] < free:
            short.setdefault(doc["slot_size"], []).append("%s (%d of %d free slots listed, free_slots %d)"
                                                          % (doc["page"], doc["freelist_length"], free,
                                                             doc["free_slots"]))
    bad = [p for pages in short.values() if len(pages) > 1 for p in pages]
    if bad:
        raise Failure("%s: free lists that miss free slots on more than one page of a slot size: %s"
                      % (where, "; ".join(bad[:6])))


def pages_of(objs, consts):
    pages = {}
    mask = ~(page_size(consts) - 1)
    for o in objs:
        pages.setdefault(int(o["address"], 16) & mask, []).append(o)
    return pages


def check_all(out_dir, pages, consts, where):
    n = 0
    docs = []
    for i, (body, objs) in enumerate(sorted(pages.items())):
        path = os.path.join(out_dir, "page%d.json" % i)
        try:
            doc = harness.read_json(path)
        except (OSError, ValueError) as e:
            raise Failure("%s: ruby page %s --json: cannot read %s: %s" % (where, objs[0]["address"], path, e))
        if int(doc["page"], 16) != body:
            raise Failure("%s: ruby page %s shows the page at %s, not %s" % (where, objs[0]["address"],
                                                                             doc["page"], hex(body)))
        n += check_page(doc, objs, consts, where)[0]
        docs.append(doc)
    check_free_lists(docs, where)
    return n


def run_debugger(target, debugger, mode, core, ruby, pages, consts):
    out_dir = os.path.join(target.workdir, "%s-%s" % (debugger, mode))
    os.makedirs(out_dir, exist_ok=True)
    cmds = []
    for i, (body, objs) in enumerate(sorted(pages.items())):
        cmds.append("ruby page %s --json -o %s" % (objs[0]["address"], os.path.join(out_dir, "page%d.json" % i)))
    cmds.append("ruby page %s" % objs[0]["address"])  # text: one line per slot
    cmds.append("ruby page 0x10")  # last: lldb -b stops at a command's first error
    if mode == "live":
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
    else:
        rc, output = harness.run_debugger(debugger, cmds, exe=ruby, core=core)
    harness.assert_no_traceback(output)
    if "heap page 0x" not in output:
        raise Failure("%s %s: ruby page printed no page line:\n%s" % (debugger, mode, output[-3000:]))
    if "is not in any of the" not in output:
        raise Failure("%s %s: ruby page 0x10 was not refused:\n%s" % (debugger, mode, output[-3000:]))
    n = check_all(out_dir, pages, consts, "%s %s" % (debugger, mode))
    harness.log("  %s %s: %d pages agree with ObjectSpace.dump for %d objects" % (debugger, mode, len(pages), n))
    if mode == "live":
        target.assert_left_running()


def run_cli(target, mode, core, pages, consts):
    out_dir = os.path.join(target.workdir, "cli-%s" % mode)
    os.makedirs(out_dir, exist_ok=True)
    where = ["--pid", str(target.pid)] if mode == "live" else ["--core", core]
    for i, (body, objs) in enumerate(sorted(pages.items())):
        rc, out, err = harness.run_cli(["page"] + where + [objs[0]["address"], "--json", "-o",
                                                           os.path.join(out_dir, "page%d.json" % i)])
        harness.assert_no_traceback(out + err)
        if rc != 0:
            raise Failure("rbpeek page %s %s: exit %d: %s" % (mode, objs[0]["address"], rc, err[-2000:]))
    rc, out, err = harness.run_cli(["page"] + where + ["0x10"])
    if rc == 0 or "is not in any of the" not in err or len(err.strip().splitlines()) != 1:
        raise Failure("rbpeek page 0x10 (%s): exit %d, want one line of refusal: %r" % (mode, rc, err[-2000:]))
    n = check_all(out_dir, pages, consts, "rbpeek %s" % mode)
    harness.log("  rbpeek --%s: %d pages agree for %d objects" % ("pid" if mode == "live" else "core", len(pages), n))


def check(c, pages, consts):
    if c.debugger == "cli":
        run_cli(c.target, c.mode, c.core, pages, consts)
    else:
        run_debugger(c.target, c.debugger, c.mode, c.core, c.ruby, pages, consts)


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    with m.start("page_scenarios.rb") as target:
        objs, consts = load_objects(target)
        pages = pages_of(objs, consts)
        m.run(target, lambda c: check(c, pages, consts), combos=matrix.WITH_CLI, parallel=True)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
