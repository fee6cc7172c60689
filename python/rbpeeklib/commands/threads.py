"""`ruby threads`: one line per Ruby thread: its debugger number, name,
TID, state, what it waits on, what it holds, and its innermost frame.
"""

from .base import Command, add_output_options, json_text, parse_args, write_output
from .lockview import addr_text, analyze, gvl_text, mutex_text, owner_text, ref_text, thread_json

# Columns are as wide as their widest cell, up to these; a longer cell is
# shortened in the middle (the JSON keeps it whole), so that a thread with a
# long name, or waiting on something long to say, cannot push the others'
# columns out of line.
_NAME_MAX = 32
_WHAT_MAX = 56


def _fit(text, width):
    """text cut to width characters by an ellipsis in its middle."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[:(keep + 1) // 2] + "\u2026" + text[len(text) - keep // 2:]


def _table(rows):
    """Rows of cells as lines, each column as wide as its widest cell (the
    last one as it is)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths)) + "  " + r[-1] for r in rows]


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
            text = "%s %s" % (mutex_text(doc, m), owner_text(threads, m))
        else:
            text = "Mutex %s" % addr_text(w["object"])
    elif kind == "condvar":
        text = "ConditionVariable %s" % addr_text(w["object"])
        if w["cv_mutex"]:
            text += " (Mutex %s)" % w["cv_mutex"]
        text += timed
    elif kind in ("queue", "sized_queue", "sized_queue_push"):
        cls = "Queue" if kind == "queue" else "SizedQueue"
        op = "push" if kind == "sized_queue_push" else "pop"
        text = "%s#%s %s" % (cls, op, addr_text(w["object"]))
        facts = []
        if w["queue_length"] is not None:
            facts.append("empty" if w["queue_length"] == 0 else "%d queued" % w["queue_length"])
        if w["queue_waiters"]:
            facts.append("%d waiting" % w["queue_waiters"])
        if facts:
            text += " (%s)" % ", ".join(facts)
        text += timed
    elif kind == "join":
        text = "Thread#%s on %s" % (w["method"] or "join", ref_text(threads, w["target"])) + timed
    elif kind == "io":
        text = "IO#%s" % (w["method"] or "?")
        text += " fd %d" % w["fd"] if w["fd"] is not None else " (fd unknown)"
    elif kind == "select":
        text = "IO.select"
    elif kind == "sleep":
        text = "Kernel#sleep" + (" (with a duration)" if w["timeout"] else " (no duration)" if w["timeout"] is False
                                 else "")
    elif kind == "mutex_sleep":
        text = "Mutex#sleep %s%s" % (addr_text(w["object"]), timed)
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
    return "holds " + ", ".join(mutex_text(doc, doc["mutexes"][k]) for k in t["holds"])


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
        args = parse_args(self.name, argv, add_output_options)
        version, threads, doc = analyze(self.sessions, dbg, args)
        if args.json:
            out = {"ruby_version": version,
                   "threads": [thread_json(threads, doc, t, doc["threads"][t["index"]]) for t in threads],
                   "notes": doc["notes"]}
            write_output(dbg, json_text(out), args.output)
            return
        rows = []
        for t in threads:
            lt = doc["threads"][t["index"]]
            num = ref_text(threads, t["index"], with_name=False)
            name = '"%s"' % t["name"] if t["name"] else ("main" if t["main"] else "-")
            tid = "tid %s" % t["native_tid"] if t["native_tid"] else "tid ?"
            what = _wait_text(threads, doc, lt)
            extra = [x for x in (_holds_text(doc, lt), "holds the GVL" if lt["holds_gvl"] else "") if x]
            if extra:
                what += "; " + "; ".join(extra)
            top = t.get("top_line", "(no Ruby frames)")
            rows.append([num, _fit(name, _NAME_MAX), tid, lt["state"], _fit(what, _WHAT_MAX), top])
        lines = _table(rows) if rows else []
        lines.extend(gvl_text(threads, doc))
        lines.extend("note: %s" % n for n in doc["notes"])
        write_output(dbg, "\n".join(lines), args.output)
