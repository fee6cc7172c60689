"""`ruby allocs --sites`: where the live target allocates, estimated from
allocator samples (docs/allocations.md, "Allocation sites").

The sampler (sampling/traced.py, the C tracer) stops the thread holding the
GVL --rate times a second and unwinds its machine stack; the core keeps the
samples whose machine frames, between the leaf and the first Ruby frame,
are in the object allocator or in a GC step under it
(rbpeek_alloc_sites_add_snapshot), each attributed to its Ruby stack. The
GC's own counters, read before and after, give the exact number of objects
allocated meanwhile; each site gets that total times its share of the
allocator samples, with a 95% interval (Wilson's) from the number of
samples. The profile's writers get the stacks weighted by estimated
allocations.
"""

import argparse
import json
import math
import time

from ..core import FORMAT_JSON, FORMATS, AllocSites, Profile, RbpeekError, SampleOptions
from ..sampling.report import check_outputs, write_outputs
from ..sampling.stats import Stats, fmt_rate
from ..sampling.traced import run_traced

DEFAULT_RATE = 50.0         # samples a second (docs/performance.md: the cost)
Z95 = 1.959964              # the normal quantile of a 95% interval
TOP = 10                    # sites shown per table
METHOD = "allocator samples"


def wilson(k, n):
    """The 95% Wilson score interval of a proportion k/n."""
    if n <= 0:
        return 0.0, 1.0
    p = k / n
    z2 = Z95 * Z95
    den = 1 + z2 / n
    mid = (p + z2 / (2 * n)) / den
    half = Z95 * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


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


def estimate(raw_sites, total, kept, names=None):
    """The sites with their estimates: count (estimated allocations), share,
    its interval, and types: {class: estimated allocations} of the samples
    whose frame said the class (Class#new and the like), others not read."""
    out = []
    for s in raw_sites:
        lo, hi = wilson(s["samples"], kept)
        share = s["samples"] / kept if kept else 0.0
        types = {}
        for t in s.get("types", ()):
            name = (names or {}).get(t["class"])
            if name and kept:
                types[name] = types.get(name, 0) + int(round(total * t["samples"] / kept))
        out.append({"label": s["label"], "path": s["path"], "lineno": s["lineno"], "kind": s["kind"],
                    "samples": s["samples"], "share": share, "share_ci95": [lo, hi],
                    "count": int(round(total * share)), "count_ci95": [int(total * lo), int(math.ceil(total * hi))],
                    "types": types, "typed_samples": sum(t["samples"] for t in s.get("types", ()))})
    return out


def add_types(into, types):
    for name, n in types.items():
        into[name] = into.get(name, 0) + n
    return into


def _summed(sites, total, kept, key_of, row_of):
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
        lo, hi = wilson(k, kept)
        row = {"samples": k, "share": k / kept if kept else 0.0, "share_ci95": [lo, hi],
               "count": int(round(total * k / kept)) if kept else 0, "types": types}
        row.update(row_of(key, labels))
        rows.append(row)
    return rows


def by_line(sites, total, kept):
    """The sites summed by source line: a Ruby frame's own line, a C
    method's caller's ("a" * 4 allocates in the method's frame and in
    String#*, on one line)."""
    return _summed(sites, total, kept, lambda s: (s["path"], s["lineno"]),
                   lambda key, labels: {"path": key[0], "lineno": key[1], "labels": labels})


def by_method(sites, total, kept):
    """The sites summed by method: a Ruby frame's label and file, a C
    method's label (its path is its caller's)."""
    return _summed(sites, total, kept, lambda s: (s["label"], s["path"] if s["kind"] == "ruby" else None),
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
    run = argparse.Namespace(count=None, duration=args.duration, max_frames=0, nonblocking=False, stop_all=False,
                             native=True, alloc_sites=judge)
    dbg.progress("rbpeek: sampling the allocator of pid %d (Ruby %s) at %s Hz for %s; Ctrl-C ends it early\n"
                 % (pid, version, fmt_rate(1.0 / interval),
                    "%g s" % args.duration if args.duration else "as long as you like"))
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
    raw_sites = judge.sites(profile)
    sites = estimate(raw_sites, total, kept, class_names(session, raw_sites))
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
              "sites": sites, "lines": by_line(sites, total, kept), "methods": by_method(sites, total, kept), "sites_unavailable": None,
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
        facts = {"title": title, "period_s": el / total if total else 0.0, "on_cpu": False, "duration": el,
                 "start": w0}
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
    lines.append("By line:   share [95% interval]   est. objects   est. /s  samples  line (frames)")
    el = r["duration_s"]
    for s in r["lines"][:TOP]:
        lo, hi = s["share_ci95"]
        lines.append("  %6.1f%% [%5.1f-%5.1f%%] %12s %9s %8d  %s (%s)%s" % (
            100 * s["share"], 100 * lo, 100 * hi, fmt_count(s["count"]), fmt_count(s["count"] / el), s["samples"],
            _where(s), ", ".join(s["labels"]),
            " types: " + types_text(s["types"], s["count"]) if s["types"] and s["count"] else ""))
    if len(r["lines"]) > TOP:
        lines.append("  ... %d more lines (--json lists every site)" % (len(r["lines"]) - TOP))
    lines.append("By method: share [95% interval]   est. objects   est. /s  samples  method")
    for m in r["methods"][:TOP]:
        lo, hi = m["share_ci95"]
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
