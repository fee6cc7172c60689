"""Benchmark: `ruby bt --native` of a thread with about 200 native frames
(not a test; prints a table).

    python3 tests/bench/bench_native.py [--ruby debian-3.1] [--depth 190] [--runs 8] [--debuggers gdb,lldb]

The native_ext extension (tests/integration/programs/native_ext) is built
for the Ruby; the target's main thread calls NativeExt.deep(DEPTH), DEPTH
nested calls of a C function whose innermost yields to a block that
sleeps: DEPTH frames of deep_level, and the interpreter's and libc's below
and above them. In each debugger, attached once (live), timed inside the
debugger:

  attach   the first `ruby bt` (Ruby frames only): symbols, layout, the VM
  bt warm  the median of the next RUNS `ruby bt` (Ruby frames only), for
           comparison
  first    the first `ruby bt --native`: the unwinder loaded, every mapped
           module's ELF file opened and checked, its CFI read as the walk
           needs it, the merge
  warm     the median of the next RUNS `ruby bt --native` (the memory cache
           dropped before each, as every command does; the modules and the
           per-pc cache kept)

with the number of machine frames the thread has (from --json), and the
load average while it ran (the machine is shared: say it with the figures).
"""

import argparse
import json
import os
import re
import statistics
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402
import nativelib  # noqa: E402

PROGRAM = """
require File.join(ARGV[0], "native_ext")
NativeExt.deep(%d) do
  File.write(File.join(ARGV[0], "ready"), Process.pid.to_s)
  sleep
end
"""


def measure(debugger, pid, runs, workdir):
    out_json = os.path.join(workdir, "%s.json" % debugger)
    plain = benchlib.timer(debugger, "ruby bt -o /dev/null")
    native = benchlib.timer(debugger, "ruby bt --native -o /dev/null")
    cmds = [plain] * (runs + 1) + [native] * (runs + 1) + ["ruby bt --native --json -o " + out_json]
    rc, out = harness.run_debugger(debugger, cmds, pid=pid)
    times = [float(x) for x in re.findall(r"BENCH ([0-9.]+)", out)]
    if len(times) != 2 * runs + 2 or not os.path.exists(out_json):
        raise SystemExit("benchmark run failed:\n" + out[-3000:])
    with open(out_json) as f:
        thread = json.load(f)["threads"][0]
    frames = thread["frames"]
    native = thread.get("native") or {}
    if not native.get("merged") or native.get("cut"):
        raise SystemExit("%s: the stack was not merged whole: %s" % (debugger, native))
    return {"attach": times[0], "plain": statistics.median(times[1:runs + 1]), "first": times[runs + 1],
            "warm": statistics.median(times[runs + 2:]),
            "native": sum(1 for f in frames if f["kind"] == "native" or (f["kind"] == "cfunc" and f.get("pc"))),
            "frames": len(frames)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--depth", type=int, default=190)
    ap.add_argument("--runs", type=int, default=8)
    ap.add_argument("--debuggers", default="gdb,lldb")
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    workdir = tempfile.mkdtemp(prefix="rbpeek-bench-native-")
    nativelib.build(ruby, workdir)
    prog = os.path.join(workdir, "deep.rb")
    with open(prog, "w") as f:
        f.write(PROGRAM % args.depth)
    proc = benchlib.launch([ruby, prog, workdir], workdir, settle=0.3)
    try:
        print("Ruby %s, NativeExt.deep(%d): `ruby bt --native` of the main thread, live, timed in the debugger"
              % (args.ruby, args.depth))
        print("%-5s %8s %8s %10s %10s %10s %9s %9s" % ("", "frames", "machine", "attach ms", "bt warm ms",
                                                      "first ms", "warm ms", "load avg"))
        for d in args.debuggers.split(","):
            r = measure(d, proc.pid, args.runs, workdir)
            print("%-5s %8d %8d %10.1f %10.2f %10.1f %9.2f %9.1f" % (d, r["frames"], r["native"], 1e3 * r["attach"],
                                                                 1e3 * r["plain"], 1e3 * r["first"], 1e3 * r["warm"],
                                                                 os.getloadavg()[0]), flush=True)
    finally:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
