#!/usr/bin/env python3
"""it.arch_read: an arm64 Ruby read on x86-64 (issue 39), on its core and
live through gdb-multiarch on qemu's gdb stub.

Debian's arm64 ruby3.1 (3.1.2) runs under qemu-aarch64 -L SYSROOT
(programs/arch_read.rb: "waiter" in Queue#pop, "sleeper" in Kernel#sleep
under six Ruby frames, "locker" in ConditionVariable#wait, the main thread
in Kernel#sleep; a recorder thread writes the program's own view and
ends; its view in expected.json). What rbpeek says must equal that view:

- its core (qemu writes one on SIGABRT: aarch64 NT_PRSTATUS, NT_AUXV, no
  NT_FILE; its files found from the dynamic linker's list, under the
  sysroot), in the command line (`--core --sysroot`), gdb-multiarch
  (`set sysroot`, the executable, `core-file`) and lldb-16 (`target create
  --arch aarch64-unknown-linux-gnu --core`, the sysroot as the platform's):
    bt -a --json          the program's threads, no other, each with its
                          status and its backtrace_locations (label, path,
                          line) in order;
    bt -a --native --json each thread merged with its machine stack, unwound
                          to its end (no cut): its Ruby frames exactly
                          those, its innermost machine frame in libc, and
                          the notes of C methods not found among the machine
                          frames exactly those of the same program on
                          Debian's x86-64 ruby3.1, live (the same release's
                          tail calls, whatever the machine);
    heap --json           ArchProbe's instances exactly; count_objects'
                          TOTAL exactly, and each type at least Ruby's count,
                          more by what the recorder allocated after counting
                          (with the GC disabled: Ruby's FREE less rbpeek's,
                          at most ALLOC_SLACK);
    p ADDR --json         the value's #inspect exactly;
    threads --json, locks --json, locks
                          by test_locks.py's checks against the program's
                          record (its "locks", with each thread's TID,
                          status and first backtrace location): the
                          program's threads, no other, each with its TID
                          (in the debuggers also its debugger thread's, from
                          `info threads` / `thread list`), status, innermost
                          frame and wait: "waiter" on the Queue (its
                          address, found in the Queue's wait list, its
                          length and waiters Queue#length and
                          #num_waiting), "locker" on the ConditionVariable
                          (found in its wait list, with its Mutex), the
                          others in a sleep with no duration; no Mutex held
                          (the locker's released in ConditionVariable#wait:
                          listed, if at all, as unowned), no deadlock,
                          nothing never released or stuck behind, the GVL
                          known and free; the text says "No deadlock";
    gc --json             by test_inspect.py's check against GC.stat, taken
                          with count_objects as the recorder's last act, the
                          GC disabled: count, minor and major counts,
                          final slots, pages and slots exactly, allocated
                          and live more only by what the recorder allocated
                          after (at most its ALLOC_SLACK), malloc counters
                          within its MALLOC_SLACK, disabled, not stressed,
                          GC.latest_gc_info's state;
    threads, gc (text)    run, say nothing of an error, print no traceback;
  and x86-64's table of 3.1.2 is refused on it (--layout), in one line;
- live, through gdb-multiarch on `qemu-aarch64 -g SOCKET` (stopped by
  SIGUSR1 to qemu, which gdb stops on): `ruby bt -a --json`, `ruby
  threads`, `ruby p ADDR --json`: no thread the program does not have;
  `ruby bt -a --native --json` as on the core (gdb lists no mapped file
  over the stub: the files come from the dynamic linker's list, found
  through `info auxv` and gdb's reads);
- `rbpeek bt -a --pid` of the qemu process is refused in one line (its
  registers and addresses are the emulator's);
- a layout made for aarch64 (`machine aarch64`) is refused on an x86-64
  Ruby (Debian's ruby3.1, live, by pid).

qemu-user, gdb-multiarch and the arm64 sysroot come from
scripts/install-arm64.sh, which scripts/test.sh runs (docs/testing.md);
without them the test skips and says what is missing.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import threading
import time

import harness
from harness import Failure, SkipTest
from test_inspect import check_gc
from test_locks import Checker, check_locks, check_text, check_threads, debugger_tids

SYSROOT = os.environ.get("RBPEEK_ARM64_SYSROOT", "/var/cache/rbpeek/arm64-sysroot")
ARM_RUBY = os.path.join(SYSROOT, "usr", "bin", "ruby3.1")
PROGRAM = os.path.join(harness.PROGRAMS, "arch_read.rb")
X86_RUBY = "/usr/bin/ruby3.1"
LIBC = "libc.so"
# Objects the recorder allocates after ObjectSpace.count_objects and
# GC.stat (a String per number it writes, the ready file), with the GC
# disabled
ALLOC_SLACK = 200


def core_signal():
    """SIGABRT: Ruby traps SIGQUIT (signal.c: SignalException, then the
    VM's cleanup, ruby_current_vm_ptr NULL, before the default action
    dumps), not SIGABRT; qemu writes the guest's core on either."""
    return signal.SIGABRT


def need():
    missing = [t for t in ("qemu-aarch64", "gdb-multiarch") if not shutil.which(t)]
    if not os.access(ARM_RUBY, os.X_OK):
        missing.append("Debian's arm64 ruby3.1 in %s" % SYSROOT)
    if missing:
        raise SkipTest("needs %s: run scripts/install-arm64.sh (see docs/testing.md)" % ", ".join(missing))


def unlimited_core():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


class ArmRuby:
    """arch_read.rb under qemu-aarch64 (with a gdb stub on a Unix socket
    when gdb_socket is given: it then waits for gdb before running)."""

    def __init__(self, workdir, name, gdb_socket=None):
        self.dir = os.path.join(workdir, name)
        os.mkdir(self.dir)
        argv = ["qemu-aarch64"] + (["-g", gdb_socket] if gdb_socket else [])
        argv += ["-L", SYSROOT, ARM_RUBY, "--disable-gems", PROGRAM, self.dir]
        self.log = open(os.path.join(self.dir, "output.txt"), "w")
        self.proc = subprocess.Popen(argv, cwd=self.dir, stdin=subprocess.DEVNULL, stdout=self.log,
                                     stderr=subprocess.STDOUT, preexec_fn=unlimited_core)

    def wait_ready(self, timeout=240):
        ready = os.path.join(self.dir, "ready")
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None or time.time() > deadline:
                raise Failure("the arm64 Ruby never got ready:\n" + open(self.log.name, errors="replace").read()[-2000:])
            time.sleep(0.2)
        view = json.load(open(os.path.join(self.dir, "expected.json")))
        if not view["platform"].startswith("aarch64") or len(view["threads"]) != 4 or not view["value"]["address"]:
            raise Failure("the program's own view is not an arm64 Ruby's with 4 threads: %r" % view)
        return view

    def core(self):
        """qemu writes the guest's core (qemu_<prog>_<date>_<pid>.core)."""
        self.proc.send_signal(core_signal())
        self.proc.wait(timeout=240)
        cores = [f for f in os.listdir(self.dir) if f.startswith("qemu_") and f.endswith(".core")]
        # the kernel's core of qemu itself, where core_pattern writes one here: not ours to read
        for f in os.listdir(self.dir):
            if f == "core" or (f.startswith("core.") and f not in cores):
                os.unlink(os.path.join(self.dir, f))
        if len(cores) != 1:
            raise Failure("qemu wrote no core of the arm64 Ruby on SIGABRT: %s" % os.listdir(self.dir))
        return os.path.join(self.dir, cores[0])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


# --- what each command must say -------------------------------------------------

def thread_key(t):
    """A thread of `bt --json` by its name ("main" for an unnamed main one)."""
    return t.get("name") or ("main" if t.get("main") else "-")


def ruby_frames(frames):
    return [(f["label"], f["path"], f["lineno"]) for f in frames if f.get("kind", "ruby") in ("ruby", "cfunc")]


def check_bt(who, view, bt, native=None):
    """bt -a --json against the program's threads; native: with --native,
    the notes of each thread on x86-64 ({name: note})."""
    want = {t["name"]: t for t in view["threads"]}
    got = {thread_key(t): t for t in bt["threads"]}
    if set(got) != set(want):
        raise Failure("%s: threads %s, the program has %s" % (who, sorted(got), sorted(want)))
    for name, exp in want.items():
        act = got[name]
        if act.get("error"):
            raise Failure("%s: thread %s: %s" % (who, name, act["error"]))
        if act["status"] != exp["status"]:
            raise Failure("%s: thread %s is %s, Ruby says %s" % (who, name, act["status"], exp["status"]))
        w = [(f["label"], f["path"], f["lineno"]) for f in exp["frames"]]
        if ruby_frames(act["frames"]) != w:
            raise Failure("%s: thread %s's frames:\n  rbpeek: %s\n  ruby:   %s" % (who, name, ruby_frames(act["frames"]), w))
        if native is None:
            continue
        nat = act.get("native") or {}
        if not nat.get("merged") or nat.get("cut") or nat.get("note") != native.get(name):
            raise Failure("%s: thread %s not merged with its whole machine stack as on x86-64 (note %r): %s"
                          % (who, name, native.get(name), nat))
        machine = [f for f in act["frames"] if f["kind"] == "native"]
        if not machine or LIBC not in (machine[0].get("module") or ""):
            raise Failure("%s: thread %s's innermost machine frame is not libc's: %s" % (who, name, machine[:1]))
    harness.log("%s: %d threads, %d frames as the program's own%s" % (
        who, len(want), sum(len(t["frames"]) for t in view["threads"]), ", merged with their machine stacks"
        if native is not None else ""))


def check_heap(who, view, heap):
    classes = {c.get("name"): c.get("count") for c in heap.get("classes", [])}
    if classes.get("ArchProbe") != view["probes"]:
        raise Failure("%s: %r ArchProbe, the program counts %d" % (who, classes.get("ArchProbe"), view["probes"]))
    got, want = heap.get("count_objects") or {}, view["counts"]
    more = {k: got.get(k, 0) - want.get(k, 0) for k in set(want) | set(got) if k not in ("TOTAL", "FREE")}
    allocated = want.get("FREE", 0) - got.get("FREE", 0)
    if (got.get("TOTAL") != want.get("TOTAL") or min(more.values()) < 0 or sum(more.values()) != allocated
            or allocated > ALLOC_SLACK):
        raise Failure("%s: count_objects are not Ruby's and what it allocated after counting (%d objects; at most "
                      "%d):\n  rbpeek: %s\n  ruby:   %s" % (who, allocated, ALLOC_SLACK, got, want))
    harness.log("%s: %d ArchProbe; count_objects as Ruby's, and the %d objects allocated after" % (
        who, view["probes"], allocated))


def check_p(who, view, p):
    if p.get("inspect") != view["value"]["inspect"]:
        raise Failure("%s: p %s:\n  rbpeek: %r\n  ruby:   %r" % (who, view["value"]["address"], p.get("inspect"),
                                                              view["value"]["inspect"]))
    harness.log("%s: p %s as Ruby's #inspect" % (who, view["value"]["address"]))


def locks_truth(view):
    """The program's record of its waits (view["locks"], in the shape of
    locks_scenarios.rb's) with each thread's TID, status and innermost
    frame from its own view: what test_locks.py's checks compare with."""
    exp = dict(view["locks"], ruby_version=view["ruby_version"], threads={})
    for t in view["threads"]:
        name = "<main>" if t["main"] else t["name"]
        exp["threads"][name] = dict(view["locks"]["threads"][name], tid=t["tid"], status=t["status"],
                                    top=t["frames"][0] if t["frames"] else None)
    return exp


def check_threads_locks(who, view, threads, locks, text, dbg_tids=None):
    """threads --json and locks --json (and locks' text) against the
    program's record, by test_locks.py's checks: each thread's TID (and its
    debugger thread's, dbg_tids), status, innermost frame, wait (the Queue
    and the ConditionVariable by address, each found in its own wait list,
    the ConditionVariable's Mutex) and holdings (none: the locker's Mutex
    is released while it waits, and listed, if at all, as unowned); no
    deadlock, nothing never released, no GVL owner. And here: the threads
    are the program's, no other, and the Queue's length and waiters are
    Queue#length and Queue#num_waiting."""
    exp = locks_truth(view)
    ck = Checker(who)
    ck.eq("Ruby version", locks.get("ruby_version"), exp["ruby_version"])
    for source, doc in (("threads", threads), ("locks", locks)):
        names = {"<main>" if t["main"] else t["name"]: t for t in doc["threads"]}
        ck.eq(source + ": the threads", sorted(n or "?" for n in names), sorted(exp["threads"]))
        for name, e in exp["threads"].items():
            w = (names.get(name) or {}).get("waiting_on") or {}
            if e["wait"]["kind"] == "queue":
                ck.eq("%s %s: the Queue's length" % (source, name), w.get("queue_length"), e["wait"]["queue_length"])
                ck.eq("%s %s: the Queue's waiters" % (source, name), w.get("queue_waiters"),
                      e["wait"]["queue_waiters"])
    check_threads(ck, exp, threads, locks, dbg_tids)
    check_locks(ck, exp, locks)
    check_text(ck, exp, text)
    if ck.problems:
        raise Failure("%d mismatches:\n  %s\n--- ruby locks:\n%s" % (len(ck.problems), "\n  ".join(ck.problems[:40]),
                                                                   text[-3000:]))
    harness.log("%s: threads and locks as the program's (%d threads, their waits, no Mutex held, no deadlock)"
                % (who, len(exp["threads"])))


def check_gc_stat(who, view, gc):
    """gc --json against GC.stat, taken with the GC disabled as the
    recorder's last act (test_inspect.py's check)."""
    try:
        grew = check_gc(view["gc"], gc)
    except Failure as e:
        raise Failure("%s: %s" % (who, e))
    harness.log("%s: as GC.stat (count %d), and the %d objects allocated after" % (who, gc["count"], grew))


def load(who, path):
    try:
        return json.load(open(path))
    except (OSError, ValueError) as e:
        raise Failure("%s: no JSON in %s: %s" % (who, path, e))


# --- the core -------------------------------------------------------------------

def check_core_cli(workdir, view, core, notes):
    base = ["--core", core, "--sysroot", SYSROOT]
    out, _ = harness.cli(["bt", "-a", "--json"] + base)
    check_bt("rbpeek bt -a --core", view, json.loads(out))
    out, _ = harness.cli(["bt", "-a", "--native", "--json"] + base)
    check_bt("rbpeek bt -a --native --core", view, json.loads(out), native=notes)
    out, _ = harness.cli(["heap", "--json", "--top", "1000"] + base)
    check_heap("rbpeek heap --core", view, json.loads(out))
    out, _ = harness.cli(["p", view["value"]["address"], "--json"] + base)
    check_p("rbpeek p --core", view, json.loads(out))
    docs = {cmd: json.loads(harness.cli([cmd, "--json"] + base)[0]) for cmd in ("threads", "locks", "gc")}
    text, _ = harness.cli(["locks"] + base)
    check_threads_locks("rbpeek threads, locks --core", view, docs["threads"], docs["locks"], text)
    check_gc_stat("rbpeek gc --core", view, docs["gc"])
    # x86-64's table of the same release does not fit an aarch64 target
    rc, out, err = harness.run_cli(["bt", "-a", "--layout", os.path.join(harness.REPO, "layouts", "3.1.2.layout")]
                                   + base)
    want = "was made for x86-64 (ELF machine 62), the target is aarch64 (ELF machine 183)"
    harness.assert_no_traceback(out + err)
    if rc == 0 or want not in err or out.strip():
        raise Failure("x86-64's table on the arm64 core: wanted a refusal with %r, got exit %d:\n%s%s"
                      % (want, rc, out, err))
    harness.log("x86-64's table on the arm64 core: %s" % err.strip())


# The steps of debugger_steps past those writing JSON, in this order
TEXT_STEPS = ("locks", "threads", "gc", "thread list")


def debugger_steps(workdir, tag, view, debugger):
    """The commands each debugger runs, and where their JSON goes; the
    steps with text to read are the last, TEXT_STEPS."""
    files = {k: os.path.join(workdir, "%s-%s.json" % (tag, k))
             for k in ("bt", "native", "heap", "p", "threads", "locks", "gc")}
    steps = [["ruby bt -a --json -o " + files["bt"]], ["ruby bt -a --native --json -o " + files["native"]],
             ["ruby heap --json --top 1000 -o " + files["heap"]], ["ruby p %s --json -o %s" % (view["value"]["address"], files["p"])],
             ["ruby threads --json -o " + files["threads"]], ["ruby locks --json -o " + files["locks"]],
             ["ruby gc --json -o " + files["gc"]],
             ["ruby locks"], ["ruby threads"], ["ruby gc"], ["info threads" if debugger == "gdb" else "thread list"]]
    return steps, files


def check_debugger_core(who, debugger, view, parts, whole, files, notes):
    harness.assert_no_traceback(whole)
    if any(p is None for p in parts):
        raise Failure("%s: a command did not finish:\n%s" % (who, whole[-3000:]))
    for i, p in enumerate(parts):
        said = [l for l in p.splitlines() if "rbpeek:" in l and not l.strip().startswith(("rbpeek: wrote ",
                                                                                          "rbpeek: warning"))]
        if said:
            raise Failure("%s: step %d failed:\n%s" % (who, i, p[-2000:]))
    check_bt(who + ": ruby bt -a", view, load(who, files["bt"]))
    check_bt(who + ": ruby bt -a --native", view, load(who, files["native"]), native=notes)
    check_heap(who + ": ruby heap", view, load(who, files["heap"]))
    check_p(who + ": ruby p", view, load(who, files["p"]))
    text = dict(zip(TEXT_STEPS, parts[-len(TEXT_STEPS):]))
    check_threads_locks(who + ": ruby threads, locks", view, load(who, files["threads"]), load(who, files["locks"]),
                        text["locks"], debugger_tids(debugger, text["thread list"]))
    check_gc_stat(who + ": ruby gc", view, load(who, files["gc"]))


def gdb_argv(setup, steps):
    """gdb-multiarch with the arm64 sysroot and the plugin, the setup
    commands, then the steps (harness.step_commands); and the markers."""
    cmds, markers = harness.step_commands("gdb", steps)
    argv = ["gdb-multiarch", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
            "-ex", "set sysroot " + SYSROOT, "-ex", "source " + harness.GDB_PLUGIN]
    for c in setup + cmds:
        argv += ["-ex", c]
    return argv, markers


def check_core_gdb(workdir, view, core, notes):
    steps, files = debugger_steps(workdir, "gdb-core", view, "gdb")
    argv, markers = gdb_argv(["file " + ARM_RUBY, "core-file " + core], steps)
    _, parts, whole = harness.run_steps(argv, markers, timeout=400)
    check_debugger_core("gdb-multiarch on the core", "gdb", view, parts, whole, files, notes)


def check_core_lldb(workdir, view, core, notes):
    # lldb-16 knows a core's OS from its NT_FILE note, which qemu does not
    # write: the architecture is given, as a user would; the files are
    # the platform's sysroot's
    steps, files = debugger_steps(workdir, "lldb-core", view, "lldb")
    cmds, markers = harness.step_commands("lldb", steps)
    argv = [harness.LLDB, "--no-lldbinit", "-b", "-o", "platform select remote-linux --sysroot " + SYSROOT,
            "-o", "target create --arch aarch64-unknown-linux-gnu --core " + core,
            "-o", "command script import " + harness.LLDB_PLUGIN]
    for c in cmds:
        argv += ["-o", c]
    _, parts, whole = harness.run_steps(argv, markers, timeout=400)
    check_debugger_core("lldb-16 on the core", "lldb", view, parts, whole, files, notes)


# --- live -----------------------------------------------------------------------

def check_live_gdb(workdir, notes):
    sock = os.path.join(workdir, "gdb.sock")
    ruby = ArmRuby(workdir, "live-gdb", gdb_socket=sock)
    try:
        deadline = time.time() + 60
        while not os.path.exists(sock):
            if ruby.proc.poll() is not None or time.time() > deadline:
                raise Failure("qemu-aarch64 -g made no socket")
            time.sleep(0.1)
        files = {k: os.path.join(workdir, "live-%s.json" % k) for k in ("bt", "p", "native")}
        box = {}
        addr_file = os.path.join(workdir, "live-address")
        steps = [["ruby bt -a --json -o " + files["bt"]], ["ruby threads"],
                 ["source " + addr_file], ["ruby bt -a --native --json -o " + files["native"]]]
        argv = gdb_argv(["file " + ARM_RUBY, "target remote " + sock, "continue"], steps)[0] + ["-ex", "kill"]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, env=harness.front_end_env(), errors="replace")

        def stop_when_ready():
            try:
                box["view"] = ruby.wait_ready()
                # the value's address is known only now: gdb sources it
                with open(addr_file, "w") as f:
                    f.write("ruby p %s --json -o %s\n" % (box["view"]["value"]["address"], files["p"]))
            except Failure as e:
                box["error"] = e
                open(addr_file, "w").close()
            finally:
                # gdb's "continue" returns on the signal (gdb stops on SIGUSR1
                # and never passes it: the last command kills the program)
                if ruby.proc.poll() is None:
                    ruby.proc.send_signal(signal.SIGUSR1)

        t = threading.Thread(target=stop_when_ready)
        t.start()
        try:
            out, _ = proc.communicate(timeout=400)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            t.join()
        if "error" in box:
            raise box["error"]
        harness.assert_no_traceback(out)
        if "SIGUSR1" not in out:
            raise Failure("gdb-multiarch did not stop the arm64 Ruby on SIGUSR1:\n" + out[-3000:])
        view = box["view"]
        check_bt("gdb-multiarch on qemu's gdb stub: ruby bt -a", view, load("live", files["bt"]))
        threads = out.partition("rbpeek-test-step-0-done\n")[2].partition("rbpeek-test-step-1-done\n")[0]
        listed = [line for line in threads.splitlines() if line.startswith("#")]
        named = [t_["name"] for t_ in view["threads"] if t_["name"] != "main"]
        if len(listed) != len(view["threads"]) or any(not any('"%s"' % n in l for l in listed) for n in named):
            raise Failure("gdb-multiarch on qemu's gdb stub: ruby threads is not the program's %d threads (%s and "
                          "main):\n%s" % (len(view["threads"]), ", ".join(named), threads))
        check_p("gdb-multiarch on qemu's gdb stub: ruby p", view, load("live", files["p"]))
        check_bt("gdb-multiarch on qemu's gdb stub: ruby bt -a --native", view, load("live", files["native"]),
                 native=notes)
    finally:
        ruby.stop()


def check_emulator_pid(ruby):
    """By pid, the qemu process is refused: its registers are qemu's."""
    rc, out, err = harness.run_cli(["bt", "-a", "--pid", str(ruby.proc.pid)])
    harness.assert_no_traceback(out + err)
    want = "runs a Ruby of aarch64"
    if rc == 0 or want not in err or out.strip() or len(err.strip().splitlines()) != 1:
        raise Failure("rbpeek bt -a --pid of qemu-aarch64: wanted one refusal line with %r, got exit %d:\n%s%s"
                      % (want, rc, out, err))
    if ruby.proc.poll() is not None:
        raise Failure("the arm64 Ruby did not survive being read")
    harness.log("rbpeek bt -a --pid (the qemu-aarch64 process): %s" % err.strip())


def check_x86(workdir):
    """The same program on Debian's x86-64 ruby3.1, live: a layout made for
    aarch64 is not used on it, and its own table reads it, whose machine
    stacks' notes (C methods the merge did not find among the machine
    frames) the arm64 core's must equal. Returns them, {thread: note}."""
    if not os.access(X86_RUBY, os.X_OK):
        raise SkipTest("needs Debian's x86-64 ruby3.1 (%s), the same release on this machine" % X86_RUBY)
    table = os.path.join(harness.REPO, "layouts", "aarch64", "3.1.2.layout")
    out_dir = os.path.join(workdir, "x86")
    os.mkdir(out_dir)
    target = harness.Target(X86_RUBY, os.path.basename(PROGRAM), out_dir, timeout=120, ruby_args=["--disable-gems"])
    try:
        rc, out, err = harness.run_cli(["bt", "-a", "--pid", str(target.pid), "--layout", table])
        harness.assert_no_traceback(out + err)
        want = "was made for aarch64 (ELF machine 183), the target is x86-64 (ELF machine 62)"
        if rc == 0 or want not in err or out.strip() or len(err.strip().splitlines()) != 1:
            raise Failure("an aarch64 layout on an x86-64 Ruby: wanted one refusal line with %r, got exit %d:\n%s%s"
                          % (want, rc, out, err))
        harness.log("an aarch64 layout on x86-64: %s" % err.strip())
        # and the same Ruby, with its own table, reads (the refusal was the layout's)
        view = json.load(open(os.path.join(out_dir, "expected.json")))
        out, _ = harness.cli(["bt", "-a", "--native", "--json", "--pid", str(target.pid)])
        bt = json.loads(out)
        notes = {thread_key(t): (t.get("native") or {}).get("note") for t in bt["threads"]}
        check_bt("rbpeek bt -a --native --pid (x86-64)", view, bt, native=notes)
        return notes
    finally:
        target.close()


def test(workdir):
    need()
    notes = check_x86(workdir)
    ruby = ArmRuby(workdir, "core")
    try:
        view = ruby.wait_ready()
        check_emulator_pid(ruby)
        core = ruby.core()
    finally:
        ruby.stop()
    harness.log("qemu's core: %.1f MB" % (os.path.getsize(core) / 1e6))
    check_core_cli(workdir, view, core, notes)
    check_core_gdb(workdir, view, core, notes)
    check_core_lldb(workdir, view, core, notes)
    os.unlink(core)   # 75 MB
    check_live_gdb(workdir, notes)


if __name__ == "__main__":
    harness.main(test)
