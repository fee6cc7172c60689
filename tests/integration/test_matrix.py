"""matrix.py itself: what the suites built on it promise.

    test_matrix.py

With a stand-in target (a `sleep` process; no Ruby, no debugger), checks
that every combination runs even when others fail, that the failure names
each failed one, in the matrix's order, and says why (a Failure's message;
a bug's exception and traceback); that a gcore that fails fails every
core combination, and only those; that a target left stopped fails its
live combination; that the core of a run is deleted when it passed and
kept when it failed; that a target that does not start fails every
combination of its run and the next run still runs; that parallel=True
runs the core lane beside the live one; that shared() computes once for
concurrent callers and gives each the same error; and that
RBPEEK_TEST_DEBUGGERS, RBPEEK_TEST_MODES and the command line's
combinations narrow the matrix; and that a combination may skip
(harness.SkipTest), the test skipping if all of them do.
"""

import os
import signal
import subprocess
import threading
import time

import harness
from harness import Failure
import matrix


class StandIn:
    """Duck-typed harness.Target: a sleeping process, and a 'core' file."""

    def __init__(self, workdir, gcore_fails=False):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.proc = subprocess.Popen(["sleep", "600"])
        self.pid = self.proc.pid
        self.gcore_fails = gcore_fails

    def gcore(self):
        if self.gcore_fails:
            raise Failure("gcore failed: stand-in")
        path = os.path.join(self.workdir, "core.%d" % self.pid)
        with open(path, "w") as f:
            f.write("core")
        return path

    def assert_left_running(self):
        with open("/proc/%d/stat" % self.pid) as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        if state in ("t", "T"):
            raise Failure("the target was left stopped (state %s)" % state)

    def close(self):
        self.proc.kill()
        self.proc.wait()


def expect_failure(m, names):
    try:
        m.finish()
    except Failure as e:
        want = "%d of %d combinations failed: %s" % (len(names), len(m.results), ", ".join(names))
        if str(e) != want:
            raise Failure("finish() said %r, want %r" % (str(e), want))
        return
    raise Failure("finish() passed; want %s failed" % names)


def result(m, label):
    found = [r for r in m.results if r[1] == label]
    if len(found) != 1:
        raise Failure("%d results for %r: %s" % (len(found), label, [r[1] for r in m.results]))
    return found[0]


def test(workdir):
    os.environ.pop("RBPEEK_TEST_DEBUGGERS", None)
    os.environ.pop("RBPEEK_TEST_MODES", None)

    # Every combination runs; failures and bugs are named, in order.
    ran = []

    def check(c):
        ran.append(c.name)
        if c.name == "lldb live":
            raise Failure("lldb disagrees")
        if c.name == "gdb core":
            {}["missing"]
        if not c.live and not os.path.exists(c.core):
            raise Failure("no core")
        if c.debugger == "cli" and c.where()[0] != ("--pid" if c.live else "--core"):
            raise Failure("where() %s" % c.where())

    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "a"))
    m.run(lambda: StandIn(os.path.join(workdir, "a", "t")), check, combos=matrix.WITH_CLI)
    if sorted(ran) != sorted("%s %s" % c for c in matrix.WITH_CLI):
        raise Failure("ran %s" % ran)
    expect_failure(m, ["lldb live", "gdb core"])
    if "lldb disagrees" not in result(m, "lldb live")[4]:
        raise Failure("lldb live's reason is lost: %r" % result(m, "lldb live")[4])
    msg = result(m, "gdb core")[4]
    if "KeyError" not in msg or "Traceback" not in msg:
        raise Failure("a bug in a check is not reported with its traceback: %r" % msg)
    harness.log("all six combinations ran; the two that failed are named, with their reasons")

    # A failed gcore fails the core combinations only; a stopped target its live one.
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "b"))
    target = StandIn(os.path.join(workdir, "b", "t"), gcore_fails=True)
    try:
        def stop_it(c):
            if c.name == "lldb live":
                os.kill(c.target.pid, signal.SIGSTOP)
                time.sleep(0.2)
        m.run(target, stop_it, label="x")
        os.kill(target.pid, signal.SIGCONT)
    finally:
        target.close()
    expect_failure(m, ["x: lldb live", "x: gdb core", "x: lldb core"])
    if "left stopped" not in result(m, "x: lldb live")[4] or "gcore failed" not in result(m, "x: lldb core")[4]:
        raise Failure("reasons: %s" % [r[4] for r in m.results])
    harness.log("a failed gcore fails only the core combinations; a target left stopped fails its live one")

    # A target that does not start fails its run's combinations; the next run runs.
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "c"))

    def no_start():
        raise Failure("target never became ready")
    m.run(no_start, check, label="first")
    m.run(lambda: StandIn(os.path.join(workdir, "c", "t")), lambda c: None, label="second")
    expect_failure(m, ["first: gdb live", "first: lldb live", "first: gdb core", "first: lldb core"])
    harness.log("a target that does not start fails its combinations; the next run still runs")

    # parallel=True: the core lane runs beside the live one.
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "d"))
    live_started = threading.Event()
    core_started = threading.Event()

    def meet(c):
        (live_started if c.live else core_started).set()
        if not (core_started if c.live else live_started).wait(10):
            raise Failure("%s ran alone" % c.name)
    m.run(lambda: StandIn(os.path.join(workdir, "d", "t")), meet, combos=[("gdb", "live"), ("gdb", "core")],
          parallel=True)
    m.finish()
    harness.log("parallel=True runs a live and a core combination at the same time")
    # The core of a run that passed is deleted; that of a failed one kept.
    cores = [f for f in os.listdir(os.path.join(workdir, "d", "t")) if f.startswith("core.")]
    kept = [f for f in os.listdir(os.path.join(workdir, "a", "t")) if f.startswith("core.")]
    if cores or len(kept) != 1:
        raise Failure("cores left after a passing run: %s; after a failing one: %s" % (cores, kept))
    harness.log("the core of a passing run is deleted, that of a failing run kept")

    # shared(): once for concurrent callers; its error raised to each.
    calls = []

    def slow():
        calls.append(1)
        time.sleep(0.3)
        return 42

    def bad():
        calls.append(2)
        raise Failure("reference unreadable")
    got, errors = [], []

    def use():
        got.append(m.shared("v", slow))
        try:
            m.shared("bad", bad)
        except Failure as e:
            errors.append(str(e))
    threads = [threading.Thread(target=use) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if got != [42] * 4 or errors != ["reference unreadable"] * 4 or sorted(calls) != [1, 2]:
        raise Failure("shared(): values %s, errors %s, calls %s" % (got, errors, calls))
    harness.log("shared() computes once for four threads, and gives each the same error")

    # The matrix narrowed by the environment and by the command line.
    os.environ["RBPEEK_TEST_DEBUGGERS"] = "lldb"
    os.environ["RBPEEK_TEST_MODES"] = "core"
    try:
        m = matrix.Matrix("debian-3.1", os.path.join(workdir, "e"))
        kept = m.wanted(matrix.WITH_CLI)
    finally:
        del os.environ["RBPEEK_TEST_DEBUGGERS"], os.environ["RBPEEK_TEST_MODES"]
    if kept != [("lldb", "core"), ("cli", "live"), ("cli", "core")]:
        raise Failure("RBPEEK_TEST_DEBUGGERS=lldb RBPEEK_TEST_MODES=core kept %s" % kept)
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "f"), ["gdb.core", "cli.live"])
    if m.wanted(matrix.WITH_CLI) != [("gdb", "core"), ("cli", "live")]:
        raise Failure("gdb.core cli.live kept %s" % m.wanted(matrix.WITH_CLI))
    try:
        matrix.Matrix("debian-3.1", workdir, ["gdb"])
        raise Failure("a combination without a mode was taken")
    except Failure as e:
        if "not a combination" not in str(e):
            raise
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "g"), ["gdb.core"])
    m.run(lambda: StandIn(os.path.join(workdir, "g", "t")), lambda c: None, combos=[("lldb", "live")])
    try:
        m.finish()
        raise Failure("finish() passed with no combination run")
    except Failure as e:
        if "no combination was run" not in str(e):
            raise
    harness.log("the environment and the command line narrow the matrix; nothing run is a failure")

    # A combination may skip (harness.SkipTest, with its reason); all skipped is a skip.
    def skip_lldb(c):
        if c.debugger == "lldb":
            raise harness.SkipTest("no lldb here")
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "h"))
    m.run(lambda: StandIn(os.path.join(workdir, "h", "t")), skip_lldb)
    m.finish()
    if [r[2] for r in sorted(m.results)] != ["ok", "skip", "ok", "skip"]:
        raise Failure("skips: %s" % sorted(m.results))
    m = matrix.Matrix("debian-3.1", os.path.join(workdir, "i"))
    m.run(lambda: StandIn(os.path.join(workdir, "i", "t")), skip_lldb, combos=[("lldb", "live"), ("lldb", "core")])
    try:
        m.finish()
        raise Failure("finish() passed with every combination skipped")
    except harness.SkipTest as e:
        if "no lldb here" not in str(e):
            raise Failure("the skip's reason is lost: %s" % e)
    harness.log("a combination may skip; all of them skipped is a skip")


if __name__ == "__main__":
    harness.main(test)
