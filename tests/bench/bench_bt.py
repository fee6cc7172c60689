"""Benchmark: `ruby bt -a` on a 5,000-frame stack (not a test; prints a table).

    python3 tests/bench/bench_bt.py [RUBY ...]      default: debian-3.1 3.4.5

For each Ruby: start a program whose one thread is 5,000 Ruby frames deep,
then measure, in gdb and lldb, live and on a gcore'd core:
  - the whole `ruby bt -a` command (first run: includes attach, i.e. symbol
    lookup, layout discovery; then warm runs, where only the memory cache is
    dropped, as on every command), timed inside the debugger;
  - the walk alone and its reads, from `ruby bt --stats`.
And, debugger-free, the instructions per frame of the walk under callgrind
(`rbpeek bt -a` on the core), which unlike wall time is stable on a busy machine
(RBPEEK_BENCH_CALLGRIND=0 leaves it out).
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

DEPTH = 5000
PROGRAM = """
def recurse(n)
  n.zero? ? sleep : recurse(n - 1)
end
Thread.new { recurse(%d) }
sleep 0.5
File.write(ARGV[0] + "/ready", Process.pid.to_s)
sleep
""" % DEPTH

RUNS = 6


def measure(debugger, pid=None, exe=None, core=None):
    cmds = [benchlib.timer(debugger, "ruby bt -a -o /dev/null")] * RUNS + ["ruby bt -a -o /dev/null --stats"]
    t0 = time.perf_counter()
    rc, out = harness.run_debugger(debugger, cmds, pid=pid, exe=exe, core=core)
    total = time.perf_counter() - t0
    times = [float(x) for x in re.findall(r"BENCH ([0-9.]+)", out)]
    stats = re.search(r"walked (\d+) threads, (\d+) frames in ([0-9.]+) ms \(([0-9.]+) us/frame\); (\d+) reads "
                      r"reached the memory source \(([0-9.]+)/frame", out)
    if len(times) != RUNS or not stats:
        raise SystemExit("benchmark run failed:\n" + out[-3000:])
    return {"first": times[0], "warm": statistics.median(times[1:]), "frames": int(stats.group(2)),
            "walk_ms": float(stats.group(3)), "us_frame": float(stats.group(4)), "reads": int(stats.group(5)),
            "reads_frame": float(stats.group(6)), "debugger_total": total}


def callgrind(core, build_dir):
    tool = os.path.join(harness.REPO, "tools", "rbpeek")
    if not shutil.which("valgrind") or os.environ.get("RBPEEK_BENCH_CALLGRIND") == "0":
        return None
    out_file = tempfile.mktemp(prefix="callgrind.")
    r = subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out_file, sys.executable, tool, "bt",
                        "-a", "--core", core, "--json"], capture_output=True, text=True,
                       env=dict(os.environ, RBPEEK_LIBRARY=os.path.join(build_dir, "lib", "librbpeek.so")))
    m = re.search(r"Collected : (\d+)", r.stderr)
    anno = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out_file], capture_output=True,
                          text=True).stdout
    os.unlink(out_file)
    # "total" includes Python's start; the walk is rbpeek_snapshot_take's.
    # The inclusive cost of the call ("N (x%)  => path/snapshot.c:rbpeek_snapshot_take (1x)"),
    # not the source line of the call site, which mentions it too; the
    # compiler may make rbpeek_snapshot_take a jump to snapshot.c's take().
    snap = re.search(r"^\s*([\d,]+) \([^)]*\)\s+=> \S*snapshot\.c:(?:rbpeek_snapshot_take|take) \(", anno, re.M)
    return {"total": int(m.group(1)) if m else None,
            "snapshot": int(snap.group(1).replace(",", "")) if snap else None}


def main():
    rubies = sys.argv[1:] or ["debian-3.1", "3.4.5"]
    build_dir = os.environ.get("RBPEEK_BUILD_DIR", os.path.join(harness.REPO, "build"))
    rows = []
    for spec, ruby, pid, core, _ in benchlib.parked_targets(rubies, "deep.rb", PROGRAM):
        for dbg in ("gdb", "lldb"):
            rows.append((spec, dbg, "live", measure(dbg, pid=pid)))
            rows.append((spec, dbg, "core", measure(dbg, exe=ruby, core=core)))
        cg = callgrind(core, build_dir)
        if cg and cg["snapshot"]:
            print("%s callgrind: rbpeek_snapshot_take %d instructions for %d frames = %d instructions/frame"
                  % (spec, cg["snapshot"], rows[-1][3]["frames"], cg["snapshot"] // rows[-1][3]["frames"]))
    print()
    print("| Ruby | debugger | mode | frames | `ruby bt -a` first | warm | walk only | us/frame | "
          "source reads | reads/frame |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for spec, dbg, mode, m in rows:
        print("| %s | %s | %s | %d | %.0f ms | %.0f ms | %.1f ms | %.2f | %d | %.4f |"
              % (spec, dbg, mode, m["frames"], m["first"] * 1e3, m["warm"] * 1e3, m["walk_ms"], m["us_frame"],
                 m["reads"], m["reads_frame"]))


if __name__ == "__main__":
    main()
