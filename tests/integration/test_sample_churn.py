"""`ruby sample` when the GVL holder's stack changes faster than it can be
read: the default (the holder stopped for its walk) must show only stacks
the program really has, and drop none; --nonblocking must catch the torn
reads (a stack that changed while read is dropped and counted, never shown
half old, half new).

    test_sample_churn.py RUBY [COMBO...]      e.g. test_sample_churn.py 3.4.5 gdb.live

The target is programs/parked_server.rb --calls: 15 parked threads, and a
main thread whose loop makes a recursive call (dig) 1 to 8 deep at every
iteration, so that its stack is a different one every few hundred
nanoseconds; one per Ruby serves gdb, then lldb (matrix.py). In one
session of each debugger: `ruby sample` and `ruby sample
--nonblocking`, both --per-thread, then `ruby bt -a --json` with every
thread stopped. Every parked thread's samples must equal its stack in the
reference, frame for frame; every sample of the main thread must be
serve > compute_calls with 0 to 8 dig frames on top, or (rarely: it lasts
nanoseconds) serve > loop between two iterations. The default must drop
nothing; --nonblocking must drop some of the main thread's stacks (else the
check was not tested) and at most its share of them. The target must be
left running.

The computing thread and the debugger run on different CPUs: on the same
one, the sampler's thread preempts the target for the length of its read,
so the stack holds still, and --nonblocking's check would not be tested.
"""

import os
import re
import sys

import harness
from harness import Failure
import matrix
from test_sample_parked import by_thread, check_parked, parse_folded, reference

SAMPLES = 300
RATE = 200


def check(c):
    target = c.target
    names = [t["name"] for t in target.expected("threads.json")["threads"]]
    runs = (("default", "", c.path("default.folded")),
            ("--nonblocking", " --nonblocking", c.path("nonblocking.folded")))
    bt = c.path("bt.json")
    cmds = ["ruby sample %d --rate %d --per-thread --idle%s --folded %s" % (SAMPLES, RATE, flag, path)
            for _what, flag, path in runs] + ["ruby bt -a --json -o %s" % bt]
    rc, output = c.run_debugger(cmds)
    harness.assert_no_traceback(output)
    target.assert_left_running()
    for path in [r[2] for r in runs] + [bt]:
        if not os.path.exists(path):
            raise Failure("%s was not written; debugger output:\n%s" % (path, output[-3000:]))
    dropped = [int(d) for d in re.findall(r"^Dropped:\s+(\d+) of \d+ thread stacks", output, re.M)]
    if len(dropped) != len(runs):
        raise Failure("the runs do not both report a dropped share:\n" + output[-3000:])
    if dropped[0] != 0:
        raise Failure("the default run (the holder stopped) dropped %d stacks:\n%s" % (dropped[0], output[-3000:]))
    if dropped[1] == 0:
        raise Failure("--nonblocking dropped no stack of a thread whose stack changes at every call: its "
                      "check was not tested (or does not work):\n" + output[-3000:])
    ref = reference(bt)
    for (what, _flag, path), torn in zip(runs, dropped):
        got = by_thread(parse_folded(path))
        # Only the main thread's stack changes: the torn are all its own.
        check_parked(what, got, ref, names, SAMPLES, 0)
        main = got.get("main", {})
        if sum(main.values()) + torn != SAMPLES:
            raise Failure("%s: the main thread is in %d of %d samples, and %d stacks were dropped"
                          % (what, sum(main.values()), SAMPLES, torn))
        depths = {}
        between = 0
        for stack, count in main.items():
            labels = [re.sub(r"^[A-Z][\w:]*[#.]", "", f.split(" (")[0]) for f in stack]   # 3.4: "Object#dig"
            # Between two of loop's iterations (compute_calls returned, the
            # next not yet called) the stack ends at loop or at its block:
            # a real state, but one that lasts a few hundred nanoseconds
            # in every compute_calls of milliseconds, so it must be rare.
            rest = labels[labels.index("serve") + 1:] if "serve" in labels else None
            if rest and rest[0] == "loop" and (len(rest) == 1 or (len(rest) == 2 and re.fullmatch(
                    r"block in (\w+#)?serve", rest[1]))):   # 3.4: "block in Object#serve"
                between += count
                continue
            ok = ("serve" in labels and "compute_calls" in labels and
                  labels.index("serve") < labels.index("compute_calls") and
                  len(labels) - labels.index("compute_calls") - 1 <= 8 and
                  all(l == "dig" for l in labels[labels.index("compute_calls") + 1:]))
            if not ok:
                raise Failure("%s: the main thread was sampled %d times as\n  %s\nwhich parked_server.rb "
                              "--calls never runs" % (what, count, ";".join(stack)))
            depth = len(labels) - labels.index("compute_calls") - 1
            depths[depth] = depths.get(depth, 0) + count
        if between > SAMPLES // 20:
            raise Failure("%s: the main thread was between two of loop's iterations in %d of %d samples, a "
                          "state of nanoseconds: stacks cut short?" % (what, between, SAMPLES))
        harness.log("%s: %d stacks dropped as torn; the main thread's dig depth in the rest: %s, "
                    "between iterations %d; parked threads exact"
                    % (what, torn, dict(sorted(depths.items())), between))


def test(ruby_spec, only, workdir):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise Failure("this test needs 2 CPUs (the target's and the debugger's); this machine has 1")
    m = matrix.Matrix(ruby_spec, workdir, only)
    with m.start("parked_server.rb", env={"RBPEEK_PARKED_ARGS": "--calls"}) as target:   # read by the program
        os.sched_setaffinity(target.pid, {cpus[-1]})   # its main thread, the one that computes
        os.sched_setaffinity(0, {cpus[0]})             # the debugger and its sampling thread inherit it
        try:
            m.run(target, check, combos=[(d, "live") for d in matrix.DEBUGGERS])
        finally:
            os.sched_setaffinity(0, cpus)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
