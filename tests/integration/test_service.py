"""The whole service (issue 26): a pre-forking program, started once per
Ruby (matrix.py), checked by gdb, lldb and the rbpeek command line, live
and on a gcore'd core of a worker, each combination reported on its own.

    test_service.py RUBY [COMBO...]     it.service.<ruby>; e.g. test_service.py 3.4.5 cli.live

programs/prefork.rb: a master forks two workers at once and a third when
told to; each worker computes in a method of its own on its main thread
during the checks that sample it (COMPUTING; Prefork.computing) and naps
otherwise, beside a named thread parked in sleep and one with a long
name; each process records its own view. The core combinations read a gcore of
worker one (Prefork.gcore).

What each combination checks (every check of a combination runs, and the
combination fails naming each that did):

- thread ids: every worker's `bt -a --json` reports its main thread's
  native_tid as the worker's pid, whatever Ruby records (3.1 keeps the
  master's: then ruby_native_tid says so), every thread numbered in the
  text; every thread's TID is one of the worker's tasks. The command
  line reads every worker, a debugger worker two (attaching is slow).
- threads columns (live): `ruby threads` keeps its columns with a
  110-character thread name, shortened in its column, whole in JSON.
- truncated core (cli core): a core cut in half is said to be truncated
  in one line; one missing its last segment warns and reads every frame.
- second sampler (cli live): refused in one line naming the first,
  before anything is written, also when named beside a process it could
  sample (which is let go untraced).
- subprocesses in the debugger (gdb and lldb live, attached to the
  master): `ruby sample --subprocesses --native`: the master and both
  workers, each worker's samples in its own method and with its machine
  frames; the debugger has its process back after.
- subprocesses (cli live, last: it forks the third worker and kills
  worker two): see check_subprocesses; then `--pid A --pid B --native`
  (machine frames in both workers' stacks).
"""

import contextlib
import json
import os
import re
import signal
import sys
import time
import traceback

import harness
from harness import Failure
import matrix
from folded_procs import folded_by_pid, idle_by_pid, samples_in
from prefork import Prefork, after_wrote, cli, debugger, tracer_of


# -- thread ids -------------------------------------------------------------

def check_tid_doc(doc, worker, tasks, where):
    """A worker's bt -a --json: its main thread is the worker's pid."""
    mains = [t for t in doc["threads"] if t["main"]]
    if len(mains) != 1:
        raise Failure("%s: %d main threads" % (where, len(mains)))
    main = mains[0]
    if main["native_tid"] != worker["pid"]:
        raise Failure("%s: the main thread's native_tid is %s, the worker's pid is %d (Ruby records %s)"
                      % (where, main["native_tid"], worker["pid"], worker["ruby_main_native_tid"]))
    ruby_says = worker["ruby_main_native_tid"]
    if ruby_says is not None and ruby_says != worker["pid"]:
        if main.get("ruby_native_tid") != ruby_says:
            raise Failure("%s: Ruby records %s for the main thread, ruby_native_tid says %s"
                          % (where, ruby_says, main.get("ruby_native_tid")))
    elif "ruby_native_tid" in main:
        raise Failure("%s: ruby_native_tid %s given where Ruby's record is the kernel's" % (where, main["ruby_native_tid"]))
    for t in doc["threads"]:
        if t["native_tid"] not in tasks:
            raise Failure("%s: thread %r has native_tid %s, not one of the worker's tasks %s"
                          % (where, t["name"], t["native_tid"], tasks))
    names = sorted(t["name"] or "" for t in doc["threads"])
    if names != sorted(t["name"] or "" for t in worker["threads"]):
        raise Failure("%s: threads %s, the worker has %s" % (where, names, worker["threads"]))


def check_tid_text(text, worker, where):
    """bt -a's text: every thread numbered, the main thread with its pid."""
    titles = [l for l in text.splitlines() if l.startswith("Thread")]
    if len(titles) != len(worker["threads"]):
        raise Failure("%s: %d thread titles for %d threads:\n%s" % (where, len(titles), len(worker["threads"]), text))
    for title in titles:
        if not re.match(r"Thread \d+ ", title):
            raise Failure("%s: a thread without its number: %r" % (where, title))
    main = [l for l in titles if "(main," in l]
    if not main or ("tid %d" % worker["pid"]) not in main[0]:
        raise Failure("%s: the main thread's title does not name tid %d: %r" % (where, worker["pid"], main))


def check_thread_ids(c):
    pf, ruby = c.target, c.ruby
    if c.debugger == "cli" and c.live:
        for role, w in sorted(pf.workers.items()):
            pid = w["pid"]
            tasks = pf.tasks(pid)
            doc = json.loads(cli(["bt", "-a", "--json", "--pid", str(pid)])[0])
            check_tid_doc(doc, w, tasks, "rbpeek bt --pid (worker %s)" % role)
            check_tid_text(cli(["bt", "-a", "--pid", str(pid)])[0], w, "rbpeek bt -a --pid (worker %s)" % role)
    elif c.debugger == "cli":
        w = pf.workers["one"]
        doc = json.loads(cli(["bt", "-a", "--json", "--core", c.core, "--exe", ruby])[0])
        check_tid_doc(doc, w, pf.tasks(w["pid"]), "rbpeek bt --core (worker one)")
        check_tid_text(cli(["bt", "-a", "--core", c.core, "--exe", ruby])[0], w, "rbpeek bt -a --core (worker one)")
    else:
        role = "two" if c.live else "one"
        w = pf.workers[role]
        path = c.path("bt.json")
        cmds = ["ruby bt -a --json -o " + path, "ruby bt -a"]
        if c.live:
            out = debugger(c.debugger, cmds, pid=w["pid"])
        else:
            out = debugger(c.debugger, cmds, exe=ruby, core=c.core)
        where = "%s %s (worker %s)" % (c.debugger, "attached" if c.live else "on the core", role)
        check_tid_doc(harness.read_json(path), w, pf.tasks(w["pid"]), where)
        check_tid_text(after_wrote(out, path), w, where)
    harness.log("thread ids: each worker's main thread is its pid (Ruby records %s for worker one)"
                % pf.workers["one"]["ruby_main_native_tid"])


# -- a truncated core --------------------------------------------------------

ABORT_PROGRAM = "Thread.new { sleep }; def deep(n) = n == 0 ? Process.kill(:ABRT, $$) : deep(n - 1); deep(5)"
ABORT_PROGRAM_27 = "Thread.new { sleep }; def deep(n); n == 0 ? Process.kill(:ABRT, $$) : deep(n - 1); end; deep(5)"


def kernel_core(ruby, workdir):
    """A core the kernel wrote (notes first, as the kernel lays them out) of
    a Ruby that aborted itself 6 frames deep; None where the kernel writes
    none here (core_pattern sends them elsewhere)."""
    import resource
    import subprocess
    d = os.path.join(workdir, "kcore")
    os.makedirs(d, exist_ok=True)
    with open("/proc/sys/kernel/core_pattern") as f:
        pattern = f.read().strip()
    if pattern.startswith("|") or "/" in pattern:
        return None
    prog = ABORT_PROGRAM_27 if "2.7" in ruby else ABORT_PROGRAM
    subprocess.run([ruby, "-e", prog], cwd=d, capture_output=True, timeout=120,
                   preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY,) * 2))
    cores = [os.path.join(d, f) for f in os.listdir(d) if f.startswith("core")]
    return cores[0] if cores else None


def load_segments(path):
    """[(offset, filesz)] of the PT_LOAD segments with contents, by offset."""
    import struct
    with open(path, "rb") as f:
        eh = f.read(64)
        phoff, = struct.unpack_from("<Q", eh, 32)
        n, = struct.unpack_from("<H", eh, 56)
        segs = []
        for i in range(n):
            f.seek(phoff + 56 * i)
            t, _fl, off, _va, _pa, fsz = struct.unpack("<IIQQQQ", f.read(40))
            if t == 1 and fsz:
                segs.append((off, fsz))
    return sorted(segs)


def truncated_copy(core, size, name):
    import shutil
    path = os.path.join(os.path.dirname(core), name)
    with open(core, "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
        dst.truncate(size)
    return path


def check_truncation_line(text, where):
    for part in ("the core file is truncated:", "memory segments are cut or missing (", "still readable:"):
        if part not in text:
            raise Failure("%s: the message does not say %r:\n%s" % (where, part, text))


def check_truncated_core(c):
    pf, ruby = c.target, c.ruby
    core = kernel_core(ruby, pf.workdir)
    if core is None:
        # A gcore'd core (notes last) of a worker: any cut takes the notes.
        core = c.core
    whole = json.loads(cli(["bt", "-a", "--json", "--core", core, "--exe", ruby])[0])
    segs = load_segments(core)
    size = os.path.getsize(core)
    # Its notes and first segment alone: too little to find Ruby: one line,
    # saying why. (Not half of it: under YJIT half the core is its code
    # region's reserve and the stacks, and Ruby is found in the rest.)
    half = truncated_copy(core, segs[0][0] + segs[0][1], "head.core")
    _, err = cli(["bt", "-a", "--core", half, "--exe", ruby], want_rc=1)
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1 or not lines[0].startswith("rbpeek: the core file is truncated:"):
        raise Failure("rbpeek bt on the head of a core: not one line saying it is truncated:\n%s" % err)
    check_truncation_line(lines[0], "rbpeek bt on the head of a core")
    out = debugger("lldb", ["ruby bt -a"], exe=ruby, core=half)
    errors = [l for l in out.splitlines() if "rbpeek:" in l]
    if len(errors) != 1:
        raise Failure("lldb ruby bt on the head of a core: not one rbpeek line:\n%s" % out[-3000:])
    check_truncation_line(errors[0], "lldb ruby bt on the head of a core")
    # Only the last segment cut (the kernel's core: the main native stack,
    # vsyscall): Ruby's own stacks are elsewhere, so every frame is there,
    # and the warning says what is missing.
    last_off, last_len = segs[-1]
    if last_off + last_len <= size:
        cut_at = max(o + l for o, l in segs[:-1]) if len(segs) > 1 else last_off
        part = truncated_copy(core, cut_at, "part.core")
        out, err = cli(["bt", "-a", "--json", "--core", part, "--exe", ruby])
        check_truncation_line(err, "rbpeek bt on a core missing its last segment")
        got = json.loads(out)
        if [t["frames"] for t in got["threads"]] != [t["frames"] for t in whole["threads"]]:
            raise Failure("rbpeek bt on a core missing its last segment: frames differ from the whole core's")
    harness.log("truncated core: said, with the segments missing and what can be read")


# -- a second sampler ---------------------------------------------------------

def check_second_sampler(c):
    """A second sampler on a process another one traces: one line, naming
    the tracer, before anything is written; the first goes on."""
    pf = c.target
    import subprocess
    w = pf.workers["two"]["pid"]
    first_dir = os.path.join(pf.workdir, "first")
    second_dir = os.path.join(pf.workdir, "second")
    os.makedirs(first_dir, exist_ok=True)
    os.makedirs(second_dir, exist_ok=True)
    first = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(w), "--duration", "60",
                              "--folded", os.path.join(first_dir, "p.folded")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=first_dir,
                             # SIGINT as a terminal's Ctrl-C finds it, whatever this test inherited
                             preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + 60
        while tracer_of(w) != first.pid:
            if first.poll() is not None or time.time() > deadline:
                raise Failure("the first sampler never traced worker two: %s" % (first.communicate()[1][-2000:]))
            time.sleep(0.02)
        rc, out, err = harness.run_cli(["sample", "--pid", str(w), "--duration", "1", "--svg",
                                        os.path.join(second_dir, "p.svg")])
        lines = [l for l in (out + err).splitlines() if l.strip()]
        want = "rbpeek: process %d is already traced by pid %d (" % (w, first.pid)
        if rc != 1 or len(lines) != 1 or not lines[0].startswith(want) or "rbpeek sample" not in lines[0]:
            raise Failure("a second sampler: exit %d, wanted 1 and one line starting %r naming the first:\n%s"
                          % (rc, want, out + err))
        if os.listdir(second_dir):
            raise Failure("a second sampler wrote %s before it was refused" % os.listdir(second_dir))
        # Named beside a process it could sample: the same one line, before
        # any progress line, and the other process let go untraced.
        one = pf.workers["one"]["pid"]
        rc, out, err = harness.run_cli(["sample", "--pid", str(one), "--pid", str(w), "--duration", "1", "--svg",
                                        os.path.join(second_dir, "p.svg")])
        lines = [l for l in (out + err).splitlines() if l.strip()]
        want = "rbpeek: pid %d: process %d is already traced by pid %d (" % (w, w, first.pid)
        if rc != 1 or len(lines) != 1 or not lines[0].startswith(want):
            raise Failure("a second sampler of two processes: exit %d, wanted 1 and one line starting %r:\n%s"
                          % (rc, want, out + err))
        if os.listdir(second_dir) or tracer_of(one) != 0:
            raise Failure("a second sampler of two processes wrote %s or left worker one traced (by %s)"
                          % (os.listdir(second_dir), tracer_of(one)))
        # It went on through the refusal: Ctrl-C now ends it with its summary.
        first.send_signal(signal.SIGINT)
        out, err = first.communicate(timeout=120)
        if first.returncode != 0 or "Samples:" not in out:
            raise Failure("the first sampler did not end well (exit %d):\n%s" % (first.returncode, (out + err)[-2000:]))
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    pf.assert_running()
    harness.log("a second sampler: refused in one line naming the first (pid %d), alone or beside another"
                % first.pid)


# -- ruby threads' columns ----------------------------------------------------

def check_columns(text, worker, where):
    """`ruby threads`' text: one line per thread, its top frame (the last
    column) starting at the same place on each, the long name shortened."""
    lines = [l for l in text.splitlines() if re.match(r"#\d+ ", l)]
    if len(lines) != len(worker["threads"]):
        raise Failure("%s: %d thread lines for %d threads:\n%s" % (where, len(lines), len(worker["threads"]), text))
    # A running thread may be inside a builtin written in Ruby (3.x's Time.now
    # is `<internal:timev>`), which Ruby's own backtrace shows on top too.
    def frame_start(line):
        at = [line.find(m) for m in (harness.PROGRAMS, "<internal:") if m in line]
        return min(at) if at else -1
    if any(frame_start(l) < 0 for l in lines):
        raise Failure("%s: a thread's top frame is neither in the program nor a builtin:\n%s"
                      % (where, "\n".join(lines)))
    starts = {frame_start(l) for l in lines}
    if len(starts) != 1:
        raise Failure("%s: the top frames do not start in one column:\n%s" % (where, "\n".join(lines)))
    full = next(t["name"] for t in worker["threads"] if t["name"] and "a-thread-whose" in t["name"])
    long = [l for l in lines if '"%s' % full[:12] in l]
    if len(long) != 1 or "\u2026" not in long[0] or full in long[0]:
        raise Failure("%s: the long name is not shortened in its column:\n%s" % (where, "\n".join(lines)))


def check_threads_columns(c):
    pf = c.target
    w = pf.workers["one"]
    full = [t["name"] for t in w["threads"] if t["name"] and "a-thread-whose" in t["name"]]
    if c.debugger != "cli":
        check_columns(debugger(c.debugger, ["ruby threads"], pid=w["pid"]), w, "%s ruby threads" % c.debugger)
        harness.log("ruby threads: columns kept with a %d-character thread name" % len(full[0]))
        return
    out, _ = cli(["threads", "--pid", str(w["pid"])])
    check_columns(out, w, "rbpeek threads")
    doc = json.loads(cli(["threads", "--json", "--pid", str(w["pid"])])[0])
    if [t["name"] for t in doc["threads"] if t["name"] and "a-thread-whose" in t["name"]] != full:
        raise Failure("rbpeek threads --json does not keep the long name whole")
    harness.log("ruby threads: columns kept with a %d-character thread name" % len(full[0]))


# -- several processes: --subprocesses and --pid more than once --------------

ROLE_METHOD = {"one": "work_one", "two": "work_two", "three": "work_three"}


# The subprocesses run: the third worker forks 0.5 s in, worker two is
# killed 1.5 s in; the rest gives the third some 300 samples at the
# default 100 Hz (the check wants 10, 5 of them in its method).
SUB_DURATION = 4


def check_subprocesses(c):
    """rbpeek sample --pid MASTER --subprocesses: the master and its two
    workers from the start, a third forked during the run joins, worker two
    killed mid-sample leaves; every stack under its own process, named by
    the title the process set itself (check_names); idle threads out by
    default; then bt, threads, locks, heap, gc and allocs grouped by
    process, and --pid given twice."""
    import subprocess
    pf = c.target
    d = c.path("sub")
    os.makedirs(d, exist_ok=True)
    folded, summary = os.path.join(d, "all.folded"), os.path.join(d, "summary.json")
    ss = os.path.join(d, "all.speedscope.json")
    sampler = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(pf.pid), "--subprocesses",
                                "--duration", str(SUB_DURATION), "--folded", folded, "--speedscope", ss, "--json", "-o", summary],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=d)
    two = pf.workers["two"]["pid"]
    try:
        deadline = time.time() + 60
        while not all(tracer_of(w["pid"]) == sampler.pid for w in pf.workers.values()):
            if sampler.poll() is not None or time.time() > deadline:
                raise Failure("the sampler never traced every worker: %s" % sampler.communicate()[1][-2000:])
            time.sleep(0.02)
        time.sleep(0.5)
        three = pf.fork_third()
        time.sleep(1.0)
        os.kill(two, 9)   # a worker dying mid-sample
        out, err = sampler.communicate(timeout=180)
    finally:
        if sampler.poll() is None:
            sampler.kill()
            sampler.wait()
    two_view = pf.workers.pop("two")
    harness.assert_no_traceback(out + err)
    if sampler.returncode != 0:
        raise Failure("rbpeek sample --subprocesses: exit %d:\n%s" % (sampler.returncode, (out + err)[-3000:]))
    doc = harness.read_json(summary)
    procs = {p["pid"]: p for p in doc["processes"]}
    want = {pf.pid: "master", pf.workers["one"]["pid"]: "one", two: "two", three["pid"]: "three"}
    if set(procs) != set(want):
        raise Failure("processes sampled %s, wanted %s (master and workers)" % (sorted(procs), sorted(want)))
    for pid, role in want.items():
        if procs[pid]["samples"] < 10:
            raise Failure("%s (pid %d): only %d samples" % (role, pid, procs[pid]["samples"]))
    if not procs[two]["end"].startswith("exited"):
        raise Failure("worker two was killed mid-sample; its end says %r" % procs[two]["end"])
    for pid, role in want.items():
        if pid != two and procs[pid]["end"] != "%d s elapsed" % SUB_DURATION:
            raise Failure("%s (pid %d) ended %r, not with the run" % (role, pid, procs[pid]["end"]))
    start = doc["started"]
    joined = start + procs[three["pid"]]["joined_after_s"]
    latency = joined - three["time"]
    if procs[three["pid"]]["joined_after_s"] <= 0 or latency > 1.0:
        raise Failure("the third worker joined %.3f s after it started (joined_after_s %s)"
                      % (latency, procs[three["pid"]]["joined_after_s"]))
    by_pid = folded_by_pid(folded)
    idle = idle_by_pid(folded)
    check_names([pf.master, two_view] + list(pf.workers.values()), procs, folded)
    for pid, role in want.items():
        mine = by_pid.get(pid, {})
        if role == "master":
            # It computes about 1% of the time (master_tick) and sleeps the
            # rest, so it may have no stack at all by default; never a worker's.
            wrong = [m for m in ROLE_METHOD.values() if samples_in(mine, m)]
            if wrong:
                raise Failure("the master's stacks have the workers' %s" % wrong)
            continue
        # Worker two is killed 1.5 s into the run: a few samples are enough.
        if samples_in(mine, ROLE_METHOD[role]) < (1 if role == "two" else 5):
            raise Failure("worker %s (pid %d): %d samples in %s" % (role, pid, samples_in(mine, ROLE_METHOD[role]),
                                                                    ROLE_METHOD[role]))
        others = [m for r, m in ROLE_METHOD.items() if r != role and samples_in(mine, m)]
        if others:
            raise Failure("worker %s (pid %d) has stacks of %s" % (role, pid, others))
        # Idle threads are left out by default: the parked ones never appear
        # idle (a wake-up waiting for the GVL is not idle: idle_by_pid).
        if idle.get(pid):
            raise Failure("worker %s: idle (parked) threads in the default profile: %d samples"
                          % (role, idle[pid]))
    # speedscope: one profile per process, named by it, the weights the
    # folded total.
    prof = harness.read_json(ss)["profiles"]
    named = sorted(int(re.search(r"\(pid (\d+)\)", p["name"]).group(1)) for p in prof)
    if named != sorted(by_pid) or sum(sum(p["weights"]) for p in prof) != sum(
            int(l.rsplit(" ", 1)[1]) for l in open(folded)):
        raise Failure("speedscope: profiles %s (wanted one per process %s), or weights not the folded total"
                      % ([p["name"] for p in prof], sorted(by_pid)))
    # States: each worker's main thread runs, its parked threads are blocked.
    for t in doc["threads"]:
        role = want.get(t["pid"])
        if role in ("one", "three") and t["samples"] >= 10:
            st = t["states"]
            parked = t["name"] and ("parked" in t["name"] or "a-thread-whose" in t["name"])
            # The sampler joins worker three as it forks, before its
            # threads are parked: a few of its first samples find them
            # starting.
            starting = 3 if role == "three" else 0
            if parked and (1 - st["blocked"]) * t["samples"] > max(starting, 0.01 * t["samples"]):
                raise Failure("%s's parked thread %r: blocked only %.2f" % (role, t["name"], st["blocked"]))
            if t["tid"] == t["pid"] and st["running"] < 0.8:
                raise Failure("%s's main thread spins, running only %.2f: %s" % (role, st["running"], st))
    harness.log("sample --subprocesses: %d processes, third joined %.0f ms after its start, worker two left "
                "(%s); samples %s" % (len(procs), 1000 * latency, procs[two]["end"],
                                     {want[p]: procs[p]["samples"] for p in want}))
    pf.assert_running()
    check_two_pids_native(c, three)
    check_grouped_commands(c, want, three)


def check_two_pids_native(c, three):
    """rbpeek sample --pid A --pid B --native: both workers' stacks with
    their machine frames, and the summary's Native line."""
    pf = c.target
    one = pf.workers["one"]["pid"]
    folded = c.path("two-pids-native.folded")
    # 0.5 s: some 50 samples a worker, for a bound of half their stacks
    out, err = cli(["sample", "--pid", str(one), "--pid", str(three["pid"]), "--native", "--duration", "0.5",
                    "--folded", folded])
    if not re.search(r"^Rate:\s+[0-9.]+(-[0-9.]+)? Hz reached by the 2 processes of the 100 Hz asked", out, re.M):
        raise Failure("rbpeek sample --pid A --pid B: no Rate line in the summary:\n%s" % out[-3000:])
    if not re.search(r"^Native:\s+registers of \d+ stacks", out, re.M):
        raise Failure("rbpeek sample --pid A --pid B --native: no Native line in the summary:\n%s" % out[-3000:])
    native = check_native_stacks(folded, {one: "one", three["pid"]: "three"}, "rbpeek sample --pid A --pid B --native")
    harness.log("sample --pid A --pid B --native: (stacks, with machine frames) %s" % native)
    pf.assert_running()


# A machine frame of libc: every thread's stack starts in it
# (__libc_start_main, start_thread), so a --native stack that was unwound
# has one, and a Ruby stack never does (its frames are "label (path:line)").
LIBC_FRAME = re.compile(r" \(libc\.so\.6\)$")


def native_shares(path):
    """{pid: (stacks, stacks with a libc frame)} of a folded file whose
    stacks start with a process root frame."""
    out = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            stack, n = line.rstrip("\n").rsplit(" ", 1)
            frames = stack.split(";")
            pid = int(re.search(r" \(pid (\d+)\)$", frames[0]).group(1))
            all_, machine = out.get(pid, (0, 0))
            out[pid] = (all_ + int(n), machine + (int(n) if any(LIBC_FRAME.search(fr) for fr in frames[1:]) else 0))
    return out


def check_native_stacks(path, pids, what):
    """--native with several processes (issue 37: it was dropped without a
    word): most of each worker's stacks hold machine frames. Not all: a
    stack whose Ruby frames cannot be placed among its machine frames is
    recorded with its Ruby frames alone (counted on the summary's Native
    line)."""
    got = native_shares(path)
    for pid, role in pids.items():
        stacks, machine = got.get(pid, (0, 0))
        if not stacks or machine < 0.5 * stacks:
            raise Failure("%s: worker %s (pid %d): %d of %d stacks have a machine frame (libc's)"
                          % (what, role, pid, machine, stacks))
    return {pids[p]: got[p] for p in pids}


def check_names(views, procs, folded):
    """Each process is named by the title it set itself, as ps shows it
    (issue 37: the master's "prefork 1.0 (tcp://127.0.0.1:9292) [app]" was
    cut at its last '/' to "127.0.0.1:9292) [app]"): the summary's command,
    its root frame's label, and every stack's root frame in the folded
    file. The name is read when the process joins the run: a worker forked
    meanwhile is joined at once, and may not have set its own title yet, so
    for one that joined after the start its parent's (the master's) title is
    its name too (docs/sampling.md)."""
    titles = {v["pid"]: v["title"] for v in views}
    master = views[0]["title"]
    allowed = {}
    for pid, p in procs.items():
        allowed[pid] = {titles[pid]} | ({master} if p.get("joined_after_s") else set())
        if p["command"] not in allowed[pid] or p["label"] != "%s (pid %d)" % (p["command"], pid):
            raise Failure("pid %d names itself %r; the summary says command %r, label %r"
                          % (pid, titles[pid], p["command"], p["label"]))
    with open(folded, encoding="utf-8") as f:
        roots = {l.split(";", 1)[0] for l in f}
    bad = roots - {"%s (pid %d)" % (t, pid) for pid in allowed for t in allowed[pid]}
    if bad:
        raise Failure("root frames %s name no process by its title %s" % (sorted(bad), titles))


def check_debugger_subprocesses(c):
    """ruby sample --subprocesses --native inside gdb and lldb, attached to
    the master: the master and both workers, each stack under its own
    process, the workers' with their machine frames; the debugger has its
    process back after (the next command reads it), and every process
    runs, untraced."""
    pf = c.target
    summary, folded = c.path("tree.json"), c.path("tree.folded")
    # 1 s: some 100 samples a worker, for a bound of 10
    out = debugger(c.debugger, ["ruby sample --subprocesses --native --duration 1 --json -o %s --folded %s"
                                % (summary, folded), "ruby threads"], pid=pf.pid)
    doc = harness.read_json(summary)
    procs = {p["pid"]: p for p in doc["processes"]}
    want = {pf.pid: "master"}
    want.update({w["pid"]: role for role, w in pf.workers.items()})
    if set(procs) != set(want):
        raise Failure("processes sampled %s, wanted %s (master and workers)" % (sorted(procs), sorted(want)))
    by_pid = folded_by_pid(folded)
    for pid, role in want.items():
        if role != "master" and samples_in(by_pid.get(pid, {}), ROLE_METHOD[role]) < 10:
            raise Failure("worker %s (pid %d): %d samples in %s"
                          % (role, pid, samples_in(by_pid.get(pid, {}), ROLE_METHOD[role]), ROLE_METHOD[role]))
    native = check_native_stacks(folded, {p: r for p, r in want.items() if r != "master"},
                                 "%s ruby sample --subprocesses --native" % c.debugger)
    # `ruby threads` after the run reads the master again: the debugger took it back.
    rest = after_wrote(out, summary)
    if not re.search(r"^#1 ", rest, re.M):
        raise Failure("the debugger did not have its process back after the run:\n%s" % rest[-2000:])
    pf.assert_running()
    harness.log("%s: ruby sample --subprocesses --native: samples %s; (stacks, with machine frames) %s"
                % (c.debugger, {want[p]: procs[p]["samples"] for p in want}, native))


def check_grouped_commands(c, want, three):
    """bt, threads, locks, heap, gc and allocs with --subprocesses, and bt
    with --pid twice: one JSON document, grouped by process."""
    pf = c.target
    alive = {p: r for p, r in want.items() if r != "two"}
    doc = json.loads(cli(["bt", "-a", "--json", "--pid", str(pf.pid), "--subprocesses"])[0])
    got = {p["pid"]: p for p in doc["processes"]}
    if set(got) != set(alive):
        raise Failure("bt --subprocesses: processes %s, wanted %s" % (sorted(got), sorted(alive)))
    for pid, role in alive.items():
        main = [t for t in got[pid]["result"]["threads"] if t["main"]]
        if len(main) != 1 or main[0]["native_tid"] != pid:
            raise Failure("bt --subprocesses, %s: main thread native_tid %s, not %d"
                          % (role, [t["native_tid"] for t in main], pid))
    text = cli(["bt", "-a", "--pid", str(pf.pid), "--subprocesses"])[0]
    titles = re.findall(r"^== (.*) \(pid (\d+)\) ==$", text, re.M)
    named = {pf.pid: pf.master["title"]}
    named.update({w["pid"]: w["title"] for w in pf.workers.values()})
    if sorted((int(p), t) for t, p in titles) != sorted((p, named[p]) for p in alive):
        raise Failure("bt --subprocesses (text): process titles %s, wanted %s"
                      % (titles, sorted((named[p], p) for p in alive)))
    one = pf.workers["one"]["pid"]
    doc = json.loads(cli(["bt", "-a", "--json", "--pid", str(one), "--pid", str(three["pid"])])[0])
    if [p["pid"] for p in doc["processes"]] != [one, three["pid"]]:
        raise Failure("bt --pid A --pid B: processes %s" % [p["pid"] for p in doc["processes"]])
    for cmd in (["threads"], ["locks"], ["heap", "--top", "3"], ["gc"], ["allocs", "--duration", "1"]):
        out, err = cli(cmd + ["--json", "--pid", str(pf.pid), "--subprocesses"])
        doc = json.loads(out)
        got = [p["pid"] for p in doc["processes"]]
        bad = [p for p in doc["processes"] if "result" not in p]
        if sorted(got) != sorted(alive) or bad:
            # A descendant that fails is skipped, with why on stderr.
            raise Failure("%s --subprocesses: processes %s (wanted %s), failed %s; stderr: %s"
                          % (cmd[0], got, sorted(alive), bad, err.strip()[-2000:] or "(empty)"))
    harness.log("bt, threads, locks, heap, gc, allocs --subprocesses: grouped by process")
    pf.assert_running()


# (name, check, the combinations it runs in)
LIVE = {("gdb", "live"), ("lldb", "live"), ("cli", "live")}
CHECKS = [("thread ids", check_thread_ids, set(matrix.WITH_CLI)),
          ("threads columns", check_threads_columns, LIVE),
          ("truncated core", check_truncated_core, {("cli", "core")}),
          ("second sampler", check_second_sampler, {("cli", "live")}),
          ("subprocesses in the debugger", check_debugger_subprocesses, {("gdb", "live"), ("lldb", "live")}),
          # last: it forks the third worker and kills worker two
          ("subprocesses", check_subprocesses, {("cli", "live")})]
# The checks that sample the workers: they compute during these only.
COMPUTING = {"second sampler", "subprocesses in the debugger", "subprocesses"}


def check(c):
    """Every check of this combination; fails naming each that failed."""
    only = os.environ.get("RBPEEK_SERVICE_ONLY")
    failed = []
    for name, fn, combos in CHECKS:
        if (c.debugger, c.mode) not in combos or (only and name not in only.split(",")):
            continue
        t0 = time.time()
        try:
            with c.target.computing() if name in COMPUTING else contextlib.nullcontext():
                fn(c)
            harness.log("ok: %s (%.1f s)" % (name, time.time() - t0))
        except Failure as e:
            harness.log("FAILED: %s: %s" % (name, e))
            failed.append(name)
        except Exception:  # noqa: BLE001 - a test's own error fails that check, the rest still run
            harness.log("FAILED: %s:\n%s" % (name, traceback.format_exc()))
            failed.append(name)
    if failed:
        raise Failure("failed: %s" % ", ".join(failed))


def test(spec, only, workdir):
    m = matrix.Matrix(spec, workdir, only)
    pf = Prefork(m.ruby, os.path.join(workdir, "prefork"))
    try:
        m.run(pf, check, combos=matrix.WITH_CLI)
    finally:
        pf.close()
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
