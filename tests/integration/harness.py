"""Shared plumbing for the integration tests: start a Ruby test program, wait
until it has recorded its own view and parked, run a debugger with the
rbpeek plugin against it (live, or on a gcore'd core), and check the target
was left as it was.

Every integration test is a plain script (exit 0 pass, 1 fail, 77 skip) so
ctest runs it directly; this module keeps them short.
"""

import contextlib
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PROGRAMS = os.path.join(HERE, "programs")
GDB_PLUGIN = os.path.join(REPO, "gdb-plugin", "rbpeek.py")
LLDB_PLUGIN = os.path.join(REPO, "lldb-plugin", "rbpeek.py")
RBPEEK_CLI = os.path.join(REPO, "tools", "rbpeek")   # the command line, no debugger
LLDB = shutil.which("lldb-16") or "lldb-16"
# The debuggers' own indexes of the DWARF they load, kept on disk for the
# suite (gdb's index-cache, lldb's symbols.enable-lldb-index-cache): every
# check starts gdb or lldb afresh, some fifty times a Ruby, and each start
# indexed the Ruby's DWARF again, 0.2-0.25 CPU s of gdb's 0.7 and lldb's
# 1.1 (issue 27). Nothing rbpeek reads changes: the cache holds each
# debugger's index of the same files, keyed by each file's build ID (gdb) or
# its UUID and modification time (lldb).
INDEX_CACHE = os.path.join(os.environ.get("RBPEEK_BUILD_DIR") or tempfile.gettempdir(), "debugger-index-cache")
SKIP = 77


class Failure(Exception):
    pass


def strict_json(data):
    """A JSON document read strictly: the bytes must be valid UTF-8 (Python's
    json.loads would let encoded surrogates through), and no string may hold
    a lone surrogate (a \\ud800 escape that no UTF-8 can carry). Raises
    ValueError saying which rule was broken. data: bytes or text."""
    from_bytes = isinstance(data, (bytes, bytearray))
    if from_bytes:
        data = bytes(data).decode("utf-8")   # strict: invalid bytes raise UnicodeDecodeError (a ValueError)
    doc = json.loads(data)
    # Strictly decoded UTF-8 holds no surrogate: one in the document can only
    # come from a \u escape. Without any, the walk below (as costly as
    # json.loads itself on a dump of 800,000 objects) has nothing to find.
    if from_bytes and "\\u" not in data:
        return doc
    todo = [doc]
    while todo:
        v = todo.pop()
        if isinstance(v, dict):
            todo.extend(v.keys())
            todo.extend(v.values())
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError as e:
                raise ValueError("a string holds a lone surrogate: %r" % v[max(0, e.start - 10):e.end + 10])
    return doc


def read_json(path):
    """The JSON document in the file at path, read strictly (strict_json)."""
    with open(path, "rb") as f:
        return strict_json(f.read())


_log_context = threading.local()
_print_lock = threading.Lock()


def set_log_prefix(prefix):
    """Prefixes this thread's log lines (matrix.py: which combination
    says it, when two run side by side)."""
    _log_context.prefix = prefix


def log(msg):
    prefix = getattr(_log_context, "prefix", "")
    with _print_lock:
        print("".join(prefix + line + "\n" for line in str(msg).split("\n")) if prefix else msg,
              end="" if prefix else "\n", flush=True)


# The suite's statistical checks together may fail by chance in at most
# this share of its runs (a suite that fails one run in thirty by design is
# a red CI for nothing): each test splits it among its comparisons.
SUITE_FALSE_ALARM = 0.01


def family_z(comparisons, false_alarm=SUITE_FALSE_ALARM):
    """The bound, in standard errors, for `comparisons` two-sided
    comparisons of a sampled share with an independent measure that
    together fail by chance with probability false_alarm (Bonferroni):
    e.g. 36 comparisons, 1% -> 3.63. A systematic deviation is a defect to
    find, not a reason to raise this."""
    from statistics import NormalDist
    return NormalDist().inv_cdf(1.0 - false_alarm / (2.0 * comparisons))


# A Ruby of the matrix named with this suffix ("3.4.5+yjit") is the same
# Ruby with YJIT on, every method compiled at its first call, in every
# program the test starts (RUBYOPT, as production Rails sets it): so that
# each capability shown for the interpreter is shown for JIT code too.
YJIT_SUFFIX = "+yjit"
YJIT_RUBYOPT = "--yjit --yjit-call-threshold=1"


def ruby_binary(spec):
    """A Ruby from the test matrix: 'debian-3.1' is Debian's stripped
    package; anything else is a build under $RBPEEK_RUBIES. A spec ending
    in YJIT_SUFFIX turns YJIT on for the programs started from here on
    (RUBYOPT in this process's environment, which they inherit)."""
    if spec.endswith(YJIT_SUFFIX):
        spec = spec[:-len(YJIT_SUFFIX)]
        opts = os.environ.get("RUBYOPT", "")
        if YJIT_RUBYOPT not in opts:
            os.environ["RUBYOPT"] = (opts + " " + YJIT_RUBYOPT).strip()
    if spec == "debian-3.1":
        ruby = "/usr/bin/ruby3.1"
    else:
        ruby = os.path.join(os.environ.get("RBPEEK_RUBIES", "/var/cache/rbpeek/rubies"), spec, "bin", "ruby")
    if YJIT_RUBYOPT in os.environ.get("RUBYOPT", "") and os.path.exists(ruby):
        yjit_on(ruby)
    return ruby


def yjit_on(ruby):
    """Fails unless ruby runs with YJIT on under this RUBYOPT: a +yjit test
    that interpreted would pass for the wrong reason."""
    r = subprocess.run([ruby, "-e", "exit(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? ? 0 : 3)"],
                       capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise Failure("%s does not run with YJIT on under RUBYOPT=%r: %s"
                      % (ruby, os.environ.get("RUBYOPT"), (r.stdout + r.stderr).strip()[-300:] or "YJIT off"))


class Target:
    """A Ruby test program, started and parked; killed on exit. env: extra
    environment variables (how programs take their options, since they are
    started as "ruby PROGRAM OUT_DIR"); ruby_args: Ruby's own options
    before the program."""

    def __init__(self, ruby, program, workdir, timeout=90, env=None, ruby_args=()):
        self.ruby = ruby
        self.workdir = workdir
        self.log_path = os.path.join(workdir, "target.log")
        with open(self.log_path, "w") as log_file:
            self.proc = subprocess.Popen([ruby] + list(ruby_args) + [os.path.join(PROGRAMS, program), workdir],
                                         stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=workdir, env=dict(os.environ, **(env or {})))
        ready = os.path.join(workdir, "ready")
        deadline = time.time() + timeout
        while not os.path.exists(ready):
            if self.proc.poll() is not None:
                raise Failure("target exited early (%s): %s" % (self.proc.returncode, self._log_tail()))
            if time.time() > deadline:
                raise Failure("target never became ready: %s" % self._log_tail())
            time.sleep(0.05)
        self.pid = self.proc.pid
        time.sleep(0.3)  # the recorder thread finishes after writing 'ready'

    @contextlib.contextmanager
    def computing(self, settle=0.1):
        """For programs that compute only while WORKDIR/busy exists and nap
        (polling it every 10 ms) outside: they compute inside the block. A
        target that computed all along would keep a CPU busy through every
        debugger start and every check that needs no computing, and CI has
        two (issue 27). settle: seconds to let it wake up."""
        path = os.path.join(self.workdir, "busy")
        open(path, "w").close()
        try:
            time.sleep(settle)
            yield
        finally:
            os.unlink(path)

    def _log_tail(self):
        try:
            with open(self.log_path, errors="replace") as f:
                return f.read()[-2000:]
        except OSError:
            return "(no log)"

    def expected(self, name="expected.json"):
        with open(os.path.join(self.workdir, name), encoding="utf-8") as f:
            return json.load(f)

    def ruby_version(self):
        """RUBY_VERSION as the target itself reported it in expected.json."""
        return self.expected()["ruby_version"]

    def state(self):
        """The kernel's one-letter process state ('S' sleeping, 't' traced-stopped...)."""
        with open("/proc/%d/stat" % self.pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def assert_left_running(self):
        if self.proc.poll() is not None:
            raise Failure("the target died (exit %s)" % self.proc.returncode)
        for _ in range(50):  # the debugger's detach may take a moment to land
            st = self.state()
            if st not in ("t", "T"):
                return
            time.sleep(0.05)
        raise Failure("the target was left stopped (state %s)" % st)

    def gcore(self):
        return gcore(self.pid, self.workdir)

    def close(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def copy_core(src, dst):
    """A copy of a core to damage. gcore writes every mapping in full, also
    the reserved, never touched ones (a thread's malloc arena: 64 MB of
    zeros each), so a core of 1 GB may hold 10 MB of data: the copy keeps
    the zeros as holes, which makes it some ten times faster."""
    r = subprocess.run(["cp", "--sparse=always", src, dst], capture_output=True, text=True)
    if r.returncode != 0:
        raise Failure("cannot copy %s: %s" % (src, r.stderr.strip()))
    return dst


def core_segments(path, writable=False):
    """[(vaddr, file offset, filesz)] of an ELF64 little-endian core's PT_LOAD
    segments with contents (only the writable ones if asked): where a test
    finds a target address's bytes in the core file to damage them."""
    with open(path, "rb") as f:
        ehdr = f.read(64)
        if ehdr[:4] != b"\x7fELF" or ehdr[4] != 2:
            raise Failure("%s is not an ELF64 core" % path)
        phoff, = struct.unpack_from("<Q", ehdr, 0x20)
        phentsize, phnum = struct.unpack_from("<HH", ehdr, 0x36)
        f.seek(phoff)
        table = f.read(phentsize * phnum)
    segs = []
    for i in range(phnum):
        p_type, p_flags, p_offset, p_vaddr, _paddr, p_filesz = struct.unpack_from("<IIQQQQ", table, i * phentsize)
        if p_type == 1 and p_filesz and (p_flags & 2 or not writable):
            segs.append((p_vaddr, p_offset, p_filesz))
    return segs


def gcore(pid, workdir):
    """A core of process pid, written by gdb's gcore into workdir: its path."""
    base = os.path.join(workdir, "core")
    r = subprocess.run(["gcore", "-o", base, str(pid)], capture_output=True, text=True, timeout=300)
    path = "%s.%d" % (base, pid)
    if r.returncode != 0 or not os.path.exists(path):
        raise Failure("gcore failed: %s" % (r.stderr or r.stdout)[-1000:])
    return path


def debugger_argv(debugger, commands, pid=None, exe=None, core=None, plugin_first=False):
    """gdb or lldb-16 in batch mode, attached to pid (or on core, with exe),
    with the plugin loaded and the given `ruby ...` commands. plugin_first:
    the plugin loaded before the attach, as ~/.gdbinit or ~/.lldbinit load
    it (the lldb plugin then has lldb load symbols lazily)."""
    if debugger == "gdb":
        argv = ["gdb", "-q", "-nx", "-batch", "-iex", "set index-cache directory " + os.path.join(INDEX_CACHE, "gdb"),
                "-iex", "set index-cache enabled on"]
        if plugin_first:
            argv += ["-iex", "source " + GDB_PLUGIN]
        argv += ["-ex", "set pagination off", "-ex", "set confirm off"]
        if pid:
            argv += ["-p", str(pid)]
        elif exe:
            argv += [exe, core]
        else:  # a core alone: the debugger has no binaries, so no symbols
            argv += ["-c", core]
        if not plugin_first:
            argv += ["-ex", "source " + GDB_PLUGIN]
        for c in commands:
            argv += ["-ex", c]
    elif debugger == "lldb":
        argv = [LLDB, "--no-lldbinit", "-b"]
        # lldb waits 6 s for lldb-server's handshake on attach (the packet
        # timeout, when longer): on a loaded machine that is too short
        # ("failed to get reply to handshake packet within timeout").
        # -O runs before the attach.
        argv += ["-O", "settings set plugin.process.gdb-remote.packet-timeout 30",
                 "-O", "settings set symbols.enable-lldb-index-cache true",
                 "-O", "settings set symbols.lldb-index-cache-path " + os.path.join(INDEX_CACHE, "lldb")]
        if plugin_first:
            argv += ["-O", "command script import " + LLDB_PLUGIN]
        if pid:
            argv += ["-p", str(pid)]
        else:
            argv += ["-c", core] + ([exe] if exe else [])
        if not plugin_first:
            argv += ["-o", "command script import " + LLDB_PLUGIN]
        for c in commands:
            argv += ["-o", c]
    else:
        raise ValueError(debugger)
    return argv


def front_end_env():
    """The environment a debugger runs in: without this Python's paths,
    which would make gdb's or lldb's own Python load the wrong library."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def run_debugger(debugger, commands, pid=None, exe=None, core=None, timeout=300, plugin_first=False):
    """Runs gdb or lldb-16 in batch mode with the plugin loaded and the given
    `ruby ...` commands (plugin_first: debugger_argv). Returns (returncode,
    combined output)."""
    r = subprocess.run(debugger_argv(debugger, commands, pid, exe, core, plugin_first), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL, env=front_end_env(), errors="replace")
    return r.returncode, r.stdout + r.stderr


def load_core_cmds(debugger, core, exe):
    """The commands that put another core (of exe) in place of the one the
    debugger has: a step of run_debugger_steps, so that one debugger reads
    several cores (lldb: the old target deleted first, so that a core it
    cannot load leaves no target, not the old one)."""
    if debugger == "gdb":
        return ["core-file " + core]
    return ["target delete", "target create --core %s %s" % (core, exe)]


def run_debugger_steps(debugger, steps, pid=None, exe=None, core=None, timeout=300):
    """Runs several steps in one debugger, started once: each step a list
    of debugger commands, then a marker line that the debugger must still
    print (it is still usable). lldb runs each step's commands through
    HandleCommand in one script line (its batch mode abandons the rest of
    its list after a failing command). stdout and stderr are one stream,
    so that each step's messages stay between its markers. Returns the
    returncode, each step's output (None for a step whose marker never
    came, and for every step after it) and the whole output."""
    cmds, markers = step_commands(debugger, steps)
    return run_steps(debugger_argv(debugger, cmds, pid, exe, core), markers, timeout)


def step_commands(debugger, steps):
    """The debugger commands of steps, each followed by its marker
    (run_debugger_steps), and the markers."""
    markers = ["rbpeek-test-step-%d-done" % i for i in range(len(steps))]
    cmds = []
    for step, marker in zip(steps, markers):
        if debugger == "gdb":
            cmds += list(step) + ["echo %s\\n" % marker]
        else:
            cmds.append("script " + "; ".join("lldb.debugger.HandleCommand(%r)" % c for c in step)
                        + "; print(%r)" % marker)
    return cmds, markers


def run_steps(argv, markers, timeout=300):
    """Runs argv (a debugger given step_commands' commands); returns its
    returncode, each step's output as run_debugger_steps does, and the
    whole output."""
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=front_end_env(), errors="replace")
    parts, rest = [], r.stdout
    for marker in markers:
        before, sep, rest = rest.partition(marker + "\n")
        parts.append(before if sep else None)
        if not sep:
            rest = ""
    return r.returncode, parts, r.stdout


def run_and_act(argv, out_path, started, act, settle, timeout=120, during=None):
    """Starts argv (a debugger or the command line running a long command),
    its output to out_path; once started appears in it, lets it run settle
    seconds more, calls act(process) (Ctrl-C, a kill; None: nothing, the
    command ends by itself) and waits for it to end. during: a context
    manager entered as soon as started appears and left once argv has ended
    (Target.computing(): the target computes while it is sampled, not while
    a debugger starts). Returns its output; fails if it never started."""
    with open(out_path, "w") as out:
        # SIGINT as a terminal's Ctrl-C finds it, whatever this test inherited
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env=front_end_env(), preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.time() + timeout
        poll = 0.1 if during is None else 0.02
        while started not in open(out_path, errors="replace").read():
            if proc.poll() is not None or time.time() > deadline:
                raise Failure("the run never started:\n" + open(out_path, errors="replace").read()[-2000:])
            time.sleep(poll)
        with during if during is not None else contextlib.nullcontext():
            time.sleep(settle)
            if act is not None:
                act(proc)
            proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return open(out_path, errors="replace").read()


def run_cli(args, timeout=300, raw=False):
    """Runs the rbpeek command line (no debugger) with args; returns
    (returncode, stdout, stderr); stdout as bytes when raw (for
    strict_json), else as text with any bytes that are not UTF-8 replaced."""
    r = subprocess.run([sys.executable, RBPEEK_CLI] + list(args), capture_output=True, timeout=timeout,
                       stdin=subprocess.DEVNULL)
    out = r.stdout if raw else r.stdout.decode("utf-8", "replace")
    return r.returncode, out, r.stderr.decode("utf-8", "replace")


def cli(args, want_rc=0, timeout=900, raw=False):
    """run_cli that fails on a Python traceback, or on an exit code other
    than want_rc (None: any); returns (stdout, stderr), stdout as bytes
    when raw (for strict_json)."""
    rc, out, err = run_cli(args, timeout=timeout, raw=raw)
    assert_no_traceback((out.decode("utf-8", "replace") if raw else out) + err)
    if want_rc is not None and rc != want_rc:
        raise Failure("rbpeek %s: exit %d (wanted %d)\nstdout: %s\nstderr: %s"
                      % (" ".join(args), rc, want_rc, out[-2000:], err[-2000:]))
    return out, err


def assert_no_traceback(output):
    if "Traceback (most recent call last)" in output or "internal error" in output:
        raise Failure("the plugin raised a Python error:\n" + output[-3000:])


def main(test):
    """Runs test() with a fresh temp dir; maps exceptions to exit codes."""
    workdir = tempfile.mkdtemp(prefix="rbpeek-it-")
    try:
        test(workdir)
    except Failure as e:
        log("FAIL: %s" % e)
        log("(work dir kept: %s)" % workdir)
        sys.exit(1)
    except SkipTest as e:
        log("SKIP: %s" % e)
        shutil.rmtree(workdir, ignore_errors=True)
        sys.exit(SKIP)
    log("PASS")
    shutil.rmtree(workdir, ignore_errors=True)
    sys.exit(0)


class SkipTest(Exception):
    pass
