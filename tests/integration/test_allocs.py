"""`ruby allocs` against the target's own count of its allocations.

    test_allocs.py RUBY DEBUGGER          e.g. test_allocs.py 3.3.8 gdb

The target (programs/alloc_rate.rb: two threads allocating strings and
arrays) logs GC.stat(:total_allocated_objects) and GC.count every 50 ms;
it allocates only while a run counts it (from its start to the
debugger's end: harness.Target.computing) and naps otherwise.
`ruby allocs --duration 3 --json -o F` runs in the debugger; over exactly
the wall-clock window its JSON gives (started_at, ended_at), the program's
own counts, interpolated from its log, must match: allocations (the JSON's
one exact count, "allocations") within 5%
(rbpeek reads the same counters, so only the log's 50 ms steps and the
moment of each read differ), GCs within 10% or 3. The per-heap counts add
up to the total. Then:
  - --every N is refused with one line giving rbpeek_watch_probe's
    finding (and --sites as the way to sites), --folded without --sites
    with one line;
  - Ctrl-C (SIGINT to the debugger) ends a run with no --duration, which
    says so;
  - the debugger killed (SIGKILL) in the middle of a run leaves the target
    running;
  - the target exiting in the middle of a run ends it with a summary that
    says so, and no Python error;
  - after each run the target is running (not left stopped), keeps
    allocating, its executable pages (every r-x mapping, read from
    /proc/PID/mem) are byte-identical to before, and every thread's debug
    registers DR0-DR3 and DR7 are zero (read with ptrace after the
    debugger has gone).
"""

import ctypes
import hashlib
import os
import signal
import subprocess
import sys
import time

import harness
from harness import Failure

PTRACE_PEEKUSER, PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 3, 17, 0x4206, 0x4207
U_DEBUGREG = 848   # offsetof(struct user, u_debugreg) on x86-64


def text_pages(pid):
    """{(start, end, path): sha256} of every r-x mapping's bytes, of a
    file: where a debugger's breakpoint would be (the allocators, in
    libruby or ruby). Not anonymous ones: under YJIT the JIT writes its
    code there and flips the pages between writable and executable."""
    out = {}
    with open("/proc/%d/maps" % pid) as maps, open("/proc/%d/mem" % pid, "rb", buffering=0) as mem:
        for line in maps:
            parts = line.split()
            if len(parts) < 2 or parts[1][:3] != "r-x":
                continue
            start, end = (int(x, 16) for x in parts[0].split("-"))
            if start >= 0xffffffffff600000 or len(parts) < 6 or not parts[5].startswith("/"):
                continue   # vsyscall (not readable this way), anonymous (JIT code)
            try:
                mem.seek(start)
                data = mem.read(end - start)
            except OSError:
                continue
            out[(start, end, parts[-1] if len(parts) > 5 else "")] = hashlib.sha256(data).hexdigest()
    if not out:
        raise Failure("no executable mapping of pid %d could be read" % pid)
    return out


def debug_registers(pid):
    """{tid: [DR0, DR1, DR2, DR3, DR7]} of every thread, read with ptrace
    (each thread seized, interrupted, read, let go)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    regs = {}
    for name in os.listdir("/proc/%d/task" % pid):
        tid = int(name)
        if libc.ptrace(PTRACE_SEIZE, tid, None, None) != 0:
            continue   # gone meanwhile
        try:
            libc.ptrace(PTRACE_INTERRUPT, tid, None, None)
            os.waitpid(tid, os.__dict__.get("WALL", 0x40000000))
            vals = []
            for i in (0, 1, 2, 3, 7):
                ctypes.set_errno(0)
                v = libc.ptrace(PTRACE_PEEKUSER, tid, ctypes.c_void_p(U_DEBUGREG + 8 * i), None)
                if ctypes.get_errno():
                    raise Failure("cannot read debug register %d of thread %d" % (i, tid))
                vals.append(v & 0xffffffffffffffff)
            regs[tid] = vals
        finally:
            libc.ptrace(PTRACE_DETACH, tid, None, None)
    if not regs:
        raise Failure("no thread of pid %d could be read" % pid)
    return regs


def own_counts(workdir, t):
    """(total allocated, GC count) the program logged, interpolated at wall time t."""
    rows = []
    with open(os.path.join(workdir, "alloc.log")) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append((float(p[0]), int(p[1]), int(p[2])))
    for (t0, a0, g0), (t1, a1, g1) in zip(rows, rows[1:]):
        if t0 <= t <= t1 and t1 > t0:
            k = (t - t0) / (t1 - t0)
            return a0 + k * (a1 - a0), g0 + k * (g1 - g0)
    raise Failure("the program's log does not cover %.3f (it covers %.3f..%.3f)"
                  % (t, rows[0][0] if rows else 0, rows[-1][0] if rows else 0))


def logged_total(workdir, fields):
    """The last GC.stat(:total_allocated_objects) the program logged in
    WORKDIR/alloc.log (second of each line's fields: alloc_rate.rb's 3,
    alloc_sites.rb's 4; a line half written has fewer)."""
    with open(os.path.join(workdir, "alloc.log")) as f:
        rows = [r for r in (line.split() for line in f) if len(r) == fields]
    return int(rows[-1][1]) if rows else 0


def keeps_allocating(target, fields, within=3.0):
    """True if the target, asked to compute, allocates: its logged count
    grows (it logs every 50 ms) within `within` seconds. Not a fixed 0.2 s:
    on a loaded machine the target has gone 0.5-0.7 s without a CPU, with
    no debugger near it (it.alloc_sites.3.3.8-static at load 9-12: its log
    had such gaps all through the run), which failed the check once."""
    with target.computing():
        total = logged_total(target.workdir, fields)
        end = time.monotonic() + within
        while time.monotonic() < end:
            time.sleep(0.05)
            if logged_total(target.workdir, fields) > total:
                return True
        return False


def check_clean(target, before, what):
    target.assert_left_running()
    if not keeps_allocating(target, 3):
        raise Failure("%s: the target stopped allocating after the run" % what)
    if text_pages(target.pid) != before:
        raise Failure("%s: the target's executable pages changed" % what)
    regs = debug_registers(target.pid)
    armed = {tid: r for tid, r in regs.items() if any(r)}
    if armed:
        raise Failure("%s: debug registers left set: %s" % (what, armed))
    harness.log("%s: target running, %d executable mappings unchanged, debug registers of %d threads clear"
                % (what, len(before), len(regs)))


def check_keys(r, who):
    """The summary's JSON has its keys, and names its count of allocations
    once, as what it is: "allocations", the GC's own exact counters (it once
    stood as "allocations_estimated" beside "allocations_exact": true)."""
    for key in ("allocations", "duration_s", "samples", "period", "sites", "started_at", "ended_at"):
        if key not in r:
            raise Failure("%s: the JSON has no %r: %s" % (who, key, r))
    others = sorted(k for k in r if k.startswith("allocations_"))
    if not isinstance(r["allocations"], int) or others:
        raise Failure("%s: the count of allocations is %r, with %s beside it: one exact count is wanted"
                      % (who, r["allocations"], others))


def failing(debugger, cmd):
    return cmd if debugger == "gdb" else "script lldb.debugger.HandleCommand(%r)" % cmd


STARTED = "rbpeek: counting allocations"


def run_interrupted(target, debugger, out_path, act=lambda proc: proc.send_signal(signal.SIGINT)):
    """`ruby allocs` with no --duration in the debugger, act(process) 1 s
    into its count (the target allocating from its start); the debugger's
    output."""
    return harness.run_and_act(harness.debugger_argv(debugger, ["ruby allocs"], target.pid), out_path, STARTED, act,
                               1.0, during=target.computing(settle=0))


def kill_debugger(proc):
    """SIGKILL to the debugger; its helpers (lldb's lldb-server, which
    outlives it, detached from the target by then) are ended by their pids."""
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True).stdout.split()
    proc.kill()
    proc.wait(timeout=60)
    for pid in children:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass


def test(ruby_spec, debugger, workdir):
    ruby = harness.ruby_binary(ruby_spec)
    if not os.path.exists(ruby):
        raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (ruby_spec, ruby))
    target = harness.Target(ruby, "alloc_rate.rb", workdir)
    try:
        before = text_pages(target.pid)
        out_json = os.path.join(workdir, "allocs.json")
        # The target allocates from the count's start (it naps while the
        # debugger starts) until the debugger has ended.
        output = harness.run_and_act(harness.debugger_argv(debugger, [
            "ruby allocs --duration 3 --json -o " + out_json,
            failing(debugger, "ruby allocs --every 1000"),
            failing(debugger, "ruby allocs --folded " + os.path.join(workdir, "x.folded")),
        ], target.pid), os.path.join(workdir, "count.out"), STARTED, None, 0, during=target.computing(settle=0))
        harness.assert_no_traceback(output)
        if not os.path.exists(out_json):
            raise Failure("no JSON written:\n" + output[-3000:])
        r = harness.read_json(out_json)
        check_keys(r, "ruby allocs")
        a0, g0 = own_counts(workdir, r["started_at"])
        a1, g1 = own_counts(workdir, r["ended_at"])
        own, got = a1 - a0, r["allocations"]
        if own <= 0 or abs(got - own) > 0.05 * own:
            raise Failure("rbpeek counted %d allocations, the program %d over the same %.2f s"
                          % (got, own, r["ended_at"] - r["started_at"]))
        own_rate = own / (r["ended_at"] - r["started_at"])
        if abs(r["rate_per_s"] - own_rate) > 0.05 * own_rate:
            raise Failure("rate %.0f/s against the program's %.0f/s" % (r["rate_per_s"], own_rate))
        if r["heaps"] and sum(h["count"] for h in r["heaps"]) != got:
            raise Failure("the heaps' counts do not add up to the total: %s" % r["heaps"])
        gcs = r["gc_count"]
        if gcs is None or abs(gcs - (g1 - g0)) > max(3, 0.1 * (g1 - g0)):
            raise Failure("rbpeek counted %s GCs, the program %.1f" % (gcs, g1 - g0))
        refusals = ("ruby allocs: --every N needs a hardware watchpoint on the slot the N-th next allocation "
                    "takes: hardware watchpoints ", "ruby allocs: --folded goes with --sites: ")
        for line in refusals:
            if line not in output:
                raise Failure("not refused with its reason: %r:\n%s" % (line, output[-3000:]))
        harness.log("counted %d allocations in %.2f s (%.2f M/s; the program: %d, %.2f M/s), %d GCs (the program: "
                    "%.1f)" % (got, r["duration_s"], r["rate_per_s"] / 1e6, own, own_rate / 1e6, gcs, g1 - g0))
        check_clean(target, before, "after a normal run")

        output = run_interrupted(target, debugger, os.path.join(workdir, "ctrlc.out"))
        harness.assert_no_traceback(output)
        if "rbpeek: allocs ended: interrupted (Ctrl-C)" not in output or "Allocated: " not in output:
            raise Failure("Ctrl-C did not end the run with a summary:\n" + output[-3000:])
        check_clean(target, before, "after Ctrl-C")

        run_interrupted(target, debugger, os.path.join(workdir, "kill.out"), kill_debugger)
        check_clean(target, before, "after the debugger was killed")

        output = run_interrupted(target, debugger, os.path.join(workdir, "exit.out"),
                                 lambda proc: open(os.path.join(workdir, "exit"), "w").close())
        harness.assert_no_traceback(output)
        if "rbpeek: allocs ended: the target exited" not in output or "Allocated: " not in output:
            raise Failure("the target's exit did not end the run with a summary:\n" + output[-3000:])
        harness.log("the target's exit ends the run with its summary")
    finally:
        target.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[2] not in ("gdb", "lldb"):
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2], wd))
