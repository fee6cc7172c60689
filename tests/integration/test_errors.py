"""Bad targets and bad input: each must give one clear `rbpeek:` line, no
Python traceback, a usable debugger, and a target left running.

    test_errors.py DEBUGGER        (gdb or lldb)

Cases: a non-Ruby process; a Ruby with no usable layout (forced unknown
version, missing and garbage --layout files); a layout of another release
line forced with --ruby-version, which every command must refuse before it
prints anything; a release newer than any table; a garbage --vm address
(unreadable memory); bad arguments; `ruby bt` on a thread that is not a
Ruby thread; and cores with corrupted memory pages, which must never
crash, hang or raise, whatever is read. The cases on the live Ruby run in
one debugger, one after another, and so do the damaged cores (each loaded
in place of the one before): each must give its line and leave the
debugger running the next.
"""

import os
import random
import re
import subprocess
import sys
import time

import harness
from harness import Failure

RUBY = "/usr/bin/ruby3.1"


def rbpeek_lines(output):
    return [line for line in output.splitlines() if "rbpeek:" in line]


def expect_one_line(output, pattern, what):
    harness.assert_no_traceback(output)
    lines = [line for line in rbpeek_lines(output) if "warning" not in line]
    if len(lines) != 1:
        raise Failure("%s: expected exactly one rbpeek line, got %d:\n%s" % (what, len(lines), output[-2000:]))
    if not re.search(pattern, lines[0]):
        raise Failure("%s: %r does not match %r" % (what, lines[0], pattern))
    harness.log("ok   %-34s %s" % (what, lines[0].strip()[:150]))


def still_usable(debugger, output, what):
    # The command after the failing one must still run (the debugger is usable).
    if "after-marker" not in output:
        raise Failure("%s: the debugger did not run the next command:\n%s" % (what, output[-2000:]))


def marker(debugger):
    return "echo after-marker\\n" if debugger == "gdb" else "script print('after-marker')"


def then_marker(debugger, cmd):
    """The command followed by a marker the debugger must still print.
    lldb's batch mode abandons its -o list after a failing command, so there
    the command runs through HandleCommand inside one script line."""
    if debugger == "gdb":
        return [cmd, marker(debugger)]
    return ["script lldb.debugger.HandleCommand(%r); print('after-marker')" % cmd]


def test_non_ruby(debugger, workdir):
    proc = subprocess.Popen(["sleep", "600"])
    try:
        time.sleep(0.2)
        rc, out = harness.run_debugger(debugger, then_marker(debugger, "ruby bt -a"), pid=proc.pid)
        expect_one_line(out, r"does not look like a CRuby process", "non-Ruby process")
        still_usable(debugger, out, "non-Ruby process")
        st = open("/proc/%d/stat" % proc.pid).read().rsplit(")", 1)[1].split()[0]
        if proc.poll() is not None or st in ("t", "T"):
            raise Failure("non-Ruby target was not left running (state %s)" % st)
    finally:
        proc.kill()
        proc.wait()


def test_ruby_cases(debugger, workdir):
    target = harness.Target(RUBY, "bt_scenarios.rb", workdir)
    try:
        garbage = os.path.join(workdir, "garbage.layout")
        with open(garbage, "w") as f:
            f.write("this is not a layout\n")
        cases = [
            ("ruby bt --ruby-version 9.9.9", r"no struct layout for Ruby 9\.9\.9.*--layout FILE", "no usable layout"),
            ("ruby bt --layout /nonexistent.layout", r"no such file", "missing --layout file"),
            ("ruby bt --layout " + garbage, r"unusable layout file", "garbage --layout file"),
            ("ruby bt -a --vm 0x1000", r"not readable", "garbage --vm (unreadable)"),
            ("ruby bt --vm banana", r"not an address", "--vm not an address"),
            ("ruby bt --frobnicate", r"unrecognized arguments", "unknown option"),
            ("ruby bt --max-frames -3", r"must be positive", "negative --max-frames"),
        ]
        # A patch release newer than any table of its line: the line's newest
        # table, which validation accepts, with one warning line, and the
        # backtrace still printed.
        version = target.ruby_version()
        line = version.rsplit(".", 1)[0]
        newest = max((f[:-len(".layout")] for f in os.listdir(os.path.join(harness.REPO, "layouts"))
                      if f.startswith(line + ".") and f.endswith(".layout")), key=lambda v: int(v.split(".")[2]))
        # A table of another release line, forced: refused in one line that
        # names the version the target reports, by every command.
        others = ["2.7.8", "3.0.7", "3.1.7", "3.2.11", "3.3.12", "3.4.10", "4.0.6"]
        refusal = r"does not fit this process \(it reports Ruby %s\)" % re.escape(version)
        cases += [("ruby threads --ruby-version " + other, refusal, "threads --ruby-version " + other)
                  for other in others if not other.startswith(line + ".")]
        cases += [(cmd + " --ruby-version 3.3.12", refusal, cmd + " --ruby-version 3.3.12")
                  for cmd in ("ruby bt -a", "ruby locks", "ruby heap", "ruby sample 5")]
        newer = "ruby bt -a --ruby-version %s.99" % line

        # All in one debugger, each after the others: each gives its one
        # line, and the debugger still runs the next (and the rest of the
        # session is not spoiled by a bad command before it).
        rc, outs, whole = harness.run_debugger_steps(debugger, [[cmd] for cmd, _, _ in cases] + [[newer]],
                                                     pid=target.pid)
        harness.assert_no_traceback(whole)
        for (cmd, pattern, what), out in zip(cases, outs):
            if out is None:
                raise Failure("%s: the debugger did not run the next command:\n%s" % (what, whole[-3000:]))
            expect_one_line(out, pattern, what)
        out = outs[-1]
        if out is None:
            raise Failure("%s: the debugger did not get there:\n%s" % (newer, whole[-3000:]))
        warnings = [l for l in rbpeek_lines(out) if "warning" in l and "nearest" in l]
        if len(warnings) != 1 or "nearest table (%s)" % newest not in warnings[0] or "in `park_forever'" not in out:
            raise Failure("--ruby-version %s.99: expected one nearest-table warning and a backtrace:\n%s"
                          % (line, out[-2000:]))
        harness.log("ok   %-34s %s" % ("newer patch release", warnings[0].strip()[:150]))
        target.assert_left_running()

        # Select the native thread the program started with pthread_create(pause):
        # it is the only thread whose innermost frame is in pause().
        if not os.path.exists(os.path.join(workdir, "native_thread")):
            raise Failure("the test program could not start its native thread (fiddle missing?)")
        if debugger == "gdb":
            select = ("python exec(\"for t in gdb.selected_inferior().threads():\\n t.switch()\\n"
                      " if 'pause' in str(gdb.newest_frame().name()): break\")")
        else:
            select = ("script [lldb.process.SetSelectedThread(t) for t in lldb.process "
                      "if 'pause' in (t.GetFrameAtIndex(0).GetFunctionName() or '')]")
        rc, out = harness.run_debugger(debugger, [select] + then_marker(debugger, "ruby bt"), pid=target.pid)
        expect_one_line(out, r"is not a Ruby thread; 'ruby bt -a'", "bt on a non-Ruby thread")
        target.assert_left_running()

        # The same target through a core with damaged pages.
        core = target.gcore()
        fuzz_core(debugger, core, workdir)
    finally:
        target.close()



def fuzz_core(debugger, core, workdir, rounds=6):
    """Overwrites random pages of a copy of the core (heap, stacks, VM
    stacks: any writable segment) with garbage, pointer-like values or
    self-references, and checks rbpeek survives each copy."""
    rng = random.Random(20261121)
    # (file offset, size) of the writable segments of at least a page
    segs = [(off, size) for _va, off, size in harness.core_segments(core, writable=True) if size >= 4096]
    if not segs:
        raise Failure("no writable segments in the core")
    copies = []
    for r in range(rounds):
        damaged = os.path.join(workdir, "damaged-%d.core" % r)
        harness.copy_core(core, damaged)
        with open(damaged, "r+b") as f:
            for _ in range(300):
                off, size = rng.choice(segs)
                page = off + rng.randrange(0, size // 4096) * 4096
                f.seek(page)
                kind = rng.randrange(3)
                if kind == 0:
                    f.write(os.urandom(4096))
                elif kind == 1:  # pointer-like garbage: likely to be followed
                    f.write(bytes([rng.choice([0, 0xff, 0x41])]) * 4096)
                else:  # self-referencing words: cycles for list and chain walks
                    f.write(b"".join((page + i * 8).to_bytes(8, "little") for i in range(512)))
        copies.append(damaged)
    # One debugger reads them all, one after another (as one might look
    # through a crash's cores): each must leave it usable for the next.
    start = time.time()
    steps = [(harness.load_core_cmds(debugger, d, RUBY) if r else []) + ["ruby bt -a"] for r, d in enumerate(copies)]
    rc, outs, whole = harness.run_debugger_steps(debugger, steps, exe=RUBY, core=copies[0], timeout=120 * rounds)
    harness.assert_no_traceback(whole)
    for r, out in enumerate(outs):
        if out is None:
            raise Failure("damaged core %d: the debugger did not run the next command:\n%s" % (r, whole[-3000:]))
        harness.log("ok   damaged core %d: %s" % (r, (rbpeek_lines(out) or ["(walked)"])[0].strip()[:120]))
    harness.log("%d damaged cores in %.1f s" % (rounds, time.time() - start))


def test(debugger, workdir):
    test_non_ruby(debugger, workdir)
    test_ruby_cases(debugger, workdir)


if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in ("gdb", "lldb"):
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], wd))
