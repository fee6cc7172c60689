"""Benchmark: what attach costs (not a test; prints a table).

    python3 tests/bench/bench_attach.py [RUBY ...]      default: debian-3.1 and the built matrix

Attach is what every command pays first: the version, the choice among the
68 built-in tables (or DWARF), the VM, and validation of the layout against
the target. For each Ruby, a parked program, live and gcore'd, is attached
RUNS times through the Python binding (no debugger, so only rbpeek's own
work is timed) and the median is shown. The two cores made elsewhere
(../shared/testdata/rbspy-cores) are timed too: there the version comes
from libruby's file name and the VM and ID table from scans of its data.
Issue 10's budget: choosing a table and validating it adds < 5 ms. Wall
time is noisy on a shared machine, so each core is also attached once under
callgrind, and the instructions of attach's steps are shown.
"""

import gzip
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "integration"))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
import benchlib  # noqa: E402
import harness  # noqa: E402
from rbpeeklib.core import Session  # noqa: E402

RUNS = 30
PROGRAM = """
t = Thread.new { sleep }
def park; sleep; end
File.write(ARGV[0] + "/ready", Process.pid.to_s)
park
"""
FOREIGN = os.path.join(HERE, "..", "..", "..", "shared", "testdata", "rbspy-cores")


def attach_ms(use):
    """Median wall time of attach, in ms, over RUNS fresh sessions, and what
    the last one said of its layout."""
    times = []
    for _ in range(RUNS):
        with Session() as s:
            use(s)
            t0 = time.perf_counter()
            s.attach()
            times.append((time.perf_counter() - t0) * 1000)
            d = s.describe()
    return statistics.median(times), d


def row(what, ms, d):
    print("%-28s %8.2f ms   %-8s %s" % (what, ms, d["ruby_version"], d["layout_source"]))


# Attach's steps, as callgrind names them: instruction counts are stable on
# a busy machine where wall time is not.
STEPS = ["rbpeek_session_attach", "rbp_discover_version", "rbp_discover_layout", "rbp_discover_vm",
         "rbp_locate_global_symbols", "rbp_validate_layout"]


def instructions(core):
    """{step: instructions} of one attach to core, from `rbpeek bt` under callgrind."""
    tool = os.path.join(HERE, "..", "..", "tools", "rbpeek")
    if not shutil.which("valgrind"):
        return {}
    with tempfile.NamedTemporaryFile(suffix=".cg") as out:
        subprocess.run(["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out.name, sys.executable, tool, "bt",
                        "-a", "--core", core],
                       capture_output=True)
        text = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", out.name], capture_output=True,
                              text=True).stdout
    got = {}
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+) .*:(\w+)(?:\.\w+)*(?:\.constprop\.\d+)? \[", line)
        if m and m.group(2) in STEPS and m.group(2) not in got:
            got[m.group(2)] = int(m.group(1).replace(",", ""))
    return got


def instruction_row(what, core):
    got = instructions(core)
    if got:
        print("%-28s %s" % (what + " Ir", "  ".join("%s %.2fM" % (k.replace("rbp_", "").replace("rbpeek_session_", ""),
                                                                 got[k] / 1e6) for k in STEPS if k in got)))


def main():
    specs = sys.argv[1:] or ["debian-3.1", "2.7.4", "3.1.2", "3.3.8", "3.4.5", "3.3.8-static"]
    print("%-28s %11s   %-8s %s" % ("target", "attach", "version", "layout"))
    for spec, _ruby, pid, core, _wd in benchlib.parked_targets(specs, "attach.rb", PROGRAM, settle=0.2):
        ms, d = attach_ms(lambda s: s.use_pid(pid))
        row("%s live" % spec, ms, d)
        ms, d = attach_ms(lambda s: s.use_core(core))
        row("%s core" % spec, ms, d)
        instruction_row(spec + " core", core)
    if os.path.isdir(FOREIGN):
        tmp = tempfile.mkdtemp(prefix="rbpeek-bench-")
        try:
            for name in sorted(os.listdir(FOREIGN)):
                if not name.endswith(".gz"):
                    continue
                core = os.path.join(tmp, name[:-3])
                with gzip.open(os.path.join(FOREIGN, name)) as src, open(core, "wb") as dst:
                    shutil.copyfileobj(src, dst)
                try:
                    ms, d = attach_ms(lambda s: s.use_core(core))
                    row(name[:-3] + " (no binaries)", ms, d)
                    instruction_row(name[:-3], core)
                except Exception as e:  # a line not supported yet: say so, go on
                    print("%-28s %s" % (name[:-3], e))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
