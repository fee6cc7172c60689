"""Thread states in samples (issues 26, 35, 37) against the kernel's view
and the program's own CPU clocks.

    test_thread_states.py RUBY [COMBO...]     it.thread_states.<ruby>; e.g. 3.4.5 cli.live

programs/gvl_contention.rb: 4 CPU-bound threads contend for the GVL (on
any machine each holds it about a sixth of the time and waits for it the
rest); a "napper" sleeps 1 ms and a "reader" reads a byte of /dev/zero in a
loop, each waiting for the GVL after every call; 4 threads are blocked in
sleep, Queue#pop, Mutex#lock and a pipe's read. While `sample --json` (the
command line, and `ruby sample` in gdb and lldb, live; "RUBY+yjit" runs
it all under YJIT, harness.ruby_binary) samples it, this script reads
the kernel's view of every one of the target's threads, as often as it can
(/proc/PID/task/TID/stat and syscall, each thread found by the name Ruby
gave its native thread): a CPU-bound thread is in `futex` exactly while it
sleeps waiting for the GVL (it makes no other blocking call), and runs or
is runnable while it holds it. So over the sampled window:

- each CPU-bound thread's `gvl_wait` share is its share of the time in
  futex, and `running` (with `gc`: it holds the GVL) the rest; both within
  the bound below, and running + gc + gvl_wait within it of 1;
- its own CPU clock (logged by the program) is no more than its running
  share: a thread on a CPU holds the GVL (on a quiet machine the two are
  equal; on a loaded one the kernel runs others while it holds it);
- the 4 CPU-bound threads hold one GVL: their running shares add up to at
  most 1;
- the napper and the reader are `blocked` no more than they sleep by their
  own count (check_waiters): Ruby calls them "sleep" until they hold the
  GVL again, and the kernel sees them in futex either way;
- each blocked thread is `blocked` in every sample;
- each sample of a thread in gvl_wait names itself: the folded stacks of a
  CPU-bound thread, the napper and the reader end in `[GVL wait]` in
  exactly their gvl_wait samples, and the frame is in the SVG, the
  speedscope file and the pprof profile.

The bound: the sampler's share is a proportion of its samples of the
thread (n_s), taken at random moments (exponential gaps) of the timeline
the poller reads every few milliseconds: Z standard errors of a binomial
share, Z * sqrt(p(1-p) / n_s), p the kernel's share (about 7 points at 6 s
and 100 Hz), Z for the suite's comparisons (COMPARISONS: a false alarm in
1% of suite runs, harness.family_z). The poller's share is no draw: it
places each of the thread's state changes within a poll gap, so it is
known to within Z * gap * sqrt(changes / 12) / window (KernelView.resolution,
a few thousandths here), plus the share of the window it did not see
(KernelView.blind). On a loaded machine both the sampler and this poller
wait for a CPU now and then: each poll counts for the time to the next
(KernelView.waiting_share), the sampler's samples one each. Measured with
the sampler's standard errors, ten runs beside two busy loops gave a
chi-square of 28.9 for their 40 shares (30 degrees of freedom): binomial.
The old bound (3 standard errors of both shares as draws, 3.4 of the
sampler's) failed a fresh clone at 3.5 (3.3.8-static, cpu-4 31.1% for
24.9%): a comparison in 1,600 by chance, a run in 15 of the suite's.

By default the blocked threads are absent from the profile, with --idle
present.
"""

import bisect
import gzip
import math
import os
import re
import sys
import threading
import time

import harness
from harness import Failure
import matrix

DURATION = 6.0
RATE = 100
# Per Ruby it runs on (7: the matrix, Debian's 3.1 and 3.4.5+yjit) and
# front end (3): the 4 CPU-bound threads' shares (running and GVL wait are
# one comparison: they add up to 1) and the napper and reader's one-sided
# checks (counted as one).
COMPARISONS = 7 * 3 * 5
Z = harness.family_z(COMPARISONS)
SYS_FUTEX = "202"   # x86-64
GVL_WAIT = "[GVL wait]"
NAP_S = 0.001    # the napper's naps (programs/gvl_contention.rb)
WAKE_S = 0.005   # the most a nap's end may wait for a CPU on a loaded machine
GAP_S = 0.02     # a gap between the poller's rounds it sees through (a fifth of a time slice)


class KernelView:
    """Polls the kernel's state of the target's named threads from start()
    to stop(), all of them in each round: per round its time, whether each
    thread was asleep in futex, and how many were stopped (t or T)."""

    def __init__(self, pid, names):
        self.pid, self.names = pid, set(names)
        self.tids = {}
        for tid in os.listdir("/proc/%d/task" % pid):
            try:
                with open("/proc/%d/task/%s/comm" % (pid, tid)) as f:
                    comm = f.read().strip()
            except OSError:
                continue
            if comm in self.names:
                self.tids[comm] = int(tid)
        missing = self.names - set(self.tids)
        if missing:
            raise Failure("the kernel lists no thread named %s in pid %d" % (sorted(missing), pid))
        self.rounds = []   # (time, {name: (asleep in futex, ns on a CPU)}, threads stopped)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _state(self, tid):
        base = "/proc/%d/task/%d/" % (self.pid, tid)
        with open(base + "stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
        with open(base + "syscall") as f:
            call = f.read().split()[0]
        with open(base + "schedstat") as f:
            oncpu = int(f.read().split()[0])
        return state, call, oncpu

    def _run(self):
        while not self._stop.is_set():
            t = time.time()
            futex, stopped = {}, 0
            for name, tid in self.tids.items():
                try:
                    state, call, oncpu = self._state(tid)
                except (OSError, IndexError, ValueError):
                    continue
                # asleep in futex: 'S' (or stopped by the sampler, 't', while
                # in it: the syscall file still names it); with its time on
                # a CPU so far (ns)
                futex[name] = (call == SYS_FUTEX and state != "R", oncpu)
                stopped += state in "tT"
            self.rounds.append((t, futex, stopped))
            time.sleep(0.002)

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()
        self._thread.join()

    def blind(self, rounds):
        """The share of the rounds' time this poller did not see: the part
        of each gap between rounds past GAP_S (it waited for a CPU, on a
        loaded machine for up to a third of a second). A state can change
        unseen there, a GVL time slice lasting 100 ms: the kernel's share
        is known to within that, whatever the number of rounds."""
        gaps = [b[0] - a[0] for a, b in zip(rounds, rounds[1:])]
        total = sum(gaps)
        return sum(max(0.0, g - GAP_S) for g in gaps) / total if total else 0.0

    def resolution(self, name, rounds):
        """Z standard errors of the thread's share in the rounds' time from
        where its changes between asleep in futex and not fell within their
        poll gaps (each uniform in it: gap / sqrt(12))."""
        flags = [f.get(name, (None, None))[0] for _, f, _ in rounds]
        changes = sum(1 for a, b in zip(flags, flags[1:]) if a is not None and b is not None and a != b)
        total = rounds[-1][0] - rounds[0][0] if len(rounds) > 1 else 0.0
        if not total:
            return 0.0
        gap = total / (len(rounds) - 1)
        return Z * gap * math.sqrt(changes / 12.0) / total

    def sampled(self, t0, t1):
        """The rounds of the command's window [t0, t1). A round that found
        every thread stopped counts for nothing (waiting_share): in a debugger
        the target is stopped before and after the hand-over to the tracer,
        when no sample is taken (its GVL holder seen on a CPU all along)."""
        return [r for r in self.rounds if t0 <= r[0] < t1]

    def waiting_share(self, name, rounds, ran, handed):
        """The share of the rounds' time the thread waited for the GVL, each
        round standing for the time to the next (on a loaded machine this
        poller waits for a CPU too, and a round taken late must not count
        for less time than it stood for), but a round that found every
        thread stopped counts for nothing (the whole process held, at a
        sample when the GVL changed hands, or by the debugger); and the
        number of rounds that count.

        It waits while asleep in futex. Around that the kernel's "not in
        futex" (runnable) counted two holders at once on a loaded machine
        (their running shares summed to 1.09 on 2.7.4 at a load of 9), the
        one on its way out and the one on its way in, each runnable for
        milliseconds without a CPU; so it also waits:
        - after it gave the GVL up: it holds it through its last Ruby code
          (ran: the times it read its clock, every 0.5 ms it runs Ruby code)
          and any wait for a CPU after, and gives it up at its next time on
          a CPU (its time slice ended meanwhile; schedstat's time on a CPU
          grows), on its way to the futex;
        - before 3.2 (handed false), from its wake-up to its next time on a
          CPU: the GVL's release wakes a waiter, which takes the GVL
          (gvl.owner) once it gets a CPU (its first Ruby code may come much
          later on a machine that gives it 2% of a CPU). From 3.2 the
          releasing thread names the next holder (sched.running) before it
          wakes it: it holds it."""
        n = len(self.tids)
        polls = [(t, f.get(name, (None, None)), stopped < n) for t, f, stopped in rounds]
        gave_up = [False] * len(polls)
        # Backwards from each sleep: the rounds since its last Ruby code in
        # which it had run again (its time on a CPU grew) are on its way out.
        i = len(polls) - 1
        while i >= 0:
            if not polls[i][1][0]:
                i -= 1
                continue
            j = i - 1
            while j > 0 and polls[j][1][0] is False and not runs_between(ran, polls[j][0], polls[i][0]):
                j -= 1
            # rounds j+1 .. i-1: no Ruby code between them and the sleep;
            # the way out begins after the first of them the CPU time grew
            # (from round j itself when that is a sleep: woken, it ran no
            # Ruby code before it slept again, as 2.7-3.1's timer waiter)
            grew = None
            for k in range(j + 1 if polls[j][1][0] else j + 2, i):
                a, b = polls[k - 1][1][1], polls[k][1][1]
                if a is not None and b is not None and b > a:
                    grew = k - 1
                    break
            for k in range(grew if grew is not None else i, i):
                gave_up[k] = True
            i = j
        total = waited = 0.0
        counted = 0
        slept = None   # its time on a CPU when last seen asleep in futex
        for i, ((ta, (fa, cpu), live), (tb, _, _)) in enumerate(zip(polls, polls[1:])):
            if fa:
                slept = cpu
            # woken, and not yet on a CPU since (before 3.2 it takes the GVL
            # there, in microseconds, or finds it held and sleeps again)
            woken = not handed and not fa and slept is not None and cpu is not None and cpu == slept
            wait = bool(fa) or gave_up[i] or woken
            if not live or fa is None:
                continue
            counted += 1
            total += tb - ta
            waited += (tb - ta) if wait else 0.0
        return (waited / total if total else None), counted

LOGGED = {"5": "napper", "6": "reader"}   # the program's numbers of the threads other than cpu-N


def read_log(target):
    """The program's log: per CPU-bound thread, its CPU clock readings
    [(wall, cpu)], under "napper" its count of naps [(wall, count)], and
    per thread its idle naps [(from, to)]."""
    readings, naps = {}, {}
    with open(os.path.join(target.workdir, "cpu.log")) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "cpu":
                readings.setdefault("cpu-" + parts[1], []).append((float(parts[2]), float(parts[3])))
            elif len(parts) == 3 and parts[0] == "naps":
                readings.setdefault("napper", []).append((float(parts[1]), int(parts[2])))
            elif len(parts) == 4 and parts[0] == "nap":
                name = LOGGED.get(parts[1], "cpu-" + parts[1])
                naps.setdefault(name, []).append((float(parts[2]), float(parts[3])))
    return readings, naps


def await_log(target, names, t, timeout=20.0):
    """Until the program's log has a reading past t of each of names (the
    main thread writes it when it gets the GVL, which under this contention
    can take a second or more)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        readings, _ = read_log(target)
        if all(readings.get(n) and readings[n][-1][0] >= t for n in names):
            return
        time.sleep(0.1)
    raise Failure("the program's log has no reading of %s after the run's end (%s)" % (names, target.workdir))


def cpu_share(readings, t0, t1):
    """The CPU time used over [t0, t1] as a share of it, from the last
    reading taken before each end; None if the log does not span it."""
    def at(t):
        before = [c for w, c in readings if w <= t]
        return before[-1] if before else None
    a, b = at(t0), at(t1)
    if a is None or b is None or not any(w >= t1 for w, _ in readings):
        return None
    return (b - a) / (t1 - t0)


def bound(p, n_s):
    """Z standard errors of a share p of n_s samples."""
    p = min(max(p, 0.05), 0.95)
    return Z * math.sqrt(p * (1 - p) / max(n_s, 1))


def folded_by_thread(path):
    """Per thread root frame (--per-thread) of a folded file: (samples,
    samples whose leaf is [GVL wait])."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            m = re.match(r'Thread "([^"]*)"', stack)
            key = m.group(1) if m else stack.split(";")[0]
            total, waits = out.get(key, (0, 0))
            out[key] = (total + int(n), waits + (int(n) if stack.endswith(";" + GVL_WAIT) else 0))
    return out


def check_frames(name, t, per_thread, problems):
    """Its folded stacks end in [GVL wait] in exactly its gvl_wait samples."""
    total, waits = per_thread.get(name, (0, 0))
    n_s = t["samples"]
    n_wait = int(round(t["states"]["gvl_wait"] * n_s))
    # the summary tallies every sample; a stack torn while read is left out
    # of the stacks (counted): those may be any state
    dropped = n_s - total
    if dropped < 0 or not n_wait - dropped <= waits <= n_wait:
        problems.append("%s: %d of its %d folded samples end in %s; the summary counts %d samples, %d in GVL wait"
                        % (name, waits, total, GVL_WAIT, n_s, n_wait))


def runs_between(ran, a, b):
    """Whether the thread read its clock (ran Ruby code) in [a, b)."""
    return bisect.bisect_left(ran, a) < bisect.bisect_left(ran, b)


def version_of(doc):
    return tuple(int(x) for x in doc["processes"][0]["ruby_version"].split(".")[:2])


def count_at(readings, t):
    before = [n for w, n in readings if w <= t]
    return before[-1] if before else 0


def check_waiters(threads, exp, readings, t0, t1, per_thread, problems, lines):
    """The napper and the reader: between calls that release the GVL for
    a moment (a 1 ms sleep; a read of /dev/zero, which returns at once) each
    waits for the GVL, Ruby's status still "sleep" until it holds it. So
    `blocked` is at most the napper's time asleep (its naps begun in the
    window, each 1 ms and up to WAKE_S more until the kernel runs it again
    on a loaded machine: while that lasts it is not yet queued for the GVL)
    and the reader's read (nothing), within three standard errors of n
    samples. Reading a thread back from a sleep as blocked made it
    blocked 100% of the time for its 0.1% asleep (issue 35)."""
    for name in exp.get("waiters", []):
        t = threads.get(name)
        if t is None or t["samples"] < 50:
            problems.append("%s: %s samples" % (name, t and t["samples"]))
            continue
        st, n_s = t["states"], t["samples"]
        naps = count_at(readings.get("napper", []), t1) - count_at(readings.get("napper", []), t0) + 1 \
            if name == "napper" else 0
        asleep = min(1.0, naps * (NAP_S + WAKE_S) / (t1 - t0))
        b = bound(asleep, n_s)
        lines.append("%s running %.3f gc %.3f GVL wait %.3f blocked %.3f (%d samples); asleep at most %.3f "
                     "(%d naps); bound %.3f" % (name, st["running"], st["gc"], st["gvl_wait"], st["blocked"], n_s,
                                                asleep, naps, b))
        if st["blocked"] > asleep + b:
            problems.append("%s: blocked %.3f, but asleep at most %.3f of the time (bound %.3f): the rest it waits "
                            "for the GVL" % (name, st["blocked"], asleep, b))
        check_frames(name, t, per_thread, problems)


def check_doc(doc, exp, kernel, log, folded, where):
    t0 = doc["started"]
    t1 = t0 + doc["duration_s"]
    threads = {t["name"]: t for t in doc["threads"]}
    readings, naps = log
    per_thread = folded_by_thread(folded)
    problems, lines, held_sum, bounds = [], [], 0.0, []
    rounds = kernel.sampled(t0, t1)
    blind = kernel.blind(rounds)
    if rounds:
        n = len(kernel.tids)
        live = [r for r in rounds if r[2] < n]
        gaps = [b[0] - a[0] for a, b in zip(rounds, rounds[1:])]
        lines.append("kernel read %d times in %.3f-%.3f s of the command's %.3f s, %d with every thread stopped; "
                     "longest gap %.0f ms; unseen %.3f of the time (added to each bound)"
                     % (len(rounds), rounds[0][0] - t0, rounds[-1][0] - t0, t1 - t0, len(rounds) - len(live),
                        1000 * max(gaps or [0]), blind))
    for name in exp["cpu"]:
        t = threads.get(name)
        if t is None or t["samples"] < 50:
            problems.append("%s: %s samples" % (name, t and t["samples"]))
            continue
        napped = [(a, b) for a, b in naps.get(name, []) if a < t1 and b > t0]
        if napped:
            problems.append("%s napped in the sampled window (%s): the program did not compute" % (name, napped))
            continue
        clock = [w for w, _ in readings.get(name, [])]
        waited, n_k = kernel.waiting_share(name, rounds, clock, version_of(doc) >= (3, 2))
        if waited is None or n_k < 50:
            problems.append("%s: the kernel was read %d times in the window" % (name, n_k))
            continue
        n_s = t["samples"]
        st = t["states"]
        held = st["running"] + st["gc"]
        b = bound(waited, n_s) + kernel.resolution(name, rounds) + blind
        bounds.append(b)
        held_sum += held
        cpu = cpu_share(readings.get(name, []), t0, t1)
        lines.append("%s running %.3f gc %.3f GVL wait %.3f blocked %.3f (%d samples); kernel: waiting %.3f "
                     "(%d polls); own CPU clock %s; bound %.3f"
                     % (name, st["running"], st["gc"], st["gvl_wait"], st["blocked"], n_s, waited, n_k,
                        "%.3f" % cpu if cpu is not None else "?", b))
        if abs(st["gvl_wait"] - waited) > b:
            problems.append("%s: GVL wait %.3f, by the kernel it waited %.3f of the time (bound %.3f)"
                            % (name, st["gvl_wait"], waited, b))
        if abs(held - (1 - waited)) > b:
            problems.append("%s: running %.3f (+ GC %.3f), by the kernel it held the GVL %.3f of the time "
                            "(bound %.3f)" % (name, st["running"], st["gc"], 1 - waited, b))
        if abs(held + st["gvl_wait"] - 1) > b:
            problems.append("%s: running + GC + GVL wait = %.3f, not 1 (blocked %.3f; bound %.3f)"
                            % (name, held + st["gvl_wait"], st["blocked"], b))
        if cpu is None:
            problems.append("%s: the program's log does not span the sampled window" % name)
        elif cpu > held + b:
            problems.append("%s: on a CPU %.3f of the time by its own clock, but running only %.3f (bound %.3f)"
                            % (name, cpu, held, b))
        check_frames(name, t, per_thread, problems)
    check_waiters(threads, exp, readings, t0, t1, per_thread, problems, lines)
    if bounds and held_sum > 1 + sum(bounds):
        problems.append("the CPU-bound threads hold one GVL, but their running shares add up to %.3f" % held_sum)
    for name in exp["blocked"]:
        t = threads.get(name)
        if t is None or t["states"]["blocked"] != 1.0:
            problems.append("%s (blocked): %s" % (name, t and t["states"]))
    if problems:
        raise Failure("%s:\n  %s\n  measured:\n  %s" % (where, "\n  ".join(problems), "\n  ".join(lines)))
    harness.log("%s (load %s):\n  %s" % (where, " ".join(open("/proc/loadavg").read().split()[:3]), "\n  ".join(lines)))


def check_presence(folded, exp, idle, where):
    seen = folded_by_thread(folded)
    missing = [n for n in exp["cpu"] if not seen.get(n)]
    if missing:
        raise Failure("%s: CPU-bound threads %s absent from the profile" % (where, missing))
    present = [n for n in exp["blocked"] if seen.get(n)]
    if idle and len(present) != len(exp["blocked"]):
        raise Failure("%s: with --idle the blocked threads must be there, only %s are" % (where, present))
    if not idle and present:
        raise Failure("%s: blocked threads %s in the default profile (idle threads are left out)" % (where, present))


def check_formats(c):
    """[GVL wait] in each format that draws stacks."""
    for name in ("states.svg", "states.speedscope.json"):
        with open(c.path(name), encoding="utf-8") as f:
            if GVL_WAIT not in f.read():
                raise Failure("%s: no %s frame in %s" % (c.name, GVL_WAIT, name))
    with gzip.open(c.path("states.pb.gz")) as f:
        if GVL_WAIT.encode() not in f.read():
            raise Failure("%s: no %s frame in the pprof profile's strings" % (c.name, GVL_WAIT))


STARTED = "rbpeek: sampling pid"


def sample(c, args, out_path, kernel=None, logged=()):
    """`sample ARGS` on the live target in c's front end (the command line
    or the debugger), the target computing from 0.5 s before the run to its
    end, the kernel read meanwhile; the output."""
    if c.debugger == "cli":
        argv = [sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(c.target.pid)] + args
    else:
        argv = harness.debugger_argv(c.debugger, [" ".join(["ruby sample"] + args)], c.target.pid)
    busy = time.time()
    with c.target.computing(settle=0.5):
        if logged:
            # every thread logged is back from its naps (under this
            # contention one back from its last 10 ms nap waits for the GVL
            # up to a second before it computes: a nap in the window)
            await_log(c.target, logged, busy)
        if kernel:
            kernel.start()
        try:
            out = harness.run_and_act(argv, out_path, STARTED, None, 0, timeout=300)
        finally:
            if kernel:
                kernel.stop()
        if logged:   # the log's last lines, past the window's end
            await_log(c.target, logged, time.time())
    harness.assert_no_traceback(out)
    return out


def check(c):
    time.sleep(0.5)   # the previous combination's run must be in the past of the window
    exp = c.target.expected()
    summary, folded = c.path("states.json"), c.path("default.folded")
    kernel = KernelView(c.target.pid, exp["cpu"] + exp["blocked"])
    sample(c, ["--duration", "%g" % DURATION, "--rate", str(RATE), "--per-thread", "--json", "-o", summary,
               "--folded", folded, "--svg", c.path("states.svg"), "--speedscope", c.path("states.speedscope.json"),
               "--pprof", c.path("states.pb.gz")], c.path("sample.out"), kernel, exp["cpu"] + ["napper"])
    doc = harness.read_json(summary)
    check_doc(doc, exp, kernel, read_log(c.target), folded, "%s sample --json" % c.name)
    check_presence(folded, exp, False, c.name)
    check_formats(c)
    if c.debugger == "cli":
        idle = c.path("idle.folded")
        sample(c, ["--duration", "1", "--per-thread", "--idle", "--folded", idle], c.path("idle.out"))
        check_presence(idle, exp, True, "cli sample --idle")


def test(spec, only, workdir):
    m = matrix.Matrix(spec, workdir, only)
    m.run("gvl_contention.rb", check, combos=[("cli", "live"), ("gdb", "live"), ("lldb", "live")])
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
