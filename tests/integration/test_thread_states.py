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
of that measure over the time it sampled (the threads compute only
around a run, from 0.5 s before it starts to its end, and nap otherwise;
a nap that reached into the window would be logged and counted as
neither), and each sleeping thread
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
    """Thread cpu-N's log: its waits [(from, to)], its naps [(from, to)]
    (outside the runs: the program computes only while one samples it, and
    may still be waking up as the sampling starts), and the time up to
    which the log is complete (its last "seen": every wait that ended
    before is in it)."""
    waits, naps, seen = [], [], 0.0
    with open(os.path.join(target.workdir, "cpu-%d.log" % n)) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[0] == "nap":
                naps.append((float(parts[1]), float(parts[2])))
            elif len(parts) != 2 or parts[0] == "start":
                continue
            elif parts[0] == "seen":
                seen = max(seen, float(parts[1]))
            else:
                waits.append((float(parts[0]), float(parts[1])))
    return waits, naps, seen


def cpu_shares(target, t0, t1):
    """Each CPU-bound thread's shares of [t0, t1] holding the GVL and
    waiting for it, as it measured them itself: its logged waits, and the
    rest of the window less any nap (asleep, neither)."""
    out = []
    for n in range(1, 5):
        waits, naps, seen = read_log(target, n)
        if seen < t1:
            raise Failure("thread cpu-%d's log ends before the sampled window does (complete to %.3f, window ends %.3f)"
                          % (n, seen, t1))

        def inside(spans):
            return sum(max(0.0, min(b, t1) - max(a, t0)) for a, b in spans) / (t1 - t0)
        waited, napped = inside(waits), inside(naps)
        out.append((1.0 - waited - napped, waited))
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
    for name, (held, waited) in zip(exp["cpu"], shares):
        t = threads.get(name)
        if t is None or t["samples"] < 50:
            problems.append("%s: %s samples" % (name, t and t["samples"]))
            continue
        st = t["states"]
        if abs(st["running"] - held) > TOLERANCE or abs(st["gvl_wait"] - waited) > TOLERANCE:
            problems.append("%s: running %.2f, GVL wait %.2f; the thread measured %.2f holding the GVL, %.2f "
                            "waiting for it" % (name, st["running"], st["gvl_wait"], held, waited))
    for name in exp["sleep"]:
        t = threads.get(name)
        if t is None or t["states"]["blocked"] < 0.99:
            problems.append("%s (sleeping): %s" % (name, t and t["states"]))
    if problems:
        raise Failure("%s:\n  %s" % (where, "\n  ".join(problems)))
    harness.log("%s: %s" % (where, ", ".join("%s running %.2f/GVL wait %.2f (measured %.2f/%.2f)"
                                             % (n, threads[n]["states"]["running"], threads[n]["states"]["gvl_wait"],
                                                held, waited)
                                             for n, (held, waited) in zip(exp["cpu"], shares))))


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


STARTED = "rbpeek: sampling pid"


def sample(c, args, out_path):
    """`sample ARGS` on the live target in c's front end (the command line
    or the debugger), the target computing from before the run (its
    threads all running well before the first sample: woken at the
    sampling's start, on 2.7 they took some 300 ms to get the GVL in turn,
    which the program counts as waits and the sampler as sleeps) to its
    end; the output."""
    if c.debugger == "cli":
        argv = [sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(c.target.pid)] + args
    else:
        argv = harness.debugger_argv(c.debugger, [" ".join(["ruby sample"] + args)], c.target.pid)
    with c.target.computing(settle=0.5):
        out = harness.run_and_act(argv, out_path, STARTED, None, 0, timeout=300)
    harness.assert_no_traceback(out)
    return out


def check(c):
    time.sleep(0.5)   # the previous combination's run must be in the past of the window
    exp = c.target.expected()
    summary, folded = c.path("states.json"), c.path("default.folded")
    sample(c, ["--duration", "%g" % DURATION, "--per-thread", "--json", "-o", summary, "--folded", folded],
           c.path("sample.out"))
    doc = harness.read_json(summary)
    # The sampled window, as the sampler reports it; each thread records its
    # waits as they end: wait until every log is complete past the window.
    end = doc["started"] + doc["duration_s"]
    deadline = time.time() + 30
    while time.time() < deadline and not all(read_log(c.target, n)[2] >= end for n in range(1, 5)):
        time.sleep(0.2)
    shares = cpu_shares(c.target, doc["started"], doc["started"] + doc["duration_s"])
    check_doc(doc, exp, shares, "%s sample --json" % c.name)
    check_presence(folded, exp, False, c.name)
    if c.debugger == "cli":
        idle = c.path("idle.folded")
        sample(c, ["--duration", "1", "--per-thread", "--idle", "--folded", idle], c.path("idle.out"))
        check_presence(idle, exp, True, "cli sample --idle")


def test(spec, only, workdir):
    m = matrix.Matrix(spec, workdir, only)
    m.run("gvl_contention.rb", check, combos=[("cli", "live"), ("gdb", "live")])
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
