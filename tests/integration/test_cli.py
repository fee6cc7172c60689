"""The `rbpeek` command line (no debugger) against the Ruby's own view.

    test_cli.py bt RUBY       bt -a --json, --pid and --core, vs backtrace_locations
    test_cli.py heap RUBY     heap --json and --dump, --pid and --core, vs ObjectSpace
    test_cli.py sample RUBY   sample --pid vs the target's own CPU split, also as go tool
                              pprof -top reads the --pprof file; --duration; Ctrl-C;
                              --core refused
    test_cli.py usage         --help, exit codes, one-line errors

The comparisons are those of test_bt.py, test_heap.py and test_sample.py,
on the same programs: only the front end differs (tools/rbpeek instead of
gdb or lldb), so this checks that the command line reads a process and a
core by itself as well as the debuggers do. A live target must be left
running, and exit codes must be 0 done, 1 failed, 2 wrong usage.
"""

import json
import os
import re
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import harness
from harness import Failure
import test_bt
import test_heap
import test_sample


def cli(args, want_rc=0, timeout=900, raw=False):
    rc, out, err = harness.run_cli(args, timeout=timeout, raw=raw)
    harness.assert_no_traceback((out.decode("utf-8", "replace") if raw else out) + err)
    if want_rc is not None and rc != want_rc:
        raise Failure("rbpeek %s: exit %d (wanted %d)\nstdout: %s\nstderr: %s"
                      % (" ".join(args), rc, want_rc, out[-2000:], err[-2000:]))
    return out, err


def ruby_of(spec):
    ruby = harness.ruby_binary(spec)
    if not os.path.exists(ruby):
        raise Failure("Ruby %s is not built (%s); run scripts/build-rubies.sh" % (spec, ruby))
    return ruby


def test_bt_cmd(spec, workdir):
    ruby = ruby_of(spec)
    target = harness.Target(ruby, "bt_scenarios.rb", workdir)
    try:
        expected = target.expected()
        out, _ = cli(["bt", "-a", "--json", "--pid", str(target.pid)], raw=True)
        n = test_bt.compare(expected, harness.strict_json(out))
        target.assert_left_running()
        harness.log("rbpeek bt --pid: %d frames identical" % n)
        # Without -a: the main thread, as gdb -p selects it; text as Ruby prints it.
        out, _ = cli(["bt", "--pid", str(target.pid)])
        main = next(t for t in expected["threads"] if t["main"])
        if not out.startswith("Thread 1 (main") or "%s:%d:in " % (main["frames"][0]["path"],
                                                                  main["frames"][0]["lineno"]) not in out:
            raise Failure("rbpeek bt (no -a) did not show the main thread's stack:\n" + out[-2000:])
        core = target.gcore()
        path = os.path.join(workdir, "bt.json")
        _, err = cli(["bt", "-a", "--json", "--core", core, "--exe", ruby, "-o", path])
        if "rbpeek: wrote " + path not in err + _:
            raise Failure("rbpeek bt -o did not say it wrote %s" % path)
        n = test_bt.compare(expected, harness.read_json(path))
        out, _ = cli(["bt", "-a", "--json", "--core", core], raw=True)   # the core alone: ELF symbols only
        test_bt.compare(expected, harness.strict_json(out))
        harness.log("rbpeek bt --core (with and without --exe): %d frames identical" % n)
        # threads and locks run too, and name the same threads as bt.
        doc = harness.strict_json(cli(["threads", "--json", "--core", core], raw=True)[0])
        names = sorted(t["name"] or "<main>" for t in doc["threads"] if t["name"] != "rbpeek-recorder")
        want = sorted(t["name"] if not t["main"] else "<main>" for t in expected["threads"])
        if names != want:
            raise Failure("rbpeek threads --core: threads %s, Ruby has %s" % (names, want))
        harness.strict_json(cli(["locks", "--json", "--pid", str(target.pid)], raw=True)[0])
        info, _ = cli(["info", "--pid", str(target.pid)])
        if "Ruby version:  %s" % expected["ruby_version"] not in info or "/proc/%d/mem" % target.pid not in info:
            raise Failure("rbpeek info --pid:\n" + info)
        target.assert_left_running()
    finally:
        target.close()


def test_heap_cmd(spec, workdir):
    ruby = ruby_of(spec)
    target = harness.Target(ruby, "heap_population.rb", workdir, timeout=600)
    try:
        expected = target.expected()
        with open(os.path.join(workdir, "counts.json"), encoding="utf-8") as f:
            counts = json.load(f)
        ruby_dump = test_heap.load_dump(os.path.join(workdir, "dump.jsonl"))
        mimic = expected["ruby_version"].startswith("2.")
        core = None
        for mode in ("live", "core"):
            if mode == "live":
                where = ["--pid", str(target.pid)]
            else:
                core = core or target.gcore()
                where = ["--core", core, "--exe", ruby]
            census = harness.strict_json(cli(["heap", "--json"] + where, raw=True)[0])
            if census["ruby_version"] != expected["ruby_version"]:
                raise Failure("version: rbpeek says %s, Ruby says %s" % (census["ruby_version"],
                                                                           expected["ruby_version"]))
            test_heap.compare_census(expected, counts, census)
            dump = os.path.join(workdir, "rbpeek-%s.jsonl" % mode)
            out, _ = cli(["heap", "--dump", dump] + where)
            if not re.search(r"rbpeek: wrote \d+ objects", out):
                raise Failure("rbpeek heap --dump said: %s" % out)
            test_heap.compare_dumps(ruby_dump, test_heap.load_dump(dump, mimic_27=mimic))
            if mode == "live":
                target.assert_left_running()
            harness.log("rbpeek heap %s: census and dump agree with Ruby's own" % " ".join(where[:1]))
    finally:
        target.close()


def test_sample_cmd(spec, workdir):
    ruby = ruby_of(spec)
    target = test_sample.SplitTarget(ruby, os.path.join(workdir, "a"))
    try:
        folded = os.path.join(workdir, "all.folded")
        svg = os.path.join(workdir, "all.svg")
        ss = os.path.join(workdir, "all.speedscope.json")
        pprof = os.path.join(workdir, "all.pb.gz")
        n = test_sample.SAMPLES
        out, err = cli(["sample", "--pid", str(target.pid), str(n), "--rate", str(test_sample.RATE),
                        "--folded", folded, "--svg", svg, "--speedscope", ss, "--pprof", pprof])
        target.assert_left_running()
        if not err.startswith("rbpeek: sampling pid %d" % target.pid):
            raise Failure("no progress line on stderr: %r" % err[:300])
        if test_sample.samples_reported(out) != [n]:
            raise Failure("expected a summary of %d samples:\n%s" % (n, out[-3000:]))
        stacks = test_sample.parse_folded(folded)
        start, end = test_sample.sampling_window(out, folded)
        split = target.split_between(start, end)
        test_sample.check_accuracy(stacks, split, "rbpeek sample --pid (%s)" % spec)
        test_sample.check_pprof(pprof, stacks, split, "rbpeek sample --pprof (%s)" % spec)
        ET.parse(svg)
        prof = harness.read_json(ss)["profiles"][0]
        if sum(prof["weights"]) != sum(c for _f, c in stacks):
            raise Failure("speedscope file disagrees with the folded stacks")
        # --duration, and the default file names (rbpeek-PID-TIME.folded/.svg) in the current directory.
        t0 = time.monotonic()
        rc, out, err = run_in(workdir, ["sample", "--pid", str(target.pid), "--duration", "1"])
        took = time.monotonic() - t0
        if rc != 0 or "1 s elapsed" not in out:
            raise Failure("rbpeek sample --duration 1: exit %d:\n%s\n%s" % (rc, out[-2000:], err[-2000:]))
        made = sorted(f for f in os.listdir(workdir) if f.startswith("rbpeek-%d-" % target.pid))
        if len(made) != 2 or not made[0].endswith(".folded") or not made[1].endswith(".svg"):
            raise Failure("default outputs: %s" % made)
        harness.log("rbpeek sample --duration 1: %.1f s in all, wrote %s" % (took, made))
        target.assert_left_running()
        # Ctrl-C ends sampling: what was collected is written, exit 0.
        ctrl_c = os.path.join(workdir, "ctrl-c.folded")
        p = subprocess.Popen([sys.executable, harness.RBPEEK_CLI, "sample", "--pid", str(target.pid), "--folded",
                              ctrl_c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             stdin=subprocess.DEVNULL, preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not target_traced(target.pid):
            time.sleep(0.1)
        time.sleep(1.0)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
        harness.assert_no_traceback(out + err)
        if p.returncode != 0 or "interrupted (Ctrl-C)" not in out + err or not os.path.exists(ctrl_c):
            raise Failure("rbpeek sample ended by Ctrl-C: exit %d, folded written: %s\n%s%s"
                          % (p.returncode, os.path.exists(ctrl_c), out[-1500:], err[-1500:]))
        target.assert_left_running()
        if target_traced(target.pid):
            raise Failure("after Ctrl-C the target is still traced")
        harness.log("rbpeek sample ended by Ctrl-C: exit 0, %d stacks written, target running"
                    % len(test_sample.parse_folded(ctrl_c)))
        core = target.gcore()
        _, err = cli(["sample", "--core", core, "10", "--folded", folded + ".core"], want_rc=1)
        if "core file" not in err or len(err.strip().splitlines()) != 1 or os.path.exists(folded + ".core"):
            raise Failure("rbpeek sample --core: not one refusal line: %r" % err)
    finally:
        target.close()


def target_traced(pid):
    """True while some process traces pid (rbpeek sampling it)."""
    with open("/proc/%d/status" % pid) as f:
        return any(l.startswith("TracerPid:") and l.split()[1] != "0" for l in f)


def run_in(cwd, args):
    r = subprocess.run([sys.executable, harness.RBPEEK_CLI] + args, capture_output=True, text=True, cwd=cwd,
                       timeout=300, stdin=subprocess.DEVNULL)
    harness.assert_no_traceback(r.stdout + r.stderr)
    return r.returncode, r.stdout, r.stderr


def test_usage(workdir):
    out, _ = cli(["--help"])
    for name in ("bt", "threads", "locks", "heap", "sample", "info"):
        if not re.search(r"^  %s\s" % name, out, re.M):
            raise Failure("rbpeek --help does not list %s:\n%s" % (name, out))
        text, _ = cli([name, "--help"])
        if not text.startswith("rbpeek %s (--pid PID | --core CORE [--exe PATH])" % name) or "--core CORE" not in text:
            raise Failure("rbpeek %s --help:\n%s" % (name, text))
    cases = [
        ([], 2, r"usage: rbpeek COMMAND"),
        (["frobnicate", "--pid", "1"], 2, r"no command 'frobnicate'"),
        (["bt"], 2, r"give the target: --pid PID"),
        (["bt", "--pid", "abc"], 2, r"--pid wants a process id"),
        (["bt", "--pid", "1", "--core", "x"], 2, r"give the target"),
        (["bt", "--pid", "%d" % os.getpid(), "--frames"], 2, r"rbpeek bt: unrecognized arguments: --frames "
                                                           r"\(see 'rbpeek bt --help'\)"),
        (["bt", "--pid", "%d" % os.getpid(), "--max-frames", "-3"], 2, r"must be positive"),
        (["sample", "--pid", "%d" % os.getpid(), "--via-debugger"], 2, r"needs a debugger"),
        (["bt", "--exe", "/bin/true", "--pid", "1"], 2, r"--exe goes with --core"),
        (["bt", "--core", os.path.join(workdir, "nothing")], 1, r"no such file"),
        (["bt", "--pid", "999999999"], 1, r"no process 999999999"),
        # Python itself, not a Ruby: one line saying so, exit 1.
        (["bt", "--pid", "%d" % os.getpid()], 1, r"Ruby"),
    ]
    for args, rc, pattern in cases:
        r, out, err = harness.run_cli(args)
        text = out + err
        harness.assert_no_traceback(text)
        if r != rc or not re.search(pattern, text):
            raise Failure("rbpeek %s: exit %d, wanted %d and /%s/:\n%s" % (" ".join(args), r, rc, pattern, text))
        if rc and len(err.strip().splitlines()) != 1 and args:
            raise Failure("rbpeek %s: not one error line:\n%s" % (" ".join(args), err))
    harness.log("--help of every command, and %d error cases with their exit codes" % len(cases))


if __name__ == "__main__":
    what = sys.argv[1] if len(sys.argv) > 1 else None
    tests = {"bt": test_bt_cmd, "heap": test_heap_cmd, "sample": test_sample_cmd}
    if what == "usage" and len(sys.argv) == 2:
        harness.main(test_usage)
    elif what in tests and len(sys.argv) == 3:
        harness.main(lambda wd: tests[what](sys.argv[2], wd))
    else:
        sys.exit(__doc__)
