"""What the `ruby bt` and `ruby heap` benchmarks share: a parked target
program per Ruby, gcore'd once, and a debugger command timed from inside
the debugger (so the debugger's own start-up is not counted).
"""

import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "integration"))
import harness  # noqa: E402


def timer(debugger, command):
    """A debugger command line that runs command and prints "BENCH seconds"."""
    if debugger == "gdb":
        run = "python import time as _t; _s=_t.perf_counter(); gdb.execute('%s', to_string=True); " % command
    else:
        run = "script import time as _t; _s=_t.perf_counter(); lldb.debugger.HandleCommand('%s'); " % command
    return run + "print('BENCH %.6f' % (_t.perf_counter()-_s))"


def timed_runs(debugger, mode, command, runs, ruby, pid, core):
    """Runs command runs times in one debugger session, attached to pid
    (mode "live") or on core (mode "core"): (the seconds of each run, the
    debugger's output)."""
    cmds = [timer(debugger, command) for _ in range(runs)]
    if mode == "live":
        _, text = harness.run_debugger(debugger, cmds, pid=pid)
    else:
        _, text = harness.run_debugger(debugger, cmds, exe=ruby, core=core)
    return [float(t) for t in re.findall(r"BENCH ([0-9.]+)", text)], text


def start(ruby, workdir, name, program, settle=0.0, polls=1200):
    """Runs program (Ruby source, given workdir as ARGV[0]) and waits until
    it writes workdir/ready."""
    prog = os.path.join(workdir, name)
    with open(prog, "w") as f:
        f.write(program)
    proc = subprocess.Popen([ruby, prog, workdir], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    for _ in range(polls):
        if os.path.exists(os.path.join(workdir, "ready")):
            time.sleep(settle)
            return proc
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("benchmark target never became ready")


def parked_targets(specs, name, program, settle=0.0):
    """For each built Ruby of specs: (spec, ruby, pid, core path, workdir),
    with program running and parked and a core of it taken; cleaned up after."""
    for spec in specs:
        ruby = harness.ruby_binary(spec)
        if not os.path.exists(ruby):
            print("skipping %s (not built)" % spec)
            continue
        workdir = tempfile.mkdtemp(prefix="rbpeek-bench-")
        with contextlib.ExitStack() as cleanup:
            cleanup.callback(shutil.rmtree, workdir, ignore_errors=True)
            proc = start(ruby, workdir, name, program, settle)
            cleanup.callback(proc.wait)
            cleanup.callback(proc.kill)
            core_path = os.path.join(workdir, "core")
            subprocess.run(["gcore", "-o", core_path, str(proc.pid)], capture_output=True, check=True)
            yield spec, ruby, proc.pid, "%s.%d" % (core_path, proc.pid), workdir
