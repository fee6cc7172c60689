#!/usr/bin/env python3
"""it.arch_refusal: a Ruby of an architecture rbpeek does not read is
refused in one line, never read with x86-64's tables (issue 39).

Debian's arm64 ruby3.1 runs under qemu-aarch64 (programs/arch_threads.rb:
a thread in Queue#pop, a named sleeper, its own view written down). Before
the refusal, gdb-multiarch on qemu's gdb stub read it with the x86-64 table
of 3.1.2, said "Verified" and printed a thread the program does not have,
without names; the command line read the emulator's process by pid the
same way. Now each front end must print exactly one line, naming aarch64
(ELF machine 183), where it was seen, and x86-64 as what rbpeek reads, and
nothing of the program (no thread, no frame, no "Verified"), no traceback:

- its core (qemu writes one on SIGQUIT): `rbpeek bt -a --core`, gdb-multiarch
  and lldb-16 on it;
- live through gdb-multiarch: `qemu-aarch64 -g SOCKET`, `target remote`,
  stopped by SIGUSR1 to qemu, `ruby bt -a` and `ruby threads`;
- live without a debugger: `rbpeek bt -a --pid` of the qemu process, whose
  mapped libruby is arm64's.

And the other way round, a layout made for aarch64 (`machine aarch64`) is
refused on an x86-64 Ruby (Debian's ruby3.1, live, by pid).

Opt-in: qemu-user, gdb-multiarch and the arm64 sysroot come from
scripts/install-arm64.sh (docs/testing.md); without them the test skips
and says what is missing.
"""

import os
import resource
import shutil
import signal
import subprocess
import threading
import time

import harness
from harness import Failure, SkipTest

SYSROOT = os.environ.get("RBPEEK_ARM64_SYSROOT", "/var/cache/rbpeek/arm64-sysroot")
ARM_RUBY = os.path.join(SYSROOT, "usr", "bin", "ruby3.1")
PROGRAM = os.path.join(harness.PROGRAMS, "arch_threads.rb")
X86_RUBY = "/usr/bin/ruby3.1"
STEP = "rbpeek-test-step-done"


def need():
    missing = [t for t in ("qemu-aarch64", "gdb-multiarch") if not shutil.which(t)]
    if not os.access(ARM_RUBY, os.X_OK):
        missing.append("Debian's arm64 ruby3.1 in %s" % SYSROOT)
    if missing:
        raise SkipTest("needs %s: run scripts/install-arm64.sh (opt-in, see docs/testing.md)" % ", ".join(missing))


def unlimited_core():
    resource.setrlimit(resource.RLIMIT_CORE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))


class ArmRuby:
    """arch_threads.rb under qemu-aarch64 (with a gdb stub on a Unix socket
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
        return read_view(self.dir)

    def core(self):
        """SIGQUIT: qemu writes the guest's core (qemu_<prog>_<date>_<pid>.core)."""
        self.proc.send_signal(signal.SIGQUIT)
        self.proc.wait(timeout=240)
        cores = [f for f in os.listdir(self.dir) if f.startswith("qemu_") and f.endswith(".core")]
        # the kernel's core of qemu itself, where core_pattern writes one here: not ours to read
        for f in os.listdir(self.dir):
            if f == "core" or (f.startswith("core.") and f not in cores):
                os.unlink(os.path.join(self.dir, f))
        if len(cores) != 1:
            raise Failure("qemu wrote no core of the arm64 Ruby on SIGQUIT: %s" % os.listdir(self.dir))
        return os.path.join(self.dir, cores[0])

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def read_view(out_dir):
    """The program's own view: its platform, its threads' names and frames."""
    view = {"threads": [], "frames": []}
    for line in open(os.path.join(out_dir, "expected.txt")):
        if line.startswith("platform "):
            view["platform"] = line.split()[1]
        elif line.startswith("thread "):
            view["threads"].append(line.split()[1])
        elif line.startswith("  "):
            view["frames"].append(line.strip())
    if not view.get("platform", "").startswith("aarch64") or len(view["threads"]) != 3 or not view["frames"]:
        raise Failure("the program's own view is not an arm64 Ruby's with 3 threads: %r" % view)
    return view


def assert_refused(what, output, view, where):
    """output holds the one-line refusal and nothing of the program."""
    harness.assert_no_traceback(output)
    lines = [l for l in output.splitlines() if "rbpeek:" in l]
    if len(lines) != 1:
        raise Failure("%s: wanted one refusal line, got %d:\n%s" % (what, len(lines), output[-3000:]))
    line = lines[0]
    for want in ("the target is aarch64 (ELF machine 183, from " + where, "rbpeek reads x86-64 targets only"):
        if want not in line:
            raise Failure("%s: the refusal lacks %r:\n%s" % (what, want, line))
    for said in ["Verified", "Thread (", "(main, ", "native_thread_id", "no Ruby frames"] + view["threads"][1:] + view["frames"]:
        if said in output:
            raise Failure("%s: printed %r of the program besides the refusal:\n%s" % (what, said, output[-3000:]))
    harness.log("%s: %s" % (what, line.strip()))


def check_core(workdir, view, core):
    rc, out, err = harness.run_cli(["bt", "-a", "--core", core])
    if rc == 0:
        raise Failure("rbpeek bt -a --core: exit 0 on an arm64 core:\n" + out + err)
    assert_refused("rbpeek bt -a --core", out + err, view, "the core's ELF header")
    gdb = ["gdb-multiarch", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set sysroot " + SYSROOT,
           "-ex", "source " + harness.GDB_PLUGIN, "-ex", "core-file " + core, "-ex", "ruby bt -a",
           "-ex", "echo %s\\n" % STEP, "-ex", "ruby threads"]
    # one stream, so that each command's refusal stays on its side of the marker
    r = subprocess.run(gdb, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       stdin=subprocess.DEVNULL, env=harness.front_end_env(), errors="replace")
    bt, _, threads = r.stdout.partition(STEP + "\n")
    assert_refused("gdb-multiarch on the core: ruby bt -a", bt, view, "the debugger's architecture aarch64")
    assert_refused("gdb-multiarch on the core: ruby threads", threads, view, "the debugger's architecture aarch64")
    # lldb-16 knows a core's OS from its NT_FILE note, which qemu does not
    # write: the architecture (or the executable) is given, as a user would
    lldb = [harness.LLDB, "--no-lldbinit", "-b", "-o", "command script import " + harness.LLDB_PLUGIN,
            "-o", "target create --arch aarch64-unknown-linux-gnu --core " + core, "-o", "ruby bt -a"]
    r = subprocess.run(lldb, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
                       env=harness.front_end_env(), errors="replace")
    assert_refused("lldb-16 on the core: ruby bt -a", r.stdout + r.stderr, view, "the debugger's architecture aarch64")


def check_live_gdb(workdir):
    sock = os.path.join(workdir, "gdb.sock")
    ruby = ArmRuby(workdir, "live-gdb", gdb_socket=sock)
    try:
        deadline = time.time() + 60
        while not os.path.exists(sock):
            if ruby.proc.poll() is not None or time.time() > deadline:
                raise Failure("qemu-aarch64 -g made no socket")
            time.sleep(0.1)
        gdb = ["gdb-multiarch", "-q", "-nx", "-batch", "-ex", "set pagination off", "-ex", "set confirm off",
               "-ex", "set sysroot " + SYSROOT, "-ex", "source " + harness.GDB_PLUGIN, "-ex", "file " + ARM_RUBY,
               "-ex", "target remote " + sock, "-ex", "continue", "-ex", "ruby bt -a", "-ex", "kill"]
        proc = subprocess.Popen(gdb, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                stdin=subprocess.DEVNULL, env=harness.front_end_env(), errors="replace")
        box = {}

        def stop_when_ready():
            try:
                box["view"] = ruby.wait_ready()
            except Failure as e:
                box["error"] = e
            finally:
                # gdb's "continue" returns on the signal (gdb stops on SIGUSR1
                # and never passes it: the next command kills the program)
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
        if "SIGUSR1" not in out:
            raise Failure("gdb-multiarch did not stop the arm64 Ruby on SIGUSR1:\n" + out[-3000:])
        assert_refused("gdb-multiarch on qemu's gdb stub: ruby bt -a", out, box["view"],
                       "the debugger's architecture aarch64")
    finally:
        ruby.stop()


def check_live_pid(workdir):
    ruby = ArmRuby(workdir, "live-pid")
    try:
        view = ruby.wait_ready()
        rc, out, err = harness.run_cli(["bt", "-a", "--pid", str(ruby.proc.pid)])
        if rc == 0:
            raise Failure("rbpeek bt -a --pid of qemu-aarch64: exit 0:\n" + out + err)
        assert_refused("rbpeek bt -a --pid (the qemu-aarch64 process)", out + err, view, "the ELF header of " + SYSROOT)
        if ruby.proc.poll() is not None:
            raise Failure("the arm64 Ruby did not survive being read")
        return view
    finally:
        ruby.stop()


def check_layout_for_aarch64(workdir):
    """A layout made for aarch64 is not used on an x86-64 Ruby."""
    if not os.access(X86_RUBY, os.X_OK):
        harness.log("(no %s: the aarch64 layout on an x86-64 Ruby is not checked)" % X86_RUBY)
        return
    version = subprocess.run([X86_RUBY, "-e", "print RUBY_VERSION"], capture_output=True, text=True).stdout
    table = os.path.join(harness.REPO, "layouts", version + ".layout")
    if not os.path.exists(table):
        raise Failure("no built-in table %s for %s" % (table, X86_RUBY))
    layout = os.path.join(workdir, "aarch64.layout")
    text = open(table).read().replace("\nruby %s\n" % version, "\nruby %s\nmachine aarch64\n" % version, 1)
    open(layout, "w").write(text)
    out_dir = os.path.join(workdir, "x86")
    os.mkdir(out_dir)
    with open(os.path.join(out_dir, "output.txt"), "w") as log:
        proc = subprocess.Popen([X86_RUBY, "--disable-gems", PROGRAM, out_dir], stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.time() + 120
        while not os.path.exists(os.path.join(out_dir, "ready")):
            if proc.poll() is not None or time.time() > deadline:
                raise Failure("the x86-64 Ruby never got ready")
            time.sleep(0.1)
        rc, out, err = harness.run_cli(["bt", "-a", "--pid", str(proc.pid), "--layout", layout])
        harness.assert_no_traceback(out + err)
        want = "was made for aarch64 (ELF machine 183), the target is x86-64 (ELF machine 62)"
        if rc == 0 or want not in err or out.strip() or len(err.strip().splitlines()) != 1:
            raise Failure("an aarch64 layout on an x86-64 Ruby: wanted one refusal line with %r, got exit %d:\n%s%s"
                          % (want, rc, out, err))
        harness.log("an aarch64 layout on x86-64: %s" % err.strip())
        # and the same Ruby, with its own table, reads (the refusal was the layout's)
        rc, out, err = harness.run_cli(["bt", "-a", "--pid", str(proc.pid)])
        if rc != 0 or "waiter" not in out:
            raise Failure("the x86-64 Ruby did not read with its own table: exit %d\n%s%s" % (rc, out, err))
    finally:
        proc.kill()
        proc.wait()


def test(workdir):
    need()
    view = check_live_pid(workdir)
    ruby = ArmRuby(workdir, "core")
    try:
        ruby.wait_ready()
        core = ruby.core()
    finally:
        ruby.stop()
    check_core(workdir, view, core)
    os.unlink(core)   # 70 MB
    check_live_gdb(workdir)
    check_layout_for_aarch64(workdir)


if __name__ == "__main__":
    harness.main(test)
