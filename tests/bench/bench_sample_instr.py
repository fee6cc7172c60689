"""Instructions per sample of rbpeek's own sampling loop, split into stop,
walk and resume, for each stop mode, counted by callgrind.

    python3 tests/bench/bench_sample_instr.py [--ruby debian-3.1] [--samples 400] [--modes gvl,all,nonblocking]

No debugger: this script starts tests/integration/programs/parked_server.rb
(16 threads, one computing), and runs the C sampling loop (rbpeek_trace_*,
the same one `ruby sample` runs once the debugger has detached) on it
through the Python binding, under `valgrind --tool=callgrind`, once per stop
mode. The target itself runs natively; only this process is counted, and
only its user-space instructions (the kernel's work in ptrace, waitpid and
the reads of /proc/PID/mem is not in them: the time figures of the
summary's Cost line and bench_sample_server.py cover that). This machine has
no hardware performance counters (a VM), hence callgrind.

Inclusive instructions of the loop's steps, divided by the samples taken:
  stop    rbp_gvl_holders + tr_stop_some + tr_stop_all + rbp_mem_prefetch
          + rbp_mem_fence (reading the GVL holders, stopping, and the batched
          re-read of the last walk's pages: by default before the stop, and
          of the holder's own pages behind the fence after it)
  walk    rbp_snapshot_take_split + rbpeek_profile_add_snapshot, less the
          resume it calls back (the GVL holder is resumed after its own walk)
  resume  tr_resume_all
and, among them, what naming the GC costs (`[GC: marking]`...: the
objspace's phase read at every sample, the GC's thread looked up when one
runs; docs/native.md):
  gc      rbp_gc_state_read + rbp_gc_thread, and its share of the whole
--program gc_share.rb samples a program that spends a fifth of its time
in the GC instead of parked_server.rb. Mode "sites" is `ruby allocs
--sites`' loop (the GVL holder stopped, unwound natively, judged:
alloc_sites.c); "unwind" is the native unwind and merge inside its walk
(rbp_native_stack_sampled). With --program alloc_sites.rb.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PROGRAM = os.path.join(REPO, "tests", "integration", "programs", "parked_server.rb")
STEPS = {"stop": ("rbp_gvl_holders", "tr_stop_some", "tr_stop_all", "rbp_mem_prefetch", "rbp_mem_fence"),
         "walk": ("rbp_snapshot_take_split", "rbpeek_profile_add_snapshot", "rbpeek_alloc_sites_add_snapshot"),
         "resume": ("tr_resume_all",)}
GC_TAGGING = ("rbp_gc_state_read", "rbp_gc_thread")
# sites: the native unwind and merge, inside the walk. Only the GVL holder
# is unwound there: its registers and its stack's copy while it is held
# (rbp_native_stack_hold, which unwinds at once when no copy is made), the
# unwind of the copy after it is resumed (rbp_native_stack_held).
UNWIND = ("rbp_native_stack_hold", "rbp_native_stack_held")


def child(pid, mode, samples):
    """Runs inside valgrind: samples pid and prints the samples taken."""
    sys.path.insert(0, os.path.join(REPO, "python"))
    from rbpeeklib.core import STOP_MODES, AllocSites, Profile, SampleOptions, Session, Trace, TraceConfig
    s = Session()
    s.use_pid(pid)
    s.attach()
    cfg = TraceConfig()
    cfg.interval_s = 0.005
    cfg.max_samples = samples
    cfg.seed = 12345
    cfg.stop_mode = STOP_MODES[{"nonblocking": "none", "sites": "gvl"}.get(mode, mode)]
    judge = None
    if mode == "sites":   # ruby allocs --sites: the GVL holder unwound, judged
        judge = AllocSites()
        cfg.native = 1
        cfg.alloc_sites = judge.handle
    opts = SampleOptions()
    opts.pid = pid
    t = Trace(s, Profile(), opts, cfg)
    while not t.wait(1.0):
        pass
    st = t.stats()
    print("SAMPLES %d FULL %d TORN %d ADDED %d" % (st.samples, st.full_stops, st.torn_threads, st.added_threads))
    t.close()


def inclusive(outfile):
    r = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", outfile],
                       capture_output=True, text=True)
    costs = {}
    for line in r.stdout.splitlines():
        m = re.match(r"^\s*([0-9,]+)\s+(?:\([^)]*\)\s+)?\S*:(\S+)", line)
        if m:
            name = re.sub(r"\[.*$|'.*$", "", m.group(2))
            costs[name] = max(costs.get(name, 0), int(m.group(1).replace(",", "")))
    return costs


def main():
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        child(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--samples", type=int, default=400)
    ap.add_argument("--modes", default="gvl,all,nonblocking")
    ap.add_argument("--program", default=PROGRAM)
    args = ap.parse_args()
    program = args.program if os.path.isabs(args.program) else os.path.join(REPO, "tests", "integration",
                                                                             "programs", args.program)
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-instr-")
    with open(program) as f:
        if "native_ext" in f.read():   # gc_share.rb: the test extension, built for this Ruby
            sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
            import nativelib
            nativelib.build(harness.ruby_binary(args.ruby), workdir)
    proc = benchlib.launch([harness.ruby_binary(args.ruby), program, workdir], workdir, settle=0.5)
    try:
        print("| stop mode | samples | every thread stopped | stop | walk | resume | instructions per sample "
              "| of which GC tagging | of which the native unwind |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for mode in args.modes.split(","):
            out = os.path.join(workdir, "callgrind.%s" % mode)
            r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out, sys.executable,
                                os.path.abspath(__file__), "--child", str(proc.pid), mode, str(args.samples)],
                               capture_output=True, text=True)
            m = re.search(r"SAMPLES (\d+) FULL (\d+) TORN (\d+) ADDED (\d+)", r.stdout)
            if not m:
                raise SystemExit("the sampler failed under valgrind:\n" + (r.stdout + r.stderr)[-3000:])
            n = int(m.group(1))
            costs = inclusive(out)
            per = {k: sum(costs.get(f, 0) for f in fs) / n for k, fs in STEPS.items()}
            per["walk"] -= per["resume"]   # called back from inside the walk
            total = sum(per.values())
            gc = sum(costs.get(f, 0) for f in GC_TAGGING) / n
            unwind = sum(costs.get(f, 0) for f in UNWIND) / n
            print("| %s | %d | %s | %.0f | %.0f | %.0f | %.0f | %.0f (%.2f%%) | %.0f |" % (
                mode, n, m.group(2), per["stop"], per["walk"], per["resume"], total, gc, 100 * gc / total, unwind))
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
