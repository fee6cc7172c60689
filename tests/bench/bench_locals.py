"""Benchmark: `ruby bt -a --locals` of 100 Ruby frames (not a test; the goal
is under 100 ms warm).

    python3 tests/bench/bench_locals.py [RUBY ...]      default: debian-3.1 3.4.5

For each Ruby: a program recurses 100 levels deep, each frame with five
locals (an Integer, a String, an Array, a Hash, an object), and parks; it is
gcore'd. In gdb and lldb, live and on the core, `ruby bt -a --locals -o FILE`
runs RUNS times in one debugger session, timed inside the debugger: the
first run (attach included) and the median of the others (warm).
"""

import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402

PROGRAM = r"""
class Node; def initialize(i); @i = i; @name = "n#{i}"; end; end
def dive(n, text, list, map, node)
  if n.zero?
    File.write(ARGV[0] + "/ready", Process.pid.to_s)
    sleep
  end
  dive(n - 1, "level #{n}", [n, n + 1, "x"], { n => n.to_s }, Node.new(n))
end
GC.disable
dive(99, "top", [], {}, Node.new(0))
"""

RUNS = 7


def main(specs):
    rows = []
    for spec, ruby, pid, core, workdir in benchlib.parked_targets(specs, "locals_bench.rb", PROGRAM, settle=0.3):
        out = os.path.join(workdir, "bt.txt")
        cmd = "ruby bt -a --locals -o %s" % out
        for debugger in ("gdb", "lldb"):
            for mode in ("live", "core"):
                times, text = benchlib.timed_runs(debugger, mode, cmd, RUNS, ruby, pid, core)
                with open(out) as f:
                    printed = f.read()
                frames = printed.count("in 'Object#dive'") + printed.count("in `dive'")
                if len(times) != RUNS or frames < 100:
                    print("%s %s %s: failed (%d timings, %d frames):\n%s" % (spec, debugger, mode, len(times),
                                                                            frames, text[-2000:]))
                    continue
                rows.append((spec, debugger, mode, frames, times[0], statistics.median(times[1:])))
    print("%-12s %-5s %-5s %7s %10s %10s" % ("ruby", "dbg", "mode", "frames", "first ms", "warm ms"))
    for spec, debugger, mode, frames, first, warm in rows:
        print("%-12s %-5s %-5s %7d %10.1f %10.1f" % (spec, debugger, mode, frames, first * 1000, warm * 1000))


if __name__ == "__main__":
    main(sys.argv[1:] or ["debian-3.1", "3.4.5"])
