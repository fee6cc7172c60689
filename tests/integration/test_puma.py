"""The whole service on a real server: Debian's puma in clustered mode (2
workers, 4 threads each) serving a Sinatra app (programs/puma_app) on
127.0.0.1, under a bounded load (4 client threads, at most 60 requests a
second in all, for the run), on Debian's ruby3.1.

    test_puma.py          it.puma
    test_puma.py yjit     it.puma.yjit: the same under RUBYOPT=--yjit, as a
                          new user ran it, sampled with --native (Machine)

- `rbpeek sample --pid MASTER --subprocesses`: the master and every
  worker, each stack under its own process; a third worker added during
  the run (puma's TTIN) joins; the app's App#crunch is in the workers'
  stacks and never the master's; idle threads are left out by default
  (with --per-thread: each thread has at most as many stacks as samples
  that found it not blocked, and those blocked the whole run none), and
  the summary gives every worker thread's states;
- each worker's `bt -a --json` names its main thread by the worker's pid
  (Ruby 3.1 keeps the master's);
- every process left running and untraced, and the server still serving.
"""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import harness
from harness import Failure

RUBY = "/usr/bin/ruby3.1"
PUMA = "/usr/bin/puma"
APP = os.path.join(harness.PROGRAMS, "puma_app", "config.ru")


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def children(pid):
    try:
        return [int(x) for x in open("/proc/%d/task/%d/children" % (pid, pid)).read().split()]
    except OSError:
        return []


def get(port, path, timeout=10):
    with urllib.request.urlopen("http://127.0.0.1:%d%s" % (port, path), timeout=timeout) as r:
        return r.read()


class Load:
    """4 client threads, at most `rate` requests a second in all."""

    def __init__(self, port, rate=60):
        self.port, self.rate, self.stop, self.done, self.errors = port, rate, False, 0, 0
        self.threads = [threading.Thread(target=self.run, args=(i,), daemon=True) for i in range(4)]

    def run(self, i):
        gap = 4.0 / self.rate
        while not self.stop:
            t = time.time()
            try:
                get(self.port, "/compute" if i % 2 == 0 else "/wait")
                self.done += 1
            except OSError:
                self.errors += 1
            time.sleep(max(0.0, gap - (time.time() - t)))

    def __enter__(self):
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self.stop = True
        for t in self.threads:
            t.join(timeout=30)


def status_field(pid, name):
    with open("/proc/%d/status" % pid) as f:
        return int([l for l in f if l.startswith(name + ":")][0].split()[1])


def tracer_of(pid):
    """The process tracing pid (TracerPid names its thread), 0 if none."""
    tid = status_field(pid, "TracerPid")
    try:
        return status_field(tid, "Tgid") if tid else 0
    except (OSError, IndexError):
        return tid


class Machine:
    """yjit (--native, the new user's RUBYOPT=--yjit): the machine frames of
    the stacks that run App#crunch. Each stack must start at its thread's
    start (libc's, or the executable's _start), hold JIT code named by a
    Ruby method ([JIT] ...) in most, and no frame may be named by the
    dynamic loader at an offset (JIT code once took its name: issue 36)."""

    def __init__(self):
        self.stacks = self.whole = self.jit = 0
        self.loader = []

    def add(self, frames, n):
        self.stacks += n
        if frames and (frames[0].endswith("(libc.so.6)") or frames[0].startswith("_start ")):
            self.whole += n
        if any(f.startswith("[JIT] ") for f in frames):
            self.jit += n
        self.loader += [f for f in frames if re.match(r"ld-linux[^ ]*\+0x", f)]

    def check(self):
        if not self.stacks:
            raise Failure("--native: no stack ran App#crunch")
        if self.whole < 0.95 * self.stacks or self.jit < 0.5 * self.stacks or self.loader:
            raise Failure("--native under YJIT: of %d stacks running App#crunch, %d start at their thread's start, %d "
                          "hold JIT code; frames named by the loader: %s"
                          % (self.stacks, self.whole, self.jit, sorted(set(self.loader))[:5]))
        harness.log("puma --yjit: %d stacks ran App#crunch, %d whole to their thread's start, %d through JIT code"
                    % (self.stacks, self.whole, self.jit))


def test(workdir, yjit=False):
    if not (os.path.exists(PUMA) and os.path.exists(RUBY)):
        raise harness.SkipTest("Debian's puma is not installed (apt-get install puma ruby-sinatra)")
    port = free_port()
    log = open(os.path.join(workdir, "puma.log"), "w")
    master = subprocess.Popen([RUBY, PUMA, "-w", "2", "-t", "4:4", "-b", "tcp://127.0.0.1:%d" % port,
                               "--tag", "rbpeek-app", APP], stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, cwd=workdir, start_new_session=True,
                              env=dict(os.environ, RUBYOPT="--yjit") if yjit else None)
    try:
        deadline = time.time() + 120
        while True:
            if master.poll() is not None or time.time() > deadline:
                raise Failure("puma did not start: %s" % open(os.path.join(workdir, "puma.log")).read()[-2000:])
            try:
                if len(children(master.pid)) >= 2 and get(port, "/wait", 2) == b"ok":
                    break
            except OSError:
                pass
            time.sleep(0.2)
        workers = children(master.pid)
        summary, folded = os.path.join(workdir, "s.json"), os.path.join(workdir, "all.folded")
        with Load(port) as load:
            time.sleep(1.0)
            sampler = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(master.pid),
                                        "--subprocesses", "--duration", "8", "--per-thread", "--json", "-o", summary,
                                        "--folded", folded] + (["--native"] if yjit else []), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True, cwd=workdir)
            try:
                deadline = time.time() + 60
                while not all(tracer_of(w) == sampler.pid for w in workers):
                    if sampler.poll() is not None or time.time() > deadline:
                        raise Failure("the sampler never traced the workers: %s" % sampler.communicate()[1][-2000:])
                    time.sleep(0.05)
                os.kill(master.pid, 21)   # SIGTTIN: puma adds a worker
                out, err = sampler.communicate(timeout=300)
            finally:
                if sampler.poll() is None:
                    sampler.kill()
                    sampler.wait()
            served = load.done
        harness.assert_no_traceback(out + err)
        if sampler.returncode != 0:
            raise Failure("sample --subprocesses: exit %d:\n%s" % (sampler.returncode, (out + err)[-3000:]))
        now = children(master.pid)
        third = [p for p in now if p not in workers]
        if not third:
            raise Failure("puma added no worker on TTIN (workers %s, now %s)" % (workers, now))
        doc = harness.read_json(summary)
        procs = {p["pid"]: p for p in doc["processes"]}
        want = [master.pid] + workers + third
        missing = [p for p in want if p not in procs]
        if missing:
            raise Failure("processes not sampled: %s (sampled %s)" % (missing, sorted(procs)))
        if not procs[third[0]]["joined_after_s"] > 0:
            raise Failure("the added worker did not join during the run: %s" % procs[third[0]])
        crunch, per_tid, machine = {}, {}, Machine()
        with open(folded) as f:
            for line in f:
                stack, n = line.rstrip("\n").rsplit(" ", 1)
                frames = stack.split(";")
                m = re.search(r"\(pid (\d+)\)$", frames[0])
                t = re.search(r"\(tid (\d+)\)$", frames[1]) if len(frames) > 1 else None
                if not m or not t:
                    raise Failure("a stack without its process and thread: %r" % line[:200])
                pid = int(m.group(1))
                per_tid[int(t.group(1))] = per_tid.get(int(t.group(1)), 0) + int(n)
                if any(f.startswith("App#crunch") or f.startswith("crunch ") for f in frames):
                    crunch[pid] = crunch.get(pid, 0) + int(n)
                    machine.add(frames[2:], int(n))
        # Idle threads left out: a thread's stacks are at most its samples
        # that were not blocked (puma's idle pool threads: none at all).
        idle = 0
        for t in doc["threads"]:
            kept = per_tid.get(t["tid"], 0)
            busy = round(t["samples"] * (1.0 - t["states"]["blocked"]))
            if kept > busy:
                raise Failure("thread %r (tid %d): %d stacks kept, but only %d of its %d samples were not blocked"
                              % (t["name"], t["tid"], kept, busy, t["samples"]))
            idle += t["states"]["blocked"] == 1.0
        if not idle:
            raise Failure("no thread was idle the whole run (puma's master and pool have some)")
        if crunch.get(master.pid):
            raise Failure("App#crunch under the master (it serves nothing)")
        if sum(1 for w in workers if crunch.get(w, 0) > 0) < 2:
            raise Failure("App#crunch not in both workers' stacks: %s" % crunch)
        for w in workers:
            ts = [t for t in doc["threads"] if t["pid"] == w]
            if len(ts) < 5 or any(abs(sum(t["states"].values()) - 1) > 1e-6 for t in ts if t["samples"]):
                raise Failure("worker %d's thread states: %s" % (w, ts))
        for w in workers:
            bt = harness.strict_json(harness.cli(["bt", "-a", "--json", "--pid", str(w)], raw=True)[0])
            main = [t for t in bt["threads"] if t["main"]]
            if len(main) != 1 or main[0]["native_tid"] != w:
                raise Failure("worker %d: bt names its main thread %s" % (w, [t["native_tid"] for t in main]))
        for p in [master.pid] + children(master.pid):
            if tracer_of(p):
                raise Failure("pid %d left traced" % p)
        if get(port, "/wait") != b"ok":
            raise Failure("the server no longer serves")
        if yjit:
            machine.check()
        gvl = {w: round(procs[w]["states"]["gvl_wait"], 3) for w in workers}
        harness.log("puma: master %d, workers %s, added %s (joined after %.2f s); %d requests served meanwhile; "
                    "crunch samples %s; GVL wait by worker %s"
                    % (master.pid, workers, third, procs[third[0]]["joined_after_s"], served, crunch, gvl))
    finally:
        try:
            os.killpg(master.pid, 9)
        except OSError:
            pass
        master.wait(timeout=30)


if __name__ == "__main__":
    harness.main(lambda wd: test(wd, yjit=sys.argv[1:] == ["yjit"]))
