"""`ruby threads` and `ruby locks`: what each Ruby thread is doing or waiting
on, who holds what it waits for, and the deadlocks among them.

The C core does the analysis (rbpeek_locks_render_json, see
docs/threads-and-locks.md) and refers to threads by their index in the
snapshot; this module adds what only the debugger knows (its own thread
numbers, so `thread N` selects a thread) and lays the result out as text or
JSON.
"""

import json

from .base import Command, parse_args, write_output
from .threadview import frame_line, map_threads, uses_new_quotes

_STATE_WIDTH = 8
_WHAT_WIDTH = 48


def _analyze(sessions, dbg, args):
    """(ruby_version, threads with debugger numbers, the core's locks document)."""
    session = sessions.get(dbg, args)
    version = session.info()["ruby_version"]
    with session.snapshot(64) as snap:
        threads = map_threads(dbg, snap.threads(), session, snap)
        doc = snap.locks()
    return version, threads, doc


def _ref(threads, index):
    """A thread as a reference object for JSON output."""
    if index is None:
        return None
    t = threads[index]
    return {"index": index, "debugger_thread": t["dbg_num"], "name": t["name"], "main": t["main"]}


def _ref_text(threads, index, with_name=True):
    """'#3 "worker-2"' (the debugger's thread number), or 'Ruby thread 4' when
    the debugger does not show the thread."""
    if index is None:
        return "?"
    t = threads[index]
    num = "#%s" % t["dbg_num"] if t["dbg_num"] is not None else "Ruby thread %d" % (index + 1)
    if not with_name:
        return num
    if t["name"]:
        return '%s "%s"' % (num, t["name"])
    return "%s main" % num if t["main"] else num


def _addr(text):
    return text or "(unknown address)"


def _mutex_text(doc, m):
    """'Mutex 0x...' or, for a Monitor's inner Mutex, 'Monitor 0x... (Mutex 0x...)'."""
    obj = "Mutex %s" % m["object"] if m["object"] else "Mutex (rb_mutex_t %s)" % m["data"]
    if m.get("monitor"):
        entered = " entered %dx" % m["monitor_count"] if m.get("monitor_count") else ""
        return "Monitor %s%s (%s)" % (m["monitor"], entered, obj)
    return obj


def _owner_text(threads, m):
    state = m["owner_state"]
    if state == "thread":
        fiber = " (through a fiber that is not its current one)" if m.get("owner_fiber_current") is False else ""
        return "held by %s%s" % (_ref_text(threads, m["owner"]), fiber)
    if state == "dead_fiber":
        where = " of %s" % _ref_text(threads, m["owner"]) if m["owner"] is not None else ""
        return "locked by a finished fiber%s: nobody can unlock it" % where
    if state == "unknown":
        return "held by something that is not a live thread (owner %s)" % (m["owner_fiber"] or "?")
    return "not held" if m["locked"] is False else "owner unknown"


def _wait_text(threads, doc, t):
    """What thread t is waiting on, in a few words."""
    w = t["wait"]
    if w is None:
        return {"runnable": "running", "killed": "killed"}.get(t["state"], t["state"])
    kind = w["kind"]
    timed = " (with a timeout)" if w["timeout"] else ""
    if kind == "mutex":
        if w["mutex"] is not None:
            m = doc["mutexes"][w["mutex"]]
            text = "%s %s" % (_mutex_text(doc, m), _owner_text(threads, m))
        else:
            text = "Mutex %s" % _addr(w["object"])
    elif kind == "condvar":
        text = "ConditionVariable %s" % _addr(w["object"])
        if w["cv_mutex"]:
            text += " (Mutex %s)" % w["cv_mutex"]
        text += timed
    elif kind in ("queue", "sized_queue", "sized_queue_push"):
        cls = "Queue" if kind == "queue" else "SizedQueue"
        op = "push" if kind == "sized_queue_push" else "pop"
        text = "%s#%s %s" % (cls, op, _addr(w["object"]))
        facts = []
        if w["queue_length"] is not None:
            facts.append("empty" if w["queue_length"] == 0 else "%d queued" % w["queue_length"])
        if w["queue_waiters"]:
            facts.append("%d waiting" % w["queue_waiters"])
        if facts:
            text += " (%s)" % ", ".join(facts)
        text += timed
    elif kind == "join":
        text = "Thread#%s on %s" % (w["method"] or "join", _ref_text(threads, w["target"])) + timed
    elif kind == "io":
        text = "IO#%s" % (w["method"] or "?")
        text += " fd %d" % w["fd"] if w["fd"] is not None else " (fd unknown)"
    elif kind == "select":
        text = "IO.select"
    elif kind == "sleep":
        text = "Kernel#sleep" + (" (with a duration)" if w["timeout"] else " (no duration)" if w["timeout"] is False
                                 else "")
    elif kind == "mutex_sleep":
        text = "Mutex#sleep %s%s" % (_addr(w["object"]), timed)
    elif kind == "stop":
        text = "Thread.stop"
    else:
        text = "in %s" % w["method"] if w["method"] else "not in a method rbpeek knows"
    if w["confirmed"] is False:
        text += " [not in its wait list: just woken, or about to wait]"
    return text


def _holds_text(doc, t):
    if not t["holds"]:
        return ""
    return "holds " + ", ".join(_mutex_text(doc, doc["mutexes"][k]) for k in t["holds"])


def _wait_json(threads, doc, w):
    if w is None:
        return None
    out = {k: w[k] for k in ("kind", "method", "object", "class", "monitor", "cv_mutex", "fd", "timeout",
                             "confirmed", "queue_length", "queue_waiters", "note")}
    if w["mutex"] is not None:
        m = doc["mutexes"][w["mutex"]]
        out["mutex"] = {"object": m["object"], "data": m["data"], "owner_state": m["owner_state"]}
        out["owner"] = _ref(threads, m["owner"]) if m["owner_state"] == "thread" else None
    out["target"] = _ref(threads, w["target"])
    return out


def _thread_json(threads, doc, t, lt):
    return {"index": t["index"], "object": lt["value"], "debugger_thread": t["dbg_num"], "name": t["name"],
            "main": t["main"],
            "native_tid": t["native_tid"], "status": t["status"], "ractor": t["ractor"],
            "state": lt["state"], "sleep_forever": lt["sleep_forever"], "holds_gvl": lt["holds_gvl"],
            "waiting_on": _wait_json(threads, doc, lt["wait"]),
            "holds": [{"object": doc["mutexes"][k]["object"], "data": doc["mutexes"][k]["data"],
                       "monitor": doc["mutexes"][k]["monitor"]} for k in lt["holds"]],
            "top_frame": t["frames"][0] if t["frames"] else None}


def _gvl_text(threads, doc):
    parts = []
    for g in doc["gvl"]:
        prefix = "GVL" if len(doc["gvl"]) == 1 else "GVL of ractor %d" % g["ractor"]
        if not g["known"]:
            parts.append("%s: unknown" % prefix)
        elif g["owner"] is not None:
            parts.append("%s: held by %s" % (prefix, _ref_text(threads, g["owner"])))
        elif g["owner_thread"]:
            parts.append("%s: held by rb_thread_t %s, not a listed Ruby thread" % (prefix, g["owner_thread"]))
        else:
            parts.append("%s: free (no Ruby thread is running Ruby code)" % prefix)
    return parts


class ThreadsCommand(Command):
    name = "threads"
    summary = "One line per Ruby thread: number, name, TID, state, what it waits on, top frame."
    usage = """ruby threads [--json] [-o FILE] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Lists every Ruby thread: the debugger's thread number (so 'thread N' selects
it), its Ruby name, native TID, state (running, sleeping, blocked on a Mutex,
waiting, stopped, killed), what it waits on (a Mutex and who holds it, a
Queue, SizedQueue, ConditionVariable, Thread#join and its target, an IO and
its fd, sleep, Thread.stop), the Mutexes it holds, whether it holds the GVL,
and its innermost Ruby frame. 'ruby locks' adds deadlock detection.

  --json             JSON: {"ruby_version", "threads": [{"debugger_thread",
                     "name", "main", "native_tid", "status", "state",
                     "waiting_on", "holds", "holds_gvl", "top_frame", ...}]}
  -o, --output FILE  write to FILE instead of the debugger's output"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("--json", action="store_true")
            p.add_argument("-o", "--output")

        args = parse_args(self.name, argv, build)
        version, threads, doc = _analyze(self.sessions, dbg, args)
        if args.json:
            out = {"ruby_version": version,
                   "threads": [_thread_json(threads, doc, t, doc["threads"][t["index"]]) for t in threads],
                   "notes": doc["notes"]}
            write_output(dbg, json.dumps(out, ensure_ascii=False, indent=1) + "\n", args.output)
            return
        new_quotes = uses_new_quotes(version)
        lines = []
        for t in threads:
            lt = doc["threads"][t["index"]]
            num = _ref_text(threads, t["index"], with_name=False)
            name = '"%s"' % t["name"] if t["name"] else ("main" if t["main"] else "-")
            tid = "tid %s" % t["native_tid"] if t["native_tid"] else "tid ?"
            what = _wait_text(threads, doc, lt)
            extra = [x for x in (_holds_text(doc, lt), "holds the GVL" if lt["holds_gvl"] else "") if x]
            if extra:
                what += "; " + "; ".join(extra)
            top = frame_line(t["frames"][0], new_quotes) if t["frames"] else "(no Ruby frames)"
            lines.append("%-4s %-16s %-11s %-*s %-*s  %s" % (num, name, tid, _STATE_WIDTH, lt["state"], _WHAT_WIDTH,
                                                               what, top))
        lines.extend(_gvl_text(threads, doc))
        lines.extend("note: %s" % n for n in doc["notes"])
        write_output(dbg, "\n".join(lines), args.output)


def _edge_text(threads, doc, e):
    """'#2 "worker-1" -> Mutex 0x... (held by #3)' for one waits-for edge."""
    src = _ref_text(threads, e["thread"])
    dst = _ref_text(threads, e["waits_for"], with_name=False)
    if e["via"] == "mutex":
        m = doc["mutexes"][e["mutex"]] if e["mutex"] is not None else None
        what = _mutex_text(doc, m) if m else "Mutex %s" % _addr(e["object"])
        return "%s -> %s (held by %s)" % (src, what, dst)
    return "%s -> Thread#join (on %s)" % (src, dst)


def _edge_json(threads, doc, e):
    out = {"thread": _ref(threads, e["thread"]), "via": e["via"], "object": e["object"],
           "waits_for": _ref(threads, e["waits_for"])}
    if e["mutex"] is not None:
        out["mutex"] = {"object": doc["mutexes"][e["mutex"]]["object"], "data": doc["mutexes"][e["mutex"]]["data"]}
    return out


class LocksCommand(Command):
    name = "locks"
    summary = "Deadlocks (Mutex and Thread#join cycles), hopeless waits, every Mutex's owner and waiters, the GVL."
    usage = """ruby locks [--json] [-o FILE] [--vm ADDR] [--layout FILE] [--ruby-version X.Y.Z]

Builds the waits-for graph of the Ruby threads (a thread blocked on a Mutex
waits for its owner; a thread in Thread#join without a timeout waits for its
target) and reports every cycle in it as a DEADLOCK, every thread waiting on
something no live thread can release (a Mutex locked by a fiber that has
finished) as NEVER RELEASED, and the threads stuck behind either. Then lists
every held or awaited Mutex with its owner and waiters, and the GVL owner.
Threads are numbered as the debugger numbers them ('thread N' selects one).

  --json             JSON: {"ruby_version", "deadlocks": [{"cycle": [{"thread",
                     "via", "object", "waits_for"}]}], "never_released",
                     "behind", "mutexes", "gvl", "threads", "notes"}
  -o, --output FILE  write to FILE instead of the debugger's output"""

    def run(self, dbg, argv):
        def build(p):
            p.add_argument("--json", action="store_true")
            p.add_argument("-o", "--output")

        args = parse_args(self.name, argv, build)
        version, threads, doc = _analyze(self.sessions, dbg, args)
        if args.json:
            self._json(dbg, args, version, threads, doc)
        else:
            self._text(dbg, args, threads, doc)

    @staticmethod
    def _json(dbg, args, version, threads, doc):
        out = {
            "ruby_version": version,
            "deadlocks": [{"cycle": [_edge_json(threads, doc, e) for e in d["cycle"]]} for d in doc["deadlocks"]],
            "deadlocks_truncated": doc["deadlocks_truncated"],
            "never_released": [{"thread": _ref(threads, o["thread"]), "object": o["object"],
                                "data": doc["mutexes"][o["mutex"]]["data"], "reason": o["reason"],
                                "owner_thread": _ref(threads, o["owner_thread"])} for o in doc["orphans"]],
            "behind": [_edge_json(threads, doc, e) for e in doc["behind"]],
            "mutexes": [{"object": m["object"], "object_from": m["object_from"], "data": m["data"],
                         "locked": m["locked"], "owner_state": m["owner_state"],
                         "owner": _ref(threads, m["owner"]) if m["owner_state"] in ("thread", "dead_fiber") else None,
                         "owner_fiber": m["owner_fiber"], "owner_fiber_current": m["owner_fiber_current"],
                         "waiters": [_ref(threads, i) for i in m["waiters"]],
                         "queued": m["queued"], "monitor": m["monitor"], "monitor_count": m["monitor_count"]}
                        for m in doc["mutexes"]],
            "gvl": [{"ractor": g["ractor"], "known": g["known"], "owner": _ref(threads, g["owner"]),
                     "owner_thread": g["owner_thread"]} for g in doc["gvl"]],
            "threads": [_thread_json(threads, doc, t, doc["threads"][t["index"]]) for t in threads],
            "notes": doc["notes"],
        }
        write_output(dbg, json.dumps(out, ensure_ascii=False, indent=1) + "\n", args.output)

    @staticmethod
    def _text(dbg, args, threads, doc):
        lines = []
        for d in doc["deadlocks"]:
            cycle = d["cycle"]
            chain = " -> ".join(_edge_text(threads, doc, e) for e in cycle)
            lines.append("DEADLOCK: %s -> %s" % (chain, _ref_text(threads, cycle[0]["thread"], with_name=False)))
        if doc["deadlocks_truncated"]:
            lines.append("(more cycles may exist: the search stopped at its bound)")
        for o in doc["orphans"]:
            m = doc["mutexes"][o["mutex"]]
            lines.append("NEVER RELEASED: %s waits on %s: %s" % (_ref_text(threads, o["thread"]),
                                                                  _mutex_text(doc, m), o["reason"]))
        deadlocked = {e["thread"] for d in doc["deadlocks"] for e in d["cycle"]}
        hopeless = {o["thread"] for o in doc["orphans"]}
        for e in doc["behind"]:
            dst = _ref_text(threads, e["waits_for"], with_name=False)
            why = ("%s is deadlocked" % dst if e["waits_for"] in deadlocked else
                   "%s waits on a Mutex nobody can release" % dst if e["waits_for"] in hopeless else
                   "%s is stuck behind one too" % dst)
            lines.append("STUCK BEHIND: %s: %s" % (_edge_text(threads, doc, e), why))
        if not doc["deadlocks"] and not doc["orphans"]:
            lines.append("No deadlock: no cycle of Mutex or Thread#join waits, and no wait on a Mutex nobody "
                         "can release.")
        if doc["mutexes"]:
            lines.append("")
        for m in doc["mutexes"]:
            waiters = ", ".join(_ref_text(threads, i) for i in m["waiters"]) or "none"
            lines.append("%s  %s  waiters: %s" % (_mutex_text(doc, m), _owner_text(threads, m), waiters))
        lines.extend(_gvl_text(threads, doc))
        lines.extend("note: %s" % n for n in doc["notes"])
        write_output(dbg, "\n".join(lines), args.output)

