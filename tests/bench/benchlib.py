"""What the benchmarks share: starting a target program and waiting until
it is ready; for `ruby bt`, `ruby heap` and the like, a parked target
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


def launch(argv, workdir, env=None, settle=0.0, polls=1200):
    """Starts a benchmark's target, argv, a program that writes
    workdir/ready once it is set up (with workdir/busy made first: the
    test programs that nap without it compute), and waits for that (polls times 50 ms,
    then settle seconds): its Popen. Ends the benchmark in one line, the
    program killed, if it exits first or is not ready in time."""
    os.makedirs(workdir, exist_ok=True)
    # The test programs that compute only while workdir/busy exists
    # (harness.Target.computing) compute all along in a benchmark.
    open(os.path.join(workdir, "busy"), "w").close()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            env=env)
    name = os.path.basename(argv[1] if len(argv) > 1 else argv[0])
    for _ in range(polls):
        if os.path.exists(os.path.join(workdir, "ready")):
            time.sleep(settle)
            return proc
        if proc.poll() is not None:
            raise SystemExit("the benchmark's target %s exited (status %d) before it was ready"
                             % (name, proc.returncode))
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise SystemExit("the benchmark's target %s was not ready after %.0f s" % (name, polls * 0.05))


def start(ruby, workdir, name, program, settle=0.0, polls=1200):
    """Runs program (Ruby source, given workdir as ARGV[0]) until it is
    ready (launch)."""
    prog = os.path.join(workdir, name)
    with open(prog, "w") as f:
        f.write(program)
    return launch([ruby, prog, workdir], workdir, settle=settle, polls=polls)


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
