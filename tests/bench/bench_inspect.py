"""Benchmark: `ruby p` of a 10,000-element Array at depth 2 (not a test;
prints a table for docs/inspect.md; the goal is under 50 ms warm).

    python3 tests/bench/bench_inspect.py [RUBY ...]      default: debian-3.1 3.4.5

For each Ruby: a program builds $a = 10,000 two-element Arrays [i, "s<i>"],
records its address, parks with GC disabled, and is gcore'd. In gdb and
lldb, live and on the core, `ruby p ADDR --depth 2 --max-length 100000
-o FILE` runs RUNS times in one debugger session, timed inside the
debugger: the first run (attach included) and the median of the others
(warm). The output is checked to hold 10,000 elements.
"""

import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402

PROGRAM = r"""
require "objspace"
$a = Array.new(10_000) { |i| [i, "s#{i}"] }
3.times { GC.start }
GC.disable
File.write(ARGV[0] + "/addr", ObjectSpace.dump($a)[/"address":"(0x\h+)"/, 1])
File.write(ARGV[0] + "/ready", Process.pid.to_s)
sleep
"""

RUNS = 7


def main(specs):
    rows = []
    for spec, ruby, pid, core, workdir in benchlib.parked_targets(specs, "inspect_bench.rb", PROGRAM):
        addr = open(os.path.join(workdir, "addr")).read().strip()
        out = os.path.join(workdir, "p.txt")
        cmd = "ruby p %s --depth 2 --max-length 100000 -o %s" % (addr, out)
        for debugger in ("gdb", "lldb"):
            for mode in ("live", "core"):
                times, text = benchlib.timed_runs(debugger, mode, cmd, RUNS, ruby, pid, core)
                with open(out) as f:
                    printed = f.read()
                elems = printed.count("\"s")
                if len(times) != RUNS or elems != 10000:
                    print("%s %s %s: failed (%d timings, %d elements):\n%s" % (spec, debugger, mode, len(times),
                                                                              elems, text[-2000:]))
                    continue
                rows.append((spec, debugger, mode, times[0], statistics.median(times[1:])))
    print("%-12s %-5s %-5s %10s %10s" % ("ruby", "dbg", "mode", "first ms", "warm ms"))
    for spec, debugger, mode, first, warm in rows:
        print("%-12s %-5s %-5s %10.1f %10.1f" % (spec, debugger, mode, first * 1000, warm * 1000))


if __name__ == "__main__":
    main(sys.argv[1:] or ["debian-3.1", "3.4.5"])
