"""Benchmark: the GC's share of the CPU time under CPU contention (not a
test; prints the table of docs/sampling.md, "Under CPU contention").

    python3 tests/bench/bench_gc_share_contention.py [--rubies 3.1.2,3.3.8] [--loops 2] [--rounds 2]
                                                     [--combos gdb.live,lldb.live,cli.live]

Starts LOOPS busy loops (sh's `while :; do :; done`, at the default
priority) beside the suite's own GC test, tests/integration/
test_gc_share.py, and runs it ROUNDS times per Ruby: each round samples
programs/gc_share.rb in every front end asked for, at 400 Hz and, on the
command line, through --subprocesses and --json at 100 Hz, and prints the
GC's share of the CPU time beside the program's own measure of the same
window (its main thread's CPU time inside the GC's flag). The test's own
verdict is not the point here (a round may fail beyond its bound): every
comparison is collected, and printed per Ruby and front end as the mean
difference (rbpeek minus the program) with its standard error over the
comparisons, and each comparison's difference in units of its own binomial
standard error, whose mean square should be near 1 where the samples are
unbiased draws. The loops are killed on the way out, however it ends.
2.7 is left out: it has no GC.stat(:time), and the test compares its
samples with the polled flag in wall time only where the program has a
CPU to itself.
"""

import argparse
import math
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TEST = os.path.join(HERE, "..", "integration", "test_gc_share.py")
LINE = re.compile(r"^\[(\w+) live\]\s+(.*?): the GC ([0-9.]+)% of the CPU time \(90%: [0-9.]+-[0-9.]+%, (\d+) "
                  r"samples on a CPU\).*?the program: ([0-9.]+)% of its main thread", re.M)


def start_loops(n):
    return [subprocess.Popen(["sh", "-c", "while :; do :; done"], start_new_session=True) for _ in range(n)]


def stop_loops(loops):
    for p in loops:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def front_end(combo, what):
    if "--subprocesses" in what:
        return combo + " --subprocesses"
    if "--json" in what:
        return combo + " --json 100 Hz"
    if "--native" in what:
        return combo + " --native"
    return combo


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rubies", default="3.1.2,3.3.8,debian-3.1")
    ap.add_argument("--loops", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--combos", default="", help="the test's combinations (default: all live ones)")
    args = ap.parse_args()
    rows = {}
    loads = []
    loops = start_loops(args.loops)
    try:
        time.sleep(1)
        for ruby in args.rubies.split(","):
            for r in range(args.rounds):
                cmd = [sys.executable, TEST, ruby] + [c for c in args.combos.split(",") if c]
                out = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     timeout=1800, cwd=os.path.dirname(TEST)).stdout
                loads.append(os.getloadavg()[0])
                found = LINE.findall(out)
                if not found:
                    print("%s round %d: no comparison in the test's output:\n%s" % (ruby, r + 1, out[-1500:]))
                for combo, what, got, k, truth in found:
                    got, k, truth = float(got), int(k), float(truth)
                    if truth <= 0.0:
                        print("%s: no CPU-time measure of its own (2.7: the test compares the polled flag)" % ruby)
                        break
                    se = 100.0 * math.sqrt(max(truth / 100 * (1 - truth / 100), 1e-4) / k)
                    rows.setdefault((ruby, front_end(combo, what)), []).append((got - truth, (got - truth) / se))
                    print("%-10s %-24s %5.1f%% for %5.1f%% (%4d on a CPU): %+5.1f points, %+5.2f SE"
                          % (ruby, front_end(combo, what), got, truth, k, got - truth, (got - truth) / se), flush=True)
    finally:
        stop_loops(loops)
    print("\n%d busy loops; load average %.1f-%.1f" % (args.loops, min(loads or [0]), max(loads or [0])))
    print("%-10s %-24s %3s %15s %12s" % ("Ruby", "front end", "n", "mean diff (SE)", "mean z^2"))
    every = []
    for (ruby, fe), vals in sorted(rows.items()):
        d = [v[0] for v in vals]
        every += vals
        mean = sum(d) / len(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else float("nan")
        print("%-10s %-24s %3d %+6.2f (%4.2f) %12.2f" % (ruby, fe, len(d), mean, sd / math.sqrt(len(d)),
                                                       sum(v[1] ** 2 for v in vals) / len(vals)))
    for ruby in sorted({k[0] for k in rows}):
        vals = [v for (rb, _), vs in rows.items() if rb == ruby for v in vs]
        d = [v[0] for v in vals]
        mean = sum(d) / len(d)
        sd = math.sqrt(sum((x - mean) ** 2 for x in d) / (len(d) - 1)) if len(d) > 1 else float("nan")
        print("%-10s %-24s %3d %+6.2f (%4.2f) %12.2f" % (ruby, "all", len(d), mean, sd / math.sqrt(len(d)),
                                                       sum(v[1] ** 2 for v in vals) / len(vals)))


if __name__ == "__main__":
    main()
