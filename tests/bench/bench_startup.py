"""Benchmark: the start-up of `rbpeek bt --pid` (not a test; prints a table).

    python3 tests/bench/bench_startup.py [--runs N] [--cli RBPEEK ...] [PYTHON ...]
        default: tools/rbpeek; /usr/bin/python3, and `python3` of PATH if
        that is another

Debian's ruby3.1 parked 20 frames deep is the target. For each Python and
each RBPEEK (--cli, repeatable: a source tree's tools/rbpeek, or the
usr/bin/rbpeek of a root the .deb is installed in), the whole command
`PYTHON RBPEEK bt --pid PID` runs:
  as found   writing no byte-compiled file, as a user who cannot write the
             package's __pycache__: in a source tree, every module of
             rbpeeklib compiled on each run; in the .deb's tree, the .pyc
             its postinst wrote are read;
  .pyc       with byte-compiled files (PYTHONPYCACHEPREFIX, written by an
             unmeasured first run).
`PYTHON -c pass` is the floor. Every configuration runs once unmeasured,
then N times (default 20) in rounds, one run of each configuration per
round, so that a change of load touches them all alike. Each: median wall
time, and median CPU time (user + system, from wait4), which a loaded
machine disturbs less than wall time. Then, per RBPEEK, the modules
`rbpeek bt` imports: how many, and rbpeeklib's with their -X importtime
(which misses importlib.import_module's: the command's own module). The
load average is printed before and after.
"""

import argparse
import glob
import os
import shutil
import statistics
import subprocess
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUBY = "/usr/bin/ruby3.1"
TARGET = "def f(n) = n.zero? ? sleep : f(n-1); f(20)"

# Runs a script (sys.argv[1], its arguments after it) as python would, then
# lists the modules loaded since the interpreter started, in their order.
IMPORTED = """import runpy, sys
before = set(sys.modules)
sys.argv = sys.argv[1:]
try:
    runpy.run_path(sys.argv[0], run_name="__main__")
except SystemExit:
    pass
sys.stderr.write("IMPORTED " + " ".join(m for m in list(sys.modules) if m not in before) + "\\n")
"""


def timed(argv, env):
    """(wall seconds, CPU seconds) of one run of argv."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit("%s exited %d" % (" ".join(argv), os.waitstatus_to_exitcode(status)))
    return wall, usage.ru_utime + usage.ru_stime


def row(label, samples):
    wall = sorted(s[0] for s in samples)
    cpu = sorted(s[1] for s in samples)
    return ("| %s | %.0f | %.0f-%.0f | %.0f | %.0f-%.0f |"
            % (label, 1e3 * statistics.median(wall), 1e3 * wall[0], 1e3 * wall[-1],
               1e3 * statistics.median(cpu), 1e3 * cpu[0], 1e3 * cpu[-1]))


def imported(python, argv, env, empty):
    """(how many modules argv imports beyond those that running the empty
    script empty does, those of rbpeeklib in the order they were loaded)."""
    def modules(script_argv):
        r = subprocess.run([python, "-c", IMPORTED] + script_argv, env=env, capture_output=True, text=True)
        return next(ln.split()[1:] for ln in r.stderr.splitlines() if ln.startswith("IMPORTED"))
    names, noise = modules(argv), set(modules([empty]))
    return len(set(names) - noise), [n for n in names if n.startswith("rbpeeklib")]


def importtime(python, argv, env):
    """{module: (self us, cumulative us)} from -X importtime."""
    r = subprocess.run([python, "-X", "importtime"] + argv, env=env, capture_output=True, text=True)
    times = {}
    for line in r.stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, name = line[len("import time:"):].split("|")
            times[name.strip()] = (own.strip(), cumulative.strip())
    return times


def loadavg():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--cli", action="append")
    ap.add_argument("pythons", nargs="*")
    args = ap.parse_args()
    clis = args.cli or [os.path.join(REPO, "tools", "rbpeek")]
    pythons = args.pythons
    if not pythons:
        pythons = ["/usr/bin/python3"]
        path_python = shutil.which("python3")
        if path_python and os.path.realpath(path_python) != os.path.realpath(pythons[0]):
            pythons.append(path_python)
    if not os.path.exists(RUBY):
        raise SystemExit("%s is not installed (scripts/install-deps.sh installs it)" % RUBY)
    target = subprocess.Popen([RUBY, "-e", TARGET], stdin=subprocess.DEVNULL)
    cache = tempfile.mkdtemp(prefix="rbpeek-bench-pyc-")
    try:
        time.sleep(0.5)
        print("load average before: %s" % loadavg())
        base = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
        as_found = dict(base, PYTHONDONTWRITEBYTECODE="1")
        pyc = dict(base, PYTHONPYCACHEPREFIX=cache)
        configs = []
        for python in pythons:
            configs.append(("`%s -c pass`" % python, [python, "-c", "pass"], as_found))
            for cli in clis:
                argv = [python, cli, "bt", "--pid", str(target.pid)]
                configs.append(("`%s %s bt --pid`, as found" % (python, cli), argv, as_found))
                configs.append(("`%s %s bt --pid`, .pyc" % (python, cli), argv, pyc))
        for _label, argv, env in configs:
            timed(argv, env)  # unmeasured: writes the byte-compiled files where allowed
        samples = [[] for _ in configs]
        for _ in range(args.runs):
            for i, (_label, argv, env) in enumerate(configs):
                samples[i].append(timed(argv, env))
        print("load average after: %s" % loadavg())
        print("\n| command (%d runs each) | wall ms, median | wall range | CPU ms, median | CPU range |" % args.runs)
        print("|---|---:|---|---:|---|")
        for (label, _argv, _env), s in zip(configs, samples):
            print(row(label, s))

        empty = os.path.join(cache, "empty.py")
        open(empty, "w").close()
        for cli in clis:
            pkg = os.path.join(os.path.dirname(os.path.realpath(cli)), "..", "python", "rbpeeklib")
            found = glob.glob(os.path.join(pkg, "**", "__pycache__", "*.pyc"), recursive=True)
            argv = [cli, "bt", "--pid", str(target.pid)]
            count, ours = imported(pythons[0], argv, pyc, empty)
            times = importtime(pythons[0], argv, pyc)
            print("\n%s (%d .pyc beside rbpeeklib's modules): %s bt --pid imports %d modules beyond `-c pass`'s, "
                  "%d of rbpeeklib (-X importtime, self / cumulative us, with .pyc):"
                  % (cli, len(found), pythons[0], count, len(ours)))
            for name in ours:
                print("  %-40s %6s %7s" % ((name,) + times.get(name, ("-", "-"))))
    finally:
        target.kill()
        target.wait()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
