"""The core's locks document in the debugger's words: who a thread is
(its debugger number), what it waits on, who holds a Mutex, the GVL, and
the JSON pieces; shared by `ruby threads` and `ruby locks`.

The C core does the analysis (rbpeek_locks_render_json, see
docs/threads-and-locks.md) and refers to threads by their index in the
snapshot; this module adds what only the debugger knows (its own thread
numbers, so `thread N` selects a thread).
"""

from .threadview import map_threads


def analyze(sessions, dbg, args):
    """(ruby_version, threads with debugger numbers, the core's locks
    document). Each thread with frames has its innermost one as Ruby prints
    it in a backtrace ("top_line")."""
    session = sessions.get(dbg, args)
    version = session.info()["ruby_version"]
    with session.snapshot(64) as snap:
        threads = map_threads(dbg, snap.threads(), session, snap)
        for t in threads:
            if t["frames"]:
                t["top_line"] = snap.frame_line(t["index"], 0)
        doc = snap.locks()
    return version, threads, doc


def ref(threads, index):
    """A thread as a reference object for JSON output."""
    if index is None:
        return None
    t = threads[index]
    return {"index": index, "debugger_thread": t["dbg_num"], "name": t["name"], "main": t["main"]}


def ref_text(threads, index, with_name=True):
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


def addr_text(text):
    return text or "(unknown address)"


def mutex_text(doc, m):
    """'Mutex 0x...' or, for a Monitor's inner Mutex, 'Monitor 0x... (Mutex 0x...)'."""
    obj = "Mutex %s" % m["object"] if m["object"] else "Mutex (rb_mutex_t %s)" % m["data"]
    if m.get("monitor"):
        entered = " entered %dx" % m["monitor_count"] if m.get("monitor_count") else ""
        return "Monitor %s%s (%s)" % (m["monitor"], entered, obj)
    return obj


def owner_text(threads, m):
    state = m["owner_state"]
    if state == "thread":
        fiber = " (through a fiber that is not its current one)" if m.get("owner_fiber_current") is False else ""
        return "held by %s%s" % (ref_text(threads, m["owner"]), fiber)
    if state == "dead_fiber":
        where = " of %s" % ref_text(threads, m["owner"]) if m["owner"] is not None else ""
        return "locked by a finished fiber%s: nobody can unlock it" % where
    if state == "unknown":
        return "held by something that is not a live thread (owner %s)" % (m["owner_fiber"] or "?")
    return "not held" if m["locked"] is False else "owner unknown"


def _wait_json(threads, doc, w):
    if w is None:
        return None
    out = {k: w[k] for k in ("kind", "method", "object", "class", "monitor", "cv_mutex", "fd", "timeout",
                             "confirmed", "queue_length", "queue_waiters", "note")}
    if w["mutex"] is not None:
        m = doc["mutexes"][w["mutex"]]
        out["mutex"] = {"object": m["object"], "data": m["data"], "owner_state": m["owner_state"]}
        out["owner"] = ref(threads, m["owner"]) if m["owner_state"] == "thread" else None
    out["target"] = ref(threads, w["target"])
    return out


def thread_json(threads, doc, t, lt):
    return {"index": t["index"], "object": lt["value"], "debugger_thread": t["dbg_num"], "name": t["name"],
            "main": t["main"],
            "native_tid": t["native_tid"], "status": t["status"], "ractor": t["ractor"],
            "state": lt["state"], "sleep_forever": lt["sleep_forever"], "holds_gvl": lt["holds_gvl"],
            "waiting_on": _wait_json(threads, doc, lt["wait"]),
            "holds": [{"object": doc["mutexes"][k]["object"], "data": doc["mutexes"][k]["data"],
                       "monitor": doc["mutexes"][k]["monitor"]} for k in lt["holds"]],
            "top_frame": t["frames"][0] if t["frames"] else None}


def gvl_text(threads, doc):
    parts = []
    for g in doc["gvl"]:
        prefix = "GVL" if len(doc["gvl"]) == 1 else "GVL of ractor %d" % g["ractor"]
        if not g["known"]:
            parts.append("%s: unknown" % prefix)
        elif g["owner"] is not None:
            parts.append("%s: held by %s" % (prefix, ref_text(threads, g["owner"])))
        elif g["owner_thread"]:
            parts.append("%s: held by rb_thread_t %s, not a listed Ruby thread" % (prefix, g["owner_thread"]))
        else:
            parts.append("%s: free (no Ruby thread is running Ruby code)" % prefix)
    return parts
