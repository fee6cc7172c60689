"""Ruby threads in the debugger's terms: which debugger thread each one is
(map_threads). Shared by bt, threads, locks, frame and sample. How Ruby
prints a thread or a frame is the core's (rbpeek_snapshot_render_bt,
rbpeek_frame_render)."""

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
