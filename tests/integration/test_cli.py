"""The `rbpeek` command line's usage: --help of every command, exit codes
(0 done, 1 failed, 2 wrong usage) and one-line errors.

    test_cli.py usage

What the command line reads (bt, threads, locks, info, heap, sample, page,
with --pid and with --core) is checked against each program's own view by
the suite of the command, as a combination beside gdb's and lldb's
(matrix.py: test_bt.py, test_heap.py, test_sample.py, test_page.py).
"""

import os
import re
import sys

import harness
from harness import Failure

cli = harness.cli


def test_usage(workdir):
    out, _ = cli(["--help"])
    for name in ("bt", "threads", "locks", "heap", "sample", "info"):
        if not re.search(r"^  %s\s" % name, out, re.M):
            raise Failure("rbpeek --help does not list %s:\n%s" % (name, out))
        text, _ = cli([name, "--help"])
        if not text.startswith("rbpeek %s (--pid PID... [--subprocesses] | --core CORE [--exe PATH] [--sysroot DIR])"
                               % name) \
                or "--core CORE" not in text:
            raise Failure("rbpeek %s --help:\n%s" % (name, text))
    cases = [
        ([], 2, r"usage: rbpeek COMMAND"),
        (["frobnicate", "--pid", "1"], 2, r"no command 'frobnicate'"),
        (["bt"], 2, r"give the target: --pid PID"),
        (["bt", "--pid", "abc"], 2, r"--pid wants a process id"),
        (["bt", "--pid", "1", "--core", "x"], 2, r"give the target"),
        (["bt", "--pid", "%d" % os.getpid(), "--sysroot", "/"], 2, r"--sysroot goes with --core"),
        (["bt", "--pid", "%d" % os.getpid(), "--frames"], 2, r"rbpeek bt: unrecognized arguments: --frames "
                                                           r"\(see 'rbpeek bt --help'\)"),
        (["bt", "--pid", "%d" % os.getpid(), "--max-frames", "-3"], 2, r"must be positive"),
        (["sample", "--pid", "%d" % os.getpid(), "--via-debugger"], 2, r"needs a debugger"),
        (["bt", "--exe", "/bin/true", "--pid", "1"], 2, r"--exe goes with --core"),
        (["bt", "--subprocesses", "--core", "x"], 2, r"--subprocesses goes with --pid"),
        (["info", "--pid", "1", "--pid", "%d" % os.getpid()], 2, r"info reads one process"),
        (["heap", "--pid", "1", "--subprocesses", "--dump", "x"], 2, r"--dump writes one process's file"),
        (["sample", "--pid", "%d" % os.getpid(), "-o", "x"], 2, r"-o writes the --json summary"),
        (["top", "--core", "/bin/true"], 2, r"top watches a live process"),
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
    if sys.argv[1:] != ["usage"]:
        sys.exit(__doc__)
    harness.main(test_usage)
