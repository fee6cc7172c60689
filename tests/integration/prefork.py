"""The pre-forking target of the whole-service tests (test_service.py):
programs/prefork.rb running, its master's and workers' own views, and the
small helpers its checks share (the kernel's view of a process, the
command line and a debugger run with their output checked).
"""

import os
import time

import harness
from harness import Failure


class Prefork:
    """programs/prefork.rb, running: the master and its workers' views."""

    def __init__(self, ruby, workdir):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.ruby = ruby
        self.target = harness.Target(ruby, "prefork.rb", workdir, timeout=120)
        self.pid = self.target.pid
        self.master = self.view("master")
        self.workers = {r: self.view(r) for r in ("one", "two")}

    def gcore(self):
        """The core combinations' core: worker one's (its NT_PRSTATUS notes
        are the kernel's list of its threads)."""
        return harness.gcore(self.workers["one"]["pid"], self.workdir)

    def assert_left_running(self):
        self.assert_running()

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

    def computing(self):
        """The workers compute (in work_one...) inside the block, and nap
        outside it: prefork.rb reads WORKDIR/busy every 10 ms while it naps
        and every 50 ms while it computes (harness.Target.computing)."""
        return self.target.computing()

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


def after_wrote(out, path):
    """What a debugger printed after 'rbpeek: wrote PATH' (the next command's output)."""
    mark = "rbpeek: wrote %s\n" % path
    if mark not in out:
        raise Failure("the debugger did not write %s:\n%s" % (path, out[-2000:]))
    return out[out.index(mark) + len(mark):]
