"""Benchmark: what `ruby allocs` and `ruby allocs --sites` cost an allocation-heavy program, next to
stackprof's mode: :object (not a test; prints the table of
docs/performance-allocs.md).

    python3 tests/bench/bench_allocs.py [--ruby debian-3.1] [--repeat 3] [--debugger gdb]
    python3 tests/bench/bench_allocs.py [--ruby debian-3.1] --interleaved N [--control]
    python3 tests/bench/bench_allocs.py [--ruby debian-3.1] --paired N

The workload (tests/bench/alloc_workload.rb) allocates a few million small
objects a second on its main thread and logs its own iterations every
50 ms. In one run of this script, each repeat:
  1. rbpeek: a fresh workload; after 2 s, `gdb -p PID` (or lldb) runs
     `ruby allocs --duration 2 --json -o F` at its default settings. The
     workload's iterations per second while rbpeek counted (the JSON's
     started_at..ended_at) and over the whole command (the debugger's start
     to its exit: attach, the detach and attach again included) are
     compared with the 1.5 s before the debugger started and the 1.5 s
     after it exited (their mean: other load comes and goes); the debugger
     holds the target stopped while it attaches and loads, so the whole
     command's figure depends mostly on the debugger and the machine's load.
  1b. the same with `ruby allocs --sites --duration 2` (default rate):
     the workload's speed while it samples the allocator, and the tracer's
     own count of the time it held the GVL holder stopped (held_s over the
     time sampled: what stops cost, whatever the machine's load);
  2. stackprof: a fresh workload with STACKPROF_OBJECT=1 (mode: :object,
     interval 1, stackprof's default: a sample at every allocation) and
     again with interval 1000, from 2 s to 4 s of its life, against the
     1.5 s around that window, in the same process.
Ratios are "kept": the window's rate over the baseline (1.0 = undisturbed),
per second of wall-clock time and per second of the workload's own CPU
time (which other jobs on a loaded machine do not dilute; stops do not
show in it, and `ruby allocs` makes none while it counts).
Each figure is the median of --repeat runs; the load average is printed.

--interleaved N measures `ruby allocs` and `--sites` alone, through the
command line (nothing attaches a debugger, which stops the target): one
workload each, N windows of 2 s, each followed by 2 s undisturbed, each
window against the 1.5 s before and after its command. Plain `rbpeek
allocs` stops nothing (it reads the GC's counters), so its figure is the
benchmark's own floor: how much a window differs from its neighbours with
no cost at all. With --control a second, identical workload runs beside
it, never observed, and each window's figure is divided by the control's
over the same spans: what the machine itself does to both (this virtual
machine's speed moves by 20-40% from one 2 s window to the next) cancels,
and what rbpeek does to its target remains. (The sampler's own CPU time
competes with either workload; on a 2-CPU machine with the two workloads
on it, that cost is counted too.)
--paired N: one workload, warmed up; N rounds, each a plain `rbpeek
allocs` window and an `--sites` one, the order alternating; each `--sites`
window over its round's plain one, with the 95% bootstrap interval of the
mean of those ratios; then stackprof's object mode (interval 1 and 1000)
in workloads of their own, over the same 2 s after the same warm-up.
Debian's ruby-stackprof is built for Debian's ruby3.1, hence the default Ruby.
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

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
WORKLOAD = os.path.join(HERE, "alloc_workload.rb")
GDB_PLUGIN = os.path.join(REPO, "gdb-plugin", "rbpeek.py")
CLI = os.path.join(REPO, "tools", "rbpeek")
LLDB_PLUGIN = os.path.join(REPO, "lldb-plugin", "rbpeek.py")
WARM_UP = 8.0       # seconds of the workload before --interleaved's first window


def start(ruby, workdir, env_extra=None):
    return benchlib.launch([ruby, WORKLOAD, workdir], workdir, env=dict(os.environ, **(env_extra or {})), polls=600)


def read_log(workdir):
    rows, marks = [], {}
    with open(os.path.join(workdir, "iter.log")) as f:
        for line in f:
            p = line.split()
            if len(p) == 3 and p[1] != "stackprof":
                rows.append((float(p[0]), int(p[1]), float(p[2])))
            elif len(p) >= 3 and p[1] == "stackprof":
                marks[p[2]] = float(p[0])
    return rows, marks


def rate(rows, a, b, cpu=False):
    """Iterations per second between wall times a and b (log rows inside):
    per second of wall-clock time, or (cpu) per second of the workload's
    own CPU time, which other load on the machine does not dilute."""
    inside = [r for r in rows if a <= r[0] <= b]
    if len(inside) < 2:
        return None
    (t0, i0, c0), (t1, i1, c1) = inside[0], inside[-1]
    span = (c1 - c0) if cpu else (t1 - t0)
    return (i1 - i0) / span if span > 0 else None


def kept(rows, a, b, span=1.5, base=None, cpu=False):
    """The rate between a and b over the mean of the span before and the
    span after base (a, b by default): the undisturbed speed around it."""
    base_a, base_b = base or (a, b)
    w, before, after = (rate(rows, a, b, cpu), rate(rows, base_a - span, base_a, cpu),
                        rate(rows, base_b, base_b + span, cpu))
    if w is None or before is None or after is None:
        return None
    return w / ((before + after) / 2)


def run_rbpeek(ruby, debugger, workdir, extra=""):
    proc = start(ruby, workdir)
    try:
        time.sleep(2.0)
        out = os.path.join(workdir, "allocs.json")
        if debugger == "gdb":
            argv = ["gdb", "-q", "-nx", "-batch", "-p", str(proc.pid), "-ex", "source " + GDB_PLUGIN,
                    "-ex", "ruby allocs --duration 2%s --json -o %s" % (extra, out)]
        else:
            argv = [shutil.which("lldb-16") or "lldb-16", "--no-lldbinit", "-b", "-p", str(proc.pid), "-o",
                    "command script import " + LLDB_PLUGIN, "-o", "ruby allocs --duration 2%s --json -o %s" % (extra, out)]
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        t_cmd0 = time.time()
        subprocess.run(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                       env=env, timeout=120)
        t_cmd1 = time.time()
        time.sleep(2.0)
        r = json.load(open(out))
        rows, _ = read_log(workdir)
        # The baseline is outside the whole command: the debugger stops the
        # target while it attaches, before the count, and after it.
        return (kept(rows, r["started_at"], r["ended_at"], base=(t_cmd0, t_cmd1)), kept(rows, t_cmd0, t_cmd1),
                r["rate_per_s"], kept(rows, r["started_at"], r["ended_at"], base=(t_cmd0, t_cmd1), cpu=True),
                r.get("held_s", 0.0) / r["sampled_s"] if r.get("sampled_s") else None)
    finally:
        proc.kill()
        proc.wait()


def window(pid, workdir, tag, extra, control_dir=None):
    """`rbpeek allocs --pid PID --duration 2` (the command line: no debugger
    stops the target to attach), then 2 s alone; the window (the JSON's
    started_at..ended_at) against the 1.5 s before and after the command:
    (kept, kept per CPU second, held share), each divided by the control
    workload's over the same spans when there is one."""
    out = os.path.join(workdir, "allocs-%s.json" % tag)
    t_cmd0 = time.time()
    subprocess.run([sys.executable, CLI, "allocs", "--pid", str(pid), "--duration", "2", "--json", "-o", out] + extra,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL, timeout=120,
                   check=True)
    t_cmd1 = time.time()
    time.sleep(2.0)
    r = json.load(open(out))
    rows, _ = read_log(workdir)
    k = [kept(rows, r["started_at"], r["ended_at"], base=(t_cmd0, t_cmd1), cpu=cpu) for cpu in (False, True)]
    if control_dir:
        crows, _ = read_log(control_dir)
        c = [kept(crows, r["started_at"], r["ended_at"], base=(t_cmd0, t_cmd1), cpu=cpu) for cpu in (False, True)]
        k = [a / b if a is not None and b else None for a, b in zip(k, c)]
    return k[0], k[1], r.get("held_s", 0.0) / r["sampled_s"] if r.get("sampled_s") else None


def run_interleaved(ruby, workdir, runs, extra, control=False):
    """One workload; runs times: `rbpeek allocs --pid` (the command line:
    no debugger stops it to attach) for 2 s, then 2 s alone. Each run's
    window (the JSON's started_at..ended_at) against the 1.5 s before and
    after the command: a list of (kept, kept per CPU second, held share),
    with control each divided by the control workload's over the same spans."""
    proc = start(ruby, workdir)
    cdir = os.path.join(workdir, "control")
    if control:
        os.makedirs(cdir)
        cproc = start(ruby, cdir)
    got = []
    try:
        # The workload's first seconds are its heap's growth: alone, its
        # speed over 0.5 s windows swung 61-109% of its mean until about
        # 6 s, then stayed within 96-110%.
        time.sleep(WARM_UP)
        for i in range(runs):
            got.append(window(proc.pid, workdir, str(i), extra, cdir if control else None))
    finally:
        proc.kill()
        proc.wait()
        if control:
            cproc.kill()
            cproc.wait()
    return got


def interleaved(ruby, runs, control=False):
    """--interleaved: plain `rbpeek allocs` (which stops nothing: the
    benchmark's own floor) and `--sites`, each in one workload, windows
    interleaved with undisturbed ones; the medians."""
    print("load average before: %s" % open("/proc/loadavg").read().strip())
    rows = []
    for name, extra in (("`rbpeek allocs` (stops nothing)", []), ("`rbpeek allocs --sites` (default rate)", ["--sites"])):
        d = tempfile.mkdtemp(prefix="rbpeek-bench-allocs-")
        try:
            got = run_interleaved(ruby, d, runs, extra, control)
        finally:
            shutil.rmtree(d, ignore_errors=True)

        def med(k):
            vals = [g[k] for g in got if g[k] is not None]
            return statistics.median(vals) if vals else None
        each = " ".join("%.1f" % (100 * g[0]) for g in got if g[0] is not None)
        rows.append("| %s | %s (%s) | %s | %s |" % (name, fmt(med(0)), each, fmt(med(1)), fmt(med(2))))
    print("load average after: %s" % open("/proc/loadavg").read().strip())
    print("\nmedian of %d windows of 2 s, each against the 1.5 s before and after it, in one workload%s\n"
          % (runs, ", over the same of a control workload beside it" if control else ""))
    print("| command | speed kept (wall clock; median, each window) | per CPU second | held stopped |")
    print("|---|---:|---:|---:|")
    for r in rows:
        print(r)
    return 0


def run_paired(ruby, workdir, rounds):
    """One workload, warmed up; rounds of a plain `rbpeek allocs` window and
    an `rbpeek allocs --sites` one (window(): 2 s, then 2 s alone), the
    order alternating from round to round: [(plain kept, --sites kept,
    --sites held share)]."""
    proc = start(ruby, workdir)
    got = []
    try:
        time.sleep(WARM_UP)
        for i in range(rounds):
            each = {}
            for extra in (([], ["--sites"]) if i % 2 == 0 else (["--sites"], [])):
                each[bool(extra)] = window(proc.pid, workdir, "%d%s" % (i, "s" if extra else ""), extra)
            got.append((each[False][0], each[True][0], each[True][2]))
    finally:
        proc.kill()
        proc.wait()
    return got


def bootstrap_mean_ci(vals, resamples=10000, seed=1):
    """The 95% percentile bootstrap interval of the mean of vals."""
    rng = random.Random(seed)
    n = len(vals)
    means = sorted(sum(rng.choice(vals) for _ in range(n)) / n for _ in range(resamples))
    return means[int(0.025 * resamples)], means[int(0.975 * resamples) - 1]


def paired(ruby, rounds):
    """--paired: `--sites` against plain `rbpeek allocs` (which stops
    nothing) window by window in one workload, and stackprof's object mode
    in workloads of its own, in one run of this script."""
    print("load average before: %s" % open("/proc/loadavg").read().strip())
    d = tempfile.mkdtemp(prefix="rbpeek-bench-allocs-")
    try:
        got = run_paired(ruby, d, rounds)
    finally:
        shutil.rmtree(d, ignore_errors=True)
    sp = {}
    for interval in (1, 1000):
        d = tempfile.mkdtemp(prefix="rbpeek-bench-allocs-")
        try:
            sp[interval] = run_stackprof(ruby, interval, d, start_s=WARM_UP)
        finally:
            shutil.rmtree(d, ignore_errors=True)
    print("load average after: %s" % open("/proc/loadavg").read().strip())
    pairs = [(a, b, h) for a, b, h in got if a and b]
    ratios = [b / a for a, b, _ in pairs]
    lo, hi = bootstrap_mean_ci(ratios)
    print("\n%d rounds, each a plain `rbpeek allocs` window and an `rbpeek allocs --sites` one (default rate) of "
          "2 s, in one workload after %g s of warm-up, the order alternating; each window against the 1.5 s before "
          "and after its command\n" % (len(pairs), WARM_UP))
    print("| | median | mean [95% interval] | windows from .. to |")
    print("|---|---:|---:|---:|")
    print("| `rbpeek allocs` (stops nothing): speed kept | %s | %s | %s-%s |" % (
        fmt(statistics.median(a for a, _, _ in pairs)), fmt(statistics.mean(a for a, _, _ in pairs)),
        fmt(min(a for a, _, _ in pairs)), fmt(max(a for a, _, _ in pairs))))
    print("| `rbpeek allocs --sites`: speed kept | %s | %s | %s-%s |" % (
        fmt(statistics.median(b for _, b, _ in pairs)), fmt(statistics.mean(b for _, b, _ in pairs)),
        fmt(min(b for _, b, _ in pairs)), fmt(max(b for _, b, _ in pairs))))
    print("| `--sites` over the plain window of its round | %s | %s [%s-%s] | %s-%s |" % (
        fmt(statistics.median(ratios)), fmt(statistics.mean(ratios)), fmt(lo), fmt(hi), fmt(min(ratios)),
        fmt(max(ratios))))
    held = [h for _, _, h in pairs if h is not None]
    print("| `--sites`: the GVL holder held stopped, share of the time sampled | %s | %s | %s-%s |" % (
        fmt(statistics.median(held)), fmt(statistics.mean(held)), fmt(min(held)), fmt(max(held))))
    for interval in (1, 1000):
        print("| stackprof `mode: :object`, interval %d: speed kept (per CPU second %s) | %s | | |"
              % (interval, fmt(sp[interval][1]), fmt(sp[interval][0])))
    return 0


def run_stackprof(ruby, interval, workdir, start_s=2.0):
    """stackprof's object mode in a workload of its own, from start_s to
    start_s + 2 of its life, against the 1.5 s around: (kept, per CPU second)."""
    proc = start(ruby, workdir, {"STACKPROF_OBJECT": str(interval), "STACKPROF_START": str(start_s)})
    try:
        time.sleep(start_s + 4.0)
        rows, marks = read_log(workdir)
        if "start" not in marks or "stop" not in marks:
            raise SystemExit("stackprof did not run in the workload (is ruby-stackprof installed for this Ruby?)")
        return kept(rows, marks["start"], marks["stop"]), kept(rows, marks["start"], marks["stop"], cpu=True)
    finally:
        proc.kill()
        proc.wait()


def fmt(v):
    return "-" if v is None else "%.1f%%" % (100 * v)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--debugger", default="gdb", choices=("gdb", "lldb"))
    ap.add_argument("--interleaved", type=int, metavar="N",
                    help="instead: N windows of the command line's allocs and allocs --sites in one workload each")
    ap.add_argument("--paired", type=int, metavar="N",
                    help="instead: N rounds of a plain and a --sites window in one workload, and stackprof")
    ap.add_argument("--control", action="store_true",
                    help="with --interleaved: each window over the same spans of an unobserved workload beside it")
    a = ap.parse_args()
    ruby = harness.ruby_binary(a.ruby)
    if a.paired:
        return paired(ruby, a.paired)
    if a.interleaved:
        return interleaved(ruby, a.interleaved, a.control)
    results = {"rbpeek_window": [], "rbpeek_command": [], "sp1": [], "sp1000": [],
               "rbpeek_window_cpu": [], "sp1_cpu": [], "sp1000_cpu": [],
               "sites_window": [], "sites_window_cpu": [], "sites_held": []}
    rates = []
    print("load average before: %s" % open("/proc/loadavg").read().strip())
    for i in range(a.repeat):
        for name, fn in (("rbpeek", lambda d: run_rbpeek(ruby, a.debugger, d)),
                         ("sites", lambda d: run_rbpeek(ruby, a.debugger, d, " --sites")),
                         ("sp1", lambda d: run_stackprof(ruby, 1, d)),
                         ("sp1000", lambda d: run_stackprof(ruby, 1000, d))):
            d = tempfile.mkdtemp(prefix="rbpeek-bench-allocs-")
            try:
                got = fn(d)
            finally:
                shutil.rmtree(d, ignore_errors=True)
            if name == "sites":
                results["sites_window"].append(got[0])
                results["sites_window_cpu"].append(got[3])
                results["sites_held"].append(got[4])
            elif name == "rbpeek":
                results["rbpeek_window"].append(got[0])
                results["rbpeek_command"].append(got[1])
                rates.append(got[2])
                results["rbpeek_window_cpu"].append(got[3])
            else:
                results[name].append(got[0])
                results[name + "_cpu"].append(got[1])
        print("repeat %d: %s" % (i + 1, {k: fmt(v[-1]) for k, v in results.items()}), flush=True)
    print("load average after: %s" % open("/proc/loadavg").read().strip())

    def med(k):
        vals = [v for v in results[k] if v is not None]
        return statistics.median(vals) if vals else None

    print("\nRuby %s, %s, median of %d; the workload allocated %.1f M objects/s (rbpeek's count)\n"
          % (a.ruby, a.debugger, a.repeat, statistics.median(rates) / 1e6 if rates else 0))
    print("| profiler | setting | speed kept (wall clock) | speed kept (per CPU second of the workload) |")
    print("|---|---|---:|---:|")
    print("| `ruby allocs` | default, while counting | %s | %s |" % (fmt(med("rbpeek_window")),
                                                                  fmt(med("rbpeek_window_cpu"))))
    print("| `ruby allocs` | default, whole command (attach, detach, attach again) | %s | - |"
          % fmt(med("rbpeek_command")))
    print("| `ruby allocs --sites` | default (50 Hz), while sampling | %s | %s |" % (fmt(med("sites_window")),
                                                                                fmt(med("sites_window_cpu"))))
    print("| `ruby allocs --sites` | its own count: the GVL holder held stopped, share of the time sampled | %s | - |"
          % fmt(med("sites_held")))
    print("| stackprof `mode: :object` | interval 1 (its default) | %s | %s |" % (fmt(med("sp1")), fmt(med("sp1_cpu"))))
    print("| stackprof `mode: :object` | interval 1000 | %s | %s |" % (fmt(med("sp1000")), fmt(med("sp1000_cpu"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
