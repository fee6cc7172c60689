"""Ruby threads in the debugger's terms: which debugger thread each one is
(map_threads). Shared by bt, threads, locks, frame and sample. How Ruby
prints a thread or a frame is the core's (rbpeek_snapshot_render_bt,
rbpeek_frame_render)."""


def map_threads(dbg, threads, session=None, snapshot=None):
    """Adds each Ruby thread's debugger thread number ("dbg_num").

    A snapshot's TIDs are the kernel's (glibc's thread descriptors, or
    Ruby's record, checked against the kernel's list: the core's
    vm/kernel_tid.c), so a thread is found by its TID; failing that, by its
    pthread_t, for debuggers that tell one (gdb). A thread the debugger
    places whose TID the snapshot does not know takes the debugger's. The
    session and snapshot arguments are kept for callers of the earlier
    signature.
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
    return threads
