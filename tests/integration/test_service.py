"""The whole service (issue 26): a pre-forking program, started once per
Ruby, checked by gdb, lldb and the rbpeek command line in one test.

    test_service.py RUBY          it.service.<ruby>

programs/prefork.rb: a master forks two workers at once and a third when
told to; each worker computes in a method of its own on its main thread,
beside a named thread parked in sleep; each process records its own view.

Checks, in order (each raises harness.Failure; all run even when one fails,
and the test fails naming each that did):

- thread ids: every worker's `bt -a --json` (the command line live and on
  a gcore'd core, gdb and lldb attached) reports its main thread's
  native_tid as the worker's pid, whatever Ruby records (3.1 keeps the
  master's: then ruby_native_tid says so), every thread numbered in the
  text; the parked thread's TID is one of the worker's tasks.
"""

import json
import os
import re
import sys
import time
import traceback

import harness
from harness import Failure


class Prefork:
    """programs/prefork.rb, running: the master and its workers' views."""

    def __init__(self, ruby, workdir):
        self.workdir = workdir
        self.target = harness.Target(ruby, "prefork.rb", workdir, timeout=120)
        self.master = self.view("master")
        self.workers = {r: self.view(r) for r in ("one", "two")}

    def view(self, role):
        return harness.read_json(os.path.join(self.workdir, role + ".json"))

    def fork_third(self, timeout=30):
        open(os.path.join(self.workdir, "fork-third"), "w").close()
        path = os.path.join(self.workdir, "three.json")
        deadline = time.time() + timeout
        while not os.path.exists(path):
            if time.time() > deadline:
                raise Failure("the third worker never recorded itself")
            time.sleep(0.02)
        self.workers["three"] = self.view("three")
        return self.workers["three"]

    def tasks(self, pid):
        return sorted(int(t) for t in os.listdir("/proc/%d/task" % pid))

    def assert_running(self):
        self.target.assert_left_running()
        for role, w in self.workers.items():
            state = proc_state(w["pid"])
            if state is None:
                raise Failure("worker %s (pid %d) is gone" % (role, w["pid"]))
            if state in ("t", "T"):
                raise Failure("worker %s (pid %d) was left stopped" % (role, w["pid"]))
            if tracer_of(w["pid"]):
                raise Failure("worker %s (pid %d) was left traced" % (role, w["pid"]))

    def close(self):
        self.target.close()


def proc_state(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def status_field(pid, name):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split()[1]
    return None


def tracer_of(pid):
    """The process tracing pid (TracerPid names the tracing thread), 0 if none."""
    tid = int(status_field(pid, "TracerPid") or 0)
    if tid <= 0:
        return 0
    try:
        return int(status_field(tid, "Tgid"))
    except (OSError, TypeError):
        return tid


def cli(args, want_rc=0, timeout=300):
    rc, out, err = harness.run_cli(args, timeout=timeout)
    harness.assert_no_traceback(out + err)
    if want_rc is not None and rc != want_rc:
        raise Failure("rbpeek %s: exit %d (wanted %d)\nstdout: %s\nstderr: %s"
                      % (" ".join(args), rc, want_rc, out[-2000:], err[-2000:]))
    return out, err


def debugger(dbg, commands, pid=None, exe=None, core=None):
    rc, out = harness.run_debugger(dbg, commands, pid=pid, exe=exe, core=core)
    harness.assert_no_traceback(out)
    return out


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


def check_thread_ids(pf, ruby):
    for role, w in sorted(pf.workers.items()):
        pid = w["pid"]
        tasks = pf.tasks(pid)
        doc = json.loads(cli(["bt", "-a", "--json", "--pid", str(pid)])[0])
        check_tid_doc(doc, w, tasks, "rbpeek bt --pid (worker %s)" % role)
        check_tid_text(cli(["bt", "-a", "--pid", str(pid)])[0], w, "rbpeek bt -a --pid (worker %s)" % role)
        # The debuggers on one worker (attaching is the slow part), the
        # command line on each.
        for dbg in ("gdb", "lldb") if role == "two" else ():
            path = os.path.join(pf.workdir, "bt-%s-%s.json" % (role, dbg))
            out = debugger(dbg, ["ruby bt -a --json -o " + path, "ruby bt -a"], pid=pid)
            check_tid_doc(harness.read_json(path), w, tasks, "%s ruby bt -a --json (worker %s)" % (dbg, role))
            check_tid_text(after_wrote(out, path), w, "%s ruby bt -a (worker %s)" % (dbg, role))
        pf.assert_running()
    # On a core of a worker: the core's NT_PRSTATUS notes are the kernel's list.
    w = pf.workers["one"]
    core = gcore(w["pid"], pf.workdir)
    tasks = pf.tasks(w["pid"])
    doc = json.loads(cli(["bt", "-a", "--json", "--core", core, "--exe", ruby])[0])
    check_tid_doc(doc, w, tasks, "rbpeek bt --core (worker one)")
    for dbg in ("gdb", "lldb"):
        path = os.path.join(pf.workdir, "bt-core-%s.json" % dbg)
        out = debugger(dbg, ["ruby bt -a --json -o " + path, "ruby bt -a"], exe=ruby, core=core)
        check_tid_doc(harness.read_json(path), w, tasks, "%s on the core (worker one)" % dbg)
        check_tid_text(after_wrote(out, path), w, "%s ruby bt -a on the core (worker one)" % dbg)
    os.unlink(core)
    harness.log("thread ids: each worker's main thread is its pid (Ruby records %s for worker one)"
                % pf.workers["one"]["ruby_main_native_tid"])


def after_wrote(out, path):
    """What a debugger printed after 'rbpeek: wrote PATH' (the next command's output)."""
    mark = "rbpeek: wrote %s\n" % path
    if mark not in out:
        raise Failure("the debugger did not write %s:\n%s" % (path, out[-2000:]))
    return out[out.index(mark) + len(mark):]


def gcore(pid, workdir):
    import subprocess
    base = os.path.join(workdir, "core")
    r = subprocess.run(["gcore", "-o", base, str(pid)], capture_output=True, text=True, timeout=300)
    path = "%s.%d" % (base, pid)
    if r.returncode != 0 or not os.path.exists(path):
        raise Failure("gcore failed: %s" % (r.stderr or r.stdout)[-1000:])
    return path


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


def check_truncated_core(pf, ruby):
    core = kernel_core(ruby, pf.workdir)
    if core is None:
        # A gcore'd core (notes last) of a worker: any cut takes the notes.
        core = gcore(pf.workers["one"]["pid"], pf.workdir)
    whole = json.loads(cli(["bt", "-a", "--json", "--core", core, "--exe", ruby])[0])
    segs = load_segments(core)
    size = os.path.getsize(core)
    # Half of it: too little to find Ruby: one line, saying why.
    half = truncated_copy(core, size // 2, "half.core")
    _, err = cli(["bt", "-a", "--core", half, "--exe", ruby], want_rc=1)
    lines = [l for l in err.splitlines() if l.strip()]
    if len(lines) != 1 or not lines[0].startswith("rbpeek: the core file is truncated:"):
        raise Failure("rbpeek bt on half a core: not one line saying it is truncated:\n%s" % err)
    check_truncation_line(lines[0], "rbpeek bt on half a core")
    out = debugger("lldb", ["ruby bt -a"], exe=ruby, core=half)
    errors = [l for l in out.splitlines() if "rbpeek:" in l]
    if len(errors) != 1:
        raise Failure("lldb ruby bt on half a core: not one rbpeek line:\n%s" % out[-3000:])
    check_truncation_line(errors[0], "lldb ruby bt on half a core")
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

def check_second_sampler(pf, ruby):
    """A second sampler on a process another one traces: one line, naming
    the tracer, before anything is written; the first goes on."""
    import subprocess
    w = pf.workers["two"]["pid"]
    first_dir = os.path.join(pf.workdir, "first")
    second_dir = os.path.join(pf.workdir, "second")
    os.makedirs(first_dir, exist_ok=True)
    os.makedirs(second_dir, exist_ok=True)
    first = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(w), "--duration", "8",
                              "--folded", os.path.join(first_dir, "p.folded")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=first_dir)
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
        out, err = first.communicate(timeout=120)
        if first.returncode != 0 or "Samples:" not in out:
            raise Failure("the first sampler did not end well (exit %d):\n%s" % (first.returncode, (out + err)[-2000:]))
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    pf.assert_running()
    harness.log("a second sampler: refused in one line naming the first (pid %d)" % first.pid)


CHECKS = [("thread ids", check_thread_ids), ("truncated core", check_truncated_core),
          ("second sampler", check_second_sampler)]


def run(spec, workdir):
    ruby = harness.ruby_binary(spec)
    if not os.path.exists(ruby):
        raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (spec, ruby))
    only = os.environ.get("RBPEEK_SERVICE_ONLY")
    pf = Prefork(ruby, workdir)
    failed = []
    try:
        for name, check in CHECKS:
            if only and name not in only.split(","):
                continue
            t0 = time.time()
            try:
                check(pf, ruby)
                harness.log("ok: %s (%.1f s)" % (name, time.time() - t0))
            except Failure as e:
                harness.log("FAILED: %s: %s" % (name, e))
                failed.append(name)
            except Exception:  # noqa: BLE001 - a test's own error fails that check, the rest still run
                harness.log("FAILED: %s:\n%s" % (name, traceback.format_exc()))
                failed.append(name)
    finally:
        pf.close()
    if failed:
        raise Failure("failed: %s" % ", ".join(failed))


if __name__ == "__main__":
    spec = sys.argv[1]
    harness.main(lambda workdir: run(spec, workdir))
