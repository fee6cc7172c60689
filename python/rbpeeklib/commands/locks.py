"""`ruby locks`: deadlocks (cycles of Mutex and Thread#join waits), waits
nobody can end, every held or awaited Mutex with its owner and waiters,
and the GVL.
"""

from .base import Command, add_output_options, json_text, parse_args, write_output
from .lockview import addr_text, analyze, gvl_text, mutex_text, owner_text, ref, ref_text, thread_json


def _edge_text(threads, doc, e):
    """'#2 "worker-1" -> Mutex 0x... (held by #3)' for one waits-for edge."""
    src = ref_text(threads, e["thread"])
    dst = ref_text(threads, e["waits_for"], with_name=False)
    if e["via"] == "mutex":
        m = doc["mutexes"][e["mutex"]] if e["mutex"] is not None else None
        what = mutex_text(doc, m) if m else "Mutex %s" % addr_text(e["object"])
        return "%s -> %s (held by %s)" % (src, what, dst)
    return "%s -> Thread#join (on %s)" % (src, dst)


def _edge_json(threads, doc, e):
    out = {"thread": ref(threads, e["thread"]), "via": e["via"], "object": e["object"],
           "waits_for": ref(threads, e["waits_for"])}
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
        args = parse_args(self.name, argv, add_output_options)
        version, threads, doc = analyze(self.sessions, dbg, args)
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
            "never_released": [{"thread": ref(threads, o["thread"]), "object": o["object"],
                                "data": doc["mutexes"][o["mutex"]]["data"], "reason": o["reason"],
                                "owner_thread": ref(threads, o["owner_thread"])} for o in doc["orphans"]],
            "behind": [_edge_json(threads, doc, e) for e in doc["behind"]],
            "mutexes": [{"object": m["object"], "object_from": m["object_from"], "data": m["data"],
                         "locked": m["locked"], "owner_state": m["owner_state"],
                         "owner": ref(threads, m["owner"]) if m["owner_state"] in ("thread", "dead_fiber") else None,
                         "owner_fiber": m["owner_fiber"], "owner_fiber_current": m["owner_fiber_current"],
                         "waiters": [ref(threads, i) for i in m["waiters"]],
                         "queued": m["queued"], "monitor": m["monitor"], "monitor_count": m["monitor_count"]}
                        for m in doc["mutexes"]],
            "gvl": [{"ractor": g["ractor"], "known": g["known"], "owner": ref(threads, g["owner"]),
                     "owner_thread": g["owner_thread"]} for g in doc["gvl"]],
            "threads": [thread_json(threads, doc, t, doc["threads"][t["index"]]) for t in threads],
            "notes": doc["notes"],
        }
        write_output(dbg, json_text(out), args.output)

    @staticmethod
    def _text(dbg, args, threads, doc):
        lines = []
        for d in doc["deadlocks"]:
            cycle = d["cycle"]
            chain = " -> ".join(_edge_text(threads, doc, e) for e in cycle)
            lines.append("DEADLOCK: %s -> %s" % (chain, ref_text(threads, cycle[0]["thread"], with_name=False)))
        if doc["deadlocks_truncated"]:
            lines.append("(more cycles may exist: the search stopped at its bound)")
        for o in doc["orphans"]:
            m = doc["mutexes"][o["mutex"]]
            lines.append("NEVER RELEASED: %s waits on %s: %s" % (ref_text(threads, o["thread"]),
                                                                  mutex_text(doc, m), o["reason"]))
        deadlocked = {e["thread"] for d in doc["deadlocks"] for e in d["cycle"]}
        hopeless = {o["thread"] for o in doc["orphans"]}
        for e in doc["behind"]:
            dst = ref_text(threads, e["waits_for"], with_name=False)
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
            waiters = ", ".join(ref_text(threads, i) for i in m["waiters"]) or "none"
            lines.append("%s  %s  waiters: %s" % (mutex_text(doc, m), owner_text(threads, m), waiters))
        lines.extend(gvl_text(threads, doc))
        lines.extend("note: %s" % n for n in doc["notes"])
        write_output(dbg, "\n".join(lines), args.output)
