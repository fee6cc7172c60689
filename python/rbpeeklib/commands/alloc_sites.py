"""`ruby allocs --sites`: where the live target allocates, estimated from
allocator samples (docs/allocations.md, "Allocation sites").

The sampler (sampling/traced.py, the C tracer) stops the thread holding the
GVL --rate times a second and unwinds its machine stack; the core keeps the
samples whose machine frames, between the leaf and the first Ruby frame,
are in the object allocator or in a GC step under it
(rbpeek_alloc_sites_add_snapshot), each attributed to its Ruby stack. The
GC's own counters, read before and after, give the exact number of objects
allocated meanwhile; each site gets that total times its share of the
allocator samples, with a 90% interval (precision()). The profile's
writers get the stacks weighted by estimated allocations.
"""

import argparse
import json
import math
import time

from ..core import FORMAT_JSON, FORMATS, AllocSites, Profile, RbpeekError, SampleOptions, share_interval
from ..sampling.report import Z90, check_outputs, write_outputs
from ..sampling.stats import Stats, fmt_rate
from ..sampling.traced import run_traced

DEFAULT_RATE = 100.0        # samples a second (docs/allocations.md, "Precision"; docs/performance-allocs.md: the cost)
DEFAULT_DURATION = 20.0     # seconds when --duration is not given: a 75/25 split within 5 points in 90% of
                            # runs on every matrix Ruby at DEFAULT_RATE (docs/sampling.md, "Allocation sites")
LUMP = 0.05                 # sites under this share are one category in the dispersion's table
BATCH_JOINS = (1, 2, 4)     # the dispersion is measured at the core's batches, and joined in twos and fours...
MIN_BATCHES = 4             # ... while this many batches remain (dispersion())
TOP = 10                    # sites shown per table
METHOD = "allocator samples"
PRECISION_AT = 0.25         # the share whose interval the summary quotes (a 75/25 split's smaller site)
WANTED_POINTS = 5.0         # ... and the half-width it says how long to sample for


def t_quantile(z, dof):
    """Student's t quantile of the normal quantile z at dof degrees of
    freedom (the Cornish-Fisher expansion: within 0.3% of the table from 3
    degrees on); z itself without dof."""
    if not dof:
        return z
    return z + (z ** 3 + z) / (4 * dof) + (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * dof * dof)


def pearson_dispersion(cats):
    """(chi-square / dof, dof) of a batches x categories table (each
    category its samples per batch); (None, 0) when it has no degrees of
    freedom."""
    nb = len(cats[0]) if cats else 0
    m = [sum(c[b] for c in cats) for b in range(nb)]
    n = sum(m)
    dof = (nb - 1) * (len(cats) - 1)
    if dof <= 0 or not n:
        return None, 0
    x2 = 0.0
    for c in cats:
        p = sum(c) / n
        for b in range(nb):
            e = m[b] * p
            if e > 0:
                x2 += (c[b] - e) ** 2 / e
    return x2 / dof, dof


def dispersion(doc):
    """(phi, dof): how much more the sites' shares varied from batch to
    batch of the run (rbpeek_alloc_sites_json's batch_samples) than
    independent samples would: Pearson's chi-square of the batches x sites
    table (sites under LUMP summed into one) over its degrees of freedom,
    at each batch length of BATCH_JOINS (the core's batches joined in
    twos and fours, while MIN_BATCHES remain), the largest, with the
    degrees of freedom of the longest batches (the fewest: phi is least
    sure there). Samples are not independent when one GC step spans
    several stops (a major GC of tens of milliseconds goes to the one
    allocation that started it, stop after stop), and on a loaded machine
    they clump over seconds too, which short batches do not see: measured
    on 38 runs (docs/allocations.md), the core's 20 batches alone gave 90%
    intervals that held the program's own share in 84% of them (81% at a
    load of 7), the largest of three lengths in 95%. (None, 0) with fewer
    than two batches or one site."""
    nb = doc.get("batches") or 0
    sites = doc.get("sites") or []
    batched = doc.get("batched") or 0
    if nb < 2 or not batched:
        return None, 0
    cats, other = [], [0] * nb
    for s in sites:
        per = s.get("batch_samples") or [0] * nb
        if sum(per) >= LUMP * batched:
            cats.append(per)
        else:
            other = [a + b for a, b in zip(other, per)]
    if sum(other):
        cats.append(other)
    if len(cats) < 2:
        return None, 0
    best, dof = None, 0
    for join in BATCH_JOINS:
        k = nb // join
        if join > 1 and k < MIN_BATCHES:
            break
        # the core's batches joined in runs of `join` (the last run takes what is left)
        joined = [[sum(c[i * join:(i + 1) * join if i < k - 1 else nb]) for i in range(k)] for c in cats]
        phi, d = pearson_dispersion(joined)
        if phi is None:
            continue
        best = phi if best is None else max(best, phi)
        dof = d
    return (best, dof) if best is not None else (None, 0)


def precision(doc, kept):
    """{n_eff, z, dispersion, dof, batches}: the intervals' inputs. Each
    share's 90% interval is Wilson's (rbpeek_share_interval) for its samples
    out of kept counted as kept / phi independent ones (phi the dispersion,
    never below 1: it does not claim better than independent samples), at
    Student's quantile for phi's degrees of freedom (phi is itself
    estimated from the run)."""
    phi, dof = dispersion(doc)
    f = max(1.0, phi) if phi is not None else 1.0
    return {"n_eff": kept / f if kept else 0.0, "z": t_quantile(Z90, dof), "dispersion": phi, "dof": dof,
            "batches": doc.get("batches") or 0, "confidence": 0.90}


def interval(k, kept, prec):
    """The 90% interval of the share k / kept."""
    if not kept:
        return 0.0, 1.0
    return share_interval(k / kept * prec["n_eff"], prec["n_eff"], prec["z"])


def fmt_count(n):
    for div, unit in ((1e9, " G"), (1e6, " M"), (1e3, " k")):
        if n >= div:
            return "%.2f%s" % (n / div, unit)
    return "%d" % round(n)


def _where(s):
    if s["path"] and s["lineno"]:
        return "%s:%d" % (s["path"], s["lineno"])
    if s["path"] and s["lineno"] is None:   # not known: JIT code ran the frame, and saved no pc
        return "%s:?" % s["path"]
    return s["path"] or "?"


def class_names(session, raw_sites):
    """{address: name} of the classes the sites' frames said they allocate
    (rbpeek_frame.instantiates), each inspected as Ruby's Class#inspect
    prints it ("Point", "#<Class:0x...>"); an address that no longer holds
    a class (it was collected meanwhile) gets no name."""
    names = {}
    for s in raw_sites:
        for t in s.get("types", ()):
            k = t["class"]
            if k in names:
                continue
            names[k] = None
            try:
                doc = json.loads(session.inspect_value(k, 0, 0, False, FORMAT_JSON))
            except (RbpeekError, ValueError):
                continue
            if doc.get("type") in ("T_CLASS", "class") and doc.get("inspect"):
                names[k] = doc["inspect"]
    return names


def estimate(raw_sites, total, kept, prec, names=None):
    """The sites with their estimates: count (estimated allocations), share,
    its 90% interval (precision()), and types: {class: estimated
    allocations} of the samples whose frame said the class (Class#new and
    the like), others not read."""
    out = []
    for s in raw_sites:
        lo, hi = interval(s["samples"], kept, prec)
        share = s["samples"] / kept if kept else 0.0
        types = {}
        for t in s.get("types", ()):
            name = (names or {}).get(t["class"])
            if name and kept:
                types[name] = types.get(name, 0) + int(round(total * t["samples"] / kept))
        out.append({"label": s["label"], "path": s["path"], "lineno": s["lineno"], "kind": s["kind"],
                    "samples": s["samples"], "share": share, "share_ci90": [lo, hi],
                    "count": int(round(total * share)), "count_ci90": [int(total * lo), int(math.ceil(total * hi))],
                    "types": types, "typed_samples": sum(t["samples"] for t in s.get("types", ())),
                    "batch_samples": s.get("batch_samples") or []})
    return out


def add_types(into, types):
    for name, n in types.items():
        into[name] = into.get(name, 0) + n
    return into


def _summed(sites, total, kept, prec, key_of, row_of):
    acc, order = {}, []
    for s in sites:
        key = key_of(s)
        if key not in acc:
            acc[key] = [0, [], {}]
            order.append(key)
        acc[key][0] += s["samples"]
        if s["label"] not in acc[key][1]:
            acc[key][1].append(s["label"])
        add_types(acc[key][2], s["types"])
    rows = []
    for key in sorted(order, key=lambda k: -acc[k][0]):
        k, labels, types = acc[key]
        lo, hi = interval(k, kept, prec)
        row = {"samples": k, "share": k / kept if kept else 0.0, "share_ci90": [lo, hi],
               "count": int(round(total * k / kept)) if kept else 0, "types": types}
        row.update(row_of(key, labels))
        rows.append(row)
    return rows


def by_line(sites, total, kept, prec):
    """The sites summed by source line: a Ruby frame's own line, a C
    method's caller's ("a" * 4 allocates in the method's frame and in
    String#*, on one line)."""
    return _summed(sites, total, kept, prec, lambda s: (s["path"], s["lineno"]),
                   lambda key, labels: {"path": key[0], "lineno": key[1], "labels": labels})


def by_method(sites, total, kept, prec):
    """The sites summed by method: a Ruby frame's label and file, a C
    method's label (its path is its caller's)."""
    return _summed(sites, total, kept, prec, lambda s: (s["label"], s["path"] if s["kind"] == "ruby" else None),
                   lambda key, labels: {"label": key[0], "path": key[1]})


def run_sites(cmd, dbg, args, session, pid, version, policy):
    """Samples the allocator for --duration or until Ctrl-C; returns (the
    result dict, how it ended, the files written, the failure or None)."""
    outputs = check_outputs(args, pid) if any(getattr(args, f.name) for f in FORMATS) else []
    interval = 1.0 / (args.rate or DEFAULT_RATE)
    if interval < 1e-4:
        raise RbpeekError("ruby allocs --sites: at most 10000 samples a second")
    opts = SampleOptions()
    opts.pid = pid
    profile = Profile()
    judge = AllocSites()
    st = Stats()
    if not dbg.own_source():
        # The unwinder's modules and the first unwind's cost, paid while the
        # debugger still holds the target.
        try:
            session.snapshot_native(1, lines=False).close()
        except RbpeekError as e:
            raise RbpeekError("ruby allocs --sites needs native stacks, and here there are none: %s" % e)
    duration = args.duration or DEFAULT_DURATION
    run = argparse.Namespace(count=None, duration=duration, max_frames=0, nonblocking=False, stop_all=False,
                             native=True, alloc_sites=judge)
    dbg.progress("rbpeek: sampling the allocator of pid %d (Ruby %s) at %s Hz for %s; Ctrl-C ends it early\n"
                 % (pid, version, fmt_rate(1.0 / interval),
                    "%g s" % duration if args.duration else "%g s (the default; --duration S to change it)" % duration))
    c0, t0, w0 = session.alloc_counts(), time.perf_counter(), time.time()
    end, failure = run_traced(dbg, session, profile, opts, run, interval, pid, policy, st)
    c1, t1, w1 = None, time.perf_counter(), time.time()
    if not end.startswith("the target exited"):
        try:
            c1 = session.alloc_counts()
            t1, w1 = time.perf_counter(), time.time()
            check_forwards(c0, c1)
        except RbpeekError as e:
            c1, failure = None, failure or e
    counts = judge.stats()
    kept = counts["allocator"]
    total = (c1["total"] - c0["total"]) if c1 else 0
    el = max(t1 - t0, 1e-9)
    doc = judge.sites(profile)
    raw_sites = doc["sites"]
    prec = precision(doc, kept)
    sites = estimate(raw_sites, total, kept, prec, class_names(session, raw_sites))
    gcs = None
    if c1 and c0["gc_count"] is not None and c1["gc_count"] is not None:
        gcs = c1["gc_count"] - c0["gc_count"]
    heaps = [{"slot_size": slot, "count": b - a} for (slot, a), (_s, b) in zip(c0["heaps"], c1["heaps"])] if c1 else []
    result = {"pid": pid, "ruby_version": version, "ended": end, "method": METHOD,
              "allocations": total if c1 else None,
              "duration_s": round(el, 6), "rate_per_s": total / el if c1 else None, "gc_count": gcs, "heaps": heaps,
              "samples": kept, "samples_taken": st.samples, "stacks_judged": counts["stacks"],
              "samples_in_gc": counts["allocator_gc"], "gc_elsewhere": counts["gc_elsewhere"],
              "unmerged": counts["unmerged"], "not_run": counts["not_run"],
              "period": (total / kept) if kept else None,
              "held_s": st.held, "sampled_s": st.elapsed(), "full_stops": st.full_stops,
              "threads_stopped": st.threads_stopped, "gvl_free": st.gvl_free,
              "sites": sites, "lines": by_line(sites, total, kept, prec), "methods": by_method(sites, total, kept, prec),
              "sites_unavailable": None, "precision": precision_facts(prec, kept, el),
              "typed_samples": counts["typed"], "types": types_total(sites),
              "started_at": w0, "ended_at": w1}
    written = []
    if outputs:
        if kept and total:
            profile.scale_to(total)
        title = "ruby allocs --sites: pid %d, Ruby %s, %s objects estimated from %d allocator samples" % (
            pid, version, fmt_count(total), kept)
        profile.set_meta("title", title)
        profile.set_meta("ruby_version", version)
        profile.set_meta("pid", pid)
        profile.set_meta("unit", "allocations")
        facts = {"title": title, "period_s": el / total if total else 0.0, "on_cpu": False, "duration": el,
                 "start": w0, "ci_samples": prec["n_eff"], "ci_z": prec["z"]}
        written = write_outputs(dbg, profile, outputs, facts)
    return result, end, written, failure


def check_forwards(before, after):
    """Refuses a count of allocations that went backwards: a damaged
    objspace, or a pid that exec'd another program meanwhile. Passed on, its
    negative difference would reach the core as 2^64 - d allocations."""
    if after["total"] < before["total"]:
        raise RbpeekError("the allocation counter went backwards (%d, then %d): the layout does not fit this "
                          "Ruby's objspace, or the process is no longer the Ruby it was (did it exec?)"
                          % (before["total"], after["total"]))


def precision_facts(prec, kept, elapsed):
    """The JSON's "precision": the interval's inputs, the half-width of a
    share of 25% in points, and the seconds of sampling (at this run's rate
    of allocator samples and dispersion) a half-width of 5 points needs."""
    lo, hi = interval(PRECISION_AT * kept, kept, prec) if kept else (0.0, 1.0)
    half = 50.0 * (hi - lo)
    need = None
    if kept and elapsed > 0:
        need = elapsed * (half / WANTED_POINTS) ** 2
    return {"confidence": prec["confidence"], "interval": "wilson", "samples": kept,
            "effective_samples": round(prec["n_eff"], 1), "dispersion": prec["dispersion"],
            "dispersion_dof": prec["dof"], "batches": prec["batches"], "z": round(prec["z"], 4),
            "points_at_25": round(half, 2), "seconds_for_5_points": round(need, 1) if need is not None else None}


def batch_lengths(nb):
    """"20, 10 and 5 batches, the most they varied": the cuts dispersion()
    measured."""
    counts = [nb // j for j in BATCH_JOINS if j == 1 or nb // j >= MIN_BATCHES]
    if len(counts) == 1:
        return "%d batches" % nb
    return "%s and %d batches, the most they varied" % (", ".join(str(c) for c in counts[:-1]), counts[-1])


def precision_text(p, elapsed):
    """The summary's line on the intervals."""
    phi = p["dispersion"]
    if phi is None:
        how = "the samples counted as independent (too few to cut into batches and measure how they vary)"
    else:
        how = ("from batch to batch of the run (%s) the shares varied %.2f times as much as independent "
               "samples' would, so the %d count as %.0f" % (batch_lengths(p["batches"]), phi, p["samples"],
                                                            p["effective_samples"])
               if phi > 1 else
               "from batch to batch of the run (%s) the shares varied no more than independent samples' would"
               % batch_lengths(p["batches"]))
    line = "Precision: 90%% intervals (Wilson's) from %d allocator samples: %s; a share of 25%% is known to +-%.1f " \
           "points" % (p["samples"], how, p["points_at_25"])
    need = p["seconds_for_5_points"]
    if need is not None and p["points_at_25"] > WANTED_POINTS:
        line += "; for +-%g points sample about %.0f s (--duration, or a higher --rate)" % (WANTED_POINTS, need)
    return line


def types_total(sites):
    """{class: estimated allocations} over every site, most first."""
    acc = {}
    for s in sites:
        add_types(acc, s["types"])
    return dict(sorted(acc.items(), key=lambda kv: -kv[1]))


def types_text(types, count):
    """ "Point 98.2%, Array 1.8%": each class's share of count, most first
    (the names alone when count is not known)."""
    most = sorted(types.items(), key=lambda kv: -kv[1])
    return ", ".join("%s %.1f%%" % (name, 100.0 * n / count) if count else name for name, n in most[:5]) + (
        ", ..." if len(most) > 5 else "")


def sites_text(r):
    """The summary's lines on the sites."""
    kept, taken = r["samples"], r["samples_taken"]
    lines = ["Sites:     estimated from %d allocator samples (%d of the GVL holder's %d stacks, %d samples; %d of "
             "them in a GC step the allocator started); each stands for %s allocations"
             % (kept, kept, r["stacks_judged"], taken, r["samples_in_gc"],
                fmt_count(r["period"]) if r["period"] else "?")]
    if r["not_run"]:
        lines.append("           %d samples dropped: the thread had not run since its previous sample (it waited "
                     "for a CPU)" % r["not_run"])
    if r["sampled_s"] > 0:
        lines.append("Cost:      the GVL holder held stopped %.1f ms in all, %.2f%% of the %.1f s sampled (%.0f us a "
                     "sample)" % (1e3 * r["held_s"], 100 * r["held_s"] / r["sampled_s"], r["sampled_s"],
                                  1e6 * r["held_s"] / taken if taken else 0))
    if not kept:
        lines.append("           none: no sample landed in the allocator (a longer --duration or a higher --rate "
                     "gives more)")
        return lines
    lines.append(precision_text(r["precision"], r["duration_s"]))
    lines.append("By line:   share [90% interval]   est. objects   est. /s  samples  line (frames)")
    el = r["duration_s"]
    for s in r["lines"][:TOP]:
        lo, hi = s["share_ci90"]
        lines.append("  %6.1f%% [%5.1f-%5.1f%%] %12s %9s %8d  %s (%s)%s" % (
            100 * s["share"], 100 * lo, 100 * hi, fmt_count(s["count"]), fmt_count(s["count"] / el), s["samples"],
            _where(s), ", ".join(s["labels"]),
            " types: " + types_text(s["types"], s["count"]) if s["types"] and s["count"] else ""))
    if len(r["lines"]) > TOP:
        lines.append("  ... %d more lines (--json lists every site)" % (len(r["lines"]) - TOP))
    lines.append("By method: share [90% interval]   est. objects   est. /s  samples  method")
    for m in r["methods"][:TOP]:
        lo, hi = m["share_ci90"]
        lines.append("  %6.1f%% [%5.1f-%5.1f%%] %12s %9s %8d  %s%s" % (
            100 * m["share"], 100 * lo, 100 * hi, fmt_count(m["count"]), fmt_count(m["count"] / el), m["samples"],
            m["label"], " (%s)" % m["path"] if m["path"] else ""))
    if r["typed_samples"]:
        lines.append("Types:     read at %d of the %d allocator samples (sites in Class#new, Class#allocate, "
                     "a Struct class's new or Array.new): %s"
                     % (r["typed_samples"], kept, types_text(r["types"], r["allocations"])))
    else:
        lines.append("Types:     not read: no site was in Class#new, Class#allocate, a Struct class's new or "
                     "Array.new (other sites' types are not read: docs/allocations.md)")
    lines.append("Estimates weight each site by the time its allocations take (GC steps included): see "
                 "docs/allocations.md for the bias")
    return lines
