"""`ruby sample` ends cleanly whatever ends it.

    test_sample_safety.py RUBY DEBUGGER [SCENARIO...]    e.g. test_sample_safety.py debian-3.1 lldb

Scenarios (all by default), on the default path (the debugger detaches
while rbpeek traces the target, then attaches again) unless marked -via
(--via-debugger: the debugger stops and resumes the target):
  exit       the target exits during sampling: the command ends with the data
             collected so far, says so, and the debugger stays usable (a
             second `ruby sample` refuses with one line).
  ctrl-c     SIGINT to the debugger during sampling (what Ctrl-C sends).
  fault      an exception in the middle of the loop (injected from the
             debugger's Python into the loop's progress report).
  interrupt  a KeyboardInterrupt in the middle of the loop (the same way).
  ctrl-c-via, fault-via: the same through the debugger.
  signal     the target receives SIGUSR1 (which the debugger stops for)
             during sampling: sampling ends and says so, the target is
             stopped, and the debugger reports the signal on continue.
  threads    the target starts a thread every 20 ms while sampled: the
             threads are sampled, and the debugger knows every thread after.
  held-signal the target is stopped at a signal the debugger will deliver
             (SIGWINCH, set to stop): sampling goes through the debugger,
             which delivers it, instead of detaching, which would deliver it
             unseen.
For ctrl-c, fault and interrupt: the profile collected so far is written
(every sample the summary counts), the target is stopped when the command
returns (as it was before), the debugger's handling of the sampling signal
is what it was before the command, no catchpoint is left behind, the
selected thread is the one selected before, `ruby bt` works afterwards, and
the target runs on once the debugger detaches.
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

ALL = ("exit", "ctrl-c", "fault", "interrupt", "ctrl-c-via", "fault-via", "signal", "threads", "held-signal")

# Makes the loop's progress report raise on its Nth call: through the
# debugger it is called after every sample, on the traced path every 0.1 s.
INJECT = ("import rbpeeklib.sampling.stats as m\n"
          "_orig = m.Progress.update\n"
          "_calls = [0]\n"
          "def _injected(self, st, now):\n"
          "    _calls[0] += 1\n"
          "    if _calls[0] == {n}:\n"
          "        raise {exc}\n"
          "    return _orig(self, st, now)\n"
          "m.Progress.update = _injected\n")


def script_cmd(debugger, code):
    return ("python exec(%r)" if debugger == "gdb" else "script exec(%r)") % code


def failing(debugger, cmd):
    """A command expected to fail, such that the commands after it still
    run: lldb -b stops at the first failing command (whatever
    interpreter.stop-command-source-on-error says), but not when the
    command runs through SBDebugger.HandleCommand."""
    return cmd if debugger == "gdb" else "script lldb.debugger.HandleCommand(%r)" % cmd


def select_cmd(debugger):
    """Selects the thread named "sleeper" (before sampling, which must keep
    it selected): not the first thread, and a Ruby thread on every Ruby."""
    if debugger == "gdb":
        return script_cmd(debugger, "import gdb\n[t.switch() for t in gdb.selected_inferior().threads() "
                                    "if t.name == 'sleeper']")
    return script_cmd(debugger, "import lldb\np = lldb.debugger.GetSelectedTarget().GetProcess()\n"
                                "[p.SetSelectedThread(t) for t in p if t.GetName() == 'sleeper']")


def state_cmds(debugger):
    """Commands whose output must be the same before and after sampling."""
    if debugger == "gdb":
        return ["info signals SIGURG", "info breakpoints", "thread"]
    return ["process handle SIGURG", "breakpoint list", "thread info"]


def stopped_check(debugger):
    if debugger == "gdb":
        return script_cmd(debugger, "import gdb\nprint('RUNNING=%s' % any(t.is_running() for t in "
                                    "gdb.selected_inferior().threads()))")
    return script_cmd(debugger, "import lldb\nprint('RUNNING=%s' % (lldb.debugger.GetSelectedTarget().GetProcess()"
                                ".GetState() == lldb.eStateRunning))")


def threads_check(debugger):
    """Prints whether the debugger's threads are the kernel's (the target is stopped)."""
    if debugger == "gdb":
        listed = "{t.ptid[1] for t in gdb.selected_inferior().threads()}"
        pid = "gdb.selected_inferior().pid"
        imp = "import gdb, os\n"
    else:
        listed = "{t.GetThreadID() for t in lldb.debugger.GetSelectedTarget().GetProcess()}"
        pid = "lldb.debugger.GetSelectedTarget().GetProcess().GetProcessID()"
        imp = "import lldb, os\n"
    return script_cmd(debugger, imp + "a = %s\nb = {int(x) for x in os.listdir('/proc/%%d/task' %% %s)}\n"
                      "print('THREADS debugger=%%d kernel=%%d same=%%s' %% (len(a), len(b), a == b))" % (listed, pid))


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
    if debugger == "gdb":
        sel = re.findall(r"^\[Current thread is (\d+) .*\(LWP (\d+)\)", output, re.M)
    else:
        sel = re.findall(r"^\*? *thread #(\d+): tid = (\d+)", output, re.M)
    if len(sel) != 2 or sel[0] != sel[1] or sel[0][0] == "1":
        raise Failure("the selected thread changed (before, after): %s" % sel)
    if "RUNNING=False" not in output:
        raise Failure("the target was not stopped when `ruby sample` returned:\n" + output[-3000:])


def expect_in(output, text, what, failure):
    """Fails with what: failure, and the output's tail, unless text is in output."""
    if text not in output:
        raise Failure("%s: %s:\n%s" % (what, failure, output[-3000:]))


def check_profile(path, output, what):
    if not os.path.exists(path):
        raise Failure("%s: nothing was written; output:\n%s" % (what, output[-3000:]))
    stacks = parse_folded(path)
    total = sum(c for _f, c in stacks)
    if total == 0:
        raise Failure("%s: the profile written is empty" % what)
    return total


def check_bt_after(output, what):
    """`ruby bt` after the sampling shows a Ruby thread's frames (the main
    thread, or the sleeper where the scenario selected it)."""
    tail = output.rpartition("rbpeek: wrote")[2]
    if (not re.search(r"^Thread \d+ .*(main|sleeper)", tail, re.M)
            or not re.search(r"^\s+\S*cpu_split\.rb:\d+:in ", tail, re.M)):
        raise Failure("%s: `ruby bt` after sampling did not work:\n%s" % (what, tail[-2000:]))


def run_and_act(debugger, cmds, pid, out_path, act):
    """Runs the debugger; once sampling has run for a moment, calls act(proc)
    (while the debugger still runs); returns the debugger's output."""
    with open(out_path, "w") as out:
        proc = subprocess.Popen(harness.debugger_argv(debugger, cmds, pid), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=harness.front_end_env())
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
        time.sleep(1.0)   # some 100 samples in: the run is well under way
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
        cmds = ["ruby sample --idle --duration 120 --folded " + folded, "ruby sample --idle 5 --folded " + again]
        output = run_and_act(debugger, cmds, target.pid, os.path.join(workdir, "exit.out"),
                             lambda proc: open(os.path.join(target.workdir, "exit"), "w").close())
        harness.assert_no_traceback(output)
        expect_in(output, "sampling ended: the target exited", "exit", "the summary does not say the target exited")
        total = check_profile(folded, output, "exit")
        refusals = [l for l in output.splitlines() if "rbpeek:" in l and "no process to sample" in l]
        if len(refusals) != 1 or os.path.exists(again):
            raise Failure("a second `ruby sample` after the exit did not refuse with one line:\n" + output[-2000:])
        harness.log("exit: %d stacks written, then: %s" % (total, refusals[0].strip()))
    finally:
        target.close()


def summary_samples(output, what):
    m = re.search(r"^Samples:\s+(\d+) in", output, re.M)
    if not m:
        raise Failure("%s: no summary:\n%s" % (what, output[-3000:]))
    return int(m.group(1))


def check_all_written(total, samples, what):
    """Every sample the summary counts is in the profile: one stack for each
    of the 3 Ruby threads (4 while the main thread of 2.7... has one more)."""
    if samples <= 0 or not samples * 3 <= total <= samples * 4:
        raise Failure("%s: %d stacks written for the %d samples the summary counts" % (what, total, samples))


def scenario_inproc(ruby, debugger, workdir, name, exc, expect, via=False):
    target = SplitTarget(ruby, os.path.join(workdir, name))
    try:
        folded = os.path.join(workdir, name + ".folded")
        # Through the debugger the progress report runs after every sample:
        # the 40th call ends it after 40 samples. Traced, it runs every 0.1 s.
        inject = INJECT.format(exc=exc, n=40 if via else 10)
        cmd = "ruby sample --idle 2000 --rate 200 --folded " + folded + (" --via-debugger" if via else "")
        cmds = [select_cmd(debugger)] + state_cmds(debugger) + [script_cmd(debugger, inject), failing(debugger, cmd),
                                                                stopped_check(debugger)] + state_cmds(debugger) + [
            "ruby bt"]
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
        if "Traceback (most recent call last)" in output:
            raise Failure("%s: a Python traceback reached the user:\n%s" % (name, output[-3000:]))
        expect_in(output, expect, name, "expected %r in the output" % expect)
        total = check_profile(folded, output, name)
        samples = summary_samples(output, name)
        check_all_written(total, samples, name)
        if via and samples != 40:
            raise Failure("%s: %d samples counted, expected the 40 taken before the fault" % (name, samples))
        if not via and "traced by rbpeek" not in output:
            raise Failure("%s: the default path did not trace the target itself:\n%s" % (name, output[-3000:]))
        check_state_restored(output, debugger)
        check_bt_after(output, name)
        target.assert_left_running()
        harness.log("%s: %d samples, %d stacks written; state restored; debugger usable" % (name, samples, total))
    finally:
        target.close()


def scenario_signal(ruby, debugger, workdir):
    """SIGUSR1 during sampling: gdb and lldb stop for it by default."""
    target = SplitTarget(ruby, os.path.join(workdir, "signal"))
    try:
        folded = os.path.join(workdir, "signal.folded")
        cont = ["continue"] if debugger == "gdb" else ["process continue"]
        cmds = ["ruby sample --idle --duration 120 --folded " + folded, stopped_check(debugger), "ruby bt"] + cont
        output = run_and_act(debugger, cmds, target.pid, os.path.join(workdir, "signal.out"),
                             lambda proc: os.kill(target.pid, signal.SIGUSR1))
        harness.assert_no_traceback(output)
        expect_in(output, "sampling ended: the target received SIGUSR1", "signal",
                  "the summary does not say the target received SIGUSR1")
        expect_in(output, "RUNNING=False", "signal", "the target was not stopped when `ruby sample` returned")
        check_bt_after(output, "signal")
        tail = output.split("RUNNING=False", 1)[1]
        reported = ("received signal SIGUSR1" in tail if debugger == "gdb"
                    else re.search(r"stop reason = signal SIGUSR1", tail) is not None)
        if not reported:
            raise Failure("signal: the debugger did not report the pending SIGUSR1 on continue:\n" + tail[-3000:])
        total = check_profile(folded, output, "signal")
        harness.log("signal: %d stacks written; SIGUSR1 reported on continue" % total)
    finally:
        target.close()


def scenario_held_signal(ruby, debugger, workdir):
    target = SplitTarget(ruby, os.path.join(workdir, "held"))
    try:
        folded = os.path.join(workdir, "held.folded")
        sample = "ruby sample --idle 30 --rate 200 --folded " + folded
        if debugger == "gdb":
            cmds = ["handle SIGWINCH stop print pass", "shell kill -WINCH %d" % target.pid, "continue", sample]
        else:
            cmds = ["process handle -s true -p true SIGWINCH",
                    script_cmd(debugger, "import os, lldb\nos.kill(%d, 28)\nlldb.debugger.SetAsync(False)\n"
                                         "lldb.process.Continue()\nlldb.debugger.HandleCommand(%r)"
                               % (target.pid, sample))]
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
        harness.assert_no_traceback(output)
        expect_in(output, "sampling ended: 30 samples taken", "held-signal", "sampling did not run to its end")
        expect_in(output, "stopped through the debugger: the target is stopped with SIGWINCH pending", "held-signal",
                  "sampling did not go through the debugger")
        total = check_profile(folded, output, "held-signal")
        target.assert_left_running()
        harness.log("held-signal: %d stacks, sampled through the debugger" % total)
    finally:
        target.close()


def scenario_threads(ruby, debugger, workdir):
    """Threads born while the target is traced are sampled, and the debugger
    knows every thread when it attaches again."""
    target = SplitTarget(ruby, os.path.join(workdir, "threads"), "--spawn-threads")
    try:
        folded = os.path.join(workdir, "threads.folded")
        cmds = ["ruby sample --idle 600 --rate 200 --folded " + folded, stopped_check(debugger), threads_check(debugger),
                "ruby bt -a"]
        rc, output = harness.run_debugger(debugger, cmds, pid=target.pid)
        harness.assert_no_traceback(output)
        expect_in(output, "sampling ended: 600 samples taken", "threads", "sampling did not run to its end")
        expect_in(output, "RUNNING=False", "threads", "the target was not stopped when `ruby sample` returned")
        m = re.search(r"^THREADS debugger=(\d+) kernel=(\d+) same=(True|False)", output, re.M)
        if not m or m.group(3) != "True":
            raise Failure("threads: the debugger's thread list is not the process's after sampling: %s\n%s"
                          % (m.group(0) if m else "no answer", output[-3000:]))
        stacks = parse_folded(folded)
        # The short-lived threads sleep in the block given to Thread.new
        # inside the spawner's loop.
        born = sum(c for f, c in stacks if re.match(r"(Kernel#)?sleep \(", f[-1]) and len(f) >= 2
                   and f[-2].startswith("block (3 levels) in <main>"))
        if born == 0:
            raise Failure("threads: no sample of a short-lived thread; stacks:\n%s" % stacks[:20])
        target.assert_left_running()
        harness.log("threads: %d stacks of short-lived threads; after: %s" % (born, m.group(0)))
    finally:
        target.close()


def scenario_ctrl_c(ruby, debugger, workdir, via=False):
    target = SplitTarget(ruby, os.path.join(workdir, "ctrlc"))
    try:
        folded = os.path.join(workdir, "ctrlc.folded")
        cmds = [select_cmd(debugger)] + state_cmds(debugger) + [
            "ruby sample --idle --duration 120 --folded " + folded + (" --via-debugger" if via else ""),
                                       stopped_check(debugger)] + state_cmds(debugger) + ["ruby bt"]
        output = run_and_act(debugger, cmds, target.pid, os.path.join(workdir, "ctrlc.out"),
                             lambda proc: proc.send_signal(signal.SIGINT))
        harness.assert_no_traceback(output)
        expect_in(output, "sampling ended: interrupted (Ctrl-C)", "ctrl-c",
                  "the summary does not say it was interrupted")
        total = check_profile(folded, output, "ctrl-c")
        check_all_written(total, summary_samples(output, "ctrl-c"), "ctrl-c")
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
        elif s in ("ctrl-c", "ctrl-c-via"):
            scenario_ctrl_c(ruby, debugger, workdir, via=s.endswith("-via"))
        elif s in ("fault", "fault-via"):
            scenario_inproc(ruby, debugger, workdir, s, "RuntimeError('injected fault')",
                            "internal error: RuntimeError: injected fault", via=s.endswith("-via"))
        elif s == "interrupt":
            scenario_inproc(ruby, debugger, workdir, "interrupt", "KeyboardInterrupt()",
                            "sampling ended: interrupted (Ctrl-C)")
        elif s == "signal":
            scenario_signal(ruby, debugger, workdir)
        elif s == "threads":
            scenario_threads(ruby, debugger, workdir)
        elif s == "held-signal":
            scenario_held_signal(ruby, debugger, workdir)

if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) < 2 or args[1] not in ("gdb", "lldb") or any(s not in ALL for s in args[2:]):
        sys.exit(__doc__)
    harness.main(lambda wd: test(args[0], args[1], args[2:] or ALL, wd))
