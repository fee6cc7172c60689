"""The Ruby side of rbpeek under YJIT: `ruby bt` and `sample` of a program
whose every method is compiled before it runs (issue 36).

    test_yjit.py RUBY [COMBO...]      e.g. test_yjit.py 3.4.5, test_yjit.py debian-3.1 cli.live

RUBY is a matrix name built with YJIT (3.3.8 and 3.4.5 of the matrix, and
Debian's ruby3.1, whose YJIT is the C one). programs/yjit_app.rb runs
under `--yjit --yjit-call-threshold=1` (RUBY+yjit: harness.ruby_binary)
and must say YJIT is on. Its threads park in Queue#pop and sleep called
from JIT-compiled methods, one computes in a JIT-compiled loop with no
calls in its body (hot_leaf), one allocates; both compute only while
sampled.

- bt (gdb and lldb, live and on the core; the command line, --pid and
  --core): the parked threads' frames equal their own backtrace_locations,
  label, path, absolute path and line, in order: a frame that called out
  of JIT code keeps its exact line. No frame of any thread says
  "<unknown C method>", and a hot_leaf frame's line is its body's or
  unknown (null, with its note).
- sample (the command line, live, while both compute): hot_leaf is in the
  samples; no sample carries a hot_leaf line outside the method's body as
  a known line (YJIT does not keep the pc of the frame it runs: the stale
  one named the method's `end`); no frame is "<unknown C method>" (3.1's
  YJIT publishes a frame before writing it: caught half pushed, a frame
  is left out and the sample counted, never shown).
"""

import os
import re
import sys

import harness
from harness import Failure
import matrix

SECONDS = 2
RATE = 200
HOT = "hot_leaf"


def expected_of(c):
    exp = c.target.expected()
    if not exp.get("yjit"):
        raise Failure("%s runs without YJIT (RubyVM::YJIT.enabled? is false): build it with YJIT" % c.ruby_spec)
    return exp


def hot_line_ok(exp, label, lineno, parked=True):
    """A frame of hot_leaf: its line is unknown, or in the method's body; or
    its `end` (exp["hot_end"]), where Ruby puts the method's `leave`, when
    the thread may be parked there: YJIT's leave checks for interrupts and
    on one exits to the interpreter, which writes the pc (exact), runs the
    leave and may hand the GVL over, and the thread waits at that line
    (seen once in 785 samples of a fresh clone, 2026-11-29). Never while it
    runs JIT code (parked False: the stack does not end in a GVL wait), where
    the frame's stale pc is the last call's leave: the line must then be
    unknown (issue 36's stale `end`). `ruby bt` does not say which thread
    waits for the GVL, so there (parked True) the sample check is the one
    that holds the stale line out."""
    first, last = exp["hot"]
    return (not label.endswith(HOT) or lineno is None or first <= lineno <= last
            or (parked and lineno == exp["hot_end"]))


def compare(exp, doc, where):
    """The parked threads frame for frame; every thread's frames sane."""
    by_name = {("<main>" if t["main"] else t["name"]): t for t in doc["threads"]}
    problems = []
    frames = 0
    for want in exp["threads"]:
        name = "<main>" if want["main"] else want["name"]
        got = by_name.get(name)
        if got is None:
            problems.append("%s: not in rbpeek's output" % name)
            continue
        if got.get("error"):
            problems.append("%s: walk error: %s" % (name, got["error"]))
        fields = ("label", "path", "absolute_path", "lineno")
        ef = [tuple(f.get(k) for k in fields) for f in want["frames"]]
        af = [tuple(f.get(k) for k in fields) for f in got["frames"]]
        if ef != af:
            problems.append("%s:\n      ruby:   %s\n      rbpeek: %s" % (name, ef, af))
        frames += len(ef)
    for t in doc["threads"]:
        for f in t["frames"]:
            if f["label"] == "<unknown C method>":
                problems.append("%s: a frame '<unknown C method>'" % t["name"])
            if not hot_line_ok(exp, f["label"], f.get("lineno")):
                problems.append("%s: %s at line %s, outside its body %s" % (t["name"], f["label"], f["lineno"], exp["hot"]))
            if f.get("lineno") is None and f.get("kind") == "ruby" and not f.get("note"):
                problems.append("%s: %s has no line and no note saying why" % (t["name"], f["label"]))
    if problems:
        raise Failure("%s: %d problems:\n  %s" % (where, len(problems), "\n  ".join(problems)))
    return frames


def check_bt(c):
    exp = expected_of(c)
    if c.debugger == "cli":
        args = ["--pid", str(c.target.pid)] if c.live else ["--core", c.core, "--exe", c.ruby]
        out, _ = harness.cli(["bt", "-a", "--json"] + args, raw=True)
        n = compare(exp, harness.strict_json(out), "rbpeek bt %s" % c.mode)
    else:
        path = c.path("bt.json")
        rc, output = c.run_debugger(["ruby bt -a --json -o " + path])
        harness.assert_no_traceback(output)
        if not os.path.exists(path):
            raise Failure("no JSON written; debugger output:\n" + output[-3000:])
        n = compare(exp, harness.read_json(path), "%s ruby bt" % c.name)
    harness.log("%d parked threads, %d frames exact" % (len(exp["threads"]), n))


def stack_frames(line):
    frames, count = line.rsplit(" ", 1)
    return frames.split(";"), int(count)


def check_sample(c):
    """rbpeek sample of the computing threads: no stale line, no unnamed frame."""
    exp = expected_of(c)
    folded = c.path("yjit.folded")
    with c.target.computing(settle=0.3):
        out, err = harness.cli(["sample", "--pid", str(c.target.pid), "--duration", str(SECONDS),
                                "--rate", str(RATE), "--folded", folded])
    text = out + err
    samples = re.search(r"^Samples:\s+(\d+) in", text, re.M)
    if not samples or not os.path.exists(folded):
        raise Failure("rbpeek sample wrote no profile:\n" + text[-3000:])
    hot = unknown = total = caller_last = 0
    problems = []
    # the call's line: a stack that ends there, hot_leaf not shown, lost the running frame
    caller_re = re.compile(r"^block in (?:[\w:]+#)?compute \([^:()]*:%d\)$" % exp["hot_call"])
    # 3.4 qualifies its labels (Object#hot_leaf): the method's name ends the label
    name_re = re.compile(r"^(?:[\w:]+#)?%s \(([^:()]*)(?::(\d+))?\)$" % HOT)
    with open(folded, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            frames, count = stack_frames(line.rstrip("\n"))
            total += count
            if caller_re.match(frames[-1]):
                caller_last += count
            for fr in frames:
                if fr.startswith("<unknown C method>"):
                    problems.append("%d samples with a frame '<unknown C method>': %s" % (count, line.strip()))
                m = name_re.match(fr)
                if not m:
                    continue
                hot += count
                if m.group(2) is None:
                    unknown += count
                elif not hot_line_ok(exp, HOT, int(m.group(2)), parked=frames[-1] == "[GVL wait]"):
                    problems.append("%d samples put %s on line %s, outside its body %s"
                                    % (count, HOT, m.group(2), exp["hot"]))
    if problems:
        raise Failure("rbpeek sample under YJIT:\n  %s\n%s" % ("\n  ".join(problems[:20]), text[-2000:]))
    if hot < 0.1 * int(samples.group(1)):
        raise Failure("%s is in only %d of %s samples: the target did not compute?\n%s"
                      % (HOT, hot, samples.group(1), text[-2000:]))
    # a window of a few instructions (the call's push, the return's pop) may catch some;
    # 3.1's YJIT runs hot_leaf with pc 0, which dropped it from 1,077 of 1,800 samples
    if caller_last > 0.02 * (hot + caller_last):
        raise Failure("%d samples end in compute's call of %s (line %d), %s not shown (%d with it): "
                      "the frame JIT code runs was left out\n%s"
                      % (caller_last, HOT, exp["hot_call"], HOT, hot, text[-2000:]))
    skipped = re.search(r"^Skipped:\s+(.*)$", text, re.M)
    harness.log("%s samples, %d stacks: %s in %d (line not known in %d, in its body in the rest); "
                "%d end at its call; no '<unknown C method>'; skipped: %s"
                % (samples.group(1), total, HOT, hot, unknown, caller_last, skipped.group(1) if skipped else "?"))


def check(c):
    check_bt(c)
    if c.debugger == "cli" and c.live:
        check_sample(c)


def test(ruby_spec, only, workdir):
    if not ruby_spec.endswith(harness.YJIT_SUFFIX):   # every method compiled at its first call
        ruby_spec += harness.YJIT_SUFFIX
    m = matrix.Matrix(ruby_spec, workdir, only)
    m.run("yjit_app.rb", check, combos=matrix.WITH_CLI, parallel=True, start_timeout=300)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
