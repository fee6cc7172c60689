"""Benchmark: `ruby p` of a 10,000-element Array at depth 2, and of a
Bignum of 2,000,000 bits (not a test; prints a table for docs/inspect.md
and docs/performance.md; the goals are under 50 ms warm for the Array and
under 2 s for the Bignum).

    python3 tests/bench/bench_inspect.py [RUBY ...]      default: debian-3.1 3.4.5

For each Ruby: a program builds $a = 10,000 two-element Arrays [i, "s<i>"]
and $big = 2**2_000_000 (602,060 digits), records their addresses, parks
with GC disabled, and is gcore'd. In gdb and lldb, live and on the core,
`ruby p ADDR --depth 2 --max-length 100000 -o FILE` and `ruby p BIG -o
FILE` run RUNS times each in one debugger session, timed inside the
debugger: the first run (attach included, for the Array) and the median of
the others (warm). The outputs are checked: 10,000 elements, and the
Bignum's digits equal to what the program wrote itself.
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
$big = 2**2_000_000
3.times { GC.start }
GC.disable
File.write(ARGV[0] + "/addr", ObjectSpace.dump($a)[/"address":"(0x\h+)"/, 1])
File.write(ARGV[0] + "/bigaddr", ObjectSpace.dump($big)[/"address":"(0x\h+)"/, 1])
File.write(ARGV[0] + "/big", $big.inspect)
File.write(ARGV[0] + "/ready", Process.pid.to_s)
sleep
"""

RUNS = 7


def main(specs):
    rows = []
    for spec, ruby, pid, core, workdir in benchlib.parked_targets(specs, "inspect_bench.rb", PROGRAM):
        addr = open(os.path.join(workdir, "addr")).read().strip()
        bigaddr = open(os.path.join(workdir, "bigaddr")).read().strip()
        big = open(os.path.join(workdir, "big")).read()
        out = os.path.join(workdir, "p.txt")
        cases = [("array", "ruby p %s --depth 2 --max-length 100000 -o %s" % (addr, out),
                  lambda printed: printed.count("\"s") == 10000),
                 ("2**2e6", "ruby p %s -o %s" % (bigaddr, out), lambda printed: printed.strip() == big)]
        for name, cmd, check in cases:
            for debugger in ("gdb", "lldb"):
                for mode in ("live", "core"):
                    times, text = benchlib.timed_runs(debugger, mode, cmd, RUNS, ruby, pid, core)
                    with open(out) as f:
                        printed = f.read()
                    if len(times) != RUNS or not check(printed):
                        print("%s %s %s %s: failed (%d timings, %d bytes out):\n%s" % (
                            spec, name, debugger, mode, len(times), len(printed), text[-2000:]))
                        continue
                    rows.append((spec, name, debugger, mode, times[0], statistics.median(times[1:])))
    print("load average: %.1f %.1f %.1f" % os.getloadavg())
    print("%-12s %-7s %-5s %-5s %10s %10s" % ("ruby", "value", "dbg", "mode", "first ms", "warm ms"))
    for spec, name, debugger, mode, first, warm in rows:
        print("%-12s %-7s %-5s %-5s %10.1f %10.1f" % (spec, name, debugger, mode, first * 1000, warm * 1000))


if __name__ == "__main__":
    main(sys.argv[1:] or ["debian-3.1", "3.4.5"])
