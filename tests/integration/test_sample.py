"""`ruby sample` against the target's own measure of where its CPU time went.

    test_sample.py RUBY [accuracy|other] [COMBO...]      e.g. test_sample.py 3.4.5 other lldb.core

The target (programs/cpu_split.rb) splits its main thread's CPU time between
two methods, alpha and beta, measures the split with its own thread CPU
clock and logs it every 50 ms. "accuracy" (the default; ctest's
it.sample.RUBY, which runs alone) does 1 and 2 with one such target per
Ruby, for gdb, lldb and the command line in turn, never two at once
(matrix.py); "other" (it.sample_other.RUBY) does the rest with one target
started with --burner, its core, and the command line. Live:

  1. `ruby sample --idle` (all threads, idle ones kept) must attribute the alpha/beta split within
     5 percentage points of the target's own measure over the time it was
     sampled (sampling disturbs caches, so the split is not quite the same
     before and during sampling: the program measures during),
     record the two idle threads (sleeper, reader) in every sample, and write
     folded stacks, an SVG that parses as XML, speedscope JSON whose
     sample count equals the folded total, and a pprof file that `go tool
     pprof -top` reads as a wall-time profile of the same samples, with the
     same hot method and split.
  2. `--threads current --per-thread` (the main thread is selected after
     attaching) records only the main thread, under its thread root frame.
  3. With a second CPU-bound thread (so one of the two always waits for the
     GVL, runnable for Ruby but blocked for the kernel), `--on-cpu
     --per-thread` keeps about one stack per sample (not two), from those
     two threads only, and never the sleeping or blocked ones.

The command line (`rbpeek sample --pid`) is checked as in 1, with every
writer; and (other) with --duration 1 and its default file names, and
ended by Ctrl-C (exit 0, the data written, the target running and
untraced). Core (other: one gcore of the --burner target): `ruby sample`
and `rbpeek sample --core` must refuse with one clear line and write
nothing. The target must be left running in every case.
"""

import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import harness
from harness import Failure
import matrix

TOLERANCE = 5.0   # percentage points
# 2000 samples: about 1 point of sampling noise. 400 Hz: the run takes 5 s
# (the test runs alone, so its time is the suite's), and a sample's stop,
# 0.4-0.6 ms in rbpeek's tracer (which gdb and lldb use here too), leaves
# the target running most of the time: samples taken only a few dozen
# microseconds of the target's time apart would see nearly the same stack,
# and count for little.
SAMPLES = 2000
RATE = 400


class SplitTarget(harness.Target):
    """cpu_split.rb, with its options passed through the environment."""

    def __init__(self, ruby, workdir, args=""):
        os.makedirs(workdir, exist_ok=True)
        super().__init__(ruby, "cpu_split.rb", workdir, env={"RBPEEK_CPU_SPLIT_ARGS": args})

    def split_between(self, start, end):
        """The target's own (alpha, beta) CPU seconds between two wall-clock
        times, from the records it logs every 50 ms (the first and last
        record inside the window)."""
        rows = []
        with open(os.path.join(self.workdir, "cpu.log")) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3:
                    rows.append(tuple(float(x) for x in parts))
        inside = [r for r in rows if start <= r[0] <= end]
        if len(inside) < 2:
            raise Failure("the target logged no CPU split while it was sampled (%d records in %.2f s)"
                          % (len(inside), end - start))
        first, last = inside[0], inside[-1]
        return last[1] - first[1], last[2] - first[2]


def sampling_window(output, folded_path, index=0):
    """(start, end) wall-clock times of the index-th `ruby sample` run: its
    folded file is written as soon as sampling ends, and its summary says
    how long it sampled."""
    durations = [float(x) for x in re.findall(r"^Samples:\s+\d+ in ([0-9.]+) s", output, re.M)]
    if len(durations) <= index:
        raise Failure("no sampling summary in the output:\n" + output[-3000:])
    end = os.stat(folded_path).st_mtime
    return end - durations[index], end


def parse_folded(path):
    stacks = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            frames, count = line.rsplit(" ", 1)
            stacks.append((frames.split(";"), int(count)))
    return stacks


def label(frame):
    """'Object#alpha (x.rb:12)' -> 'Object#alpha'."""
    return re.sub(r" \([^()]*\)$", "", frame)


def method_is(frame, name):
    # Ruby 3.4 labels methods "Object#alpha"; earlier Rubies "alpha".
    return label(frame) in (name, "Object#" + name)


def samples_reported(output):
    return [int(n) for n in re.findall(r"^Samples:\s+(\d+) in", output, re.M)]


def check_accuracy(stacks, split, what):
    alpha = sum(c for frames, c in stacks if any(method_is(f, "alpha") for f in frames))
    beta = sum(c for frames, c in stacks if any(method_is(f, "beta") for f in frames))
    if alpha + beta < 200:
        raise Failure("%s: too few samples in alpha/beta (%d + %d) to judge" % (what, alpha, beta))
    a_cpu, b_cpu = split
    want = 100.0 * a_cpu / (a_cpu + b_cpu)
    got = 100.0 * alpha / (alpha + beta)
    harness.log("%s: Ruby measured alpha %.1f%% (%.3f s / %.3f s CPU); rbpeek: %.1f%% (%d / %d samples)"
                % (what, want, a_cpu, b_cpu, got, alpha, alpha + beta))
    if abs(got - want) > TOLERANCE:
        raise Failure("%s: rbpeek attributes %.1f%% to alpha, Ruby measured %.1f%% (tolerance %.0f points)"
                      % (what, got, want, TOLERANCE))


def check_pprof(path, stacks, split, what, clock="wall"):
    """The pprof file as `go tool pprof -top` reads it: the default sample
    type is the clock (wall, or cpu with --on-cpu) in time units, the
    sample counts add up to the folded total and to the folded counts of
    alpha and beta, the hot method is the one the target measured as hot,
    with the alpha/beta split within TOLERANCE of the target's own, and
    (go tool pprof -raw) alpha and beta start at their `def` lines."""
    def top(*opts):
        r = subprocess.run(["go", "tool", "pprof", "-top"] + list(opts) + [path], capture_output=True, text=True,
                           timeout=120, env=dict(os.environ, HOME=os.environ.get("HOME", "/tmp")))
        if r.returncode != 0:
            raise Failure("%s: go tool pprof -top %s rejected %s:\n%s" % (what, " ".join(opts), path, r.stderr[-2000:]))
        return r.stdout + r.stderr
    out = top()
    if not re.search(r"^Type: %s$" % clock, out, re.M) or not re.search(r"Total samples = [0-9.]+m?s", out):
        raise Failure("%s: go tool pprof -top: not a %s-time profile:\n%s" % (what, clock, out[-2000:]))
    out = top("-sample_index=samples")
    m = re.search(r"Total samples = (\d+)", out)
    total = sum(c for _f, c in stacks)
    if not m or int(m.group(1)) != total:
        raise Failure("%s: pprof counts %s samples, the folded file %d:\n%s" % (what, m and m.group(1), total,
                                                                               out[-2000:]))
    cum = {}
    for line in out.splitlines():
        row = re.match(r"^\s*(\d+)\s+[0-9.]+%\s+[0-9.]+%\s+(\d+)\s+[0-9.]+%\s+(.+)$", line)
        if row:
            cum[row.group(3).strip()] = int(row.group(2))
    # Samples in each method, callees included: as check_accuracy counts them.
    alpha = sum(v for k, v in cum.items() if k in ("alpha", "Object#alpha"))
    beta = sum(v for k, v in cum.items() if k in ("beta", "Object#beta"))
    f_alpha = sum(c for frames, c in stacks if any(method_is(f, "alpha") for f in frames))
    f_beta = sum(c for frames, c in stacks if any(method_is(f, "beta") for f in frames))
    if (alpha, beta) != (f_alpha, f_beta):
        raise Failure("%s: pprof puts %d samples in alpha and %d in beta, the folded file %d and %d"
                      % (what, alpha, beta, f_alpha, f_beta))
    # Functions start where the methods are defined: `def alpha` in the
    # program's source is the line Ruby records as the method's first.
    with open(os.path.join(harness.PROGRAMS, "cpu_split.rb")) as f:
        defs = {m.group(1): i + 1 for i, l in enumerate(f) for m in [re.match(r"def (alpha|beta)$", l)] if m}
    raw = subprocess.run(["go", "tool", "pprof", "-raw", path], capture_output=True, text=True,
                         timeout=120).stdout
    starts = {}
    for m in re.finditer(r"M=\d+ (?:Object#)?(alpha|beta) \S*cpu_split\.rb:\d+ s=(\d+)", raw):
        starts.setdefault(m.group(1), set()).add(int(m.group(2)))
    if starts != {k: {v} for k, v in defs.items()}:
        raise Failure("%s: pprof functions start at %s, the program defines them at %s" % (what, starts, defs))
    a_cpu, b_cpu = split
    want = 100.0 * a_cpu / (a_cpu + b_cpu)
    got = 100.0 * alpha / (alpha + beta) if alpha + beta else 0.0
    hot = "alpha" if a_cpu > b_cpu else "beta"
    harness.log("%s: go tool pprof -top: alpha %d, beta %d samples (%.1f%%; the target measured %.1f%%)"
                % (what, alpha, beta, got, want))
    if (alpha > beta) != (hot == "alpha") or abs(got - want) > TOLERANCE:
        raise Failure("%s: go tool pprof shows alpha %.1f%% (%d/%d), the target measured %.1f%% (%s is hot)"
                      % (what, got, alpha, alpha + beta, want, hot))


def is_main_stack(frames):
    return label(frames[0]) == "<main>"


def leaf_is(frames, names):
    return label(frames[-1]) in names


SLEEP_LEAVES = ("sleep", "Kernel#sleep")
READ_LEAVES = ("read", "IO#read")


def live_all_threads(c):
    target = c.target
    folded_a = c.path("all.folded")
    svg_a = c.path("all.svg")
    ss_a = c.path("all.speedscope.json")
    pprof_a = c.path("all.pb.gz")
    folded_b = c.path("current.folded")
    cmds = ["ruby sample %d --rate %d --idle --folded %s --svg %s --speedscope %s --pprof %s"
            % (SAMPLES, RATE, folded_a, svg_a, ss_a, pprof_a),
            "ruby sample 200 --rate %d --threads current --per-thread --folded %s" % (RATE, folded_b)]
    rc, output = c.run_debugger(cmds)
    harness.assert_no_traceback(output)
    target.assert_left_running()
    for path in (folded_a, svg_a, ss_a, pprof_a, folded_b):
        if not os.path.exists(path):
            raise Failure("%s was not written; debugger output:\n%s" % (path, output[-3000:]))
    counts = samples_reported(output)
    if len(counts) != 2 or counts[0] != SAMPLES or counts[1] != 200:
        raise Failure("expected summaries of %d and 200 samples, got %s:\n%s" % (SAMPLES, counts, output[-3000:]))

    # 1. accuracy, and every thread in every sample.
    stacks = parse_folded(folded_a)
    start, end = sampling_window(output, folded_a)
    split = target.split_between(start, end)
    check_accuracy(stacks, split, "all threads")
    check_pprof(pprof_a, stacks, split, "--pprof")
    main = sum(n for frames, n in stacks if is_main_stack(frames))
    sleeper = sum(n for frames, n in stacks if leaf_is(frames, SLEEP_LEAVES) and not is_main_stack(frames))
    reader = sum(n for frames, n in stacks if leaf_is(frames, READ_LEAVES) and not is_main_stack(frames))
    if main < 0.95 * SAMPLES or sleeper < 0.95 * SAMPLES or reader < 0.95 * SAMPLES:
        raise Failure("not every thread in every sample: main %d, sleeper %d, reader %d of %d samples"
                      % (main, sleeper, reader, SAMPLES))

    # The other writers hold the same data.
    ET.parse(svg_a)
    ss = harness.read_json(ss_a)
    prof = ss["profiles"][0]
    total = sum(n for _f, n in stacks)
    if prof["type"] != "sampled" or len(prof["samples"]) != len(prof["weights"]) or \
            sum(prof["weights"]) != total:
        raise Failure("speedscope file disagrees with the folded stacks (%s weights vs %d)"
                      % (sum(prof.get("weights", [])), total))

    # 2. --threads current --per-thread: the main thread only.
    cur = parse_folded(folded_b)
    roots = {frames[0] for frames, _n in cur}
    if not cur or any(not r.startswith("Thread main") for r in roots):
        raise Failure("--threads current --per-thread: roots %s, expected only the main thread's" % sorted(roots))
    if any(not is_main_stack(frames[1:]) for frames, _n in cur):
        raise Failure("--threads current recorded a stack of another thread")
    harness.log("%d samples, main/sleeper/reader %d/%d/%d; --threads current: %d stacks under %s"
                % (SAMPLES, main, sleeper, reader, sum(n for _f, n in cur), sorted(roots)))


def live_on_cpu(c):
    folded = c.path("oncpu.folded")
    n = 600
    rc, output = c.run_debugger(["ruby sample %d --rate %d --on-cpu --per-thread --folded %s" % (n, RATE, folded)])
    harness.assert_no_traceback(output)
    c.target.assert_left_running()
    if not os.path.exists(folded):
        raise Failure("%s was not written; debugger output:\n%s" % (folded, output[-3000:]))
    stacks = parse_folded(folded)
    by_root = {}
    for frames, k in stacks:
        by_root[frames[0]] = by_root.get(frames[0], 0) + k
    total = sum(by_root.values())
    main = sum(k for r, k in by_root.items() if r.startswith("Thread main"))
    burner = sum(k for r, k in by_root.items() if r.startswith('Thread "burner"'))
    others = {r: k for r, k in by_root.items() if not (r.startswith("Thread main") or
                                                       r.startswith('Thread "burner"'))}
    harness.log("--on-cpu: %d stacks in %d samples: main %d, burner %d, others %s" % (total, n, main, burner, others))
    if others:
        raise Failure("--on-cpu kept threads that were not running: %s" % others)
    # Without the kernel's view, the thread waiting for the GVL would add
    # a second stack to nearly every sample.
    if total > 1.1 * n:
        raise Failure("--on-cpu kept %d stacks in %d samples: a GVL waiter was counted as running" % (total, n))
    # (How the two share the GVL is Ruby's business: 3.1 often lets the
    # burner keep it for most of the time.)
    if total < 0.6 * n:
        raise Failure("--on-cpu lost the running threads: %d stacks (main %d, burner %d) in %d samples"
                      % (total, main, burner, n))


def core_refusal(c):
    folded = c.path("core.folded")
    rc, output = c.run_debugger(["ruby sample 10 --folded " + folded])
    harness.assert_no_traceback(output)
    lines = [line for line in output.splitlines() if "rbpeek:" in line and "core file" in line]
    if len(lines) != 1 or "live process" not in lines[0]:
        raise Failure("expected one line refusing to sample a core, got:\n" + output[-3000:])
    if os.path.exists(folded):
        raise Failure("a profile was written for a core file")
    if re.search(r"^Samples:", output, re.M):
        raise Failure("sampling ran on a core file:\n" + output[-3000:])
    harness.log("refused: %s" % lines[0].strip())


def cli_live(c):
    """rbpeek sample --pid: accuracy and every writer."""
    target = c.target
    folded = c.path("all.folded")
    svg = c.path("all.svg")
    ss = c.path("all.speedscope.json")
    pprof = c.path("all.pb.gz")
    out, err = harness.cli(["sample", "--pid", str(target.pid), str(SAMPLES), "--rate", str(RATE), "--idle",
                            "--folded", folded, "--svg", svg, "--speedscope", ss, "--pprof", pprof])
    target.assert_left_running()
    if not err.startswith("rbpeek: sampling pid %d" % target.pid):
        raise Failure("no progress line on stderr: %r" % err[:300])
    if samples_reported(out) != [SAMPLES]:
        raise Failure("expected a summary of %d samples:\n%s" % (SAMPLES, out[-3000:]))
    stacks = parse_folded(folded)
    start, end = sampling_window(out, folded)
    split = target.split_between(start, end)
    check_accuracy(stacks, split, "rbpeek sample --pid")
    check_pprof(pprof, stacks, split, "rbpeek sample --pprof")
    ET.parse(svg)
    prof = harness.read_json(ss)["profiles"][0]
    if sum(prof["weights"]) != sum(n for _f, n in stacks):
        raise Failure("speedscope file disagrees with the folded stacks")


def cli_ends(c):
    """rbpeek sample --pid --duration 1, with the default file names
    (rbpeek-PID-TIME.folded/.svg) in the current directory, and ended by
    Ctrl-C."""
    target = c.target
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(target.pid), "--duration", "1"],
                       capture_output=True, text=True, cwd=c.workdir, timeout=300, stdin=subprocess.DEVNULL)
    harness.assert_no_traceback(r.stdout + r.stderr)
    took = time.monotonic() - t0
    if r.returncode != 0 or "1 s elapsed" not in r.stdout:
        raise Failure("rbpeek sample --duration 1: exit %d:\n%s\n%s" % (r.returncode, r.stdout[-2000:],
                                                                         r.stderr[-2000:]))
    made = sorted(f for f in os.listdir(c.workdir) if f.startswith("rbpeek-%d-" % target.pid))
    if len(made) != 2 or not made[0].endswith(".folded") or not made[1].endswith(".svg"):
        raise Failure("default outputs: %s" % made)
    harness.log("rbpeek sample --duration 1: %.1f s in all, wrote %s" % (took, made))
    target.assert_left_running()
    # Ctrl-C ends sampling: what was collected is written, exit 0.
    ctrl_c = c.path("ctrl-c.folded")
    p = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(target.pid), "--folded",
                          ctrl_c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not traced(target.pid):
        time.sleep(0.1)
    time.sleep(1.0)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=120)
    harness.assert_no_traceback(out + err)
    if p.returncode != 0 or "interrupted (Ctrl-C)" not in out + err or not os.path.exists(ctrl_c):
        raise Failure("rbpeek sample ended by Ctrl-C: exit %d, folded written: %s\n%s%s"
                      % (p.returncode, os.path.exists(ctrl_c), out[-1500:], err[-1500:]))
    target.assert_left_running()
    if traced(target.pid):
        raise Failure("after Ctrl-C the target is still traced")
    harness.log("rbpeek sample ended by Ctrl-C: exit 0, %d stacks written, target running"
                % len(parse_folded(ctrl_c)))


def cli_core(c):
    folded = c.path("core.folded")
    _, err = harness.cli(["sample", "--core", c.core, "10", "--folded", folded], want_rc=1)
    if "core file" not in err or len(err.strip().splitlines()) != 1 or os.path.exists(folded):
        raise Failure("rbpeek sample --core: not one refusal line: %r" % err)
    harness.log("refused: %s" % err.strip())


def traced(pid):
    """True while some process traces pid (rbpeek sampling it)."""
    with open("/proc/%d/status" % pid) as f:
        return any(line.startswith("TracerPid:") and line.split()[1] != "0" for line in f)


def check_split(c):
    (cli_live if c.debugger == "cli" else live_all_threads)(c)


def check_other(c):
    if c.debugger == "cli":
        (cli_ends if c.live else cli_core)(c)
    else:
        (live_on_cpu if c.live else core_refusal)(c)


def test(ruby_spec, part, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    if part == "accuracy":
        # Measured against the target's CPU clocks: one check at a time,
        # and the ctest test alone (RUN_SERIAL).
        m.run(lambda: SplitTarget(m.ruby, os.path.join(workdir, "split")), check_split,
              combos=[(d, "live") for d in matrix.DEBUGGERS + ("cli",)])
    else:
        m.run(lambda: SplitTarget(m.ruby, os.path.join(workdir, "burner"), "--burner"), check_other,
              combos=matrix.WITH_CLI, parallel=True)
    m.finish()


if __name__ == "__main__":
    args = sys.argv[1:]
    part = args.pop(1) if len(args) > 1 and args[1] in ("accuracy", "other") else "accuracy"
    if not args:
        sys.exit(__doc__)
    harness.main(lambda wd: test(args[0], part, args[1:], wd))
