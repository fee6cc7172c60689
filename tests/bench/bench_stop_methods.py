"""Benchmark: ways to stop and resume a target in gdb and lldb (not a test).

    python3 tests/bench/bench_stop_methods.py [--ruby debian-3.1] [--cycles 400] [--repeat 3]

`ruby sample` spends most of each sample in the debugger stopping and
resuming the target. This measures the candidates it was chosen from, each
as a bare loop inside the debugger (no stack walk): resume, let the target
run 100 us, stop it, repeat; the figure is the mean cycle, median of
--repeat runs, on a CPU-bound target with three Ruby threads.

gdb (all-stop; a Python command blocks in "continue" until the target stops):
  sigint-printed   a helper thread sends SIGINT (gdb's own "interrupt" does
                   the same); gdb prints each stop
  interrupt-event  the helper posts gdb's "interrupt" command to gdb's event
                   loop (gdb.post_event)
  catch-silent     the helper sends SIGURG; a silent "catch signal SIGURG"
                   takes the stop, "handle SIGURG nopass" keeps it from the
                   target (what ruby sample does)
  catch-always-in  the same with "set breakpoint always-inserted on", so gdb
                   does not re-insert its internal breakpoints on each resume
lldb (a Python command):
  sync-sigurg      synchronous Continue(); the helper sends SIGURG, set to
                   stop, not notify, suppress (what ruby sample does)
  sync-sigstop     the same with SIGSTOP
  async-stop       asynchronous Continue(), then SBProcess.Stop() after the
                   run time
(SBProcess.SendAsyncInterrupt() or Stop() from a helper thread while a
synchronous Continue() waits never returns: not measured.)
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
import benchlib  # noqa: E402
import harness  # noqa: E402

WORKLOAD = os.path.join(HERE, "sample_workload.rb")

GDB_LOOP = r'''
import gdb, os, re, signal, threading, time
METHOD, N = os.environ["BENCH_METHOD"], int(os.environ["BENCH_CYCLES"])
pid = gdb.selected_inferior().pid
fd = os.pidfd_open(pid)
go = threading.Event(); quit = [False]
sig = signal.SIGINT if METHOD == "sigint-printed" else signal.SIGURG
def helper():
    while not quit[0]:
        go.wait(); go.clear()
        if quit[0]: break
        time.sleep(0.0001)
        if METHOD == "interrupt-event":
            gdb.post_event(lambda: gdb.execute("interrupt"))
        else:
            signal.pidfd_send_signal(fd, sig)
threading.Thread(target=helper, daemon=True).start()
gdb.execute("set pagination off")
if METHOD.startswith("catch"):
    gdb.execute("handle SIGURG stop print nopass", to_string=True)
    num = int(re.search(r"Catchpoint (\d+)", gdb.execute("catch signal SIGURG", to_string=True)).group(1))
    gdb.execute("commands %d\nsilent\nend" % num, to_string=True)
if METHOD == "catch-always-in":
    gdb.execute("set breakpoint always-inserted on")
t0 = time.perf_counter()
for i in range(N):
    go.set()
    gdb.execute("continue", to_string=True)
el = time.perf_counter() - t0
quit[0] = True; go.set()
print("BENCH %.3f" % (el / N * 1e6))
'''

LLDB_LOOP = r'''
import lldb, os, signal, threading, time
def run(debugger, command, result, internal_dict):
    METHOD, N = os.environ["BENCH_METHOD"], int(os.environ["BENCH_CYCLES"])
    process = debugger.GetSelectedTarget().GetProcess()
    pid = process.GetProcessID()
    fd = os.pidfd_open(pid)
    sig = signal.SIGSTOP if METHOD == "sync-sigstop" else signal.SIGURG
    sigs = process.GetUnixSignals()
    sigs.SetShouldStop(int(sig), True); sigs.SetShouldSuppress(int(sig), True); sigs.SetShouldNotify(int(sig), False)
    go = threading.Event(); quit = [False]
    def helper():
        while not quit[0]:
            go.wait(); go.clear()
            if quit[0]: break
            time.sleep(0.0001)
            signal.pidfd_send_signal(fd, sig)
    if METHOD != "async-stop":
        threading.Thread(target=helper, daemon=True).start()
    was = debugger.GetAsync()
    debugger.SetAsync(METHOD == "async-stop")
    t0 = time.perf_counter()
    try:
        for i in range(N):
            if METHOD == "async-stop":
                process.Continue(); time.sleep(0.0001); process.Stop()
            else:
                go.set(); process.Continue()
    finally:
        debugger.SetAsync(was)
    el = time.perf_counter() - t0
    quit[0] = True; go.set()
    result.AppendMessage("BENCH %.3f" % (el / N * 1e6))
'''


def start(ruby, workdir):
    return benchlib.launch([ruby, WORKLOAD, workdir], workdir, polls=600)


def one(debugger, method, ruby, cycles, work):
    target = start(ruby, tempfile.mkdtemp(dir=work))
    env = dict(os.environ, BENCH_METHOD=method, BENCH_CYCLES=str(cycles))
    env.pop("PYTHONPATH", None)
    try:
        if debugger == "gdb":
            script = os.path.join(work, "loop_gdb.py")
            with open(script, "w") as f:
                f.write(GDB_LOOP)
            argv = ["gdb", "-q", "-nx", "-batch", "-p", str(target.pid), "-ex", "source " + script]
        else:
            script = os.path.join(work, "loop_lldb.py")
            with open(script, "w") as f:
                f.write(LLDB_LOOP)
            argv = [harness.LLDB, "--no-lldbinit", "-b", "-p", str(target.pid), "-o", "command script import " + script,
                    "-o", "command script add -f loop_lldb.run benchloop", "-o", "benchloop"]
        r = subprocess.run(argv, capture_output=True, text=True, timeout=600, env=env, errors="replace")
        m = re.search(r"BENCH ([0-9.]+)", r.stdout + r.stderr)
        if not m:
            raise SystemExit("%s %s failed:\n%s" % (debugger, method, (r.stdout + r.stderr)[-2000:]))
        return float(m.group(1))
    finally:
        target.kill()
        target.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ruby", default="debian-3.1")
    ap.add_argument("--cycles", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    ruby = harness.ruby_binary(args.ruby)
    work = tempfile.mkdtemp(prefix="rbpeek-bench-stop-")
    print("Load average at start: %.2f %.2f %.2f" % os.getloadavg())
    print("| debugger | method | cycle (us, incl. 100 us run) |")
    print("|---|---|---:|")
    for debugger, methods in (("gdb", ("sigint-printed", "interrupt-event", "catch-silent", "catch-always-in")),
                              ("lldb", ("sync-sigurg", "sync-sigstop", "async-stop"))):
        for method in methods:
            cycles = args.cycles if method != "async-stop" else max(20, args.cycles // 10)
            values = [one(debugger, method, ruby, cycles, work) for _ in range(args.repeat)]
            print("| %s | %s | %.0f |" % (debugger, method, statistics.median(values)), flush=True)
    print("Load average at end: %.2f %.2f %.2f" % os.getloadavg())


if __name__ == "__main__":
    main()
