"""Benchmark: what `ruby allocs --sites` costs a many-threaded target (not a
test; prints the table of docs/performance-allocs.md, "`ruby allocs --sites` on a
many-threaded target").

    python3 tests/bench/bench_alloc_sites_threads.py [--ruby debian-3.1] [--rounds 10] [--threads 13]
        [--front cli,gdb,lldb] [--before TREE]

The workload (tests/bench/alloc_threads_workload.rb) is a puma worker's
shape: one thread allocates all along, the others (12 by default, 13
threads in all as in issue 37) wake from a wait in the kernel every 5 ms,
work a little and wait again, so the GVL changes hands hundreds of times a
second. One workload, warmed up; then rounds, each of a plain `rbpeek
allocs --pid P --duration 2` window (it reads the GC's counters and stops
nothing: the benchmark's floor) and one `ruby allocs --sites --duration 2`
window per front end (default rate), the order turning from round to
round, each followed by 2 s alone. Each window's speed is the allocating
thread's iterations a second between the JSON's started_at and ended_at
over those of the 1.5 s before the command started and after it ended
(the debugger's attach, which stops the target, is outside both).
Printed per front end: the speed kept (median, and the mean over the
round's plain window with its 95% bootstrap interval), and the tracer's
own counts: the time the target was held stopped (share of the time
sampled, and per sample), the samples that stopped every thread, those
that found every GVL free (nothing stopped), the threads stopped a sample.
And the speed per CPU second of the allocating thread (its own clock), over
the plain window's: the wall-clock ratio moves by 10% from window to window
with the GVL's hand-offs among 13 threads, the CPU one hardly, and it
holds what the sampling costs the code (caches) apart from what it costs
in time stopped. While a holder is stopped no Ruby thread of the process
runs, so the wall-clock speed is about (1 - held) times the CPU one: the
last column, the same interval scaled.
With --before TREE (another checkout, built in TREE/build) its command
line runs a `--sites` window too in each round, labelled "before".
"""

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import benchlib  # also puts tests/integration (harness) on the path
import harness  # noqa: E402
from bench_allocs import bootstrap_mean_ci, kept, read_log  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(HERE, "alloc_threads_workload.rb")
CLI = os.path.join(REPO, "tools", "rbpeek")
WARM_UP = 8.0
WINDOW = 2


def command(front, pid, out, sites, tree=None):
    args = "--duration %d --json -o %s%s" % (WINDOW, out, " --sites" if sites else "")
    if front == "cli":
        return [sys.executable, os.path.join(tree or REPO, "tools", "rbpeek"), "allocs", "--pid", str(pid)] + \
            args.split()
    return harness.debugger_argv(front, ["ruby allocs " + args], pid)


def window(pid, workdir, tag, front, sites, tree=None):
    """One command's window: (speed kept, the JSON, speed kept per CPU second
    of the allocating thread)."""
    out = os.path.join(workdir, "w-%s.json" % tag)
    env = dict(os.environ)
    if tree:
        env["RBPEEK_LIBRARY"] = os.path.join(tree, "build", "lib", "librbpeek.so")
    t0 = time.time()
    subprocess.run(command(front, pid, out, sites, tree), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   stdin=subprocess.DEVNULL, timeout=180, check=True, env=env)
    t1 = time.time()
    time.sleep(2.0)
    r = json.load(open(out))
    rows, _ = read_log(workdir)
    return (kept(rows, r["started_at"], r["ended_at"], base=(t0, t1)), r,
            kept(rows, r["started_at"], r["ended_at"], base=(t0, t1), cpu=True))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--threads", type=int, default=13)
    ap.add_argument("--front", default="cli,gdb,lldb")
    ap.add_argument("--before", help="another rbpeek tree (built in TREE/build): its command line too")
    a = ap.parse_args()
    ruby = harness.ruby_binary(a.ruby)
    fronts = [(f, None) for f in a.front.split(",")] + ([("cli", a.before)] if a.before else [])
    print("load average before: %s" % open("/proc/loadavg").read().strip())
    d = tempfile.mkdtemp(prefix="rbpeek-bench-sites-threads-")
    proc = benchlib.launch([ruby, WORKLOAD, d, str(a.threads)], d)
    got = {f: [] for f in fronts}
    try:
        time.sleep(WARM_UP)
        for i in range(a.rounds):
            order = [None] + fronts
            random.Random(i).shuffle(order)
            plain = None
            each = {}
            for f in order:
                if f is None:
                    plain, _, plain_cpu = window(proc.pid, d, "%d-plain" % i, "cli", False)
                else:
                    each[f] = window(proc.pid, d, "%d-%s%s" % (i, f[0], "-before" if f[1] else ""), f[0], True, f[1])
            for f, (k, r, kc) in each.items():
                got[f].append((k, plain, r, kc, plain_cpu))
            sys.stderr.write("round %d: plain %s; %s; load %s\n" % (
                i, "%.3f" % plain if plain else "?",
                ", ".join("%s%s %.3f held %.2f%%" % (f[0], " (before)" if f[1] else "", k or 0,
                                                     100 * r["held_s"] / r["sampled_s"]) for f, (k, r, _) in each.items()),
                open("/proc/loadavg").read().split()[0]))
    finally:
        proc.kill()
        proc.wait()
        shutil.rmtree(d, ignore_errors=True)
    print("load average after: %s" % open("/proc/loadavg").read().strip())
    print("\n%d rounds, %d threads, windows of %d s at the default rate\n" % (a.rounds, a.threads, WINDOW))
    print("| front end | speed kept (median) | over the round's plain window: mean [95% interval] | held stopped "
          "(share; per sample) | samples: every thread stopped; every GVL free; threads stopped a sample | per CPU "
          "second of the allocating thread: mean [95% interval] | (1 - held) x that: [95% interval] |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for f in fronts:
        rows = [g for g in got[f] if g[0] is not None and g[1]]
        ratios = [g[0] / g[1] for g in rows]
        rs = [g[2] for g in got[f]]
        per_cpu = [g[3] / g[4] for g in got[f] if g[3] is not None and g[4]]
        taken = sum(r["samples_taken"] for r in rs)
        held = sum(r["held_s"] for r in rs)
        held_share = held / sum(r["sampled_s"] for r in rs)
        lo, hi = bootstrap_mean_ci(ratios) if len(ratios) > 1 else (float("nan"), float("nan"))
        clo, chi = bootstrap_mean_ci(per_cpu) if len(per_cpu) > 1 else (float("nan"), float("nan"))
        print("| %s%s | %.1f%% | %.1f%% [%.1f-%.1f%%] | %.2f%%; %.0f us | %d of %d; %d; %.2f | %.1f%% [%.1f-%.1f%%] | "
              "[%.1f-%.1f%%] |" % (
                  f[0], " (before)" if f[1] else "", 100 * statistics.median(g[0] for g in rows),
                  100 * statistics.mean(ratios), 100 * lo, 100 * hi,
                  100 * held_share, 1e6 * held / taken if taken else 0,
                  sum(r.get("full_stops", 0) for r in rs), taken, sum(r.get("gvl_free", 0) for r in rs),
                  sum(r.get("threads_stopped", 0) for r in rs) / taken if taken else 0,
                  100 * statistics.mean(per_cpu) if per_cpu else float("nan"), 100 * clo, 100 * chi,
                  100 * (1 - held_share) * clo, 100 * (1 - held_share) * chi))
    return 0


if __name__ == "__main__":
    sys.exit(main())
