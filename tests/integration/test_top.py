"""`rbpeek top` read off a real terminal (tmux: send-keys, capture-pane).

    test_top.py RUBY          it.top.<ruby>

programs/cpu_split.rb splits its main thread's CPU time between alpha and
beta (about 76/24) and logs the split it measures itself. `rbpeek top
--pid` runs in a tmux pane: the screen must refresh (the sample count in
its header grows between two captures), rank alpha above beta by own
share, with alpha's share of the two (totals: callees included, as the
program's clock counts them) within the bound of its samples
(BOUND_Z standard errors of a binomial share of the alpha and beta
samples) of the program's own measure over the same time, and give the GC's share of the CPU time
with its interval on its second line (its value is judged by
it.gc_share); 't' sorts by total (the header says so,
and <main> comes first), space holds the screen (two captures more than a
refresh period apart are the same) and space again lets it go on; 'q'
quits, and a second run ends by Ctrl-C: each time top exits with status 0
and the target is left running and untraced. Each step waits for the
screen to show its effect (polled, up to STEP_TIMEOUT), not a fixed time.
"""

import os
import re
import shutil
import subprocess
import sys
import time

import harness
from harness import Failure

SESSION = "rbpeek-top-test-%d" % os.getpid()
# A tmux server of this test's own: on the shared default server, one test's
# last session ending stops the server while another test's new-session is
# connecting to it ("server exited unexpectedly", CI's it.top.debian-3.1).
SERVER = "rbpeek-top-%d" % os.getpid()
# And that server is told to outlive its sessions: by default it exits when
# the last one ends, and the Ctrl-C run's new-session, sent right after the
# first run's kill-session, could reach it exiting (CI's it.top.3.4.5, the
# same message). test() ends it with kill-server.
SERVER_CONF = "set-option -g exit-empty off\n"
_conf_path = None
RATE = 400            # Hz: 800 samples, the split's judge, in about 2 s
FIRST_SAMPLES = 800
REFRESH = 1.0         # top's default --refresh
STEP_TIMEOUT = 15.0   # s: a step whose effect has not shown by then failed
# One comparison per Ruby it runs on (2.7.4, 3.4.5, Debian's 3.1), together
# failing by chance in at most the suite's share of runs.
BOUND_Z = harness.family_z(3)


def tmux(*args):
    return subprocess.run(["tmux", "-L", SERVER, "-f", _conf_path or "/dev/null"] + list(args), capture_output=True,
                          text=True, timeout=30)


def capture():
    r = tmux("capture-pane", "-p", "-t", SESSION)
    return r.stdout


def header_samples(screen):
    m = re.search(r"^rbpeek top: (\d+) samples, ", screen, re.M)
    return int(m.group(1)) if m else None


def shares(screen, column):
    """{method label: % in column 0 (own) or 1 (total)} of the table's rows."""
    out = {}
    for line in screen.splitlines():
        m = re.match(r"\s*([\d.]+)\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+(\S.*?) \(", line)
        if m:
            label = m.group(3).split("#")[-1]
            out[label] = out.get(label, 0.0) + float(m.group(1 + column))
    return out


def wait_screen(what, ok, timeout=STEP_TIMEOUT):
    """Captures the pane every 0.1 s until ok(screen); that screen. A
    Failure naming what did not show within timeout."""
    deadline = time.time() + timeout
    while True:
        screen = capture()
        if ok(screen):
            return screen
        if time.time() > deadline:
            raise Failure("%s did not show within %g s:\n%s" % (what, timeout, screen))
        time.sleep(0.1)


def samples_past(n):
    return lambda screen: (header_samples(screen) or 0) > n


def measured_split(workdir, t0, t1):
    rows = []
    with open(os.path.join(workdir, "cpu.log")) as f:
        for line in f:
            p = line.split()
            if len(p) == 3:
                rows.append(tuple(float(x) for x in p))
    inside = [r for r in rows if t0 <= r[0] <= t1]
    if len(inside) < 5:
        raise Failure("the program logged %d lines while top ran" % len(inside))
    a, b = inside[0], inside[-1]
    alpha, beta = b[1] - a[1], b[2] - a[2]
    return alpha / (alpha + beta)


def start_top(target, status_file):
    # The pane's shell has the tmux server's environment, not ours: the
    # library under test is named on the command.
    lib = os.environ.get("RBPEEK_LIBRARY")
    cmd = "%s%s %s top --pid %d --rate %d; echo $? > %s; sleep 600" % (
        "RBPEEK_LIBRARY=%s " % lib if lib else "", sys.executable, harness.RBPEEK_CLI, target.pid, RATE, status_file)
    r = tmux("new-session", "-d", "-s", SESSION, "-x", "200", "-y", "40", cmd)
    if r.returncode != 0:
        raise Failure("tmux new-session failed: %s" % r.stderr)


def wait_status(status_file, what, timeout=30):
    deadline = time.time() + timeout
    while not os.path.exists(status_file) or not open(status_file).read().strip():
        if time.time() > deadline:
            raise Failure("top did not end on %s:\n%s" % (what, capture()))
        time.sleep(0.1)
    rc = int(open(status_file).read().strip())
    if rc != 0:
        raise Failure("top ended by %s with status %d:\n%s" % (what, rc, capture()))


def check_untraced(target):
    target.assert_left_running()
    with open("/proc/%d/status" % target.pid) as f:
        tracer = [l for l in f if l.startswith("TracerPid:")][0].split()[1]
    if tracer != "0":
        raise Failure("the target was left traced by %s" % tracer)


def test(spec, workdir):
    if not shutil.which("tmux"):
        raise harness.SkipTest("tmux is not installed")
    global _conf_path
    _conf_path = os.path.join(workdir, "tmux.conf")
    with open(_conf_path, "w") as f:
        f.write(SERVER_CONF)
    ruby = harness.ruby_binary(spec)
    target = harness.Target(ruby, "cpu_split.rb", workdir)
    try:
        status = os.path.join(workdir, "status")
        t0 = time.time()
        start_top(target, status)
        try:
            first = wait_screen("%d samples" % FIRST_SAMPLES, samples_past(FIRST_SAMPLES - 1))
            t1 = time.time()
            n1 = header_samples(first)
            second = wait_screen("a refresh", samples_past(n1))
            gc = re.search(r"^GC ([0-9.]+)% of its thread's CPU time \(90%: ([0-9.]+)-([0-9.]+)%, (\d+) samples on a "
                           r"CPU\)", first, re.M)
            if not gc or not float(gc.group(2)) <= float(gc.group(1)) <= float(gc.group(3)) or int(gc.group(4)) < 1:
                raise Failure("top's second line does not give the GC's share of the CPU time:\n%s" % first)
            own = shares(first, 0)
            if not own.get("alpha", 0.0) > own.get("beta", 0.0) > 0:
                raise Failure("alpha (%.1f%%) not ranked above beta (%.1f%%):\n%s"
                              % (own.get("alpha", 0.0), own.get("beta", 0.0), first))
            # The program's clock counts a method's callees as its own time
            # (beta's Integer#^ calls, a C method on every Ruby): their
            # totals, as it.sample judges the same program.
            total = shares(first, 1)
            a, b = total.get("alpha", 0.0), total.get("beta", 0.0)
            split = measured_split(target.workdir, t0 + 1.0, t1)
            # total % of the header's samples: the alpha and beta samples
            n_ab = max(1.0, (a + b) / 100.0 * n1)
            bound = BOUND_Z * (max(split * (1.0 - split), 0.01) / n_ab) ** 0.5
            harness.log("top: alpha %.1f%%, beta %.1f%% in all (%.1f%% of the two, of some %.0f samples; measured "
                        "%.1f%%, bound %.1f points); %d then %d samples; %s"
                        % (a, b, 100 * a / (a + b), n_ab, 100 * split, 100 * bound, n1, header_samples(second),
                           gc.group(0)))
            if abs(a / (a + b) - split) > bound:
                raise Failure("top gives alpha %.1f%% of alpha+beta, the program measured %.1f%%: more than %.1f "
                              "points (%.2f standard errors of %.0f samples) apart:\n%s"
                              % (100 * a / (a + b), 100 * split, 100 * bound, BOUND_Z, n_ab, first))
            tmux("send-keys", "-t", SESSION, "t")
            screen = wait_screen("'t' (sorted by total)", lambda sc: "sorted by total" in sc)
            rows = [l for l in screen.splitlines() if re.match(r"\s*[\d.]+\s+[\d.]+\s", l)]
            if not rows or "<main>" not in rows[0]:
                raise Failure("'t' did not sort by total:\n%s" % screen)
            tmux("send-keys", "-t", SESSION, "Space")
            held1 = wait_screen("space (HELD)", lambda sc: "HELD" in sc)
            time.sleep(1.5 * REFRESH)   # past a refresh: a screen not held would have changed
            held2 = capture()
            if held1 != held2:
                raise Failure("space did not hold the screen:\n%s\n----\n%s" % (held1, held2))
            tmux("send-keys", "-t", SESSION, "Space")
            wait_screen("space again (the screen going on)", samples_past(header_samples(held2)))
            tmux("send-keys", "-t", SESSION, "q")
            wait_status(status, "q")
            check_untraced(target)
        finally:
            tmux("kill-session", "-t", SESSION)
        # Ctrl-C
        os.unlink(status)
        start_top(target, status)
        try:
            wait_screen("top's first screen", samples_past(0))
            tmux("send-keys", "-t", SESSION, "C-c")
            wait_status(status, "Ctrl-C")
            check_untraced(target)
        finally:
            tmux("kill-session", "-t", SESSION)
        harness.log("top: refreshes, ranks, sorts, holds; q and Ctrl-C leave the target running and untraced")
    finally:
        tmux("kill-server")
        target.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], wd))
