"""What `ruby sample` costs a server-like process: the share of its running
time the computing thread keeps while sampled.

    python3 tests/bench/bench_sample_server.py [--ruby debian-3.1] [--rounds 3] [--seconds 6]
        [--rates 100,1000] [--debuggers gdb,lldb] [--modes gvl,nonblocking[,all][,native]]

The target is tests/integration/programs/parked_server.rb: 16 threads, the
main one computing, 15 parked (sleep, Queue#pop, Mutex#lock, a pipe read).
The measure is the main thread's CPU time per wall second, from the kernel
(/proc/PID/task/TID/schedstat: the same clock as utime + stime in
/proc/PID/task/TID/stat, in nanoseconds rather than 10 ms ticks), polled
every 50 ms by this script. Iterations per second swing by 15% on a shared
machine; CPU time per wall second tells what the sampler took from the
thread (time stopped, and time waiting for a CPU the debugger took) from
what the machine's other jobs took, once it is compared with the same
measure undisturbed right before.

Mode native is the default stop mode with --native (each sampled thread's
machine stack unwound and merged: docs/native.md).

Each configuration (debugger x rate x stop mode) is run once per round, the
configurations in turn, each as a pair: SECONDS undisturbed, then SECONDS of
`ruby sample --duration SECONDS` (the window is the sampling loop's own, from
its summary and the time its folded file was written: the debugger's attach
and detach around it are left out). The result is the ratio of the two
shares, the median over the rounds, with the load average and CPU pressure
(/proc/pressure/cpu) seen during the run, and the figures of the command's
own summary (time held stopped, dropped share).
"""

import argparse
import os
import re
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

PROGRAM = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration", "programs",
                       "parked_server.rb")
SUMMARY = re.compile(r"^Samples:\s+(\d+) in ([0-9.]+) s: ([0-9.]+) Hz", re.M)
COST = re.compile(r"^Cost:\s+per sample (\d+) us stopping the threads, (\d+) us walking the stacks, (\d+) us "
                  r"resuming them .*threads held stopped [0-9.]+-([0-9.]+)% of the wall time", re.M)
COST_NB = re.compile(r"^Cost:\s+nothing stopped \(--nonblocking\): per sample (\d+) us reading", re.M)
DROPPED = re.compile(r"^Dropped:\s+(\d+) of (\d+) thread stacks", re.M)
ALONE = re.compile(r"^Stopped:\s+the GVL holder only in (\d+) of (\d+) samples", re.M)
MARGIN = 0.2   # seconds left out at each end of a window


class CpuPoller:
    """(wall time, CPU ns) of one thread, every 50 ms, in a thread of ours."""

    def __init__(self, pid, tid):
        self.path = "/proc/%d/task/%d/schedstat" % (pid, tid)
        self.rows = []
        self.stop = False
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self):
        while not self.stop:
            try:
                with open(self.path) as f:
                    ns = int(f.read().split()[0])
            except (OSError, ValueError, IndexError):
                return
            self.rows.append((time.time(), ns))
            time.sleep(0.05)

    def share(self, start, end):
        """CPU seconds per wall second between start and end (nearest polls inside)."""
        inside = [r for r in self.rows if start <= r[0] <= end]
        if len(inside) < 2:
            return None
        (t0, c0), (t1, c1) = inside[0], inside[-1]
        return (c1 - c0) * 1e-9 / (t1 - t0) if t1 > t0 else None


def load():
    with open("/proc/loadavg") as f:
        la = float(f.read().split()[0])
    try:
        with open("/proc/pressure/cpu") as f:
            some = float(f.readline().split()[1].split("=")[1])
    except (OSError, IndexError, ValueError):
        some = None
    return la, some


def sample_once(debugger, pid, rate, seconds, mode, workdir, poller):
    folded = os.path.join(workdir, "out.folded")
    if os.path.exists(folded):
        os.unlink(folded)
    flag = {"gvl": "", "nonblocking": " --nonblocking", "all": " --stop-all", "native": " --native"}[mode]
    rc, out = harness.run_debugger(debugger, ["ruby sample --duration %g --rate %g --folded %s%s"
                                              % (seconds, rate, folded, flag)], pid=pid)
    m = SUMMARY.search(out)
    if not m or not os.path.exists(folded):
        raise SystemExit("ruby sample failed:\n" + out[-3000:])
    elapsed = float(m.group(2))
    end = os.stat(folded).st_mtime
    r = {"achieved": float(m.group(3)), "share": poller.share(end - elapsed + MARGIN, end - MARGIN)}
    c = COST.search(out)
    if c:
        r.update(stop=int(c.group(1)), walk=int(c.group(2)), resume=int(c.group(3)), held=float(c.group(4)))
    c = COST_NB.search(out)
    if c:
        r.update(walk=int(c.group(1)), held=0.0)
    d = DROPPED.search(out)
    if d:
        r["dropped"] = 100.0 * int(d.group(1)) / max(1, int(d.group(2)))
    a = ALONE.search(out)
    if a:
        r["alone"] = 100.0 * int(a.group(1)) / max(1, int(a.group(2)))
    return r


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(v, f="%.1f"):
    return "-" if v is None else f % v


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--rates", default="100,1000")
    ap.add_argument("--debuggers", default="gdb,lldb")
    ap.add_argument("--modes", default="gvl,nonblocking")
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    configs = [(d, float(r), m) for r in args.rates.split(",") for d in args.debuggers.split(",")
               for m in args.modes.split(",")]
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-server-")
    proc = benchlib.launch([ruby, PROGRAM, workdir], workdir, settle=0.5, polls=600)
    try:
        poller = CpuPoller(proc.pid, proc.pid)   # the main thread computes: its TID is the pid
        results = {c: [] for c in configs}
        loads = []
        for rnd in range(args.rounds):
            for c in configs:
                t0 = time.time()
                time.sleep(args.seconds)
                base = poller.share(t0 + MARGIN, time.time() - MARGIN)
                r = sample_once(c[0], proc.pid, c[1], args.seconds, c[2], workdir, poller)
                r["base"] = base
                r["kept"] = 100.0 * r["share"] / base if base and r["share"] is not None else None
                results[c].append(r)
                loads.append(load())
                print("round %d %-4s %5g Hz %-11s undisturbed %s%%  sampled %s%%  kept %s%%  held %s%%%s"
                      % (rnd + 1, c[0], c[1], c[2], fmt(100 * base if base else None),
                         fmt(100 * r["share"] if r["share"] is not None else None), fmt(r["kept"]),
                         fmt(r.get("held"), "%.2f"),
                         "  dropped %.1f%%" % r["dropped"] if "dropped" in r else ""), flush=True)
        las = [l[0] for l in loads]
        pss = [l[1] for l in loads if l[1] is not None]
        print()
        print("Ruby %s, %d rounds of %g s per window; load average %.1f-%.1f (median %.1f), CPU pressure "
              "some avg10 median %s%%" % (args.ruby, args.rounds, args.seconds, min(las), max(las),
                                          statistics.median(las), fmt(med(pss))))
        print()
        print("| debugger | rate | stops | kept (median) | kept (each round) | undisturbed share | "
              "held stopped | GVL holder alone | dropped | stop / walk / resume us |")
        print("|---|---:|---|---:|---|---:|---:|---:|---:|---|")
        for c in configs:
            rs = results[c]
            print("| %s | %g Hz | %s | %s%% | %s | %s%% | %s%% | %s | %s | %s |" % (
                c[0], c[1], {"gvl": "GVL holder", "nonblocking": "none (`--nonblocking`)",
                             "all": "all (`--stop-all`)", "native": "GVL holder, `--native`"}[c[2]],
                fmt(med([r["kept"] for r in rs])), " ".join(fmt(r["kept"]) for r in rs),
                fmt(med([100 * r["base"] for r in rs if r["base"]])), fmt(med([r.get("held") for r in rs]), "%.2f"),
                fmt(med([r.get("alone") for r in rs]), "%.0f%%") if c[2] in ("gvl", "native") else "-",
                fmt(med([r.get("dropped") for r in rs]), "%.1f%%") if c[2] == "nonblocking" else "-",
                " / ".join(fmt(med([r.get(k) for r in rs]), "%.0f") for k in ("stop", "walk", "resume"))))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
