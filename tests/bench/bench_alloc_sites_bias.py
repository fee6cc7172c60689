"""Benchmark: the bias of `ruby allocs --sites` (not a test; prints the table
of docs/allocations.md, "The estimator's bias, measured").

    python3 tests/bench/bench_alloc_sites_bias.py [--ruby 3.3.8] [--repeat 3] [--duration 10] [--rate 200]

The program (tests/integration/programs/alloc_sites.rb) allocates at two
sites and counts each site's allocations itself with
GC.stat(:total_allocated_objects). Three modes, each a fresh process:
  two:   three small Strings at site_a for every one at site_b and no
         other site: a two-site 75/25 split, where the interval rbpeek
         prints for site_b's method is of the split itself (the precision
         of docs/sampling.md: how many runs within 5 points, and how often
         the printed 90% interval holds the program's own share);
  same:  the same, with the two more sites the integration test reads the
         types at (a few Points and Pairs a round);
  kinds: three small Strings at site_a for every 100-element Array at
         site_b (an Array.new(100) costs more than a String: a slot, and
         800 bytes malloc'd and filled with nil).
Each repeat runs `rbpeek allocs --pid PID --sites --duration D --rate R
--json -o F` (the command line: nothing attaches) and compares site_b's
share of the allocator samples (the samples at any line of its method,
normalised over the two sites) with the program's own share over the same
window. Printed per mode: the program's share, the estimate of each run
with the 90% interval rbpeek printed for site_b's method, their mean, and the
ratio estimate / truth. The load average is printed too.
"""

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # also puts tests/integration (harness) on the path
import harness  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                "python"))
from rbpeeklib.core import share_interval  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROGRAM = os.path.join(REPO, "tests", "integration", "programs", "alloc_sites.rb")
CLI = os.path.join(REPO, "tools", "rbpeek")


def own(workdir, t):
    """The program's (total, site a, site b) at wall time t, interpolated
    from its log; waits up to 2 s for the line after t (the program logs
    every 50 ms, and the run's end is read as soon as rbpeek exits)."""
    for _ in range(40):
        rows = [[float(x) for x in line.split()] for line in open(os.path.join(workdir, "alloc.log"))
                if len(line.split()) == 4]
        for r0, r1 in zip(rows, rows[1:]):
            if r0[0] <= t <= r1[0] and r1[0] > r0[0]:
                k = (t - r0[0]) / (r1[0] - r0[0])
                return [a + k * (b - a) for a, b in zip(r0[1:], r1[1:])]
        time.sleep(0.05)
    raise SystemExit("the log does not cover %.3f" % t)


def site_ci90(r, rec):
    """site_b's line's 90% interval as rbpeek printed it (its "By line"
    row: "b" * 4 allocates in site_b's frame and in String#*, both at that
    line; by method they are two rows), over all allocator samples; None
    if not printed."""
    for m in r.get("lines", ()):
        if m.get("path") == rec["path"] and m.get("lineno") == rec["b"]["lineno"] and "share_ci90" in m:
            return m["share_ci90"]
    return None


def split_ci90(k, n, prec):
    """The 90% interval of the two-site split k / n as rbpeek computes a
    share's (rbpeek_share_interval, n counted down by the run's dispersion,
    at its quantile): where a frame reports an earlier line of its method
    (2.7, 3.1) site_b's line's printed row holds part of its samples."""
    if not n or not prec:
        return None
    ne = n / max(1.0, prec.get("dispersion") or 1.0)
    return share_interval(k / n * ne, ne, prec["z"])


def run_mode(ruby, mode, args):
    wd = tempfile.mkdtemp(prefix="rbpeek-bias-")
    env = dict(os.environ, ALLOC_SITES_MODE=mode)
    proc = benchlib.launch([ruby, PROGRAM, wd], wd, env=env)
    try:
        rec = json.load(open(os.path.join(wd, "sites.json")))
        runs = []
        for i in range(args.repeat):
            out = os.path.join(wd, "r%d.json" % i)
            rate = ["--rate", str(args.rate)] if args.rate else []
            dur = ["--duration", str(args.duration)] if args.duration else []
            cmd = "--sites %s--json -o %s" % (" ".join(dur + rate) + " " if dur + rate else "", out)
            if args.front == "cli":
                argv = [sys.executable, CLI, "allocs", "--pid", str(proc.pid)] + cmd.split()
            else:
                argv = harness.debugger_argv(args.front, ["ruby allocs " + cmd], proc.pid)
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           stdin=subprocess.DEVNULL)
            r = json.load(open(out))
            counts = {}
            for which in ("a", "b"):
                first, last = rec[which]["lines"]
                counts[which] = sum(s["samples"] for s in r["sites"]
                                    if s["path"] == rec["path"] and first <= (s["lineno"] or 0) <= last)
            _t0, a0, b0 = own(wd, r["started_at"])
            _t1, a1, b1 = own(wd, r["ended_at"])
            n = counts["a"] + counts["b"]
            runs.append({"truth": (b1 - b0) / ((a1 - a0) + (b1 - b0)), "k": counts["b"], "n": n,
                         "taken": r["samples_taken"], "in_gc": r["samples_in_gc"], "kept": r["samples"],
                         "ci90": site_ci90(r, rec), "prec": r.get("precision") or {},
                         "split_ci90": split_ci90(counts["b"], n, r.get("precision")),
                         "held": r["held_s"] / r["sampled_s"] if r["sampled_s"] else 0})
            if args.each:
                x = runs[-1]
                p = x["prec"]
                sys.stderr.write("run %d: site_b %.1f%% of %d samples, the program's %.1f%%; 90%% %s (split %s); "
                                 "dispersion %s, "
                                 "+-%s points at 25%%, %s s for +-5; held %.2f%%; load %s\n"
                                 % (i, 100.0 * x["k"] / max(1, n), n, 100 * x["truth"],
                                    "[%.1f-%.1f%%]" % tuple(100 * v for v in x["ci90"]) if x["ci90"] else "?",
                                    "[%.1f-%.1f%%]" % tuple(100 * v for v in x["split_ci90"]) if x["split_ci90"] else "?",
                                    p.get("dispersion"), p.get("points_at_25"), p.get("seconds_for_5_points"),
                                    100 * x["held"], open("/proc/loadavg").read().split()[0]))
        return rec["ruby_version"], runs
    finally:
        proc.kill()
        proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ruby", default="3.3.8")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10, help="0: rbpeek's default")
    ap.add_argument("--rate", type=float, default=200, help="0: rbpeek's default")
    ap.add_argument("--front", default="cli", help="cli, gdb or lldb")
    ap.add_argument("--modes", default="two,same,kinds")
    ap.add_argument("--each", action="store_true", help="each run's figures to stderr as it ends")
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    print("load average before: %s" % open("/proc/loadavg").read().strip())
    print("| Ruby | site_b allocates | site_b's share: the program's own | rbpeek's estimate, each run "
          "[90% interval printed] | mean | estimate / truth | allocator samples a run (of samples; in GC) |")
    print("|---|---|---|---|---|---|---|")
    for mode, what in (("two", "small Strings (as site_a), no other site"), ("same", "small Strings (as site_a)"),
                       ("kinds", "100-element Arrays")):
        if mode not in args.modes.split(","):
            continue
        version, runs = run_mode(ruby, mode, args)
        truth = sum(r["truth"] for r in runs) / len(runs)
        ests = [r["k"] / r["n"] for r in runs]
        cells = ["%.1f%% [%s]" % (100 * e, "%.1f-%.1f%%" % tuple(100 * x for x in r["ci90"]) if r["ci90"] else "?")
                 for e, r in zip(ests, runs)]
        mean = sum(ests) / len(ests)
        print("| %s | %s | %.1f%% | %s | %.1f%% | %.2f | %s |" % (
            version, what, 100 * truth, "; ".join(cells), 100 * mean, mean / truth,
            "; ".join("%d (%d; %d)" % (r["n"], r["taken"], r["in_gc"]) for r in runs)))
        dev = [100 * (e - r["truth"]) for e, r in zip(ests, runs)]
        z = [(e - r["truth"]) / math.sqrt(r["truth"] * (1 - r["truth"]) / r["n"]) for e, r in zip(ests, runs) if r["n"]]
        inside = [r["ci90"][0] <= r["truth"] <= r["ci90"][1] for r in runs if r["ci90"]]
        inside_split = [r["split_ci90"][0] <= r["truth"] <= r["split_ci90"][1] for r in runs if r["split_ci90"]]
        print("  %s, %d runs: off by %s points; within 5 points in %d of %d; mean deviation %+.2f points; "
              "dispersion (variance of (estimate - truth) / the binomial's): %.2f; the 90%% interval printed "
              "held the truth in %d of %d (the split's, at the run's dispersion: %d of %d); allocator samples a run %s; held stopped %s" % (
                  mode, len(runs), " ".join("%+.1f" % d for d in dev), sum(abs(d) <= 5 for d in dev), len(dev),
                  statistics.mean(dev), statistics.mean(x * x for x in z) if z else float("nan"),
                  sum(inside), len(inside), sum(inside_split), len(inside_split), "%d-%d" % (min(r["n"] for r in runs), max(r["n"] for r in runs)),
                  "%.2f-%.2f%%" % (100 * min(r["held"] for r in runs), 100 * max(r["held"] for r in runs))))
        sys.stdout.flush()
    print("load average after: %s" % open("/proc/loadavg").read().strip())


if __name__ == "__main__":
    main()
