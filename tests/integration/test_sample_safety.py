"""`ruby sample` ends cleanly whatever ends it.

    test_sample_safety.py RUBY DEBUGGER [SCENARIO...]    e.g. test_sample_safety.py debian-3.1 lldb

Scenarios (all by default):
  exit       the target exits during sampling: the command ends with the data
             collected so far, says so, and the debugger stays usable (a
             second `ruby sample` refuses with one line).
  ctrl-c     SIGINT to the debugger during sampling (what Ctrl-C sends).
  fault      an exception in the middle of the loop (injected by replacing
             the sampler from the debugger's Python).
  interrupt  a KeyboardInterrupt in the middle of the loop (the same way).
For the last three: the profile collected so far is written, the target is
stopped when the command returns (as it was before), the debugger's
handling of the sampling signal is what it was before the command, no
catchpoint is left behind, `ruby bt` works afterwards, and the target runs
on once the debugger detaches.
"""

import os
import re
import signal
import subprocess
import sys
import time

import harness
from harness import Failure
from test_sample import SplitTarget, parse_folded

ALL = ("exit", "ctrl-c", "fault", "interrupt")

# Replaces the sampler with one that raises on its 40th sample.
INJECT = ("import rbpeeklib.cmd_sample as m\n"
          "class _Injected(m.Sampler):\n"
          "    calls = 0\n"
          "    def sample(self):\n"
          "        type(self).calls += 1\n"
          "        if type(self).calls == 40:\n"
          "            raise {exc}\n"
          "        return super().sample()\n"
          "m.Sampler = _Injected\n")


def script_cmd(debugger, code):
    return ("python exec(%r)" if debugger == "gdb" else "script exec(%r)") % code


def failing(debugger, cmd):
    """A command expected to fail, such that the commands after it still
    run: lldb -b stops at the first failing command (whatever
    interpreter.stop-command-source-on-error says), but not when the
    command runs through SBDebugger.HandleCommand."""
    return cmd if debugger == "gdb" else "script lldb.debugger.HandleCommand(%r)" % cmd


def state_cmds(debugger):
    """Commands whose output must be the same before and after sampling."""
    if debugger == "gdb":
        return ["info signals SIGURG", "info breakpoints"]
    return ["process handle SIGURG", "breakpoint list"]


def stopped_check(debugger):
    if debugger == "gdb":
        return script_cmd(debugger, "import gdb\nprint('RUNNING=%s' % any(t.is_running() for t in "
                                    "gdb.selected_inferior().threads()))")
    return script_cmd(debugger, "import lldb\nprint('RUNNING=%s' % (lldb.debugger.GetSelectedTarget().GetProcess()"
                                ".GetState() == lldb.eStateRunning))")


def debugger_argv(debugger, commands, pid):
    """The argv harness.run_debugger would use (for the Ctrl-C test, which
    needs the process while it runs)."""
    if debugger == "gdb":
        argv = ["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
                "-p", str(pid), "-ex", "source " + harness.GDB_PLUGIN]
        for c in commands:
            argv += ["-ex", c]
    else:
        argv = [harness.LLDB, "--no-lldbinit", "-b", "-p", str(pid), "-o",
                "command script import " + harness.LLDB_PLUGIN]
        for c in commands:
            argv += ["-o", c]
    return argv


def check_state_restored(output, debugger):
    # Each state command ran once before and once after sampling; their
    # outputs must match.
    if debugger == "gdb":
        sig = re.findall(r"^SIGURG\s.*$", output, re.M)
        bps = re.findall(r"^(No breakpoints or watchpoints\.|Num\s+Type.*)$", output, re.M)
    else:
        sig = re.findall(r"^SIGURG\s.*$", output, re.M)
        bps = re.findall(r"^(No breakpoints currently set\.|Current breakpoints:)$", output, re.M)
    if len(sig) != 2 or sig[0].split() != sig[1].split():
        raise Failure("the debugger's handling of SIGURG changed: %s" % sig)
    if len(bps) != 2 or bps[0] != bps[1]:
        raise Failure("the breakpoint list changed (a catchpoint left behind?): %s" % bps)
    if "RUNNING=False" not in output:
        raise Failure("the target was not stopped when `ruby sample` returned:\n" + output[-3000:])


def check_profile(path, output, what):
    if not os.path.exists(path):
        raise Failure("%s: nothing was written; output:\n%s" % (what, output[-3000:]))
    stacks = parse_folded(path)
    total = sum(c for _f, c in stacks)
    if total == 0:
        raise Failure("%s: the profile written is empty" % what)
    return total


def check_bt_after(output, what):
    tail = output.rpartition("rbpeek: wrote")[2]
    if not re.search(r"^Thread 1 .*main", tail, re.M) or not re.search(r"^\s+\S*cpu_split\.rb:\d+:in ", tail, re.M):
        raise Failure("%s: `ruby bt` after sampling did not work:\n%s" % (what, tail[-2000:]))


def run_and_act(debugger, cmds, pid, out_path, act):
    """Runs the debugger; once sampling has run for a moment, calls act(proc)
    (while the debugger still runs); returns the debugger's output."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    with open(out_path, "w") as out:
        proc = subprocess.Popen(debugger_argv(debugger, cmds, pid), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 120
        while time.time() < deadline:
            with open(out_path, errors="replace") as f:
                if "rbpeek: sampling pid" in f.read():
                    break
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        else:
            raise Failure("sampling never started")
        time.sleep(2.0)
        act(proc)
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    with open(out_path, errors="replace") as f:
        return f.read()


def scenario_exit(ruby, debugger, workdir):
    target = SplitTarget(ruby, os.path.join(workdir, "exit"), "--exit-on-file")
    try:
        folded = os.path.join(workdir, "exit.folded")
        again = os.path.join(workdir, "again.folded")
        cmds = ["ruby sample --duration 120 --folded " + folded, "ruby sample 5 --folded " + again]
        output = run_and_act(debugger, cmds, target.pid, os.path.join(workdir, "exit.out"),
                             lambda proc: open(os.path.join(target.workdir, "exit"), "w").close())
        harness.assert_no_traceback(output)
        if "sampling ended: the target exited" not in output:
            raise Failure("the summary does not say the target exited:\n" + output[-3000:])
        total = check_profile(folded, output, "exit")
        refusals = [l for l in output.splitlines() if "rbpeek:" in l and "no process to sample" in l]
        if len(refusals) != 1 or os.path.exists(again):
            raise Failure("a second `ruby sample` after the exit did not refuse with one line:\n" + output[-2000:])
        harness.log("exit: %d stacks written, then: %s" % (total, refusals[0].strip()))
    finally:
        target.close()


def scenario_inproc(ruby, debugger, workdir, name, exc, expect):
    target = SplitTarget(ruby, os.path.join(workdir, name))
    try:
        folded = os.path.join(workdir, name + ".folded")
        cmds = state_cmds(debugger) + [script_cmd(debugger, INJECT.format(exc=exc)),
                                       failing(debugger, "ruby sample 500 --rate 200 --folded " + folded),
                                       stopped_check(debugger)] + state_cmds(debugger) + ["ruby bt"]
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
        if "Traceback (most recent call last)" in output:
            raise Failure("%s: a Python traceback reached the user:\n%s" % (name, output[-3000:]))
        if expect not in output:
            raise Failure("%s: expected %r in the output:\n%s" % (name, expect, output[-3000:]))
        total = check_profile(folded, output, name)
        if not 39 * 3 <= total <= 39 * 4:   # 39 samples of the 3 (or 4) Ruby threads
            raise Failure("%s: %d stacks written, expected the 39 samples taken before the fault" % (name, total))
        check_state_restored(output, debugger)
        check_bt_after(output, name)
        target.assert_left_running()
        harness.log("%s: %d stacks written; state restored; debugger usable" % (name, total))
    finally:
        target.close()


def scenario_ctrl_c(ruby, debugger, workdir):
    target = SplitTarget(ruby, os.path.join(workdir, "ctrlc"))
    try:
        folded = os.path.join(workdir, "ctrlc.folded")
        cmds = state_cmds(debugger) + ["ruby sample --duration 120 --folded " + folded,
                                       stopped_check(debugger)] + state_cmds(debugger) + ["ruby bt"]
        output = run_and_act(debugger, cmds, target.pid, os.path.join(workdir, "ctrlc.out"),
                             lambda proc: proc.send_signal(signal.SIGINT))
        harness.assert_no_traceback(output)
        if "sampling ended: interrupted (Ctrl-C)" not in output:
            raise Failure("ctrl-c: the summary does not say it was interrupted:\n" + output[-3000:])
        total = check_profile(folded, output, "ctrl-c")
        check_state_restored(output, debugger)
        check_bt_after(output, "ctrl-c")
        target.assert_left_running()
        harness.log("ctrl-c: %d stacks written; state restored; debugger usable" % total)
    finally:
        target.close()


def test(ruby_spec, debugger, scenarios, workdir):
    ruby = harness.ruby_binary(ruby_spec)
    if not os.path.exists(ruby):
        raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (ruby_spec, ruby))
    for s in scenarios:
        if s == "exit":
            scenario_exit(ruby, debugger, workdir)
        elif s == "ctrl-c":
            scenario_ctrl_c(ruby, debugger, workdir)
        elif s == "fault":
            scenario_inproc(ruby, debugger, workdir, "fault", "RuntimeError('injected fault')",
                            "internal error: RuntimeError: injected fault")
        elif s == "interrupt":
            scenario_inproc(ruby, debugger, workdir, "interrupt", "KeyboardInterrupt()",
                            "sampling ended: interrupted (Ctrl-C)")


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2 or args[1] not in ("gdb", "lldb") or any(s not in ALL for s in args[2:]):
        sys.exit(__doc__)
    harness.main(lambda wd: test(args[0], args[1], args[2:] or ALL, wd))
