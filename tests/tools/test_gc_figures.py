#!/usr/bin/env python3
"""The sampling summary's GC figures (python/rbpeeklib/sampling/report.py):
Wilson's 90% interval (rbpeek_share_interval, core/src/base/interval.c,
through the binding: the one implementation, which `ruby allocs --sites`
uses too) against values computed by hand from its formula and
against a simulation of the binomial it describes, and the GC line and its
JSON from a run's counts, with and without samples that found the GVL's
holder on a CPU.

usage: test_gc_figures.py
Exit status: 0 pass, 1 fail.
"""
import os
import random
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "python"))

from rbpeeklib.core import share_interval  # noqa: E402
from rbpeeklib.sampling import report  # noqa: E402
from rbpeeklib.sampling.stats import Stats  # noqa: E402

failures = []


def check(what, ok):
    print("%s  %s" % ("ok  " if ok else "FAIL", what))
    if not ok:
        failures.append(what)


def wilson(k, n):
    return share_interval(k, n, report.Z90)


# By hand: k=40, n=100, z=1.6449: centre (0.4 + z^2/200) / (1 + z^2/100) =
# 0.40263, half-width z sqrt(0.24/100 + z^2/40000) / (1 + z^2/100) = 0.07956.
lo, hi = wilson(40, 100)
check("wilson(40, 100) = (0.3231, 0.4822): %.4f %.4f" % (lo, hi), abs(lo - 0.3231) < 5e-5 and abs(hi - 0.4822) < 5e-5)
lo, hi = wilson(0, 50)
check("wilson(0, 50) starts at 0 and is not empty: %.4f %.4f" % (lo, hi), lo == 0.0 and 0.03 < hi < 0.06)
lo, hi = wilson(50, 50)
check("wilson(50, 50) ends at 1: %.4f %.4f" % (lo, hi), abs(hi - 1.0) < 1e-12 and 0.94 < lo < 0.97)
check("wilson(0, 0) says nothing: (0, 1)", wilson(0, 0) == (0.0, 1.0))

# Coverage: 2,000 runs of 1,500 draws at p = 0.45 hold p about 90% of the
# time (binomial: 1,800 expected, standard error 13).
rng = random.Random(7)
held = 0
for _ in range(2000):
    k = sum(1 for _ in range(1500) if rng.random() < 0.45)
    lo, hi = wilson(k, 1500)
    held += lo <= 0.45 <= hi
check("the 90%% interval held p in %d of 2000 simulated runs" % held, 1740 <= held <= 1860)

st = Stats()
st.added_threads = 2000
st.gc = [0, 632, 198, 0, 1]
st.cpu_samples, st.cpu_gc, st.cpu_waited = 1613, 698, 387
f = report.gc_figures(st)
check("gc_figures: stacks and phases", f["stacks"] == 2000 and f["stacks_in_gc"] == 831 and
      f["phases"] == {"marking": 632, "sweeping": 198, "phase not told": 1})
check("gc_figures: the CPU share and its interval", f["cpu"]["samples"] == 1613 and f["cpu"]["in_gc"] == 698 and
      f["cpu"]["share"] == round(698 / 1613, 4) and f["cpu"]["interval90"][0] < f["cpu"]["share"] <
      f["cpu"]["interval90"][1] and f["cpu"]["preempted"] == 387)
line = report.gc_line(st)
check("gc_line: %s" % line, line.startswith("GC:        41.5% of the stacks (831 of 2000): marking 31.6%") and
      "; 43.3% of the CPU time of the thread it runs on (90%: 41.3-45.3%, from the 1613 samples that found it on a "
      "CPU, 387 more found it preempted)" in line)
st.cpu_samples = st.cpu_gc = st.cpu_waited = 0
check("no samples on a CPU: no CPU share", report.gc_figures(st)["cpu"] is None and
      "CPU time" not in report.gc_line(st))

print("%d passed, %d failed" % (9 - len(failures), len(failures)))
sys.exit(1 if failures else 0)
