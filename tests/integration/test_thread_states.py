"""Thread states in samples (issue 26) against the program's own measure.

    test_thread_states.py RUBY [COMBO...]     it.thread_states.<ruby>; e.g. 3.4.5 cli.live

programs/gvl_contention.rb: 4 CPU-bound threads contend for the GVL, 4
threads and the main thread sleep. Each CPU-bound thread records its own
waits for the GVL (the gaps between its short loops: its CPU clock alone
would count as waiting the time the kernel runs another process while it
holds the GVL, as it does on a loaded machine), which the main thread
logs; the rest of the sampled window it held the GVL.
`sample --json` (the command line, and `ruby sample` in gdb, live) must
give each CPU-bound thread running and GVL-wait shares within 10 points
of that measure over the time it sampled, and each sleeping thread
blocked; by default the sleeping threads are absent from the profile,
with --idle present.
"""

import os
import re
import sys
import time

import harness
from harness import Failure
import matrix

DURATION = 4.0
TOLERANCE = 0.10


def read_log(target, n):
    """Thread cpu-N's log: its waits [(from, to)], and the time up to which
    the log is complete (its last "seen": every wait that ended before is
    in it)."""
    waits, seen = [], 0.0
    with open(os.path.join(target.workdir, "cpu-%d.log" % n)) as f:
        for line in f:
            parts = line.split()
            if len(parts) != 2 or parts[0] == "start":
                continue
            if parts[0] == "seen":
                seen = max(seen, float(parts[1]))
            else:
                waits.append((float(parts[0]), float(parts[1])))
    return waits, seen


def cpu_shares(target, t0, t1):
    """Each CPU-bound thread's share of [t0, t1] holding the GVL, as it
    measured it itself: the window less the waits it logged."""
    out = []
    for n in range(1, 5):
        waits, seen = read_log(target, n)
        if seen < t1:
            raise Failure("thread cpu-%d's log ends before the sampled window does (complete to %.3f, window ends %.3f)"
                          % (n, seen, t1))
        waited = sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in waits)
        out.append(1.0 - waited / (t1 - t0))
    return out


def folded_threads(path):
    """Thread root frames (--per-thread) of a folded file, with samples."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            m = re.match(r'Thread "([^"]*)"', stack)
            key = m.group(1) if m else stack.split(";")[0]
            out[key] = out.get(key, 0) + int(n)
    return out


def check_doc(doc, exp, shares, where):
    threads = {t["name"]: t for t in doc["threads"]}
    problems = []
    for name, share in zip(exp["cpu"], shares):
        t = threads.get(name)
        if t is None or t["samples"] < 50:
            problems.append("%s: %s samples" % (name, t and t["samples"]))
            continue
        st = t["states"]
        if abs(st["running"] - share) > TOLERANCE or abs(st["gvl_wait"] - (1 - share)) > TOLERANCE:
            problems.append("%s: running %.2f, GVL wait %.2f; the thread measured %.2f on a CPU"
                            % (name, st["running"], st["gvl_wait"], share))
    for name in exp["sleep"]:
        t = threads.get(name)
        if t is None or t["states"]["blocked"] < 0.99:
            problems.append("%s (sleeping): %s" % (name, t and t["states"]))
    if problems:
        raise Failure("%s:\n  %s" % (where, "\n  ".join(problems)))
    harness.log("%s: %s" % (where, ", ".join("%s running %.2f/GVL wait %.2f (measured %.2f)"
                                             % (n, threads[n]["states"]["running"], threads[n]["states"]["gvl_wait"], s)
                                             for n, s in zip(exp["cpu"], shares))))


def check_presence(folded, exp, idle, where):
    seen = folded_threads(folded)
    missing = [n for n in exp["cpu"] if not seen.get(n)]
    if missing:
        raise Failure("%s: CPU-bound threads %s absent from the profile" % (where, missing))
    sleepers = [n for n in exp["sleep"] if seen.get(n)]
    if idle and len(sleepers) != len(exp["sleep"]):
        raise Failure("%s: with --idle the sleeping threads must be there, only %s are" % (where, sleepers))
    if not idle and sleepers:
        raise Failure("%s: sleeping threads %s in the default profile (idle threads are left out)" % (where, sleepers))


def check(c):
    time.sleep(0.5)   # the previous combination's run must be in the past of the window
    exp = c.target.expected()
    pid = str(c.target.pid)
    summary, folded = c.path("states.json"), c.path("default.folded")
    if c.debugger == "cli":
        t0 = time.time()
        harness.cli(["sample", "--pid", pid, "--duration", str(DURATION), "--per-thread", "--json", "-o", summary,
                     "--folded", folded])
        t1 = time.time()
    else:
        t0 = time.time()
        rc, out = c.run_debugger(["ruby sample --duration %g --per-thread --json -o %s --folded %s"
                                  % (DURATION, summary, folded)])
        t1 = time.time()
        harness.assert_no_traceback(out)
    doc = harness.read_json(summary)
    # The sampled window, as the sampler reports it; each thread records its
    # waits as they end: wait until every log is complete past the window.
    end = doc["started"] + doc["duration_s"]
    deadline = time.time() + 30
    while time.time() < deadline and not all(read_log(c.target, n)[1] >= end for n in range(1, 5)):
        time.sleep(0.2)
    shares = cpu_shares(c.target, doc["started"], doc["started"] + doc["duration_s"])
    check_doc(doc, exp, shares, "%s sample --json" % c.name)
    check_presence(folded, exp, False, c.name)
    if c.debugger == "cli":
        idle = c.path("idle.folded")
        harness.cli(["sample", "--pid", pid, "--duration", "1", "--per-thread", "--idle", "--folded", idle])
        check_presence(idle, exp, True, "cli sample --idle")


def test(spec, only, workdir):
    m = matrix.Matrix(spec, workdir, only)
    m.run("gvl_contention.rb", check, combos=[("cli", "live"), ("gdb", "live")])
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
