"""One Ruby's test programs, each started once, gcore'd once, and checked
from every front end: gdb and lldb, live and on the core, and the rbpeek
command line (--pid and --core).

Starting a program, building its state and taking its core are the
expensive parts of an integration test; what a check compares is cheap.
So a suite registers one ctest test per Ruby (it.<suite>.<ruby>) whose
script does:

    m = matrix.Matrix(ruby_spec, workdir)
    m.run("heap_population.rb", check, combos=matrix.WITH_CLI, start_timeout=600)
    m.finish()

run() starts the program (or takes a Target, or a callable making one),
gcores it once if any combination is a core one, and calls check(combo)
for each combination. check raises harness.Failure on any mismatch, as a
test always did; run() records it and goes on, so every combination runs
even when one fails. finish() prints each combination's result and fails
naming every one that failed. After a live combination the target must
still be running (not stopped): run() checks it as part of that
combination. A check that cannot run in its combination raises
harness.SkipTest with the reason (the test skips if all of them do). The
core is deleted when every combination of its run passed.

Combinations are (front end, mode) pairs, front end "gdb", "lldb" or
"cli", mode "live" or "core". The CMake cache variables
RBPEEK_TEST_DEBUGGERS and RBPEEK_TEST_MODES reach the script as
environment variables and restrict the gdb/lldb ones; command-line
arguments after the Ruby (e.g. `test_heap.py 3.4.5 lldb.core`) restrict
them further, to rerun one by hand.

With parallel=True (for checks that measure no timing) the live
combinations run in one lane and the core ones in another, side by side:
the core is taken first, then while a debugger is attached to the target
another reads its core. Results shared by the combinations (a parsed
reference file, a damaged copy of the core) are computed once:
Matrix.shared(key, fn), which prefetch() can start in the background.
"""

import os
import threading
import time
import traceback

import harness
from harness import Failure

DEBUGGERS = ("gdb", "lldb")
COMBOS = (("gdb", "live"), ("lldb", "live"), ("gdb", "core"), ("lldb", "core"))
WITH_CLI = COMBOS + (("cli", "live"), ("cli", "core"))


def _env_list(name, default):
    v = os.environ.get(name)
    return tuple(x for x in v.replace(",", ";").split(";") if x) if v else default


class Combo:
    """One combination's view of the shared target: where to write, and how
    to run commands on the live process or on its core."""

    def __init__(self, matrix, target, debugger, mode, label, order):
        self.matrix = matrix
        self.order = order
        self.target = target
        self.debugger = debugger
        self.mode = mode
        self.name = "%s %s" % (debugger, mode)
        self.label = "%s: %s" % (label, self.name) if label else self.name
        self.ruby = matrix.ruby
        self.ruby_spec = matrix.ruby_spec
        self.core = None
        self.workdir = os.path.join(target.workdir, "%s-%s" % (debugger, mode))
        os.makedirs(self.workdir, exist_ok=True)

    @property
    def live(self):
        return self.mode == "live"

    def path(self, name):
        return os.path.join(self.workdir, name)

    def run_debugger(self, commands, timeout=300, core=None):
        """Runs the commands in this combination's debugger, attached to the
        target or on its core (or on another core: a damaged copy)."""
        if self.debugger == "cli":
            raise ValueError("run_debugger on the command line's combination")
        if self.live and core is None:
            return harness.run_debugger(self.debugger, commands, pid=self.target.pid, timeout=timeout)
        return harness.run_debugger(self.debugger, commands, exe=self.ruby, core=core or self.core, timeout=timeout)

    def where(self):
        """The command line's target arguments: --pid, or --core with --exe."""
        if self.live:
            return ["--pid", str(self.target.pid)]
        return ["--core", self.core, "--exe", self.ruby]

    def run_commands(self, who, commands, written=()):
        """Runs `ruby ...` commands here: in the debugger all at once, on the
        command line each as `rbpeek COMMAND <where> ...`, failing on an exit
        status other than 0; neither may print a traceback, and each path of
        written must exist after. The debugger's output ("" on the command
        line)."""
        output = ""
        if self.debugger == "cli":
            for cmd in commands:
                words = cmd.split()[1:]   # "bt -a --native ...", the command first
                rc, out, err = harness.run_cli(words[:1] + self.where() + words[1:])
                harness.assert_no_traceback(out + err)
                if rc != 0:
                    raise Failure("%s: rbpeek %s: exit %d: %s" % (who, cmd, rc, err[-2000:]))
        else:
            _rc, output = self.run_debugger(commands)
            harness.assert_no_traceback(output)
        for path in written:
            if not os.path.exists(path):
                raise Failure("%s: %s was not written:\n%s" % (who, path, output[-3000:]))
        return output


class Matrix:
    def __init__(self, ruby_spec, workdir, only=()):
        self.ruby_spec = ruby_spec
        self.ruby = harness.ruby_binary(ruby_spec)
        if not os.path.exists(self.ruby):
            raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (ruby_spec, self.ruby))
        self.workdir = workdir
        self.debuggers = _env_list("RBPEEK_TEST_DEBUGGERS", DEBUGGERS)
        self.modes = _env_list("RBPEEK_TEST_MODES", ("live", "core"))
        self.only = {tuple(o.split(".")) for o in only}
        for o in self.only:
            if len(o) != 2 or o[0] not in DEBUGGERS + ("cli",) or o[1] not in ("live", "core"):
                raise Failure("not a combination: %s (give e.g. gdb.live, lldb.core, cli.core)" % ".".join(o))
        self.results = []   # (order, label, "ok" | "FAIL" | "skip", seconds, message)
        self._runs = 0
        self._lock = threading.Lock()
        self._shared = {}

    def wanted(self, combos):
        keep = []
        for dbg, mode in combos:
            if dbg != "cli" and (dbg not in self.debuggers or mode not in self.modes):
                continue
            if self.only and (dbg, mode) not in self.only:
                continue
            keep.append((dbg, mode))
        return keep

    # -- shared results -----------------------------------------------------

    def shared(self, key, fn):
        """fn() computed once for all combinations (the first to ask runs it,
        the others wait for it); an exception is kept and raised to each."""
        with self._lock:
            slot = self._shared.get(key)
            if slot is None:
                slot = self._shared[key] = {"done": threading.Event()}
                mine = True
            else:
                mine = False
        if mine:
            try:
                slot["value"] = fn()
            except BaseException as e:   # kept for every caller, raised below
                slot["error"] = e
            slot["done"].set()
        slot["done"].wait()
        if "error" in slot:
            raise slot["error"]
        return slot["value"]

    def prefetch(self, key, fn):
        """Starts shared(key, fn) in the background (e.g. parsing a large
        reference file while the first debugger attaches)."""
        threading.Thread(target=self._quiet_shared, args=(key, fn), daemon=True).start()

    def _quiet_shared(self, key, fn):
        try:
            self.shared(key, fn)
        except BaseException:   # reported to the combinations that use it
            pass

    # -- running ------------------------------------------------------------

    def start(self, program, name=None, timeout=90, env=None):
        """Starts a test program in a work directory of its own."""
        wd = os.path.join(self.workdir, name or os.path.splitext(program)[0])
        os.makedirs(wd, exist_ok=True)
        return harness.Target(self.ruby, program, wd, timeout=timeout, env=env)

    def run(self, target, check, combos=COMBOS, label=None, parallel=False, start_timeout=90, env=None):
        """Runs check(combo) for each wanted combination on one target.
        target: a started harness.Target (the caller closes it), a program
        file name under programs/, or a callable returning a Target (both
        closed here). The core (a GB for a program of many threads) is
        deleted once every combination of the run has passed; a failure
        keeps it in the work directory that harness.main keeps."""
        combos = self.wanted(combos)
        if not combos:
            return
        owned = isinstance(target, str) or callable(target)
        self._runs += 1
        run_no = self._runs
        order = [(run_no, i) for i in range(len(combos))]
        t0 = time.time()
        try:
            if isinstance(target, str):
                target = self.start(target, timeout=start_timeout, env=env)
            elif owned:
                target = target()
        except Exception as e:
            for (dbg, mode), o in zip(combos, order):
                self._record(o, self._label(label, dbg, mode), "FAIL", time.time() - t0,
                             "the target did not start: %s" % _describe(e))
            return
        try:
            all_ = [Combo(self, target, d, m, label, o) for (d, m), o in zip(combos, order)]
            live = [c for c in all_ if c.live]
            core = [c for c in all_ if not c.live]
            if parallel and live and core:
                core_error = self._take_core(target, core, label)
                lane = threading.Thread(target=self._lane, args=(core, check, core_error), daemon=True)
                lane.start()
                self._lane(live, check)
                lane.join()
            else:
                self._lane(live, check)
                if core:
                    self._lane(core, check, self._take_core(target, core, label))
            if core and core[0].core and all(r[2] != "FAIL" for r in self.results if r[0][0] == run_no):
                os.remove(core[0].core)
        finally:
            if owned:
                target.close()

    def _take_core(self, target, combos, label):
        """gcore once for every core combination; the error if it failed."""
        try:
            t0 = time.time()
            path = target.gcore()
            harness.log("%sgcore of pid %d: %.1f s, %d MB" % (label + ": " if label else "", target.pid,
                                                               time.time() - t0, os.path.getsize(path) >> 20))
        except Failure as e:   # harness's says what failed
            return str(e)
        except Exception as e:
            return "gcore failed: %s" % _describe(e)
        for c in combos:
            c.core = path
        return None

    def _lane(self, combos, check, error=None):
        for c in combos:
            if error:
                self._record(c.order, c.label, "FAIL", 0.0, error)
                continue
            t0 = time.time()
            harness.set_log_prefix("[%s] " % c.label)
            try:
                check(c)
                if c.live:
                    c.target.assert_left_running()
                status, msg = "ok", ""
            except Failure as e:
                status, msg = "FAIL", str(e)
            except harness.SkipTest as e:   # this combination cannot be checked here (the reason says why)
                status, msg = "skip", str(e)
            except Exception as e:   # a bug in the check, or a timeout: this combination fails, the rest run
                status, msg = "FAIL", "%s\n%s" % (_describe(e), traceback.format_exc())
            finally:
                harness.set_log_prefix("")
            self._record(c.order, c.label, status, time.time() - t0, msg)

    def _record(self, order, label, status, seconds, msg):
        with self._lock:
            self.results.append((order, label, status, seconds, msg))
        harness.log("%-4s %s (%.1f s)%s" % (status, label, seconds, ": " + msg if msg else ""))

    @staticmethod
    def _label(label, dbg, mode):
        return ("%s: %s %s" % (label, dbg, mode)) if label else "%s %s" % (dbg, mode)

    def finish(self):
        """Prints every combination's result; fails naming those that failed
        (skips if every combination skipped: harness.SkipTest)."""
        if not self.results:
            raise Failure("no combination was run (RBPEEK_TEST_DEBUGGERS=%s, RBPEEK_TEST_MODES=%s, only %s)"
                          % (";".join(self.debuggers), ";".join(self.modes), sorted(self.only) or "all"))
        harness.log("%s: %d combinations:" % (self.ruby_spec, len(self.results)))
        results = sorted(self.results)
        for _order, label, status, seconds, _msg in results:
            harness.log("  %-4s %-28s %6.1f s" % (status, label, seconds))
        failed = [r[1] for r in results if r[2] == "FAIL"]
        if failed:
            raise Failure("%d of %d combinations failed: %s" % (len(failed), len(results), ", ".join(failed)))
        if all(r[2] == "skip" for r in results):
            raise harness.SkipTest("every combination skipped: %s" % "; ".join(sorted({r[4] for r in results})))


def _describe(e):
    return str(e) if isinstance(e, Failure) else "%s: %s" % (type(e).__name__, e)
