"""Ruby threads in the debugger's terms: which debugger thread each one is
(map_threads), and the lines Ruby itself prints for a thread and a frame.
Shared by bt, threads, locks and sample."""

from ..core import RbpeekError, resolve_tids


def map_threads(dbg, threads, session=None, snapshot=None):
    """Adds each Ruby thread's debugger thread number ("dbg_num") and TID.

    Ruby 3.1+ records the kernel TID; older Rubies only the pthread_t, which
    the debugger's threads are matched against by their thread pointer. A
    debugger that cannot tell a thread's pointer (lldb 16 shows no fs_base)
    leaves some unplaced: given the session and snapshot, their TIDs are
    then read from glibc's thread descriptors, checked against the TIDs the
    debugger lists (rbpeek_snapshot_resolve_tids).
    """
    dbg_threads = dbg.threads()
    by_tid, by_pthread = {}, {}
    for t in dbg_threads:
        if t.get("tid"):
            by_tid[t["tid"]] = t
        if t.get("pthread"):
            by_pthread[t["pthread"]] = t
    for rt in threads:
        d = by_tid.get(rt["native_tid"]) if rt["native_tid"] else None
        if d is None and rt["pthread_id"]:
            d = by_pthread.get(rt["pthread_id"])
        rt["dbg_num"] = d["num"] if d else None
        if rt["native_tid"] is None and d:
            rt["native_tid"] = d.get("tid")
    unplaced = [rt for rt in threads if rt["dbg_num"] is None and rt["pthread_id"]]
    if unplaced and session is not None and snapshot is not None and by_tid:
        try:
            tids = dict(resolve_tids(session, snapshot, known_tids=sorted(by_tid)))
        except RbpeekError:
            tids = {}
        for rt in unplaced:
            tid = tids.get(rt["pthread_id"])
            if tid in by_tid:
                rt["dbg_num"] = by_tid[tid]["num"]
                rt["native_tid"] = tid
    return threads


def progname_if_needed(session, frames):
    """The program's name, which frames with a nil path print as; read only
    when one of frames has such a path."""
    if any(f["path"] is None for f in frames):
        return session.describe().get("progname")
    return None


def frame_line(frame, new_quotes, progname):
    """One frame as Ruby prints it in a backtrace. A frame whose path is nil
    (a C method with no Ruby frame below it) shows the program's name, as
    Thread::Backtrace::Location#to_s does."""
    loc = frame["path"] if frame["path"] is not None else (progname or "(unknown)")
    if frame["lineno"]:
        loc += ":%d" % frame["lineno"]
    quote = "'%s'" if new_quotes else "`%s'"
    return "%s:in %s" % (loc, quote % frame["label"])


def thread_title(t):
    parts = ["Thread"]
    if t.get("dbg_num") is not None:
        parts.append("%s" % t["dbg_num"])
    if t["name"]:
        parts.append('"%s"' % t["name"])
    attrs = []
    if t["main"]:
        attrs.append("main")
    attrs.append(t["status"])
    if t["native_tid"]:
        attrs.append("tid %d" % t["native_tid"])
    if t["ractor"]:
        attrs.append("ractor %d" % t["ractor"])
    return "%s (%s)" % (" ".join(parts), ", ".join(attrs))


def uses_new_quotes(version):
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return False
    return (major, minor) >= (3, 4)
