"""Benchmark: `ruby sample` (not a test; prints the tables of docs/sampling-cost.md).

    python3 tests/bench/bench_sample.py [--ruby debian-3.1] [--seconds 6] [--repeat 3]

The target is tests/bench/sample_workload.rb: a CPU-bound main thread that
counts its own iterations (and logs them every 50 ms), beside two idle
threads. Measured in one run, on this machine:

  1. Achieved rate at requested 100, 1000 and 5000 Hz, in gdb and lldb.
  2. Slowdown of the workload (its own iterations per second while sampled,
     against the same process in the 2 s before the debugger started and
     the 2 s after it detached)
     at 100 and 1000 Hz, in gdb and lldb, and under stackprof (in-process,
     SIGPROF/SIGALRM driven, in cpu and wall mode) at the same rates, as the
     reference.
  3. Where a sample's time goes: stopping the target, walking the stacks
     (C core) and resuming it, on the default path (rbpeek traces the
     target itself; the debugger detaches meanwhile) and through the
     debugger (--via-debugger: from the signal to the stop report; resuming
     is a flat-out run's cycle less the rest), in gdb and lldb; and the
     walk alone, debugger-free, with the memory cache dropped every time.
Each figure is the median of --repeat runs, each with a fresh process. On a
shared machine the workload's own throughput moves by tens of percent as
other jobs come and go: read the slowdowns with the load averages printed
around them, and rerun on a quiet machine for firm figures.
"""

import argparse
import os
import platform
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

WORKLOAD = os.path.join(HERE, "sample_workload.rb")


def start(ruby, workdir, extra=()):
    return benchlib.launch([ruby, WORKLOAD, workdir] + list(extra), workdir, polls=600)


def read_log(workdir):
    """[(realtime, iterations, run_s, wait_s)] and {marker: (realtime, args)}."""
    rows, marks = [], {}
    with open(os.path.join(workdir, "iterations.log")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[1].isdigit():
                rows.append((float(parts[0]), int(parts[1]), int(parts[2]) * 1e-9, int(parts[3]) * 1e-9))
            elif len(parts) >= 2:
                marks[parts[1]] = (float(parts[0]), parts[2:])
    return rows, marks


def window(rows, start, end):
    """(wall, iterations, run, wait) between the first and last record inside."""
    inside = [r for r in rows if start <= r[0] <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    a, b = inside[0], inside[-1]
    return b[0] - a[0], b[1] - a[1], b[2] - a[2], b[3] - a[3]


def projected_slowdown(rows, base_windows, sampled):
    """The slowdown on an otherwise idle machine, from the kernel's account
    of the main thread: the share of the sampled window it spent neither on
    a CPU nor waiting for one (stopped by the debugger), and its iterations
    per CPU-second against the unsampled windows' (what cache misses after
    each stop, or an in-process profiler's signal handler, cost it). Other
    jobs taking the CPU change neither."""
    s = window(rows, *sampled)
    bases = [w for w in (window(rows, *b) for b in base_windows) if w and w[2] > 0]
    if not s or not bases or s[2] <= 0:
        return None, None
    eff_base = sum(w[1] for w in bases) / sum(w[2] for w in bases)
    eff = s[1] / s[2]
    stopped = max(0.0, 1.0 - (s[2] + s[3]) / s[0])
    return 1.0 - (1.0 - stopped) * eff / eff_base, stopped


def rate_between(rows, start, end):
    """Iterations per second between two wall-clock times (first and last
    log record inside the window)."""
    w = window(rows, start, end)
    return w[1] / w[0] if w else None


SUMMARY = re.compile(r"^Samples:\s+(\d+) in ([0-9.]+) s: ([0-9.]+) Hz", re.M)
COST = re.compile(r"^Cost:\s+per sample (\d+) us walking the stacks, (\d+) us for the debugger to stop the target; "
                  r"resumed (\d+)%", re.M)
COST_TRACED = re.compile(r"^Cost:\s+per sample (\d+) us stopping the threads, (\d+) us walking the stacks, (\d+) us "
                         r"resuming them \(traced by rbpeek\); the sampler was at work ([0-9.]+)%", re.M)


def baseline(rows, before_end, after_start, span=2.0):
    """The workload's unsampled throughput: the mean of the span before
    sampling and the span after it. Other load on the machine comes and
    goes; windows on both sides cancel a trend, and every figure is a median
    of several runs."""
    a = rate_between(rows, before_end - span, before_end)
    b = rate_between(rows, after_start, after_start + span)
    vals = [v for v in (a, b) if v]
    return sum(vals) / len(vals) if vals else None


def run_rbpeek(ruby, debugger, rate, seconds, workdir, via=False):
    """One `ruby sample` run (traced by rbpeek, or with via: through the
    debugger). Returns a dict of figures."""
    target = start(ruby, workdir)
    try:
        time.sleep(2.5)   # the first baseline window
        folded = os.path.join(workdir, "out.folded")
        launched = time.time()
        rc, output = harness.run_debugger(debugger, ["ruby sample --duration %g --rate %g --folded %s%s"
                                                     % (seconds, rate, folded, " --via-debugger" if via else "")], pid=target.pid)
        detached = time.time()
        time.sleep(2.5)   # the second baseline window
        m, c = SUMMARY.search(output), (COST if via else COST_TRACED).search(output)
        if not m or not c or not os.path.exists(folded):
            raise SystemExit("ruby sample failed:\n" + output[-3000:])
        samples, elapsed, achieved = int(m.group(1)), float(m.group(2)), float(m.group(3))
        end = os.stat(folded).st_mtime
        rows, _ = read_log(workdir)
        base = baseline(rows, launched - 0.05, detached + 0.2)
        during = rate_between(rows, end - elapsed, end)
        proj, stopped = projected_slowdown(rows, [(launched - 2.05, launched - 0.05), (detached + 0.2, detached + 2.2)],
                                           (end - elapsed, end))
        per_sample = elapsed / samples if samples else 0.0
        if via:
            walk, stop, resume = int(c.group(1)) * 1e-6, int(c.group(2)) * 1e-6, None
            resumed = int(c.group(3)) / 100.0
        else:
            stop, walk, resume = (int(c.group(i)) * 1e-6 for i in (1, 2, 3))
            resumed = 1.0 - float(c.group(4)) / 100.0   # the share the sampler was not at work
        return {"achieved": achieved, "slowdown": 1.0 - during / base if base and during else None,
                "projected": proj, "stopped": stopped, "walk": walk, "stop": stop, "resume": resume,
                "cycle": per_sample, "resumed": resumed}
    finally:
        target.kill()
        target.wait()


def run_stackprof(ruby, mode, rate, seconds, workdir):
    target = start(ruby, workdir, ["stackprof", mode, str(rate), "2.5", str(seconds)])
    try:
        deadline = time.time() + seconds + 30
        while time.time() < deadline:
            _rows, marks = read_log(workdir)
            if "profile-end" in marks:
                break
            time.sleep(0.2)
        time.sleep(2.5)
        rows, marks = read_log(workdir)
        t0, t1 = marks["profile-start"][0], marks["profile-end"][0]
        samples = int(marks["profile-end"][1][0])
        base = baseline(rows, t0 - 0.05, t1 + 0.05)
        during = rate_between(rows, t0, t1)
        proj, stopped = projected_slowdown(rows, [(t0 - 2.05, t0 - 0.05), (t1 + 0.05, t1 + 2.05)], (t0, t1))
        return {"achieved": samples / (t1 - t0), "slowdown": 1.0 - during / base if base and during else None,
                "projected": proj, "stopped": stopped}
    finally:
        target.kill()
        target.wait()


def walk_alone(ruby, workdir, n=3000):
    """The walk with a cold memory cache (as every sample has), no debugger:
    the workload is held with SIGSTOP while rbpeek samples it n times."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    from rbpeeklib.core import Profile, SampleOptions, Sampler, Session
    target = start(ruby, workdir)
    try:
        time.sleep(0.5)
        os.kill(target.pid, signal.SIGSTOP)
        s = Session()
        s.use_pid(target.pid)
        s.attach()
        sampler = Sampler(s, Profile(), SampleOptions())
        for _ in range(200):
            sampler.sample()
        s.reset_read_stats()
        t = time.perf_counter()
        for _ in range(n):
            sampler.sample()
        per = (time.perf_counter() - t) / n
        st = s.read_stats()
        return per, st["source_reads"] / n
    finally:
        os.kill(target.pid, signal.SIGCONT)
        target.kill()
        target.wait()


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt_pct(v):
    return "n/a" if v is None else "%.1f%%" % (100 * v)


def machine():
    model = "?"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    mem = "?"
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemTotal"):
                mem = "%.0f GiB" % (int(line.split()[1]) / 1024 / 1024)

    def ver(argv):
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.splitlines()[0].strip()
        except (OSError, IndexError, subprocess.TimeoutExpired):
            return "?"

    return ["CPU: %s, %d logical CPUs; memory %s" % (model, os.cpu_count(), mem),
            "Kernel: Linux %s; %s" % (platform.release(), ver(["gdb", "--version"])),
            "LLDB: %s" % ver([harness.LLDB, "--version"]),
            "Load average at start: %.2f %.2f %.2f" % os.getloadavg()]


def paired_run(ruby, rate, pairs, workdir):
    """Slowdowns of one target sampled by the C loop (no debugger: what `ruby
    sample` runs once the debugger has detached) for 1 s out of every 2:
    [(sampled rate / mean of the unsampled rates before and after)]."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    from rbpeeklib import core  # noqa: E402
    target = start(ruby, workdir)
    try:
        session = core.Session()
        session.use_pid(target.pid)
        session.attach()
        cfg = core.TraceConfig()
        cfg.interval_s = 1.0 / rate
        cfg.duration_s = 1.0
        for sig in range(1, 65):
            cfg.pass_signals[sig] = 1
        opts = core.SampleOptions()
        opts.pid = target.pid
        windows = []
        stopped = []
        time.sleep(1.0)
        for _ in range(pairs):
            t0 = time.time()
            time.sleep(1.0)
            t1 = time.time()
            profile = core.Profile()
            trace = core.Trace(session, profile, opts, cfg)
            while not trace.wait(0.1):
                pass
            st = trace.stats()
            trace.close()
            t2 = time.time()
            windows.append(((t0 + 0.05, t1 - 0.05), (t1 + 0.05, t2 - 0.05)))
            stopped.append((st.stop_s + st.walk_s + st.resume_s) / st.elapsed_s if st.elapsed_s else 0.0)
        time.sleep(1.05)
        windows.append(((time.time() - 1.0, time.time() - 0.05), None))
        rows, _ = read_log(workdir)
        out = []
        for i in range(pairs):
            before, on = windows[i]
            after = windows[i + 1][0]
            rb, ra, r_on = rate_between(rows, *before), rate_between(rows, *after), rate_between(rows, *on)
            if rb and ra and r_on:
                out.append(1.0 - r_on / ((rb + ra) / 2))
        return out, stopped
    finally:
        target.kill()
        target.wait()


def paired(ruby, args):
    work = tempfile.mkdtemp(prefix="rbpeek-bench-sample-")
    print("\n".join(machine()))
    pairs = max(5, int(args.seconds))
    print("Ruby: %s (%s); the C sampling loop without a debugger, %d pairs of 1 s sampled / 1 s not, "
          "%d targets per rate\n" % (args.ruby, ruby, pairs, args.repeat))
    print("| rate | slowdown (median of the pairs) | middle half of the pairs | target stopped |")
    print("|---:|---:|---|---:|")
    try:
        for rate in (100, 1000):
            slow, stopped = [], []
            for i in range(args.repeat):
                a, b = paired_run(ruby, rate, pairs, os.path.join(work, "p%d-%d" % (rate, i)))
                slow += a
                stopped += b
            slow.sort()
            q1, q3 = slow[len(slow) // 4], slow[(3 * len(slow)) // 4]
            print("| %d Hz | %s | %s to %s | %s |" % (rate, fmt_pct(med(slow)), fmt_pct(q1), fmt_pct(q3),
                                                      fmt_pct(med(stopped))), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("Load average at end: %.2f %.2f %.2f" % os.getloadavg())


def at_100(ruby, args):
    work = tempfile.mkdtemp(prefix="rbpeek-bench-sample-")
    print("\n".join(machine()))
    print("Ruby: %s (%s); %d s per run, %d runs of each, interleaved\n" % (args.ruby, ruby, args.seconds, args.repeat))
    names = ("rbpeek, gdb", "rbpeek, lldb", "stackprof, cpu mode")
    runs = {n: [] for n in names}
    try:
        for i in range(args.repeat):
            wd = os.path.join(work, "run%d" % i)
            runs[names[0]].append(run_rbpeek(ruby, "gdb", 100, args.seconds, wd + "g"))
            runs[names[1]].append(run_rbpeek(ruby, "lldb", 100, args.seconds, wd + "l"))
            runs[names[2]].append(run_stackprof(ruby, "cpu", 100, args.seconds, wd + "s"))
            print("  run %d: %s" % (i + 1, "; ".join("%s %s" % (n, fmt_pct(runs[n][-1]["slowdown"])) for n in names)),
                  file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("| sampler at 100 Hz | slowdown, measured (median; each run) | slowdown, idle machine | target stopped |")
    print("|---|---|---:|---:|")
    for n in names:
        r = runs[n]
        print("| %s | %s (%s) | %s | %s |" % (n, fmt_pct(med([x["slowdown"] for x in r])),
                                             ", ".join(fmt_pct(x["slowdown"]) for x in r),
                                             fmt_pct(med([x["projected"] for x in r])),
                                             fmt_pct(med([x["stopped"] for x in r]))))
    print("Load average at end: %.2f %.2f %.2f" % os.getloadavg())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--paired", action="store_true",
                    help="the traced loop's own cost, robust to the machine's other jobs: 1 s sampled and 1 s "
                         "not, alternating, each sampled second against the unsampled seconds on either side")
    ap.add_argument("--at-100", action="store_true",
                    help="only the 100 Hz target: rbpeek traced in gdb and lldb and stackprof's cpu mode, "
                         "interleaved run by run so that the machine's other jobs weigh on each alike")
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    if args.at_100:
        return at_100(ruby, args)
    if args.paired:
        return paired(ruby, args)
    work = tempfile.mkdtemp(prefix="rbpeek-bench-sample-")
    print("\n".join(machine()))
    print("Ruby: %s (%s); %d s per run, median of %d runs\n" % (args.ruby, ruby, args.seconds, args.repeat))
    counter = [0]

    def wd():
        counter[0] += 1
        return os.path.join(work, "run%d" % counter[0])

    results = {}
    plan = [(dbg, path, rate) for path in ("traced", "via") for dbg in ("gdb", "lldb")
            for rate in ((100, 1000, 5000, 100000) if path == "traced" else (100, 1000, 100000))]
    try:
        for dbg, path, rate in plan:
            runs = [run_rbpeek(ruby, dbg, rate, args.seconds, wd(), via=path == "via") for _ in range(args.repeat)]
            results[(dbg, path, rate)] = {k: med([r[k] for r in runs]) for k in runs[0]}
            print("  %s %s %6d Hz: %s" % (dbg, path, rate, results[(dbg, path, rate)]), file=sys.stderr, flush=True)
        for mode in ("cpu", "wall"):
            for rate in (100, 1000):
                runs = [run_stackprof(ruby, mode, rate, args.seconds, wd()) for _ in range(args.repeat)]
                results[("stackprof-" + mode, rate)] = {k: med([r[k] for r in runs]) for k in runs[0]}
                print("  stackprof %s %d Hz: %s" % (mode, rate, results[("stackprof-" + mode, rate)]),
                      file=sys.stderr, flush=True)
        alone = [walk_alone(ruby, wd()) for _ in range(args.repeat)]
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print("Achieved rate and slowdown of the workload. measured: its iterations/s while sampled against the")
    print("2 s before and after; idle-machine: from the kernel's account of its main thread (the share of the")
    print("time it was stopped, and its iterations per CPU-second against unsampled), which other jobs on the")
    print("machine do not move:\n")
    print("| sampler | requested | achieved | slowdown, measured | slowdown, idle-machine | target stopped |")
    print("|---|---:|---:|---:|---:|---:|")

    def row(name, req, r):
        print("| %s | %s | %.0f Hz | %s | %s | %s |" % (name, req, r["achieved"], fmt_pct(r["slowdown"]),
                                                      fmt_pct(r["projected"]), fmt_pct(r["stopped"])))

    for dbg, path, rate in plan:
        name = "rbpeek, %s%s" % (dbg, ", --via-debugger" if path == "via" else "")
        row(name, "flat out" if rate == 100000 else "%d Hz" % rate, results[(dbg, path, rate)])
    for mode in ("cpu", "wall"):
        for rate in (100, 1000):
            row("stackprof, %s mode (in-process)" % mode, "%d Hz" % rate, results[("stackprof-" + mode, rate)])
    print("\nWhere a sample's time goes (microseconds per sample):\n")
    print("| path | debugger | run | cycle | stop | walk | resume (and loop) | walk share of stop+walk+resume |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for dbg, path, rate in plan:
        if rate not in (100, 1000, 100000):
            continue
        r = results[(dbg, path, rate)]
        if path == "traced":
            resume = r["resume"]
        elif rate == 100000:
            resume = r["cycle"] - r["walk"] - r["stop"]
        else:
            resume = None
        total = r["stop"] + r["walk"] + (resume or 0)
        print("| %s | %s | %s | %.0f | %.0f | %.0f | %s | %s |" % (
            "traced" if path == "traced" else "--via-debugger", dbg,
            "flat out" if rate == 100000 else "%d Hz" % rate, 1e6 * r["cycle"], 1e6 * r["stop"], 1e6 * r["walk"],
            "%.0f" % (1e6 * resume) if resume is not None else "-",
            "%.0f%%" % (100 * r["walk"] / total) if resume is not None and total else "-"))
    per, reads = med([a[0] for a in alone]), med([a[1] for a in alone])
    print("\nWalk alone, no debugger (3 threads, memory cache dropped each time): %.0f us per sample, "
          "%.0f page reads" % (1e6 * per, reads))
    print("Load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
