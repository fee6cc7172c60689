"""`ruby bt --native` against the program's own view, in gdb, lldb and the
command line, live and on a core (docs/native.md).

    test_native.py RUBY [COMBO...]     e.g. test_native.py debian-3.1, test_native.py 3.4.5 lldb.core

The C extension of programs/native_ext is built for RUBY (its own mkmf,
its own headers), then one program (programs/native_stack.rb) parks a
thread whose stack goes Ruby -> C -> rb_yield -> Ruby -> C ->
rb_thread_call_without_gvl -> nanosleep, and its main thread in sleep, and
records both threads' backtrace_locations. It is started once and gcore'd
once (matrix.py); gdb, lldb and the command line each run, live and on the
core:

  ruby bt -a --native --json: each thread's stack is merged (no cut, no
      note), its Ruby frames are exactly backtrace_locations (label, path,
      line), in order, each once; the worker's native frames stand where
      they run: the libc sleep innermost, park_nogvl, then NativeExt.inner
      at its C function inner_c, helper and the block, rb_yield, then
      NativeExt.outer at outer_c, run and the thread's block; the main
      thread's Kernel#sleep stands at its C function (unnamed in a stripped
      libruby: a module and a pc);
  ruby bt -a --native-all --json: the same Ruby frames, and rb_vm_exec
      frames, marked internal, just below each run of Ruby frames;
  ruby bt -a --native: the text has the same frames;
  live, ruby sample --native (gdb traced by rbpeek, lldb --via-debugger,
      the command line): the worker's stack in the folded file is its Ruby
      frames, exactly, with park_nogvl, rb_yield and the libc sleep at
      their places; the SVG marks native frames, speedscope names them,
      pprof has the extension's mapping; the summary has its GC line; and
      --native --nonblocking is refused in one line.

Every run is made under LD_DEBUG=bindings, and tests/tools/check_dw_bindings.py
checks that no dwarf_* call of libdwarf (or librbpeek) bound to libdw nor one
of libdw (or the unwinder) to libdwarf: gdb has libdw in its global scope.
The live target must be left running (matrix.py checks it).
"""

import glob
import gzip
import json
import os
import shutil
import sys
import tempfile

import harness
import matrix
import nativelib
from harness import Failure

sys.path.insert(0, os.path.join(harness.REPO, "tests", "tools"))
import check_dw_bindings  # noqa: E402

SLEEPS = ("nanosleep", "__nanosleep", "clock_nanosleep", "__clock_nanosleep")


def ruby_frames(frames):
    return [f for f in frames if f["kind"] in ("ruby", "cfunc")]


def native_names(frames):
    return [f.get("label") for f in frames if f["kind"] == "native"]


def check_thread(who, exp, act, want_all):
    native = act.get("native") or {}
    if not native.get("merged") or native.get("cut") or native.get("note"):
        raise Failure("%s: thread %s not merged cleanly: %s" % (who, exp["name"], native))
    frames = act["frames"]
    got = [(f["label"], f["path"], f["lineno"]) for f in ruby_frames(frames)]
    want = [(f["label"], f["path"], f["lineno"]) for f in exp["frames"]]
    if got != want:
        raise Failure("%s: thread %s's Ruby frames are not its backtrace_locations:\n  rbpeek: %s\n  ruby:   %s"
                      % (who, exp["name"], got, want))
    if want_all:
        # each run of Ruby frames sits just above an rb_vm_exec, marked internal
        execs = [i for i, f in enumerate(frames) if f["kind"] == "native" and f.get("label") == "rb_vm_exec"]
        if not execs or not all(frames[i].get("internal") for i in execs):
            raise Failure("%s: thread %s: no internal rb_vm_exec frames with --native-all" % (who, exp["name"]))
        for i in execs:
            if i == 0 or frames[i - 1]["kind"] not in ("ruby", "cfunc"):
                raise Failure("%s: thread %s: rb_vm_exec at %d is not just below a Ruby frame" % (who, exp["name"], i))
    elif any(f.get("internal") for f in frames):
        raise Failure("%s: thread %s: internal frames shown without --native-all" % (who, exp["name"]))
    return frames


def check_worker(who, frames):
    """libc sleep < park_nogvl < inner@inner_c < helper < block < rb_yield < outer@outer_c < run < block."""
    def index(pred, what, start=0):
        for i in range(start, len(frames)):
            if pred(frames[i]):
                return i
        raise Failure("%s: the worker's stack has no %s after frame %d: %s" % (who, what, start,
                                                                                [f.get("label") for f in frames]))
    sleep = index(lambda f: f["kind"] == "native" and f.get("label") in SLEEPS, "libc sleep")
    if not (frames[sleep].get("module") or "").split("/")[-1].startswith("libc"):
        raise Failure("%s: the sleep frame is not libc's: %s" % (who, frames[sleep]))
    park = index(lambda f: f["kind"] == "native" and f.get("label") == "park_nogvl", "park_nogvl", sleep)
    inner = index(lambda f: f["kind"] == "cfunc" and f.get("symbol") == "inner_c", "inner at inner_c", park)
    if not frames[inner]["label"].endswith("inner"):
        raise Failure("%s: inner_c carries %s" % (who, frames[inner]["label"]))
    helper = index(lambda f: f["kind"] == "ruby" and f["label"].endswith("helper"), "helper", inner)
    yld = index(lambda f: f["kind"] == "native" and f.get("label") == "rb_yield", "rb_yield", helper)
    outer = index(lambda f: f["kind"] == "cfunc" and f.get("symbol") == "outer_c", "outer at outer_c", yld)
    index(lambda f: f["kind"] == "ruby" and f["label"].endswith("run"), "run", outer)
    if not all(f.get("module", "").endswith("native_ext.so") for f in (frames[park], frames[inner], frames[outer])):
        raise Failure("%s: the extension's frames are not in native_ext.so" % who)


def check_main(who, frames):
    sleep = [f for f in frames if f["kind"] == "cfunc" and f["label"].endswith("sleep")]
    if len(sleep) != 1 or not sleep[0].get("pc") or not sleep[0].get("module"):
        raise Failure("%s: Kernel#sleep does not stand at its C function: %s" % (who, sleep))


def check_doc(who, expected, path, want_all):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    by = {("<main>" if t["main"] else t["name"]): t for t in doc["threads"]}
    for exp in expected["threads"]:
        act = by.get("<main>" if exp["name"] == "main" else exp["name"])
        if act is None:
            raise Failure("%s: no thread %s in %s" % (who, exp["name"], sorted(by)))
        frames = check_thread(who, exp, act, want_all)
        if exp["name"] == "native-worker":
            check_worker(who, frames)
        else:
            check_main(who, frames)


def check_text(who, text):
    for needle in ("[native] park_nogvl (native_ext.so)", "[inner_c (native_ext.so)", "[outer_c (native_ext.so)",
                   "[native] rb_yield ("):
        if needle not in text:
            raise Failure("%s: the text has no %r:\n%s" % (who, needle, text[-3000:]))


class Bindings:
    """LD_DEBUG=bindings for the runs inside, checked afterwards."""

    def __init__(self, workdir, who):
        self.dir = tempfile.mkdtemp(prefix="ld-", dir=workdir)
        self.who = who

    def __enter__(self):
        os.environ["LD_DEBUG"] = "bindings"
        os.environ["LD_DEBUG_OUTPUT"] = os.path.join(self.dir, "ld")
        return self

    def __exit__(self, *exc):
        os.environ.pop("LD_DEBUG", None)
        os.environ.pop("LD_DEBUG_OUTPUT", None)
        if exc[0] is None:
            bad, dwarf_calls, dwfl_calls, _ = check_dw_bindings.check(glob.glob(os.path.join(self.dir, "ld.*")))
            if bad:
                raise Failure("%s: dwarf_* bindings cross between libdw and libdwarf:\n  %s"
                              % (self.who, "\n  ".join(bad[:10])))
            if not dwfl_calls:
                raise Failure("%s: the unwinder never called libdw: the bindings check proves nothing" % self.who)
            harness.log("  %s: %d dwarf_* bindings into libdwarf, %d of the unwinder into libdw, none crossing"
                        % (self.who, dwarf_calls, dwfl_calls))
        shutil.rmtree(self.dir, ignore_errors=True)


def display(f):
    """A Ruby frame as the profile names it (sampler.c)."""
    if f["path"] is None:
        return f["label"]
    return "%s (%s%s)" % (f["label"], f["path"], ":%d" % f["lineno"] if f["lineno"] else "")


def check_sample(c):
    """ruby sample --native, live: the parked worker's stack in every
    output, its Ruby frames exactly backtrace_locations' (root first) with
    the machine frames between them at their places."""
    who = c.name + " sample --native"
    outs = {k: c.path("sample." + k) for k in ("folded", "svg", "speedscope", "pprof")}
    args = "10 --native --idle --rate 50 " + " ".join("--%s %s" % kv for kv in outs.items())
    if c.debugger == "cli":
        out, err = harness.cli(["sample", "--pid", str(c.target.pid)] + args.split())
        output = out + err
        # --native cannot go with --nonblocking: one line says why
        rc, o2, e2 = harness.run_cli(["sample", "5", "--native", "--nonblocking", "--pid", str(c.target.pid)])
        harness.assert_no_traceback(o2 + e2)
        lines = [ln for ln in (o2 + e2).splitlines() if ln.strip()]
        if rc == 0 or len(lines) != 1 or "--nonblocking" not in lines[0]:
            raise Failure("%s: --native --nonblocking was not refused in one line (exit %d):\n%s" % (who, rc, o2 + e2))
    else:
        # lldb samples through the debugger (its registers), gdb traced by rbpeek
        rc, output = c.run_debugger(["ruby sample " + args + (" --via-debugger" if c.debugger == "lldb" else "")])
        harness.assert_no_traceback(output)
    for path in outs.values():
        if not os.path.exists(path):
            raise Failure("%s: %s was not written:\n%s" % (who, path, output[-3000:]))
    if "GC:" not in output:
        raise Failure("%s: the summary has no GC line:\n%s" % (who, output[-2000:]))
    exp = next(t for t in c.target.expected()["threads"] if t["name"] == "native-worker")
    want = [display(f) for f in reversed(exp["frames"])]
    with open(outs["folded"], encoding="utf-8") as f:
        stacks = [line.rpartition(" ")[0].split(";") for line in f if "park_nogvl (native_ext.so)" in line]
    if len(stacks) != 1:
        raise Failure("%s: %d folded stacks hold the worker's park_nogvl, not one:\n%s"
                      % (who, len(stacks), open(outs["folded"]).read()[-3000:]))
    frames = stacks[0]
    got = [fr for fr in frames if fr in want]
    if got != want:
        raise Failure("%s: the worker's Ruby frames in the profile are not backtrace_locations':\n  rbpeek: %s\n"
                      "  ruby:   %s" % (who, got, want))
    leaf = frames[-1].split(" (")[0]
    if leaf not in SLEEPS or "(libc" not in frames[-1]:
        raise Failure("%s: the worker's leaf is not libc's sleep: %s" % (who, frames[-1]))
    inner = frames.index(next(w for w in want if " (" in w and w.split(" (")[0].endswith("inner")))
    park = frames.index("park_nogvl (native_ext.so)")
    helper = frames.index(next(w for w in want if w.split(" (")[0].endswith("helper")))
    outer = frames.index(next(w for w in want if w.split(" (")[0].endswith("outer")))
    yld = [i for i, fr in enumerate(frames) if fr.startswith("rb_yield (")]
    if not (outer < helper < inner < park < len(frames) - 1) or not yld or not outer < yld[0] < helper:
        raise Failure("%s: the worker's machine frames are not at their places: %s" % (who, frames))
    with open(outs["svg"], encoding="utf-8") as f:
        if "park_nogvl (native_ext.so) (native frame," not in f.read():
            raise Failure("%s: the SVG does not mark park_nogvl as a native frame" % who)
    with open(outs["speedscope"], encoding="utf-8") as f:
        if '"name":"park_nogvl (native_ext.so)"' not in f.read():
            raise Failure("%s: speedscope has no park_nogvl frame" % who)
    with gzip.open(outs["pprof"]) as f:
        if b"native_ext.so" not in f.read():
            raise Failure("%s: pprof names no native_ext.so mapping" % who)
    harness.log("  %s: the worker's whole stack in folded, SVG, speedscope and pprof" % who)


def check(c):
    """One combination: the three renderings, each checked against the record;
    live, the profile of ruby sample --native too."""
    who = c.name
    outs = {k: c.path(k) for k in ("native.json", "all.json", "native.txt")}
    cmds = ["ruby bt -a --native --json -o " + outs["native.json"],
            "ruby bt -a --native-all --json -o " + outs["all.json"],
            "ruby bt -a --native -o " + outs["native.txt"]]
    with Bindings(c.workdir, who):
        c.run_commands(who, cmds, outs.values())
    expected = c.target.expected()
    check_doc(who, expected, outs["native.json"], False)
    check_doc(who, expected, outs["all.json"], True)
    with open(outs["native.txt"], encoding="utf-8") as f:
        check_text(who, f.read())
    harness.log("  %s: merged stacks agree with backtrace_locations, C functions and libc at their places" % who)
    if c.live:
        check_sample(c)


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)

    def start():
        wd = os.path.join(workdir, "native_stack")
        os.makedirs(wd, exist_ok=True)
        nativelib.build(m.ruby, wd)
        return harness.Target(m.ruby, "native_stack.rb", wd)

    # Not parallel: LD_DEBUG is set in this process's environment for a
    # combination's runs.
    m.run(start, check, combos=matrix.WITH_CLI)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
