"""Thread states in a summary: the profile's tally (rbpeek_thread_tally:
how many samples found each thread running, waiting for the GVL, blocked,
or in the GC) as shares per thread and per process, in text and JSON.
What each state means and how it is decided: docs/sampling.md, "Thread
states"."""

from ..core import THREAD_STATES as STATES   # the C library's rbpeek_thread_state, in its order

TITLES = {"running": "running", "gvl_wait": "GVL wait", "blocked": "blocked", "gc": "GC"}


def _shares(counts, samples):
    return {k: (counts.get(k, 0) / float(samples) if samples else 0.0) for k in STATES}


def thread_entries(tallies):
    """Each thread as the JSON summary gives it: pid, tid, name, samples,
    and states as fractions of its samples."""
    return [{"pid": t["pid"], "tid": t["tid"], "name": t["name"] or ("main" if t["main"] else None),
             "samples": t["samples"], "states": _shares(t["states"], t["samples"])} for t in tallies]


def process_entries(tallies):
    """Per process: the thread samples of all its threads, and the share of
    each state among them."""
    by = {}
    for t in tallies:
        e = by.setdefault(t["pid"], {"pid": t["pid"], "threads": 0, "thread_samples": 0,
                                     "counts": dict.fromkeys(STATES, 0)})
        e["threads"] += 1
        e["thread_samples"] += t["samples"]
        for k in STATES:
            e["counts"][k] += t["states"].get(k, 0)
    out = []
    for pid in sorted(by):
        e = by[pid]
        out.append({"pid": pid, "threads": e["threads"], "thread_samples": e["thread_samples"],
                    "states": _shares(e["counts"], e["thread_samples"])})
    return out


def _pct(shares):
    return "  ".join("%s %3.0f%%" % (TITLES[k], 100.0 * shares[k]) for k in STATES)


def states_lines(tallies, names=None, max_threads=40):
    """The summary's 'Threads' block: one line per process, then one per
    thread (at most max_threads, busiest first). names: pid -> the
    process's name."""
    if not tallies:
        return []
    lines = ["Threads:   share of each thread's samples in each state (running holds the GVL; "
             "blocked: sleep, Mutex, Queue, IO...)"]
    threads = thread_entries(tallies)
    for p in process_entries(tallies):
        who = (names or {}).get(p["pid"]) or ("pid %d" % p["pid"] if p["pid"] else "the process")
        lines.append("  %s, %d thread%s: %s" % (who, p["threads"], "" if p["threads"] == 1 else "s", _pct(p["states"])))
        mine = [t for t in threads if t["pid"] == p["pid"]]
        mine.sort(key=lambda t: (-t["states"]["running"] - t["states"]["gvl_wait"], t["tid"]))
        for t in mine[:max_threads]:
            name = t["name"] if t["name"] else "(unnamed)"
            if len(name) > 28:
                name = name[:13] + "\u2026" + name[-14:]
            lines.append("    %-28s tid %-8s %s" % (name, t["tid"] if t["tid"] > 0 else "?", _pct(t["states"])))
        if len(mine) > max_threads:
            lines.append("    ... %d more threads (--json has every one)" % (len(mine) - max_threads))
    return lines


def recorded_gvl_wait(tallies):
    """The stacks recorded of threads waiting for the GVL: the tally's
    count of the samples whose stack the profile recorded (one blocked
    thread left out is seen, not recorded)."""
    return sum(t["recorded"]["gvl_wait"] for t in tallies)


def shares_text(stacks, gvl_wait, gc):
    """What the stacks recorded were doing, as the summaries and top's
    header say it. The denominator of every share is the stacks recorded:
    one per thread kept at each sample (idle ones are left out by
    default), what the folded file's counts add up to and the flamegraph's
    root is as wide as; gc is the stacks that end in a [GC: ...] frame."""
    if not stacks:
        return "no stacks recorded"
    return ("GVL wait %.1f%%, GC %.1f%% of the %d stacks recorded"
            % (100.0 * gvl_wait / stacks, 100.0 * gc / stacks, stacks))
