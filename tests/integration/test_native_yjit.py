"""The native stack through YJIT's code (docs/native.md, "JIT code"), in
gdb, lldb and the command line, live and on a core.

    test_native_yjit.py RUBY [COMBO...]     e.g. test_native_yjit.py debian-3.1, test_native_yjit.py 3.4.5 cli.core

One program (programs/native_yjit.rb) runs under --yjit
--yjit-call-threshold=1 (RUBYOPT), so every method runs as JIT code from
its first call: threads park in Queue#pop and Kernel#sleep called from
JIT-compiled methods, and one computes in a JIT loop with no calls in its
body while WORKDIR/busy exists. It records the parked threads'
backtrace_locations. Every combination runs

  ruby bt -a --native --json: each parked thread's Ruby frames are exactly
      its backtrace_locations; its stack is merged and whole (no cut: libc
      innermost, the thread's start outermost, start_thread/clone or
      _start); the JIT frame that calls its C method is there, kind "jit",
      named by the method whose code it runs, with no module; and every
      machine frame's pc lies in a mapping of the file it names (the
      process's maps: the core is the same process's), every JIT frame's
      in no file;
  ruby bt -a --native: the text has the same "[JIT] method" lines.

Live, from the command line, `rbpeek sample --native` of the computing
thread: at least 95% of its samples reach the thread's start; its JIT code
is one frame per method ("[JIT] hot_leaf (path)"), never a module's name
or a bare pc; no frame names a module at an offset beyond its file.

Skipped for a Ruby without YJIT (2.7, 3.1.2 and 3.3.8-static of the
matrix are built without it).
"""

import json
import os
import sys

import harness
import matrix
from harness import Failure

# A small code block: the core holds all of it (3.1 maps its 256 MiB default
# at once; the program needs some 150 KiB)
YJIT_OPTS = {"RUBYOPT": "--yjit --yjit-call-threshold=1 --yjit-exec-mem-size=8"}
# The Ruby method whose JIT code calls each parked thread's C method.
CALLER = {"main": "park_main", "yjit-queue": "q_wait", "yjit-sleep": "nap"}
STARTS = ("start_thread", "clone", "__clone", "clone3", "__clone3")
OUTERMOST = ("__clone3", "clone3", "__clone", "clone", "_start")


def maps_of(pid):
    """[(start, end, path or None)] of /proc/PID/maps."""
    out = []
    with open("/proc/%d/maps" % pid) as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            path = parts[5].strip() if len(parts) > 5 else ""
            out.append((lo, hi, path if path.startswith("/") else None))
    return out


def file_of(maps, pc):
    for lo, hi, path in maps:
        if lo <= pc < hi:
            return path or ""
    return None


def ruby_frames(frames):
    return [f for f in frames if f["kind"] in ("ruby", "cfunc")]


def check_thread(who, exp, act, maps):
    name = exp["name"]
    native = act.get("native") or {}
    if not native.get("merged") or native.get("cut"):
        raise Failure("%s: thread %s is not merged whole: %s" % (who, name, native))
    frames = act["frames"]
    got = [(f["label"], f["path"], f["lineno"]) for f in ruby_frames(frames)]
    want = [(f["label"], f["path"], f["lineno"]) for f in exp["frames"]]
    if got != want:
        raise Failure("%s: thread %s's Ruby frames are not its backtrace_locations:\n  rbpeek: %s\n  ruby:   %s"
                      % (who, name, got, want))
    machine = [f for f in frames if f["kind"] in ("native", "cfunc", "jit") and f.get("pc")]
    first = next(f for f in frames if f["kind"] != "gc")
    if first["kind"] != "native" or not (first.get("module") or "").split("/")[-1].startswith("libc"):
        raise Failure("%s: thread %s's innermost frame is not libc's: %s" % (who, name, first))
    last = frames[-1]
    if last["kind"] != "native" or last.get("label") not in OUTERMOST:
        raise Failure("%s: thread %s's outermost frame is not its start: %s" % (who, name, last))
    jits = [f for f in frames if f["kind"] == "jit"]
    if not any(f.get("label", "").split("#")[-1] == CALLER[name] for f in jits):
        raise Failure("%s: thread %s has no JIT frame of %s: %s" % (who, name, CALLER[name], jits))
    for f in machine:
        held = file_of(maps, int(f["pc"], 16) - (0 if f is first else 1))
        if f["kind"] == "jit":
            if f.get("module") or held != "":
                raise Failure("%s: thread %s: JIT frame %s is named by a module or lies in a file (%r)"
                              % (who, name, f, held))
        elif not f.get("module") or not held or os.path.realpath(held) != os.path.realpath(f["module"]):
            raise Failure("%s: thread %s: frame %s names %s, its pc lies in %r"
                          % (who, name, f.get("label") or f.get("symbol"), f.get("module"), held))
    return len(jits)


def check(c):
    who = c.name
    outs = {k: c.path(k) for k in ("native.json", "native.txt")}
    cmds = ["ruby bt -a --native --json -o " + outs["native.json"], "ruby bt -a --native -o " + outs["native.txt"]]
    c.run_commands(who, cmds, outs.values())
    expected = c.target.expected()
    maps = maps_of(c.target.pid)
    with open(outs["native.json"], encoding="utf-8") as f:
        doc = json.load(f)
    by = {("main" if t["main"] else t["name"]): t for t in doc["threads"]}
    njit = 0
    for exp in expected["threads"]:
        act = by.get(exp["name"])
        if act is None:
            raise Failure("%s: no thread %s in %s" % (who, exp["name"], sorted(by)))
        njit += check_thread(who, exp, act, maps)
    with open(outs["native.txt"], encoding="utf-8") as f:
        text = f.read()
    for name in CALLER.values():
        if not any(line.strip().startswith("[JIT] ") and name in line for line in text.splitlines()):
            raise Failure("%s: the text has no [JIT] line for %s:\n%s" % (who, name, text[-3000:]))
    harness.log("  %s: 3 parked threads whole through %d JIT frames, each pc in the file it names" % (who, njit))
    if c.debugger == "cli" and c.live:
        check_sample(c, maps)


def module_sizes(maps):
    sizes = {}
    for _, _, path in maps:
        if path and os.path.exists(path):
            sizes[os.path.basename(path)] = os.path.getsize(path)
    return sizes


def check_sample(c, maps):
    """sample --native of the JIT loop: whole stacks, JIT code by method."""
    who = c.name + " sample --native"
    folded = c.path("hot.folded")
    with c.target.computing(settle=0.3):
        out, err = harness.cli(["sample", "100", "--native", "--rate", "100",
                                "--pid", str(c.target.pid), "--folded", folded])
    harness.assert_no_traceback(out + err)
    stacks = []
    with open(folded, encoding="utf-8") as f:
        for line in f:
            frames, _, n = line.rstrip("\n").rpartition(" ")
            stacks.append((frames.split(";"), int(n)))
    # 3.4 qualifies its labels (Object#hot_leaf): the method's name ends the label
    hot = [(fr, n) for fr, n in stacks if any(x.split(" (")[0].split("#")[-1] == "hot_leaf" for x in fr)]
    total = sum(n for _, n in stacks)
    nhot = sum(n for _, n in hot)
    if total < 80 or nhot < 0.8 * total:
        raise Failure("%s: %d of %d samples in the hot loop (want 80%% of at least 80):\n%s"
                      % (who, nhot, total, out[-2000:]))
    whole = sum(n for fr, n in stacks if fr[0].split(" (")[0] in STARTS or fr[0].split(" (")[0] in OUTERMOST)
    if whole < 0.95 * total:
        raise Failure("%s: %d of %d samples reach the thread's start (want 95%%):\n%s"
                      % (who, whole, total, "\n".join(";".join(fr[:4]) for fr, _ in stacks[:10])))
    sizes = module_sizes(maps)
    for fr, _ in stacks:
        for x in fr:
            if x.startswith("0x"):
                raise Failure("%s: a frame is a bare pc: %s" % (who, x))
            if "+0x" in x and " (" not in x:
                mod, _, off = x.partition("+0x")
                if mod not in sizes or int(off, 16) >= sizes[mod]:
                    raise Failure("%s: %s names a module that cannot hold it" % (who, x))
    jit = sum(n for fr, n in hot if any(x.startswith("[JIT] ") and x[6:].split(" (")[0].split("#")[-1] == "hot_leaf"
                                        for x in fr))
    if jit < 0.8 * nhot:
        raise Failure("%s: %d of %d samples in the loop have a [JIT] hot_leaf frame" % (who, jit, nhot))
    names = {x for fr, _ in stacks for x in fr if x.startswith("[JIT]")}
    if len(names) > 12:
        raise Failure("%s: JIT code split into %d frames (one per method wanted): %s" % (who, len(names), names))
    harness.log("  %s: %d of %d samples whole, %d with [JIT] hot_leaf; JIT frames: %s"
                % (who, whole, total, jit, sorted(names)))


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    rc = __import__("subprocess").run([m.ruby, "--yjit", "-e", "exit(defined?(RubyVM::YJIT) && "
                                       "RubyVM::YJIT.enabled? ? 0 : 3)"], capture_output=True, timeout=60)
    if rc.returncode != 0:
        raise harness.SkipTest("%s has no YJIT" % ruby_spec)
    m.run("native_yjit.rb", check, combos=matrix.WITH_CLI, env=YJIT_OPTS)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
