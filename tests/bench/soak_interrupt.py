#!/usr/bin/env python3
"""Soak test: `ruby sample` interrupted at random moments must never harm
the target (docs/testing.md, "Soak test").

Each run attaches gdb or lldb-16 to a CPU-bound Ruby (sample_workload.rb),
starts `ruby sample --duration 60`, and at a random moment after sampling
started (0 to 3 s) does one of:
  sigint   SIGINT to the debugger (Ctrl-C): the debugger must end sampling
           and exit within 60 s, with no Python traceback;
  sigkill  SIGKILL to the debugger: it dies on the spot;
  exit     the target exits on its own (a timer thread in it calls exit!):
           the debugger must notice and exit within 60 s, no traceback.
After sigint and sigkill the target must be alive and running (not in a
stop state, and its CPU time must keep growing), untraced (TracerPid: 0 in
/proc/PID/status), with no breakpoint left (every executable file mapping
reads the same as its file: no int3 written) and no watchpoint left (each
thread's debug control register DR7 is 0, read by a brief PTRACE_SEIZE +
PTRACE_INTERRUPT of our own, detached again). The same target serves the
next runs until one kills it.

    python3 tests/bench/soak_interrupt.py [--runs 200] [--ruby /usr/bin/ruby3.1]
        [--debuggers gdb,lldb] [--seed N] [--workdir DIR]

Prints one line per run and a table of the outcomes; exits 1 if any run
failed. A smoke version for ctest: --runs 6.
"""
import argparse
import ctypes
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))
import harness  # noqa: E402

WORKLOAD = os.path.join(HERE, "sample_workload.rb")
KINDS = ("sigint", "sigkill", "exit")
EARLY_EXITS = []   # exit runs where the target exited before sampling started

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_PEEKUSER, PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 3, 17, 0x4206, 0x4207
DR7_OFFSET = 848 + 7 * 8      # offsetof(struct user, u_debugreg[7]) on x86-64
__WALL = 0x40000000


class Failure(Exception):
    pass


def status_field(pid, name):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith(name + ":"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None
    return None


def cpu_ticks(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])   # utime + stime


def text_differs(pid):
    """Executable file mappings whose memory differs from the file (a
    breakpoint's int3 left behind), as 'path+offset' strings."""
    bad = []
    with open("/proc/%d/maps" % pid) as f:
        maps = [l.split() for l in f]
    with open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for m in maps:
            if len(m) < 6 or "x" not in m[1] or not m[5].startswith("/"):
                continue
            start, end = (int(x, 16) for x in m[0].split("-"))
            off = int(m[2], 16)
            try:
                with open(m[5], "rb") as f:
                    f.seek(off)
                    want = f.read(end - start)
                mem.seek(start)
                got = mem.read(len(want))
            except OSError:
                continue
            if got != want:
                i = next(k for k in range(min(len(got), len(want))) if got[k] != want[k]) \
                    if len(got) == len(want) else 0
                bad.append("%s+0x%x (byte 0x%02x)" % (m[5], off + i, got[i] if got else 0))
    return bad


def watchpoints(pid):
    """Threads whose DR7 is not 0. Seizes each thread briefly (no signal
    sent, no stop left behind: PTRACE_INTERRUPT, read, PTRACE_DETACH)."""
    armed = []
    for tid in (int(t) for t in os.listdir("/proc/%d/task" % pid)):
        if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
            raise Failure("cannot seize thread %d to read its debug registers: errno %d"
                          % (tid, ctypes.get_errno()))
        try:
            libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
            os.waitpid(tid, __WALL)
            ctypes.set_errno(0)
            dr7 = libc.ptrace(PTRACE_PEEKUSER, tid, ctypes.c_void_p(DR7_OFFSET), None)
            if ctypes.get_errno() == 0 and dr7 & 0xff:
                armed.append("%d: DR7=0x%x" % (tid, dr7 & 0xffffffff))
        finally:
            libc.ptrace(PTRACE_DETACH, tid, None, None)
    return armed


def check_target(pid):
    """The target is alive, running, untraced, and carries no breakpoint
    or watchpoint."""
    deadline = time.time() + 5
    while True:   # the kernel's detach on the debugger's death may take a moment
        state = status_field(pid, "State")
        tracer = status_field(pid, "TracerPid")
        if state is None:
            raise Failure("the target is gone")
        if state[0] not in "tTZX" and tracer == "0":
            break
        if time.time() > deadline:
            raise Failure("target left %s, TracerPid %s" % (state, tracer))
        time.sleep(0.05)
    t0 = cpu_ticks(pid)
    time.sleep(0.3)
    if cpu_ticks(pid) == t0:
        time.sleep(1.0)
        if cpu_ticks(pid) == t0:
            raise Failure("the target does not run (no CPU time in 1.3 s; state %s)" % status_field(pid, "State"))
    bad = text_differs(pid)
    if bad:
        raise Failure("breakpoint left in the target's code: " + ", ".join(bad[:3]))
    armed = watchpoints(pid)
    if armed:
        raise Failure("watchpoint left armed: " + ", ".join(armed))
    if status_field(pid, "TracerPid") != "0" or status_field(pid, "State")[0] in "tT":
        raise Failure("the target stayed stopped or traced after our own check")


class Target:
    def __init__(self, ruby, workdir, lifetime=None):
        os.makedirs(workdir, exist_ok=True)
        code = ""
        if lifetime is not None:
            # Exits by itself at a moment the run does not control.
            code = "Thread.new { sleep %.3f; exit!(0) }; " % lifetime
        self.proc = subprocess.Popen([ruby, "-e", code + "load ARGV.shift", WORKLOAD, workdir],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        log = os.path.join(workdir, "iterations.log")
        deadline = time.time() + 30
        while not os.path.exists(log):
            if time.time() > deadline or self.proc.poll() is not None:
                raise Failure("the workload did not start")
            time.sleep(0.05)

    def alive(self):
        return self.proc.poll() is None

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def debugger_argv(debugger, pid, folded):
    cmd = "ruby sample --duration 60 --folded " + folded
    if debugger == "gdb":
        return ["gdb", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
                "-p", str(pid), "-ex", "source " + harness.GDB_PLUGIN, "-ex", cmd]
    return [harness.LLDB, "--no-lldbinit", "-b", "-p", str(pid), "-o",
            "command script import " + harness.LLDB_PLUGIN, "-o", cmd]


def one_run(debugger, kind, target, rng, workdir, n):
    """Returns (seconds from the interruption to the debugger's exit, or None)."""
    folded = os.path.join(workdir, "run%d.folded" % n)
    out_path = os.path.join(workdir, "run%d.out" % n)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    with open(out_path, "w") as out:
        proc = subprocess.Popen(debugger_argv(debugger, target.pid, folded), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 120
        while True:
            with open(out_path, errors="replace") as f:
                if "rbpeek: sampling pid" in f.read():
                    break
            if proc.poll() is not None:
                raise Failure("the debugger exited before sampling started:\n" + open(out_path).read()[-1500:])
            if time.time() > deadline:
                raise Failure("sampling never started")
            time.sleep(0.05)
        time.sleep(rng.uniform(0.0, 3.0))
        t0 = time.time()
        if kind == "sigint":
            proc.send_signal(signal.SIGINT)
        else:
            proc.send_signal(signal.SIGKILL)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Failure("the debugger did not exit within 60 s of the %s" % kind)
        took = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = open(out_path, errors="replace").read()
    if kind != "sigkill":
        if "Traceback (most recent call last)" in output:
            raise Failure("Python traceback in the debugger:\n" + output[-2000:])
        if kind == "exit" and target.alive():
            raise Failure("the target did not exit")
        if proc.returncode < 0:
            raise Failure("the debugger died of signal %d:\n%s" % (-proc.returncode, output[-1500:]))
    if kind != "exit":
        check_target(target.pid)
    return took


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ruby", default="/usr/bin/ruby3.1")
    ap.add_argument("--debuggers", default="gdb,lldb")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--workdir", default=None)
    a = ap.parse_args()
    seed = a.seed if a.seed is not None else int(time.time())
    rng = random.Random(seed)
    debuggers = a.debuggers.split(",")
    if not os.path.exists(a.ruby) or not shutil.which("gdb") or ("lldb" in debuggers and not shutil.which(harness.LLDB)):
        print("soak: SKIPPED: needs %s, gdb and lldb-16" % a.ruby)
        return 77
    workdir = a.workdir or tempfile.mkdtemp(prefix="rbpeek-soak-")
    plan = [(debuggers[i % len(debuggers)], KINDS[(i // len(debuggers)) % len(KINDS)]) for i in range(a.runs)]
    rng.shuffle(plan)
    print("soak: %d runs, seed %d, %s, workdir %s" % (a.runs, seed, a.ruby, workdir), flush=True)
    results = {}   # (debugger, kind) -> [passed, failed, [seconds]]
    target = None
    failures = []
    for n, (debugger, kind) in enumerate(plan, 1):
        try:
            if kind == "exit":
                if target:
                    target.close()
                # The exit comes at a random moment of its own: the timer
                # thread's, started now, while the debugger attaches.
                target = Target(a.ruby, os.path.join(workdir, "t%d" % n), lifetime=rng.uniform(3.0, 9.0))
            elif target is None or not target.alive():
                target = Target(a.ruby, os.path.join(workdir, "t%d" % n))
            if kind == "exit":
                took = one_run_exit(debugger, target, rng, workdir, n)
            else:
                took = one_run(debugger, kind, target, rng, workdir, n)
            r = results.setdefault((debugger, kind), [0, 0, []])
            r[0] += 1
            if took is not None:
                r[2].append(took)
            print("soak: %3d %-4s %-7s ok (debugger gone %.2f s after)" % (n, debugger, kind, took), flush=True)
        except (Failure, harness.Failure) as e:
            results.setdefault((debugger, kind), [0, 0, []])[1] += 1
            failures.append((n, debugger, kind, str(e)))
            print("soak: %3d %-4s %-7s FAILED: %s" % (n, debugger, kind, str(e)[:2000]), flush=True)
            if target:
                target.close()
                target = None
    if target:
        target.close()
    print("\n| debugger | interruption | runs | passed | failed | debugger exit after it, median / max (s) |")
    print("|---|---|---|---|---|---|")
    for (debugger, kind), (ok, bad, secs) in sorted(results.items()):
        secs.sort()
        med = secs[len(secs) // 2] if secs else float("nan")
        print("| %s | %s | %d | %d | %d | %.2f / %.2f |" % (debugger, kind, ok + bad, ok, bad, med,
                                                            secs[-1] if secs else float("nan")))
    print("soak: %d of %d runs passed; %d exit runs ended before sampling started"
          % (a.runs - len(failures), a.runs, len(EARLY_EXITS)))
    if not a.workdir and not failures:
        shutil.rmtree(workdir, ignore_errors=True)
    return 1 if failures else 0


def one_run_exit(debugger, target, rng, workdir, n):
    """The target exits by itself while being sampled."""
    folded = os.path.join(workdir, "run%d.folded" % n)
    out_path = os.path.join(workdir, "run%d.out" % n)
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    with open(out_path, "w") as out:
        proc = subprocess.Popen(debugger_argv(debugger, target.pid, folded), stdout=out,
                                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env)
    try:
        target.proc.wait(timeout=120)
        t0 = time.time()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            raise Failure("the debugger did not exit within 60 s of the target's exit")
        took = time.time() - t0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    output = open(out_path, errors="replace").read()
    if "Traceback (most recent call last)" in output:
        raise Failure("Python traceback in the debugger:\n" + output[-2000:])
    if proc.returncode < 0:
        raise Failure("the debugger died of signal %d:\n%s" % (-proc.returncode, output[-1500:]))
    # The target may exit before sampling began (attach was slow under
    # load): still a moment the debugger must cope with; counted apart.
    if "rbpeek: sampling pid" not in output:
        EARLY_EXITS.append(n)
    return took


if __name__ == "__main__":
    sys.exit(main())
