#!/usr/bin/env python3
"""Benchmark of the threads-and-locks analysis (rbpeek_locks_render_json).

    scripts/bench-locks.py RUBY [THREADS ...]

Starts RUBY with THREADS threads (default: 24 200 1000) deadlocked in Mutex
pairs (every thread holds one Mutex and waits on its partner's), plus as
many again parked in Queue#pop, then reads the stopped process through
/proc/PID/mem (as the plugins do for a live process; run as root or as its
ptrace tracer) and times, over 5 runs each: the snapshot (thread list and
stacks, 64 frames per thread) and the locks analysis on top of it, with the
memory cache dropped before each run. Prints the median times and the reads
that reached the memory source. The process is SIGSTOPped while measured.
"""

import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "python"))

from rbpeeklib.core import Session  # noqa: E402

PROGRAM = r'''
pairs = Integer(ARGV[1]) / 2
q = Queue.new
arrived = Queue.new
threads = []
pairs.times do |i|
  a, b = Mutex.new, Mutex.new
  threads << Thread.new { a.synchronize { arrived << 1; sleep 0.01 until arrived.size >= 2 * pairs; b.synchronize {} } }
  threads << Thread.new { b.synchronize { arrived << 1; sleep 0.01 until arrived.size >= 2 * pairs; a.synchronize {} } }
end
(2 * pairs).times { threads << Thread.new { q.pop } }
sleep 0.05 until threads.all? { |t| t.status == "sleep" }
sleep 0.5
File.write(File.join(ARGV[0], "ready"), "")
sleep
'''


def measure(ruby, nthreads, runs=5):
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-")
    prog = os.path.join(workdir, "bench.rb")
    with open(prog, "w") as f:
        f.write(PROGRAM)
    proc = subprocess.Popen([ruby, prog, workdir, str(nthreads)])
    try:
        deadline = time.time() + 300
        while not os.path.exists(os.path.join(workdir, "ready")):
            if proc.poll() is not None or time.time() > deadline:
                raise SystemExit("the benchmark program did not start")
            time.sleep(0.1)
        os.kill(proc.pid, signal.SIGSTOP)
        s = Session()
        s.use_pid(proc.pid)
        libdir = os.path.join(os.path.dirname(os.path.dirname(ruby)), "lib")
        for name in sorted(os.listdir(libdir)) if os.path.isdir(libdir) else []:
            if name.startswith("libruby.so.") and name.count(".") == 4:
                s.add_debug_file(os.path.join(libdir, name))
        s.attach()
        snap_t, locks_t, reads = [], [], None
        for _ in range(runs):
            s.invalidate()
            s.reset_read_stats()
            t0 = time.perf_counter()
            with s.snapshot(64) as snap:
                t1 = time.perf_counter()
                doc = snap.locks()
                t2 = time.perf_counter()
            snap_t.append(t1 - t0)
            locks_t.append(t2 - t1)
            reads = s.read_stats()
        total = len(doc["threads"])
        return (total, len(doc["deadlocks"]), statistics.median(snap_t) * 1000, statistics.median(locks_t) * 1000,
                reads)
    finally:
        proc.kill()
        proc.wait()


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    ruby = sys.argv[1]
    sizes = [int(x) for x in sys.argv[2:]] or [24, 200, 1000]
    print("%8s %10s %14s %14s %14s %14s" % ("threads", "deadlocks", "snapshot ms", "locks ms", "source reads",
                                               "source KiB"))
    for n in sizes:
        total, dl, snap_ms, locks_ms, reads = measure(ruby, n)
        print("%8d %10d %14.1f %14.1f %14d %14d" % (total, dl, snap_ms, locks_ms, reads["source_reads"],
                                                     reads["source_bytes"] // 1024))


if __name__ == "__main__":
    main()
