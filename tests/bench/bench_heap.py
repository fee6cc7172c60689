"""Benchmark: `ruby heap` on a heap of about 1.1 million live objects (not a
test; prints a table for docs/heap.md).

    python3 tests/bench/bench_heap.py [RUBY ...]      default: debian-3.1 3.4.5

For each Ruby: start a program that builds the heap (instances with ivars,
strings, arrays, hashes), runs GC and parks with GC disabled; gcore it. Then
in gdb and lldb, live and on the core:
  - a cold `ruby heap` in a fresh debugger: the whole command as the user
    waits for it (attach: symbols, layout, VM; then the census and its
    rendering), timed inside the debugger;
  - the census (`ruby heap --json --stats`), RUNS times in one debugger
    session: the walk's own time and objects/second as the command reports
    them (first run and median of the rest);
  - the dump (`ruby heap --dump FILE --stats`): time, objects/second, size;
  - the debugger's peak resident memory (VmHWM of the debugger process,
    printed from inside it): after attaching (`ruby info`), after the census
    runs, and after the dump; the dump must stream, so it should add little.
    (On a core, the debugger's own mapping of the core's pages counts too.)
"""

import os
import re
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

PROGRAM = r"""
class Item; def initialize(i); @i = i; @s = "item#{i}"; end; end
class Leaf; end
$keep = []
$keep << Array.new(300_000) { |i| Item.new(i) }      # 300k objects + 300k strings
$keep << Array.new(200_000) { Leaf.new }
$keep << Array.new(150_000) { |i| "str" * (i % 30) }
$keep << Array.new(60_000) { |i| Array.new(i % 8) { |j| j } }
$keep << Array.new(20_000) { |i| { i => i.to_s } }  # 20k hashes + 20k strings
3.times { GC.start }
GC.disable
File.write(ARGV[0] + "/ready", Process.pid.to_s)
sleep
"""

RUNS = 5
RSS_GDB = "python print('RSS %s' % [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
RSS_LLDB = ("script print('RSS %s' % [l.split()[1] for l in open('/proc/self/status') "
            "if l.startswith('VmHWM')][0])")
STATS = re.compile(r"rbpeek: (\d+) objects in (\d+) pages, ([0-9.]+) s, (\d+) objects/s")


def measure(debugger, workdir, pid=None, exe=None, core=None):
    rss = RSS_GDB if debugger == "gdb" else RSS_LLDB
    dump = os.path.join(workdir, "bench.jsonl")
    rc, out = harness.run_debugger(debugger, [benchlib.timer(debugger, "ruby heap -o /dev/null")], pid=pid, exe=exe,
                                   core=core, timeout=1800)
    cold = re.findall(r"BENCH ([0-9.]+)", out)
    if len(cold) != 1:
        raise SystemExit("benchmark run failed:\n" + out[-3000:])
    cmds = (["ruby info", rss] + ["ruby heap --json -o /dev/null --stats"] * RUNS + [rss] +
            ["ruby heap --dump %s --stats" % dump, rss])
    rc, out = harness.run_debugger(debugger, cmds, pid=pid, exe=exe, core=core, timeout=1800)
    runs = [(int(m.group(1)), float(m.group(3)), int(m.group(4))) for m in STATS.finditer(out)]
    rss_kb = [int(x) for x in re.findall(r"^RSS (\d+)", out, re.M)]
    if len(runs) != RUNS + 1 or len(rss_kb) != 3:
        raise SystemExit("benchmark run failed:\n" + out[-3000:])
    census, dumped = runs[:RUNS], runs[RUNS]
    size = os.path.getsize(dump)
    os.unlink(dump)
    return {"objects": census[0][0], "cold_s": float(cold[0]), "first_s": census[0][1], "warm_s": statistics.median(r[1] for r in census[1:]),
            "warm_ops": statistics.median(r[2] for r in census[1:]), "dump_s": dumped[1], "dump_ops": dumped[2],
            "dump_mb": size / 1048576.0, "rss_attach": rss_kb[0] / 1024.0, "rss_census": rss_kb[1] / 1024.0,
            "rss_dump": rss_kb[2] / 1024.0}


def main():
    rubies = sys.argv[1:] or ["debian-3.1", "3.4.5"]
    rows = []
    for spec, ruby, pid, core, workdir in benchlib.parked_targets(rubies, "heap.rb", PROGRAM, settle=0.3):
        for dbg in ("gdb", "lldb"):
            rows.append((spec, dbg, "live", measure(dbg, workdir, pid=pid)))
            rows.append((spec, dbg, "core", measure(dbg, workdir, exe=ruby, core=core)))
            print(rows[-2], rows[-1], flush=True)
    print()
    print("| Ruby | debugger | mode | live objects | cold `ruby heap` | census first | census warm | objects/s | "
          "dump | dump objects/s | dump size | peak RSS: attached / census / dump |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for spec, dbg, mode, m in rows:
        print("| %s | %s | %s | %d | %.2f s | %.3f s | %.3f s | %.1fM | %.2f s | %.2fM | %.0f MiB | "
              "%.0f / %.0f / %.0f MiB |"
              % (spec, dbg, mode, m["objects"], m["cold_s"], m["first_s"], m["warm_s"], m["warm_ops"] / 1e6, m["dump_s"],
                 m["dump_ops"] / 1e6, m["dump_mb"], m["rss_attach"], m["rss_census"], m["rss_dump"]))


if __name__ == "__main__":
    main()
