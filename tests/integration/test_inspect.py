"""`ruby gc`, `ruby p` and `ruby bt --locals` against the target's own view.

    test_inspect.py RUBY [COMBO...]      e.g. test_inspect.py 3.4.5, test_inspect.py 3.4.5 gdb.core

One parked program per Ruby (programs/inspect_scenarios.rb) serves every
check, in gdb and lldb, live and on one gcore'd core (four debugger runs,
each reported on its own: matrix.py), and the command line (`rbpeek p` of
the mistyped address below, --pid and --core):

  gc      `ruby gc --json` against GC.stat, taken with the GC disabled as the
          program's last act: count, major_gc_count, minor_gc_count and
          heap_final_slots exactly; total_allocated_objects may be higher by
          what the program allocated after recording (at most ALLOC_SLACK
          objects), and total_freed_objects by what it freed without a GC
          (2.7's rb_gc_force_recycle, also at most ALLOC_SLACK);
          heap_allocated_pages and heap_available_slots exactly, unless
          those objects grew the heap (at most GROWN_PAGES pages, and only
          if the net number is positive); heap_live_slots must then differ
          by exactly that net number, and heap_free_slots by it plus the new
          pages' slots; the heaps' pages and slots must add up to rbpeek's
          totals;
          malloc_increase_bytes and
          oldmalloc_increase_bytes within MALLOC_SLACK bytes; GC.disable
          shown as disabled, GC.stress's value, and GC.latest_gc_info's
          state as the phase.

  p       `ruby p ADDR --json` of every recorded object (the address
          ObjectSpace.dump gave) must give exactly the program's own
          #inspect: Strings with escapes and encodings, Symbols, Integers,
          Floats, Rational, Complex, Arrays, Hashes, Ranges, Structs, Data,
          objects with ivars, classes, modules, exceptions, Procs (blocks,
          lambdas, Symbol#to_proc, Method#to_proc), Methods and
          UnboundMethods (every parameter kind, aliases, attr, define_method,
          singleton, module and C methods), Regexps; and its class.
          An address inside a slot (and in gdb one outside every heap page)
          must be refused with "not a Ruby object" and the reason.
          A value that is no heap object (ObjectSpace.dump gives it no
          address; its VALUE is Fiddle.dlwrap's) must say which immediate
          it is, in JSON by its class, and in text for 0xdeadbeef, an
          address mistyped with an odd last digit: Ruby's Fiddle.dlunwrap
          reads it as a Fixnum, and `ruby p` must say so beside the number.

  frame   `ruby frame 3 --json` (the selected thread is the main one) gives
          Holder#parked_frame with the same location, self, owner and
          locals as `ruby bt --locals`.
  locals  `ruby bt -a --locals --json` of the main thread: the frames of
          Holder#parked_frame and its block hold, between them, every local
          the program recorded through its binding (parameters of every
          kind, block parameter and block-local variable, plain locals), each
          with exactly its #inspect (the block parameter's Proc too); self is the recorded
          self.inspect and the method owner is Holder. In text, a value
          longer than 200 bytes (local_wide) is cut there, with its length
          and where to see it whole; one of 100 KB (local_huge) is read
          only to 4096 bytes and said to be "over 4096 bytes".

The live target must be left running after each live run.
"""

import os
import sys

import harness
from harness import Failure
import matrix

ALLOC_SLACK = 2000
MALLOC_SLACK = 256 * 1024
EXACT = ("count", "major_gc_count", "minor_gc_count", "heap_final_slots")
# Pages the objects allocated after GC.stat may add: with the GC disabled,
# one that finds its size pool full makes the heap grow a page, even though
# the program fills the last page first (it fills by the total of free
# slots, and on 3.2+ that total may sit in another size pool: which one
# depends on the lengths of its strings, among them the checkout's path).
GROWN_PAGES = 2


def load_json(path, what):
    try:
        return harness.read_json(path)
    except (OSError, ValueError) as e:
        raise Failure("%s: cannot read %s: %s" % (what, path, e))


def check_gc(want, got):
    problems = []
    for k in EXACT:
        if got.get(k) != want[k]:
            problems.append("%s: %s, GC.stat says %s" % (k, got.get(k), want[k]))
    grew = got.get("total_allocated_objects", -1) - want["total_allocated_objects"]
    if not 0 <= grew <= ALLOC_SLACK:
        problems.append("total_allocated_objects: %s, GC.stat says %s" % (got.get("total_allocated_objects"),
                                                                          want["total_allocated_objects"]))
    freed = got.get("total_freed_objects", -1) - want["total_freed_objects"]
    if not 0 <= freed <= ALLOC_SLACK:
        problems.append("total_freed_objects: %s, GC.stat says %s" % (got.get("total_freed_objects"),
                                                                      want["total_freed_objects"]))
    net = grew - freed
    pages = got.get("heap_allocated_pages", -1) - want["heap_allocated_pages"]
    slots = got.get("heap_available_slots", -1) - want["heap_available_slots"]
    if not (pages == slots == 0 or (0 < pages <= GROWN_PAGES and slots > 0 and net > 0)):
        problems.append("heap_allocated_pages: %s, heap_available_slots: %s; GC.stat says %s, %s (%+d objects since: "
                        "only they may have added a page)"
                        % (got.get("heap_allocated_pages"), got.get("heap_available_slots"),
                           want["heap_allocated_pages"], want["heap_available_slots"], net))
    if got.get("heap_live_slots") != want["heap_live_slots"] + net:
        problems.append("heap_live_slots: %s, GC.stat says %s (%+d objects since)"
                        % (got.get("heap_live_slots"), want["heap_live_slots"], net))
    if got.get("heap_free_slots") != want["heap_free_slots"] - net + slots:
        problems.append("heap_free_slots: %s, GC.stat says %s (%+d objects since, %+d slots in new pages)"
                        % (got.get("heap_free_slots"), want["heap_free_slots"], net, slots))
    for k in ("malloc_increase_bytes", "oldmalloc_increase_bytes"):
        if abs(got.get(k, -10**12) - want[k]) > MALLOC_SLACK:
            problems.append("%s: %s, GC.stat says %s" % (k, got.get(k), want[k]))
    if got.get("disabled") is not True:
        problems.append("disabled: %s, but the program called GC.disable" % got.get("disabled"))
    if got.get("stress") != want["stress"]:
        problems.append("stress: %s, GC.stress is %s" % (got.get("stress"), want["stress"]))
    if got.get("phase") != want["state"] or got.get("during_gc") is not False:
        problems.append("phase %s (during_gc %s), GC.latest_gc_info says %s"
                        % (got.get("phase"), got.get("during_gc"), want["state"]))
    heaps = got.get("heaps") or []
    if sum(h["heap_eden_slots"] + h.get("heap_tomb_slots", 0) for h in heaps) != got.get("heap_available_slots"):
        problems.append("the heaps' slots do not add up to heap_available_slots")
    if sum(h["heap_eden_pages"] + h.get("heap_tomb_pages", 0) for h in heaps) != got.get("heap_allocated_pages"):
        problems.append("the heaps' pages do not add up to heap_allocated_pages")
    if problems:
        raise Failure("ruby gc: " + "; ".join(problems))
    return grew


# The immediate each class's values are when ObjectSpace.dump gives them no address
IMMEDIATE_KINDS = {"Integer": "Fixnum", "Float": "Flonum", "Symbol": "Symbol (static)", "NilClass": "nil",
                   "TrueClass": "true", "FalseClass": "false"}
MISTYPED = "mistyped address 0xdeadbeef"


def check_p(objects, out_dir, output, refusals):
    problems = []
    for i, o in enumerate(objects):
        got = load_json(os.path.join(out_dir, "p%d.json" % i), "ruby p --json of %s" % o["label"])
        kind = IMMEDIATE_KINDS.get(o["class"]) if o["immediate"] else None
        if got.get("inspect") != o["inspect"]:
            problems.append("%s (%s): %r, Ruby's inspect is %r" % (o["label"], o["address"], got.get("inspect"),
                                                                 o["inspect"]))
        elif got.get("class") != o["class"] and not o["class"].startswith("#<"):
            problems.append("%s: class %r, Ruby says %r" % (o["label"], got.get("class"), o["class"]))
        elif got.get("immediate") != kind:
            problems.append("%s (%s): immediate %r, want %r (a %s %s)" % (
                o["label"], o["address"], got.get("immediate"), kind, o["class"],
                "with no heap address" if o["immediate"] else "object"))
    mistyped = [o for o in objects if o["label"] == MISTYPED]
    if mistyped:
        n = mistyped[0]["inspect"]
        want = "%s\n  0xdeadbeef is an immediate, not an object's address: Fixnum %s\n" % (n, n)
        if want not in output.replace("\r\n", "\n"):
            problems.append("no %r in the output of `ruby p 0xdeadbeef`" % want)
    for what in refusals:
        if what not in output:
            problems.append("no %r in the output" % what)
    if problems:
        raise Failure("ruby p: " + "; ".join(problems[:12]) + (" (and %d more)" % (len(problems) - 12)
                                                              if len(problems) > 12 else ""))


def check_locals(want, doc):
    main = [t for t in doc["threads"] if t["main"]]
    if not main:
        raise Failure("ruby bt --locals: no main thread")
    frames = [f for f in main[0]["frames"] if "parked_frame" in f["label"]]
    if len(frames) != 2:
        raise Failure("ruby bt --locals: %d frames of parked_frame (want the method and its block): %s"
                      % (len(frames), [f["label"] for f in main[0]["frames"]]))
    problems = []
    seen = {}
    for f in frames:
        if "locals" not in f:
            raise Failure("ruby bt --locals: no locals for %s: %s" % (f["label"], f.get("locals_error")))
        seen.update(f["locals"])
        if f.get("self") != want["self"]:
            problems.append("self of %s: %r, Ruby says %r" % (f["label"], f.get("self"), want["self"]))
        if f.get("owner") != want["owner"]:
            problems.append("owner of %s: %r, want %r" % (f["label"], f.get("owner"), want["owner"]))
    for name, text in want["locals"].items():
        got = seen.get(name)
        if got != text:
            problems.append("local %s: %r, Ruby says %r" % (name, got, text))
    extra = set(seen) - set(want["locals"])
    if extra:
        problems.append("locals Ruby does not list: %s" % sorted(extra))
    if problems:
        raise Failure("ruby bt --locals: " + "; ".join(problems))
    return len(want["locals"])


def check_locals_text(want_locals, output):
    """`ruby bt --locals` in text: a value longer than a line shows (200
    bytes) is cut there, says its length and where to see it whole; one of
    4096 bytes and more (local_huge, 100 KB) is read only that far, and says
    so: "over 4096 bytes"."""
    for name, tail in (("local_wide", "%d bytes" % len(want_locals["local_wide"].encode("utf-8"))),
                       ("local_huge", "over 4096 bytes")):
        wide = want_locals[name]
        prefix = "        %s = " % name
        lines = [l for l in output.splitlines() if l.startswith(prefix)]
        if len(lines) != 1:
            raise Failure("ruby bt --locals: %d lines for %s (want 1)" % (len(lines), name))
        shown = lines[0][len(prefix):]
        want_tail = "\u2026 (%s; --json has it whole" % tail
        head = shown.split("\u2026 (")[0]
        if len(head.encode("utf-8")) != 200 or not wide.startswith(head) or want_tail not in shown:
            raise Failure("ruby bt --locals: %s shown as %r; Ruby's inspect is %r..." % (name, shown, wide[:300]))
        harness.log("  bt --locals (text): %s's %d bytes cut at 200, said as %r" % (name, len(wide), tail))


def check_frame(bt_doc, got):
    main = [t for t in bt_doc["threads"] if t["main"]][0]
    want = main["frames"][3]
    for k in ("label", "lineno", "self", "owner", "locals"):
        if got.get(k) != want.get(k):
            raise Failure("ruby frame 3: %s is %r, ruby bt --locals says %r" % (k, got.get(k), want.get(k)))


def run_checks(target, debugger, mode, core, ruby):
    out_dir = os.path.join(target.workdir, "%s-%s" % (debugger, mode))
    os.makedirs(out_dir, exist_ok=True)
    gc_json = os.path.join(out_dir, "gc.json")
    cmds = ["ruby gc --json -o " + gc_json, "ruby gc"]
    objects = [o for o in target.expected()["objects"] if o["address"]]
    for i, o in enumerate(objects):
        cmds.append("ruby p %s --json --max-length 100000 -o %s" % (o["address"], os.path.join(out_dir, "p%d.json" % i)))
    inside = int(objects[0]["address"], 16) + 8
    bt_json = os.path.join(out_dir, "bt.json")
    cmds.append("ruby bt -a --locals --json -o " + bt_json)
    cmds.append("ruby bt -a --locals")
    frame_json = os.path.join(out_dir, "frame.json")
    cmds.append("ruby frame 3 --json -o " + frame_json)  # sleep, the block, each, then parked_frame
    # lldb -b stops at a command's first error: one refusal, the last command
    refusals = ["rbpeek: not a Ruby object: 0x%x is inside the slot" % inside]
    if debugger == "gdb":
        refusals.insert(0, "rbpeek: not a Ruby object: 0x10 is not in any heap page")
    if any(o["label"] == MISTYPED for o in objects):
        cmds.append("ruby p 0xdeadbeef")
    cmds += ["ruby p " + r.split()[5] for r in refusals]
    if mode == "live":
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
    else:
        rc, output = harness.run_debugger(debugger, cmds, exe=ruby, core=core)
    harness.assert_no_traceback(output)
    if "GC: " not in output:
        raise Failure("%s %s: `ruby gc` printed no state line:\n%s" % (debugger, mode, output[-3000:]))
    grew = check_gc(target.expected("gc_stat.json"), load_json(gc_json, "ruby gc --json"))
    harness.log("  %s %s: gc agrees with GC.stat (+%d objects allocated after recording)" % (debugger, mode, grew))
    check_p(objects, out_dir, output, refusals)
    harness.log("  %s %s: p agrees with #inspect for all %d objects" % (debugger, mode, len(objects)))
    bt_doc = load_json(bt_json, "ruby bt --locals --json")
    n = check_locals(target.expected(), bt_doc)
    check_frame(bt_doc, load_json(frame_json, "ruby frame 3 --json"))
    check_locals_text(target.expected()["locals"], output)
    harness.log("  %s %s: bt --locals agrees with the binding for all %d locals, self and owner" % (debugger, mode, n))
    if mode == "live":
        target.assert_left_running()


def check_cli(target, mode, core):
    """The command line's `rbpeek p` of the mistyped address, in text and
    JSON (the rest of `p` is the same core call the debuggers make)."""
    mistyped = [o for o in target.expected()["objects"] if o["label"] == MISTYPED]
    if not mistyped:
        raise harness.SkipTest("this Ruby has no fiddle: no VALUE of its own to compare with")
    where = ["--pid", str(target.pid)] if mode == "live" else ["--core", core]
    text, _ = harness.cli(["p"] + where + ["0xdeadbeef"])
    doc = harness.strict_json(harness.cli(["p"] + where + ["0xdeadbeef", "--json"], raw=True)[0])
    n = mistyped[0]["inspect"]
    want = "%s\n  0xdeadbeef is an immediate, not an object's address: Fixnum %s\n" % (n, n)
    if text != want or doc.get("inspect") != n or doc.get("immediate") != "Fixnum":
        raise Failure("rbpeek p 0xdeadbeef (%s): %r and %r, want %r and the JSON's immediate 'Fixnum'"
                      % (mode, text, doc, want))
    harness.log("  rbpeek --%s: p 0xdeadbeef says it is the Fixnum %s" % ("pid" if mode == "live" else "core", n))


def check(c):
    if c.debugger == "cli":
        check_cli(c.target, c.mode, c.core)
    else:
        run_checks(c.target, c.debugger, c.mode, c.core, c.ruby)


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    m.run("inspect_scenarios.rb", check, combos=matrix.WITH_CLI, parallel=True)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
