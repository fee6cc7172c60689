"""`ruby allocs --sites` against the program's own count of each site's
allocations, in gdb, lldb and the command line (docs/allocations.md).

    test_alloc_sites.py RUBY [COMBO...]     e.g. test_alloc_sites.py debian-3.1, test_alloc_sites.py 3.4.5 cli.live

The target (programs/alloc_sites.rb) allocates at two sites, three small
Strings at site_a's line for every one at site_b_same's, and counts each
site's allocations itself with GC.stat(:total_allocated_objects), logging
the totals every 50 ms. It allocates only while a run samples it (from
the run's first sample to its end: harness.Target.computing) and naps
otherwise, so that no CPU goes to it while a debugger starts. Over exactly the wall-clock window the JSON gives
(started_at, ended_at), live:

  ruby allocs --sites --duration 12 --rate 250 --json -o F --folded G:
      method "allocator samples"; the two sites' shares of the allocator
      samples (the samples at lines of each site's method, normalised over
      the two: a Ruby frame may report an earlier line of its method when
      its instruction saves no pc, as 3.1's putstring does) within a bound
      derived from their number n of the program's own split p: 3.29
      standard errors, sqrt(phi p (1 - p) / n), phi the dispersion rbpeek
      measured between batches of the run (at least 1), at Student's
      quantile for its degrees of freedom (a run fails about once in a
      thousand by chance, and a bias of a few points fails it); the 90%
      interval printed for site_a's method no wider than +-5 points at these
      settings, and every share inside its interval; String#* at site_a's line; the rate within 25%
      of the program's own; the types read: Point at site_c's line (Class#new)
      and Pair at site_d's (a Struct class's new), nothing else anywhere
      (String#* at a and b has none); every site has label, path, lineno, count and
      types, and the counts add up to the total; the folded stacks,
      weighted by estimated allocations, add up to it too, and every one
      of them ends at a Ruby frame of the program;
  then Ctrl-C after 1 s of a run with no --duration: it ends with the
      text summary, which says "estimated from N allocator samples", gives
      the precision ("Precision: 90% intervals") and names site_a's line;
  and the debugger (or the command line) killed 0.5 s into a run:
  after each, and after the normal
  run, the target runs (no thread stopped, none traced: TracerPid 0),
  keeps allocating, and its executable pages are byte-identical to before.

On the core: `ruby allocs --sites` is refused in one line.
"""

import json
import math
import os
import signal
import sys
import time

import harness
import matrix
from harness import Failure
from test_allocs import check_keys, keeps_allocating, kill_debugger, text_pages

sys.path.insert(0, os.path.join(harness.REPO, "python"))
from rbpeeklib.commands import alloc_sites  # noqa: E402  (the quantile the intervals use)

# 12 s at 250 Hz: about 1,200 allocator samples at the two sites on 2.7.4
# (the slowest), site_a's share (75%) known to within 1.3 points (one
# sigma). 6 s at 500 Hz gets as many samples, but the sampling then weighs
# on the target: on 2.7.4 under a loaded ctest site_a's share rose to
# 78-80% for the program's 74.9%.
DURATION, RATE = 12, 250
Z_BOUND = 3.29              # standard errors: two-sided, 1 run in 1,000 outside by chance
PRECISION_POINTS = 5.0      # the 90% interval of site_a's share at these settings, at most +- this
RATE_TOLERANCE = 0.25
STARTED = "rbpeek: sampling the allocator"


def own_counts(workdir, t, wait=5.0):
    """(total, site a, site b) the program logged, interpolated at wall time
    t; waits up to wait seconds for a line past t (it logs every 50 ms, and
    a run may have ended just now)."""
    deadline = time.time() + wait
    while True:
        rows = []
        with open(os.path.join(workdir, "alloc.log")) as f:
            for line in f:
                p = line.split()
                if len(p) == 4:
                    rows.append([float(x) for x in p])
        for r0, r1 in zip(rows, rows[1:]):
            if r0[0] <= t <= r1[0] and r1[0] > r0[0]:
                k = (t - r0[0]) / (r1[0] - r0[0])
                return [a + k * (b - a) for a, b in zip(r0[1:], r1[1:])]
        if not rows or rows[-1][0] >= t or time.time() > deadline:
            raise Failure("the program's log does not cover %.3f (it covers %.3f..%.3f)"
                          % (t, rows[0][0] if rows else 0, rows[-1][0] if rows else 0))
        time.sleep(0.05)


def untraced(pid, what):
    """Every thread of pid is neither stopped nor traced."""
    bad = []
    for name in os.listdir("/proc/%d/task" % pid):
        try:
            with open("/proc/%d/task/%s/status" % (pid, name)) as f:
                st = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        state = st.get("State", "").split()
        if st.get("TracerPid", "0").strip() != "0" or (state and state[0] in ("t", "T")):
            bad.append("%s: %s, tracer %s" % (name, " ".join(state), st.get("TracerPid", "?").strip()))
    if bad:
        raise Failure("%s: threads left stopped or traced: %s" % (what, "; ".join(bad)))


def check_clean(c, before, what):
    pid = c.target.pid
    c.target.assert_left_running()
    time.sleep(0.2)
    untraced(pid, what)
    if not keeps_allocating(c.target, 4):
        raise Failure("%s: %s: the target stopped allocating" % (c.name, what))
    if text_pages(pid) != before:
        raise Failure("%s: %s: the target's executable pages changed" % (c.name, what))
    harness.log("  %s: %s: target running, no thread stopped or traced, %d executable mappings unchanged"
                % (c.name, what, len(before)))


def refused_on_core(c, cmd):
    """Runs `ruby allocs ...` on c's core; the output."""
    if c.debugger == "cli":
        words = cmd.split()[1:]
        rc, o, e = harness.run_cli(words[:1] + c.where() + words[1:], timeout=600)
        return o + e
    rc, out = c.run_debugger([cmd], timeout=600)
    return out


def sampled(c, args, out_path, act=None, settle=0.0):
    """Runs `ruby allocs --sites ARGS` on the live target in c's front end,
    the target allocating from the moment sampling starts until the run
    has ended (it naps meanwhile: a debugger's start takes a second or
    two); after settle seconds act(process) (None: the run ends by
    itself). Its output."""
    if c.debugger == "cli":
        argv = [sys.executable, harness.RBPEEK_CLI, "allocs", "--pid", str(c.target.pid), "--sites"] + args
    else:
        argv = harness.debugger_argv(c.debugger, [" ".join(["ruby allocs --sites"] + args)], c.target.pid)
    return harness.run_and_act(argv, out_path, STARTED, act, settle, timeout=300,
                               during=c.target.computing(settle=0))


def check_result(c, r, sites_rec, folded):
    who = c.name
    check_keys(r, who)
    if r.get("method") != "allocator samples":
        raise Failure("%s: method is %r" % (who, r.get("method")))
    path = sites_rec["path"]
    la = sites_rec["a"]["lineno"]

    def samples_in(which):
        first, last = sites_rec[which]["lines"]
        return sum(s["samples"] for s in r["sites"] if s["path"] == path and first <= s["lineno"] <= last)
    n_a, n_b = samples_in("a"), samples_in("b")
    if n_a + n_b < 100:
        raise Failure("%s: only %d allocator samples at the two sites (%d taken in all): too few to judge"
                      % (who, n_a + n_b, r["samples_taken"]))
    labels = {s["label"] for s in r["sites"] if s["path"] == path and s["lineno"] == la}
    if not any(label == "*" or label.endswith("#*") for label in labels):   # 3.4 labels "String#*"
        raise Failure("%s: String#* is not among line %d's sites: %s" % (who, la, labels))
    t0, a0, b0 = own_counts(c.target.workdir, r["started_at"])
    t1, a1, b1 = own_counts(c.target.workdir, r["ended_at"])
    own_split = 100.0 * (a1 - a0) / ((a1 - a0) + (b1 - b0))
    got_split = 100.0 * n_a / (n_a + n_b)
    prec = r["precision"]
    phi = max(1.0, prec["dispersion"] or 1.0)
    p = own_split / 100.0
    bound = 100.0 * alloc_sites.t_quantile(Z_BOUND, prec["dispersion_dof"]) * math.sqrt(phi * p * (1 - p) /
                                                                                        (n_a + n_b))
    if abs(got_split - own_split) > bound:
        raise Failure("%s: site_a's share %.1f%% (%d of %d samples, dispersion %.2f), the program's own %.1f%%: "
                      "off by more than %.1f points" % (who, got_split, n_a, n_a + n_b, phi, own_split, bound))
    check_intervals(c, r, sites_rec)
    window = r["ended_at"] - r["started_at"]
    own_rate = (t1 - t0) / window
    if abs(r["rate_per_s"] - own_rate) > RATE_TOLERANCE * own_rate:
        raise Failure("%s: rate %.0f/s, the program's own %.0f/s" % (who, r["rate_per_s"], own_rate))
    total = r["allocations"]
    for s in r["sites"]:
        for key in ("label", "path", "lineno", "count", "types"):
            if key not in s:
                raise Failure("%s: a site has no %r: %s" % (who, key, s))
    summed = sum(s["count"] for s in r["sites"])
    if abs(summed - total) > len(r["sites"]) + 0.001 * total:
        raise Failure("%s: the sites' counts add up to %d, the total is %d" % (who, summed, total))
    weights = 0
    with open(folded, encoding="utf-8") as f:
        for line in f:
            stack, count = line.rstrip("\n").rsplit(" ", 1)
            weights += int(count)
            leaf = [f for f in stack.split(";") if not f.startswith("[GC")][-1]   # the GC's frame on top
            if "(%s:" % path not in leaf and "(<internal:" not in leaf:
                raise Failure("%s: a folded stack does not end in a Ruby frame of the program: %s" % (who, leaf))
    if abs(weights - total) > 0.01 * total:
        raise Failure("%s: the folded stacks weigh %d, the total is %d" % (who, weights, total))
    typed = check_types(c, r, sites_rec)
    harness.log("  %s: %d allocator samples of %d; site_a %.1f%% (the program: %.1f%%; bound %.1f points, "
                "dispersion %s); rate %.2f M/s (the program: %.2f M/s); types %s"
                % (who, r["samples"], r["samples_taken"], got_split, own_split, bound, prec["dispersion"],
                   r["rate_per_s"] / 1e6, own_rate / 1e6, typed))


def check_intervals(c, r, sites_rec):
    """Every share inside its 90% interval; site_a's method's no wider than
    +-PRECISION_POINTS at the test's settings."""
    who = c.name
    for s in r["sites"] + r["lines"] + r["methods"]:
        lo, hi = s["share_ci90"]
        if not lo <= s["share"] <= hi or not 0.0 <= lo <= hi <= 1.0:
            raise Failure("%s: a share %.4f outside its interval [%.4f, %.4f]: %s" % (who, s["share"], lo, hi, s))
    a = [m for m in r["methods"] if m["label"] == sites_rec["a"]["label"]]
    if not a:
        raise Failure("%s: no method %s in %s" % (who, sites_rec["a"]["label"], [m["label"] for m in r["methods"]]))
    half = 50.0 * (a[0]["share_ci90"][1] - a[0]["share_ci90"][0])
    if half > PRECISION_POINTS:
        raise Failure("%s: site_a's 90%% interval is +-%.1f points (%d allocator samples, precision %s)"
                      % (who, half, r["samples"], r["precision"]))


def check_types(c, r, sites_rec):
    """site_c's line allocates Points in Class#new, site_d's Pairs in their
    Struct class's new: the types read there are those classes alone, with
    estimates that add up to those lines' counts; String#* (sites a and b)
    has none read. (The main loop's log line makes a Time now and then,
    which 3.1's Time.now makes in Class#new: read too, and not judged.)"""
    who, path = c.name, sites_rec["path"]
    named = {}
    for which in ("c", "d"):
        line, want = sites_rec[which]["lineno"], sites_rec[which]["class"]
        here = [s for s in r["sites"] if s["path"] == path and s["lineno"] == line]
        types = {}
        for s in here:
            for name, n in s["types"].items():
                types[name] = types.get(name, 0) + n
        if set(types) != {want}:
            raise Failure("%s: line %d allocates %s, and the types read there are %s" % (who, line, want, types))
        count = sum(s["count"] for s in here if s["kind"] == "cfunc")
        if abs(types[want] - count) > len(here) + 0.001 * count:
            raise Failure("%s: line %d's %s: %d estimated of the line's %d in its C frame" % (who, line, want,
                                                                                               types[want], count))
        named[want] = sum(s["typed_samples"] for s in here)
    strings = [s for s in r["sites"] for which in ("a", "b")
               if s["path"] == path and sites_rec[which]["lines"][0] <= s["lineno"] <= sites_rec[which]["lines"][1]]
    if any(s["types"] for s in strings):
        raise Failure("%s: types read at String#*'s sites: %s" % (who, [s["types"] for s in strings if s["types"]]))
    if not set(named) <= set(r["types"]) or r["typed_samples"] < sum(named.values()):
        raise Failure("%s: the JSON's types %s (%d samples), the sites' %s" % (who, r["types"], r["typed_samples"],
                                                                              named))
    return named


def check(c):
    who = c.name
    if not c.live:
        out = refused_on_core(c, "ruby allocs --sites --duration 1")
        harness.assert_no_traceback(out)
        if "ruby allocs needs a live process, and this is a core file" not in out:
            raise Failure("%s: --sites on a core was not refused in one line:\n%s" % (who, out[-2000:]))
        harness.log("  %s: refused on the core" % who)
        return
    with open(os.path.join(c.target.workdir, "sites.json")) as f:
        sites_rec = json.load(f)
    before = text_pages(c.target.pid)
    out_json, folded = c.path("sites.json"), c.path("sites.folded")
    out = sampled(c, ["--duration", str(DURATION), "--rate", str(RATE), "--json", "-o", out_json, "--folded", folded],
                  c.path("sites.out"))
    harness.assert_no_traceback(out)
    if not os.path.exists(out_json) or not os.path.exists(folded):
        raise Failure("%s: nothing written:\n%s" % (who, out[-3000:]))
    check_result(c, harness.read_json(out_json), sites_rec, folded)
    check_clean(c, before, "after a normal run")

    # The text summary: that of the run Ctrl-C ends (after 1 s of samples,
    # as a run of --duration 1 would print it: one run less to start).
    out = sampled(c, [], c.path("ctrlc.out"), lambda proc: proc.send_signal(signal.SIGINT), 1.0)
    harness.assert_no_traceback(out)
    if "interrupted (Ctrl-C)" not in out or "Sites:     estimated from " not in out:
        raise Failure("%s: Ctrl-C did not end the run with a summary:\n%s" % (who, out[-3000:]))
    if " allocator samples (" not in out:
        raise Failure("%s: the summary does not say how many allocator samples:\n%s" % (who, out[-3000:]))
    if "Precision: 90% intervals" not in out or "share [90% interval]" not in out:
        raise Failure("%s: the summary does not give the intervals' precision:\n%s" % (who, out[-3000:]))
    if ":%d " % sites_rec["a"]["lineno"] not in out:
        raise Failure("%s: the summary does not name site_a's line:\n%s" % (who, out[-3000:]))
    check_clean(c, before, "after Ctrl-C")

    sampled(c, [], c.path("kill.out"), kill_debugger, 0.5)
    check_clean(c, before, "after %s was killed" % ("the command line" if c.debugger == "cli" else "the debugger"))


def test(ruby_spec, only, workdir):
    m = matrix.Matrix(ruby_spec, workdir, only)
    m.run("alloc_sites.rb", check, combos=matrix.WITH_CLI)
    m.finish()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    harness.main(lambda wd: test(sys.argv[1], sys.argv[2:], wd))
