"""`ruby threads --json` and `ruby locks --json` against what the target Ruby
program knows about its own threads and locks.

    test_locks.py RUBY [stuck|healthy|both] [COMBO...]    e.g. test_locks.py 3.4.5 stuck gdb.core

RUBY is a matrix name (see harness.ruby_binary). By default both scenario
programs run (programs/locks_scenarios.rb), each started once and gcore'd
once (matrix.py), and read in gdb and lldb, live (attached to the parked
process) and on the core:

  stuck    a two-Mutex deadlock, a three-thread Mutex cycle, a Thread#join
           cycle, a thread joining a deadlocked one, a Mutex held by a
           sleeper with a waiter, Queue/SizedQueue/ConditionVariable waiters,
           a Monitor entered twice with a waiter, an IO reader, sleeps,
           Thread.stop, a timed join, and (3.x) a Mutex whose fiber finished.
  healthy  nothing that can deadlock, and a spinning thread holding the GVL:
           no deadlock may be reported.

For every thread the program recorded: its wait (kind, the exact object by
its ObjectSpace.dump address, the Mutex owner or join target by thread name,
timeout), the Mutexes it holds (proven inside the owner with Mutex#owned?),
its top frame and status must match; every deadlock cycle must be found
exactly, with no extra one; the never-released waits and the threads stuck
behind must match; and the GVL owner must be the spinner, or nobody when
every thread sleeps. The target must be left running. Four copies of the
stuck scenario's core, damaged where the analysis reads (made once), must
each give valid JSON or one rbpeek line in both debuggers (each debugger
reads the four in one session, each loaded in place of the one before).
"""

import json
import os
import random
import re
import sys

import harness
from harness import Failure
import matrix


def tname(ref):
    """A thread reference as the program names threads ('<main>' for main)."""
    if ref is None:
        return None
    return "<main>" if ref["main"] else ref["name"]


class Checker:
    def __init__(self, label):
        self.label = label
        self.problems = []

    def eq(self, what, got, want):
        if got != want:
            self.problems.append("%s: %s: rbpeek says %r, Ruby says %r" % (self.label, what, got, want))

    def true(self, what, cond):
        if not cond:
            self.problems.append("%s: %s" % (self.label, what))


def check_threads(c, expected, threads_doc, locks_doc, dbg_tids):
    """Per-thread facts, from both commands (they must agree). dbg_tids maps
    the debugger's thread numbers to TIDs, from its own thread list (None:
    the command line, which has no debugger's list to check them against)."""
    mutex_addr = {role: m["address"] for role, m in expected["mutexes"].items()}
    role_of = {m["address"]: role for role, m in expected["mutexes"].items()}
    for source, doc in (("threads", threads_doc), ("locks", locks_doc)):
        by_name = {}
        for t in doc["threads"]:
            by_name["<main>" if t["main"] else t["name"]] = t
        for name, exp in expected["threads"].items():
            t = by_name.get(name)
            where = "%s %s" % (source, name)
            if t is None:
                c.problems.append("%s: missing (rbpeek lists %s)" % (where, sorted(n or "?" for n in by_name)))
                continue
            c.eq(where + " TID", t["native_tid"], exp["tid"])
            if dbg_tids is not None:
                c.eq(where + " TID of its debugger thread number", dbg_tids.get(t["debugger_thread"]), exp["tid"])
            ew, w = exp["wait"], t["waiting_on"]
            if ew["kind"] == "running":
                c.eq(where + " state", t["state"], "runnable")
                c.eq(where + " wait", w, None)
                continue
            if w is None:
                c.problems.append("%s: no wait reported (state %s), Ruby says %s" % (where, t["state"], ew))
                continue
            c.eq(where + " wait kind", w["kind"], ew["kind"])
            kind = ew["kind"]
            if kind == "mutex":
                c.eq(where + " Mutex", role_of.get(w["mutex"] and w["mutex"]["object"]), ew["mutex"])
                c.eq(where + " wait object", w["object"], mutex_addr[ew["mutex"]])
                c.eq(where + " Mutex owner", tname(w.get("owner")), expected["mutexes"][ew["mutex"]]["owner"])
                c.eq(where + " state", t["state"], "blocked")
                c.eq(where + " Monitor", w["monitor"], ew.get("monitor"))
            elif kind == "join":
                c.eq(where + " join target", tname(w["target"]), ew["target"])
                c.eq(where + " join timeout", w["timeout"], ew["timeout"])
                c.eq(where + " join confirmed by the join list", w["confirmed"], True)
            elif kind in ("queue", "sized_queue", "sized_queue_push", "condvar"):
                c.eq(where + " object", w["object"], ew["object"])
                c.eq(where + " found in the object's wait queue", w["confirmed"], True)
                if kind == "condvar":
                    c.eq(where + " ConditionVariable's Mutex", w["cv_mutex"], ew["mutex"])
            elif kind == "io":
                c.eq(where + " IO", w["object"], ew["object"])
                c.eq(where + " fd", w["fd"], ew["fd"])
            elif kind == "sleep":
                c.eq(where + " sleep has a duration", w["timeout"], ew["timeout"])
            held = sorted(role_of.get(h["object"], h["object"] or h["data"]) for h in t["holds"])
            c.eq(where + " holds", held, sorted(exp["holds"]))
            if exp.get("status"):
                c.eq(where + " status", t["status"], exp["status"])
            top = exp.get("top")
            if top and source == "threads":
                f = t["top_frame"] or {}
                c.eq(where + " top frame", (f.get("label"), f.get("path"), f.get("lineno")),
                     (top["label"], top["path"], top["lineno"]))


def debugger_tids(debugger, output):
    """{thread number: TID} from gdb's 'info threads' or lldb's 'thread list'."""
    out = {}
    for line in output.splitlines():
        if debugger == "gdb":
            m = re.match(r"^[ *]*(\d+)\s+Thread 0x[0-9a-f]+ \(LWP (\d+)\)", line) or \
                re.match(r"^[ *]*(\d+)\s+LWP (\d+)", line)
        else:
            m = re.match(r"^[ *]*thread #(\d+): tid = (\d+)", line)
        if m:
            out[int(m.group(1))] = int(m.group(2))
    return out


def check_locks(c, expected, locks):
    exp_m = expected["mutexes"]
    by_obj = {m["object"]: m for m in locks["mutexes"] if m["object"]}
    for role, em in exp_m.items():
        if em["owner"] is None and not em["waiters"]:
            # unlocked and unawaited: rbpeek may leave it out, but must not call it held
            m = by_obj.get(em["address"])
            if m:
                c.eq("Mutex %s owner" % role, m["owner_state"], "none")
            continue
        m = by_obj.get(em["address"])
        if m is None:
            c.problems.append("Mutex %s (%s) missing from ruby locks" % (role, em["address"]))
            continue
        if em.get("dead_fiber_of"):
            c.eq("Mutex %s owner state" % role, m["owner_state"], "dead_fiber")
            c.eq("Mutex %s: thread of the dead fiber" % role, tname(m["owner"]), em["dead_fiber_of"])
        else:
            c.eq("Mutex %s owner state" % role, m["owner_state"], "thread")
            c.eq("Mutex %s owner" % role, tname(m["owner"]), em["owner"])
        c.eq("Mutex %s waiters" % role, sorted(tname(r) for r in m["waiters"]), sorted(em["waiters"]))
        if "monitor" in em:
            c.eq("Mutex %s Monitor" % role, m["monitor"], em["monitor"])
            c.eq("Mutex %s Monitor entry count" % role, m["monitor_count"], em["monitor_count"])
    # Nothing held that Ruby does not know of: every held Mutex rbpeek lists is one of the program's.
    known = {em["address"] for em in exp_m.values()}
    for m in locks["mutexes"]:
        if m["owner_state"] in ("thread", "dead_fiber"):
            c.true("rbpeek reports a held Mutex the program never locked: %s" % m, m["object"] in known)

    # Deadlocks: exactly the recorded cycles, each edge pointing at the next thread.
    got = []
    for d in locks["deadlocks"]:
        names = [tname(e["thread"]) for e in d["cycle"]]
        got.append(sorted(names))
        for i, e in enumerate(d["cycle"]):
            nxt = d["cycle"][(i + 1) % len(d["cycle"])]
            c.eq("deadlock %s: edge %d leads to the next thread" % (names, i), tname(e["waits_for"]),
                 tname(nxt["thread"]))
            if e["via"] == "mutex":
                ew = expected["threads"][tname(e["thread"])]["wait"]
                c.eq("deadlock %s: %s waits on" % (names, tname(e["thread"])), e["object"],
                     exp_m[ew["mutex"]]["address"])
    c.eq("deadlocks", sorted(got), sorted(sorted(d) for d in expected["deadlocks"]))
    c.eq("deadlocks truncated", locks["deadlocks_truncated"], False)
    c.eq("never released", sorted(tname(o["thread"]) for o in locks["never_released"]), sorted(expected["orphans"]))
    c.eq("stuck behind", sorted(tname(e["thread"]) for e in locks["behind"]), sorted(expected["behind"]))
    gvl = locks["gvl"]
    c.eq("one GVL (one ractor)", len(gvl), 1)
    if gvl:
        c.eq("GVL owner known", gvl[0]["known"], True)
        c.eq("GVL owner", tname(gvl[0]["owner"]), expected["gvl"])


def check_text(c, expected, text):
    """The text forms carry the same verdicts."""
    lines = text.splitlines()
    dl = [ln for ln in lines if ln.startswith("DEADLOCK:")]
    c.eq("DEADLOCK lines in 'ruby locks'", len(dl), len(expected["deadlocks"]))
    if not expected["deadlocks"] and not expected["orphans"]:
        c.true("'ruby locks' does not say 'No deadlock'", any(ln.startswith("No deadlock") for ln in lines))
    nr = [ln for ln in lines if ln.startswith("NEVER RELEASED:")]
    c.eq("NEVER RELEASED lines in 'ruby locks'", len(nr), len(expected["orphans"]))
    for names in expected["deadlocks"]:
        c.true("no DEADLOCK line names all of %s" % names,
               any(all('"%s"' % n in ln for n in names) for ln in dl))


def check(c, scenario):
    paths = {k: c.path("%s.json" % k) for k in ("threads", "locks")}
    text_path = c.path("locks.txt")
    cmds = ["ruby threads --json -o " + paths["threads"], "ruby locks --json -o " + paths["locks"],
            "ruby locks -o " + text_path, "ruby threads", "info threads" if c.debugger == "gdb" else "thread list"]
    rc, output = c.run_debugger(cmds)
    harness.assert_no_traceback(output)
    docs = {}
    for k, p in paths.items():
        if not os.path.exists(p):
            raise Failure("%s: no JSON from 'ruby %s'; debugger output:\n%s" % (scenario, k, output[-3000:]))
        docs[k] = harness.read_json(p)
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    expected = c.target.expected()
    ck = Checker(scenario)
    ck.eq("Ruby version", docs["locks"]["ruby_version"], expected["ruby_version"])
    check_threads(ck, expected, docs["threads"], docs["locks"], debugger_tids(c.debugger, output))
    check_locks(ck, expected, docs["locks"])
    check_text(ck, expected, text)
    if ck.problems:
        raise Failure("%d mismatches:\n  %s\n--- ruby locks:\n%s" % (len(ck.problems), "\n  ".join(ck.problems[:40]),
                                                                   text[-4000:]))
    if c.live:
        c.target.assert_left_running()
    elif scenario == "stuck":
        fuzz_core(c, docs["locks"])
    harness.log("%d threads, %d Mutexes, %d deadlocks, %d never released: as Ruby says"
                % (len(docs["threads"]["threads"]), len(docs["locks"]["mutexes"]), len(docs["locks"]["deadlocks"]),
                   len(docs["locks"]["never_released"])))


def damaged_copies(core, addrs, workdir, rounds=4):
    """Copies of the core damaged right where the analysis reads (the Mutex,
    Queue, Thread and fiber objects and structs it reported, and around
    them): garbage, all ones, zeros, and self-references (loops for every
    list walk)."""
    segs = harness.core_segments(core)

    def offset_of(addr):
        for va, off, size in segs:
            if va <= addr < va + size - 512:
                return off + addr - va
        return None

    rng = random.Random(0x10c5)
    copies = []
    for r in range(rounds):
        damaged = os.path.join(workdir, "damaged-%d.core" % r)
        harness.copy_core(core, damaged)
        with open(damaged, "r+b") as f:
            for _ in range(30):
                addr = (rng.choice(addrs) + rng.randrange(-64, 64) * 8) & ~7
                off = offset_of(addr)
                if off is None:
                    continue
                f.seek(off)
                n = rng.choice([8, 16, 64, 512])
                kind = rng.randrange(4)
                if kind == 0:
                    f.write(os.urandom(n))
                elif kind == 1:
                    f.write(b"\xff" * n)
                elif kind == 2:
                    f.write(b"\0" * n)
                else:  # self-references: loops for every list walk
                    f.write(b"".join((addr + 8 * i).to_bytes(8, "little") for i in range(n // 8)))
        copies.append(damaged)
    return copies


def fuzz_core(c, locks):
    """Each damaged copy (made once for both debuggers, from the addresses
    this combination's `ruby locks` reported) must give valid JSON or one
    rbpeek error line, never a traceback, a crash or a hang, and leave the
    debugger usable."""
    addrs = tuple(sorted({int(a, 16) for a in re.findall(r'"(0x[0-9a-f]+)"', json.dumps(locks))}))
    copies = c.matrix.shared(("locks damaged", addrs), lambda: damaged_copies(
        c.core, addrs, os.path.dirname(c.workdir)))
    # One debugger reads the copies one after another, each loaded in place
    # of the one before: each must leave it usable for the next.
    outs_json = [c.path("damaged-locks-%d.json" % r) for r in range(len(copies))]
    steps = [(harness.load_core_cmds(c.debugger, damaged, c.ruby) if r else [])
             + ["ruby locks --json -o " + out_json, "ruby threads"]
             for r, (damaged, out_json) in enumerate(zip(copies, outs_json))]
    rc, outs, whole = harness.run_debugger_steps(c.debugger, steps, exe=c.ruby, core=copies[0],
                                                 timeout=120 * len(copies))
    harness.assert_no_traceback(whole)
    for r, (output, out_json) in enumerate(zip(outs, outs_json)):
        if output is None:
            raise Failure("damaged core %d: the debugger did not survive:\n%s" % (r, whole[-2000:]))
        if os.path.exists(out_json):
            doc = harness.read_json(out_json)  # must be valid
            verdict = "JSON: %d threads, %d Mutexes, %d deadlocks" % (len(doc["threads"]), len(doc["mutexes"]),
                                                                     len(doc["deadlocks"]))
        else:
            errs = [ln for ln in output.splitlines() if "rbpeek:" in ln]
            if not errs:
                raise Failure("damaged core %d: neither JSON nor an rbpeek error:\n%s" % (r, output[-2000:]))
            verdict = errs[0].strip()[:100]
        harness.log("ok   damaged core %d: %s" % (r, verdict))


def test(ruby_spec, scenarios, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    for scenario in scenarios:
        m.run(lambda: m.start("locks_scenarios.rb", name=scenario, env={"RBPEEK_LOCKS_SCENARIO": scenario}),
              lambda c: check(c, scenario), label=scenario, parallel=True)
    m.finish()


if __name__ == "__main__":
    argv = sys.argv[1:]
    scenarios = ["stuck", "healthy"]
    if len(argv) > 1 and argv[1] in scenarios + ["both"]:
        scenarios = scenarios if argv[1] == "both" else [argv.pop(1)]
    if not argv:
        sys.exit(__doc__)
    harness.main(lambda wd: test(argv[0], scenarios, argv[1:], wd))
