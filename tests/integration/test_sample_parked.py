"""`ruby sample` stops only the GVL holder, or nothing: parked threads' samples
must be exactly their stacks taken with every thread stopped.

    test_sample_parked.py RUBY [COMBO...]      e.g. test_sample_parked.py 3.4.5 lldb.live

The target (programs/parked_server.rb) is a server-like process: the main
thread computes, 15 named threads are parked (sleep, Queue#pop, Mutex#lock,
a pipe read) and never wake. One target per Ruby serves gdb, then lldb
(matrix.py). In one session of each debugger:

  1. `ruby sample` (the default: only the thread holding the GVL is stopped)
     with --per-thread --idle (the parked threads are idle);
  2. `ruby sample --nonblocking` (nothing stopped) with --per-thread --idle;
  3. `ruby bt -a --json` afterwards, with the debugger holding every thread
     stopped: the reference.

In 1 the GVL holder is walked while stopped and resumed; the parked threads
are read after, each checked against its stack's markers. Each parked
thread must appear in every sample (but the torn ones, which the summary
counts and which must be few) and
every one of its stacks must be exactly the reference's, frame for frame
(label, path, line). The summary of 1 must say the GVL holder alone was
stopped in nearly every sample (else the test would not test the new
path), and that the parked threads' stacks were reused from the walk
kept while they slept (vm/stack_keep.c) in nearly every sample, and the
computing main thread must be in the samples too. The
target must be left running.
"""

import os
import re
import sys

import harness
from harness import Failure
import matrix

SAMPLES = 300
RATE = 200


def parse_folded(path):
    stacks = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if line:
                frames, count = line.rsplit(" ", 1)
                stacks.append((tuple(frames.split(";")), int(count)))
    return stacks


def frame_name(f):
    """The sampler's frame name (core/src/profile/sampler.c, frame_name)."""
    name = f["label"] or "?"
    if f["path"]:
        name += " (%s%s)" % (f["path"], ":%d" % f["lineno"] if f["lineno"] > 0 else "")
    return name


def reference(bt_json):
    """{thread name: (frames root first, as folded names)} of the named threads."""
    doc = harness.read_json(bt_json)
    out = {}
    for t in doc["threads"]:
        if t["name"] and not t["error"]:
            out[t["name"]] = tuple(frame_name(f) for f in reversed(t["frames"]))
    return out


def by_thread(stacks):
    """{thread name: {stack without its root: count}}; main under 'main'."""
    out = {}
    for frames, count in stacks:
        m = re.match(r'^Thread "([^"]+)"', frames[0])
        name = m.group(1) if m else ("main" if frames[0].startswith("Thread main") else frames[0])
        d = out.setdefault(name, {})
        d[frames[1:]] = d.get(frames[1:], 0) + count
    return out


def check_parked(what, got, ref, names, samples, torn):
    for name in names:
        if name not in ref:
            raise Failure("the reference `ruby bt -a --json` has no thread %r" % name)
        stacks = got.get(name, {})
        wrong = {s: c for s, c in stacks.items() if s != ref[name]}
        if wrong:
            s, c = next(iter(wrong.items()))
            raise Failure("%s: thread %s was sampled %d times as\n  %s\nbut with every thread stopped it is\n  %s"
                          % (what, name, c, ";".join(s), ";".join(ref[name])))
        n = stacks.get(ref[name], 0)
        if n > samples or n < samples - torn:
            raise Failure("%s: thread %s is in %d of %d samples (%d stacks dropped as torn in all)"
                          % (what, name, n, samples, torn))


def check(c):
    target = c.target
    names = [t["name"] for t in target.expected("threads.json")["threads"]]
    gvl = c.path("gvl.folded")
    nb = c.path("nonblocking.folded")
    bt = c.path("bt.json")
    cmds = ["ruby sample %d --rate %d --per-thread --idle --folded %s" % (SAMPLES, RATE, gvl),
            "ruby sample %d --rate %d --per-thread --idle --nonblocking --folded %s" % (SAMPLES, RATE, nb),
            "ruby bt -a --json -o %s" % bt]
    rc, output = c.run_debugger(cmds)
    harness.assert_no_traceback(output)
    target.assert_left_running()
    for path in (gvl, nb, bt):
        if not os.path.exists(path):
            raise Failure("%s was not written; debugger output:\n%s" % (path, output[-3000:]))
    counts = [int(n) for n in re.findall(r"^Samples:\s+(\d+) in", output, re.M)]
    if counts != [SAMPLES, SAMPLES]:
        raise Failure("expected two runs of %d samples, got %s:\n%s" % (SAMPLES, counts, output[-3000:]))
    m = re.search(r"^Stopped:\s+the GVL holder only in (\d+) of (\d+) samples", output, re.M)
    if not m:
        raise Failure("the default run does not say what it stopped:\n" + output[-3000:])
    alone = int(m.group(1))
    # Ruby 2.7 keeps no TID: the first sample stops every thread to learn them.
    if alone < 0.9 * SAMPLES:
        raise Failure("the GVL holder was stopped alone in only %d of %d samples:\n%s"
                      % (alone, SAMPLES, output[-3000:]))
    dropped = re.findall(r"^Dropped:\s+(\d+) of (\d+) thread stacks", output, re.M)
    if len(dropped) != 2:
        raise Failure("the runs do not both report a dropped share:\n" + output[-3000:])
    for (torn, seen), what in zip(dropped, ("the default run", "--nonblocking")):
        if int(torn) > 0.05 * int(seen):
            raise Failure("%s dropped %s of %s stacks as torn" % (what, torn, seen))
    torn_gvl, torn = int(dropped[0][0]), int(dropped[1][0])
    # The parked threads never run: after the sample that notes each asleep
    # and the one that walks it again, their stacks are the walk kept then
    # (vm/stack_keep.c), and those stacks are the ones judged exact below.
    m = re.search(r"^Reused:\s+(\d+) of (\d+) thread stacks", output, re.M)
    reused = int(m.group(1)) if m else 0
    if reused < 0.9 * len(names) * (SAMPLES - 2):
        raise Failure("the default run reused %d stacks of threads that had not run, for %d parked threads over %d "
                      "samples:\n%s" % (reused, len(names), SAMPLES, output[-3000:]))

    ref = reference(bt)
    for what, path, n_torn in (("GVL holder stopped", gvl, torn_gvl), ("--nonblocking", nb, torn)):
        got = by_thread(parse_folded(path))
        check_parked(what, got, ref, names, SAMPLES, n_torn)
        main = sum(got.get("main", {}).values())
        if main < 0.5 * SAMPLES:
            raise Failure("%s: the computing main thread is in only %d of %d samples" % (what, main, SAMPLES))
        harness.log("%s: %d parked threads exact in every sample; main thread in %d" % (what, len(names), main))
    harness.log("GVL holder alone in %d of %d samples; dropped as torn: %s (default), %s (--nonblocking); %d "
                "stacks reused" % (alone, SAMPLES, "/".join(dropped[0]), "/".join(dropped[1]), reused))


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    m.run("parked_server.rb", check, combos=[(d, "live") for d in matrix.DEBUGGERS])
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
