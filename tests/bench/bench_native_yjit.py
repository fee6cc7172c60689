"""Benchmark: the whole stack of a YJIT process (not a test; prints a table).

    python3 tests/bench/bench_native_yjit.py [--ruby 3.4.5] [--threads 16] [--seconds 6] [--repeat 3]
                                            [--runs 8] [--debuggers gdb,lldb]

The figures issue 36 asks of JIT code (docs/performance.md, "YJIT"):

  1. `rbpeek sample --native` at 100 Hz of a program under `--yjit
     --yjit-call-threshold=1` whose THREADS threads compute in JIT-compiled
     methods, sharing the GVL: the program's own iterations per second
     while sampled, against the same process in the SECONDS before the
     sampler started and after it ended (the mean of the two: a shared
     machine's speed drifts). The target must keep 98% of its speed. The
     run's summary must say every stack was merged and none cut.
  2. `ruby bt --native` of a thread parked in `sleep` called from JIT code,
     in gdb and lldb attached once: the first, and the median of the next
     RUNS (warm: the modules and the JIT region's bounds known, the memory
     cache dropped as every command does). Must be under 10 ms warm. The
     stack must be merged whole (not cut), JIT frames in it.

Each figure of 1 is the median of REPEAT fresh processes. The load average
is printed with the figures: on a shared machine the program's own
throughput moves by tens of percent as other jobs come and go.

--interleave ROUNDS measures 1 in one process instead, in short windows
that alternate: WINDOW s untouched, WINDOW s sampled with `--native`,
WINDOW s untouched, WINDOW s sampled without it, and so on ROUNDS times.
Each sampled window's rate is set against the mean of the untouched
windows on either side of it, and the figure is the mean of those ratios
with its 95% bootstrap interval. Sixteen threads passing the GVL on two
CPUs drift by some 10% from one process, and one minute, to the next
(docs/performance.md): windows seconds apart share that drift, so the
ratio of neighbours cancels it where the before/after of one long run
could not. The untouched windows leave out the command's start-up and
exit (its Python, the attach, the detach: 0.3 s after it ends).
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402
from bench_allocs import bootstrap_mean_ci  # noqa: E402

YJIT = ["--yjit", "--yjit-call-threshold=1"]

# THREADS threads add to a counter each; whichever holds the GVL logs the
# sum every 50 ms with the time (a logger thread of its own would wait
# for the GVL behind all of them).
WORKERS = """
OUT = ARGV[0]
N = Integer(ARGV[1])
COUNTS = Array.new(N, 0)
LOG = File.open(File.join(OUT, "iterations.log"), "a")
$next = 0.0

def step(x, i)
  (x * 31 + i) & 0xffff
end

def work(slot)
  x = 0
  loop do
    200.times { |i| x = step(x, i) }
    COUNTS[slot] += 1
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    if t >= $next
      $next = t + 0.05
      LOG.syswrite("%.6f %d\\n" % [t, COUNTS.sum])
    end
  end
end

threads = N.times.map { |k| Thread.new { work(k) } }
File.write(File.join(OUT, "ready"), Process.pid.to_s)
threads.each(&:join)
"""

# A thread parked in sleep four JIT-compiled methods deep.
PARKED = """
def d1; d2; end
def d2; d3; end
def d3; d4; end
def d4
  File.write(File.join(ARGV[0], "ready"), Process.pid.to_s)
  sleep
end
Thread.new { d1 }.join
"""


def rate_between(rows, t0, t1):
    inside = [r for r in rows if t0 <= r[0] <= t1]
    if len(inside) < 3:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def read_rows(workdir):
    rows = []
    with open(os.path.join(workdir, "iterations.log")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2:
                rows.append((float(parts[0]), int(parts[1])))
    return rows


def start_workers(ruby, threads):
    """WORKERS under YJIT with that many threads, started and ready: its
    process and its folder (where it logs)."""
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-yjit-")
    prog = os.path.join(workdir, "workers.rb")
    with open(prog, "w") as f:
        f.write(WORKERS)
    return benchlib.launch([ruby] + YJIT + [prog, workdir, str(threads)], workdir), workdir


def one_speed_run(ruby, threads, seconds, native=True):
    """(speed while sampled / speed around it, the summary's Native line)."""
    proc, workdir = start_workers(ruby, threads)
    try:
        time.sleep(1.0 + seconds)   # warmed: every method compiled, then the "before" window
        t_start = time.monotonic()
        r = subprocess.run([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(proc.pid)] + (["--native"] if native else []) + [
                            "--rate", "100", "--duration", str(seconds), "--folded", os.path.join(workdir, "out.folded")],
                           capture_output=True, text=True, timeout=120 + seconds)
        t_end = time.monotonic()
        time.sleep(seconds)
        rows = read_rows(workdir)
    finally:
        proc.kill()
        proc.wait()
    if r.returncode != 0:
        raise SystemExit("rbpeek sample failed:\n" + (r.stdout + r.stderr)[-2000:])
    text = r.stdout + r.stderr
    # The sampled window: the loop's own time, ending at the command's end
    m = re.search(r"^Samples:\s+\d+ in ([0-9.]+) s", text, re.M)
    s1 = t_end - 0.3
    s0 = s1 - float(m.group(1)) if m else t_start
    before = rate_between(rows, s0 - seconds, s0 - 0.1)
    during = rate_between(rows, s0 + 0.2, s1)
    after = rate_between(rows, t_end + 0.2, t_end + seconds)
    if not (before and during and after):
        raise SystemExit("the program's log does not cover the run")
    native = re.search(r"^Native:.*$", text, re.M)
    return during / ((before + after) / 2.0), native.group(0) if native else "(no Native line)"


def sampled_window(argv, json_path):
    """Runs `rbpeek sample` (argv) and reads its JSON summary: the sampled
    window in this process's monotonic clock."""
    offset = time.time() - time.monotonic()
    # in the JSON's folder: the command writes its default folded file and SVG where it runs
    r = subprocess.run(argv + ["--json", "-o", json_path], capture_output=True, text=True, timeout=120,
                       cwd=os.path.dirname(json_path))
    if r.returncode != 0:
        raise SystemExit("rbpeek sample failed:\n" + (r.stdout + r.stderr)[-2000:])
    with open(json_path) as f:
        doc = json.load(f)
    t0 = doc["started"] - offset
    return t0, t0 + doc["duration_s"], doc["samples"]


def interleaved_run(ruby, threads, window, rounds, modes):
    """{mode: [ratio of each sampled window's rate to its untouched
    neighbours']}: one process, its windows alternating untouched and
    sampled (modes in turn), ROUNDS rounds."""
    proc, workdir = start_workers(ruby, threads)
    timeline = []   # ("off", t0, t1) or (mode, t0, t1)
    taken = {m: [] for m in modes}   # samples a second of each sampled window
    try:
        time.sleep(2.0)   # every method compiled
        for k in range(rounds * len(modes)):
            mode = modes[k % len(modes)]
            a = time.monotonic()
            time.sleep(window)
            timeline.append(("off", a, time.monotonic()))
            argv = (["nice", "-n", "19"] if mode.endswith("-nice") else []) + [
                sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(proc.pid), "--rate", "100",
                "--duration", str(window)] + (["--native"] if mode.startswith("native") else [])
            s0, s1, n = sampled_window(argv, os.path.join(workdir, "s.json"))
            timeline.append((mode, s0 + 0.05, s1))
            taken[mode].append(n / (s1 - s0))
            time.sleep(0.3)   # the detach and the command's exit, in no window
        a = time.monotonic()
        time.sleep(window)
        timeline.append(("off", a, time.monotonic()))
        rows = read_rows(workdir)
    finally:
        proc.kill()
        proc.wait()
    ratios = {m: [] for m in modes}
    for i in range(1, len(timeline) - 1, 2):
        mode, s0, s1 = timeline[i]
        before = rate_between(rows, timeline[i - 1][1], timeline[i - 1][2])
        during = rate_between(rows, s0, s1)
        after = rate_between(rows, timeline[i + 1][1], timeline[i + 1][2])
        if before and during and after:
            ratios[mode].append(during / ((before + after) / 2.0))
    return ratios, taken


def bt_times(ruby, debugger, runs):
    """(first, warm median) seconds of `ruby bt -a --native` in debugger,
    whether the parked thread's stack was merged whole, its JIT frames."""
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-yjit-")
    prog = os.path.join(workdir, "parked.rb")
    with open(prog, "w") as f:
        f.write(PARKED)
    proc = benchlib.launch([ruby] + YJIT + [prog, workdir], workdir, settle=0.2)
    try:
        out_json = os.path.join(workdir, "bt.json")
        cmd = benchlib.timer(debugger, "ruby bt -a --native -o /dev/null")
        _rc, out = harness.run_debugger(debugger, [cmd] * (runs + 1) + ["ruby bt -a --native --json -o " + out_json],
                                        pid=proc.pid)
    finally:
        proc.kill()
        proc.wait()
    times = [float(x) for x in re.findall(r"BENCH ([0-9.]+)", out)]
    if len(times) != runs + 1 or not os.path.exists(out_json):
        raise SystemExit("%s: the benchmark run failed:\n%s" % (debugger, out[-3000:]))
    with open(out_json) as f:
        threads = json.load(f)["threads"]
    parked = next((t for t in threads if any(fr.get("label") in ("Object#d4", "d4") for fr in t["frames"])), None)
    if parked is None:
        raise SystemExit("%s: no thread with d4 in %s" % (debugger, out_json))
    native = parked.get("native") or {}
    jit = sum(1 for fr in parked["frames"] if fr.get("kind") == "jit")
    return times[0], statistics.median(times[1:]), bool(native.get("merged")) and not native.get("cut"), jit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruby", default="3.4.5")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--debuggers", default="gdb,lldb")
    ap.add_argument("--plain", action="store_true", help="also sample without --native, for comparison")
    ap.add_argument("--interleave", type=int, metavar="ROUNDS", default=0,
                    help="measure the speed in alternating windows of one process (see above), ROUNDS rounds")
    ap.add_argument("--window", type=float, default=2.0, help="seconds of each window of --interleave")
    ap.add_argument("--nice", action="store_true",
                    help="--interleave: also `sample --native` run at nice 19 (whether the sampler's own CPU time "
                         "is what the program loses)")
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    print("Ruby %s with %s; load average before: %s" % (args.ruby, " ".join(YJIT), benchlib_load()))
    if args.interleave:
        modes = (["native", "plain"] if args.plain else ["native"]) + (["native-nice"] if args.nice else [])
        ratios, taken = interleaved_run(ruby, args.threads, args.window, args.interleave, modes)
        for mode in modes:
            r = ratios[mode]
            print("sample %s at 100 Hz, %d threads, %d windows of %g s: the target kept%s of its speed "
                  "(windows' standard deviation %.1f points; %.1f samples a second; load %s)"
                  % ({"native": "--native", "plain": "without --native", "native-nice": "--native at nice 19"}[mode],
                     args.threads, len(r), args.window,
                     mean_ci(r)[1:] if len(r) > 1 else " ?", 100 * statistics.stdev(r) if len(r) > 1 else 0.0,
                     statistics.mean(taken[mode]) if taken[mode] else 0.0, benchlib_load()))
        return
    speeds = []
    for k in range(args.repeat):
        speed, native = one_speed_run(ruby, args.threads, args.seconds)
        speeds.append(speed)
        print("  sample --native, 100 Hz, %d threads, run %d: %.1f%% of its speed; %s (load %s)"
              % (args.threads, k + 1, 100 * speed, native, benchlib_load()))
    print("sample --native at 100 Hz: the target kept %.1f%% of its speed (median of %d; %.1f-%.1f%%)%s"
          % (100 * statistics.median(speeds), len(speeds), 100 * min(speeds), 100 * max(speeds), mean_ci(speeds)))
    if args.plain:
        plain = [one_speed_run(ruby, args.threads, args.seconds, native=False)[0] for _ in range(args.repeat)]
        print("sample without --native at 100 Hz: the target kept %.1f%% of its speed (median of %d; %.1f-%.1f%%)%s, "
              "load %s" % (100 * statistics.median(plain), len(plain), 100 * min(plain), 100 * max(plain),
                           mean_ci(plain), benchlib_load()))
    for dbg in [d for d in args.debuggers.split(",") if d]:
        first, warm, whole, jit = bt_times(ruby, dbg, args.runs)
        print("%s bt -a --native of a thread parked from JIT code: first %.1f ms, warm %.1f ms (median of %d); "
              "stack %s, %d JIT frames (load %s)"
              % (dbg, 1000 * first, 1000 * warm, args.runs, "merged whole" if whole else "NOT whole", jit,
                 benchlib_load()))


def mean_ci(speeds):
    """"; mean M% (95%: L-H%)": the mean of the runs' ratios with its 95%
    bootstrap interval (bench_allocs), which says whether a few runs can
    show a figure at all on a machine whose speed drifts."""
    if len(speeds) < 2:
        return ""
    lo, hi = bootstrap_mean_ci(speeds)
    return "; mean %.1f%% (95%%: %.1f-%.1f%%)" % (100 * statistics.mean(speeds), 100 * lo, 100 * hi)


def benchlib_load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


if __name__ == "__main__":
    main()
