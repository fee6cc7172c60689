/*
 * The snapshot API (rbpeek_snapshot_*): every Ruby thread of the target
 * (threads.c) with its backtrace (frames.c), taken in one go into one
 * arena, and the kernel TIDs of those threads where Ruby keeps none, read
 * from glibc's thread descriptors. The top of the vm layer.
 *
 * rbpeek_snapshot_take_running walks a target that is NOT stopped (the
 * sampler's --nonblocking mode). The walk reads a thread's control frames
 * in one read, through the page cache (whose pages may have been fetched at
 * different moments: the prefetch, or first use), and keeps their change
 * markers (rbp_stack_mark: the current frame pointer, the frame count, the
 * iseq and saved pc of every frame but the innermost frame's pc, which the
 * VM writes back on every instruction). Right after, the same markers are
 * read straight from the target, with the execution context the thread
 * runs. If they agree, the frames the walk reported are the thread's frames
 * at the time of that direct read, even if the bytes it used were fetched
 * piecemeal: a mix that equals the real stack is the real stack. If not,
 * the thread is walked once more with the cache refreshed (a window of
 * microseconds), and if the markers still disagree
 * it is marked torn and left out. A stack that changed and came back to the
 * same frames (same iseqs, same return addresses) is the same stack.
 * Not covered: values the labels need from a frame's environment (3.4's
 * method entries) are trusted for frames whose iseq and pc did not change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "context/context.h"
#include "vm/frames.h"
#include "vm/gc_state.h"
#include "vm/kernel_tid.h"
#include "vm/native_merge.h"
#include "vm/robject.h"
#include "vm/snapshot.h"
#include "vm/threads.h"

#define DEFAULT_MAX_FRAMES 100000
#define RBP_MARK_HOLDERS 64   /* ractors whose GVL holder a snapshot marks; more: none is marked */
/* Control frames one snapshot reads over all its threads (threads x frames
 * is a pairwise walk): 8 Mi frames is 500 threads each at the deepest
 * stack Ruby's default 1 MiB VM stack holds, and at most ~512 MiB read. */
#define SNAPSHOT_FRAME_BUDGET ((size_t)8 << 20)

struct rbpeek_snapshot {
    rbp_arena arena;
    rbpeek_thread *threads;
    size_t nthreads;
    /* For native stacks (rbpeek_snapshot_take_native): each thread's
     * execution context and its frames' control frames, then the stacks. */
    uint64_t *ecs;
    uint32_t **origins;
    int32_t *saved_lines;   /* each thread's rbp_frames_walk_origin *saved_line */
    rbpeek_native_stack *native;
};

const char *rbpeek_thread_status_name(int32_t status)
{
    switch (status) {
    case RBPEEK_THREAD_RUNNABLE: return "run";
    case RBPEEK_THREAD_STOPPED:
    case RBPEEK_THREAD_STOPPED_FOREVER: return "sleep";
    case RBPEEK_THREAD_KILLED: return "dead";
    default: return "unknown";
    }
}

/* A thread's stack markers read straight from the target, not through the
 * page cache: the execution context it runs, and its control frames'. */
static bool read_mark_direct(rbpeek_session *s, uint64_t th, uint64_t *ec, rbp_stack_mark *m)
{
    bool was = rbp_mem_set_direct(s->mem, true);
    rbp_cframes cf = {0};
    bool ok = rbp_read_field(s, th, RBP_L_th_ec, ec) && rbp_cframes_read(s, *ec, SIZE_MAX, &cf) == NULL;
    if (ok) rbp_stack_mark_of(&cf, m);
    rbp_cframes_free(&cf);
    rbp_mem_set_direct(s->mem, was);
    return ok;
}

static bool mark_equal(const rbp_stack_mark *a, const rbp_stack_mark *b)
{
    return a->cfp == b->cfp && a->nframes == b->nframes && a->hash == b->hash;
}

/* A thread's facts, as the thread list read them. */
static void thread_facts(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *r, rbpeek_thread *t)
{
    t->is_main = r->is_main;
    t->status = r->status;
    t->native_tid = r->native_tid;
    t->pthread_id = r->pthread_id;
    t->thread_addr = r->th;
    t->thread_value = r->self;
    t->ractor_addr = r->ractor;
    t->ractor_index = r->ractor_index;
    char name[1024];
    if (rbp_obj_type(s, r->name) == RBP_T_STRING && rbp_string_read(s, r->name, name, sizeof name, NULL) >= 0)
        t->name = rbp_arena_strdup(&snap->arena, name);
}

/* One thread: its facts and its walk; running: the thread may run meanwhile
 * (check the walk against direct reads; see the top of this file). */
static void walk_one(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *r, rbpeek_thread *t,
                     size_t max_frames, size_t *frame_budget, bool running)
{
    thread_facts(s, snap, r, t);
    rbp_stack_mark seen, now;
    size_t idx = (size_t)(t - snap->threads);
    uint32_t **origin = snap->origins ? &snap->origins[idx] : NULL;
    if (snap->ecs) snap->ecs[idx] = r->ec;
    int32_t *saved = snap->saved_lines ? &snap->saved_lines[idx] : NULL;
    const char *err = rbp_frames_walk_origin(s, r->ec, max_frames, &snap->arena, t, frame_budget, &seen, origin, saved);
    for (int attempt = 0; running && attempt < 2; attempt++) {
        uint64_t ec = 0;
        if (read_mark_direct(s, r->th, &ec, &now) && ec == r->ec && mark_equal(&seen, &now)) break;
        if (attempt == 0) {
            /* Once more, on fresh pages: a window of microseconds. */
            t->retried = 1;
            rbp_mem_refresh(s->mem);
            t->nframes = 0;
            t->frames = NULL;
            t->truncated = 0;
            err = rbp_frames_walk_origin(s, r->ec, max_frames, &snap->arena, t, frame_budget, &seen, origin, saved);
        } else {
            t->torn = 1;
            err = "its stack changed while it was read (torn)";
        }
    }
    if (err) t->error = rbp_arena_strdup(&snap->arena, err);
}

/* The GC at work, on the thread it runs on: read while that thread is
 * stopped (it holds the GVL), so that the phase is the one of its stack. */
static void mark_gc(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *raw, size_t n,
                    const uint64_t *held, size_t nheld)
{
    rbp_gc_state g;
    if (!rbp_gc_state_read(s, &g) || !g.during_gc) return;
    /* The sampler stopped the GVL's holder alone: that is the GC's thread */
    uint64_t th = held && nheld == 1 ? held[0] : rbp_gc_thread(s, &g);
    for (size_t i = 0; th && i < n; i++)
        if (raw[i].th == th) snap->threads[i].gc = rbp_gc_phase(&g);
}

/* Each thread's part in its ractor's GVL (rbpeek_thread.gvl): who holds
 * it, who waits in its queue. Read with the GC's state, while the holders
 * are stopped: a queue then only grows (only a holder takes a thread out
 * of it), so a waiter read is a waiter at the stop. With no holder read
 * (the GVL free, changing hands) the queue still says who waits. */
static void mark_gvl(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *raw, size_t n)
{
    rbp_gvl_holder h[RBP_MARK_HOLDERS];
    size_t nh = 0, nq = 0;
    uint64_t *queued = n ? rbp_arena_alloc(&snap->arena, n * sizeof *queued) : NULL;
    if (!queued || !rbp_gvl_waiters(s, queued, n, &nq)) return;
    bool held = rbp_gvl_holders(s, h, RBP_MARK_HOLDERS, &nh);
    for (size_t i = 0; i < n; i++) {
        int32_t role = held ? RBPEEK_GVL_NONE : RBPEEK_GVL_NOT_QUEUED;
        for (size_t k = 0; held && k < nh && role == RBPEEK_GVL_NONE; k++)
            if (h[k].th == raw[i].th) role = RBPEEK_GVL_HOLDS;
        for (size_t k = 0; k < nq; k++)
            if (queued[k] == raw[i].th && role != RBPEEK_GVL_HOLDS) role = RBPEEK_GVL_QUEUED;
        snap->threads[i].gvl = role;
    }
}

static bool in_set(const uint64_t *set, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == v) return true;
    return false;
}

/* A thread's kernel TID (kernel_tid.c). Where that finds none for Ruby's
 * main thread of a live process, it is the thread-group leader, whose TID
 * is the pid: the initial thread, or in a forked child the thread that
 * forked (3.1 keeps the parent's TID there, and a child just forked has no
 * other thread to calibrate the descriptor's offset on: puma's new worker
 * was named "Thread main" without its TID in a sample right after TTIN). */
static int64_t thread_tid(rbpeek_session *s, const rbp_thread_raw *r)
{
    int64_t tid = rbp_kernel_tid(s, r->pthread_id, r->native_tid);
    if (tid <= 0 && r->is_main && r->ractor_index == 0 && s->pid > 0) tid = s->pid;
    return tid;
}

/* Each thread's kernel TID (thread_tid), Ruby's own record kept beside
 * it; after the walks, so that a held thread waits for none of it. */
static void kernel_tids(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *raw, size_t n)
{
    uint64_t main_pthread = 0;
    for (size_t i = 0; i < n && !main_pthread; i++)
        if (raw[i].is_main && raw[i].ractor_index == 0) main_pthread = raw[i].pthread_id;
    if (main_pthread) {
        uint64_t others[64];
        size_t k = 0;
        for (size_t i = 0; i < n && k < 64; i++)
            if (raw[i].pthread_id && raw[i].pthread_id != main_pthread) others[k++] = raw[i].pthread_id;
        rbp_kernel_tid_calibrate(s, main_pthread, others, k);
    }
    for (size_t i = 0; i < n; i++) {
        snap->threads[i].ruby_tid = raw[i].native_tid;
        snap->threads[i].native_tid = thread_tid(s, &raw[i]);
    }
}

/* A held thread's native stack between its copy and its unwind. */
typedef struct held_native {
    size_t thread;
    rbp_native_held h;
} held_native;

/* A sampled thread's native stack (the sampler's --native), or its
 * failure recorded: none of this stops the sample. */
static bool sample_native(rbpeek_session *s, rbpeek_snapshot *snap, size_t i, const rbp_native_source *native,
                          bool held)
{
    return rbp_native_stack_sampled(s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i], native, held,
                                    &snap->native[i]);
}

/* How take() takes a snapshot. */
typedef struct take_opts {
    size_t max_frames;          /* 0: DEFAULT_MAX_FRAMES */
    bool running;               /* without split.held: every thread may run meanwhile (each walk checked) */
    bool origins;               /* keep each frame's control frame, for native stacks built after */
    rbp_snapshot_split split;   /* held threads, stop and release, native stacks (snapshot.h) */
} take_opts;

/* One take in progress: what it was asked, the thread list, the snapshot
 * it fills, and whether the caller's release has been called. */
typedef struct take_run {
    rbpeek_session *s;
    take_opts o;
    rbp_thread_raw *raw;
    size_t n;
    const char *warning;        /* the thread list was cut: said on its last thread */
    size_t nheld;
    rbpeek_snapshot *snap;
    size_t frame_budget;
    bool released;
} take_run;

/* The caller's release, exactly once (at the latest when the take ends). */
static void let_go(take_run *r)
{
    if (!r->released && r->o.split.release) r->o.split.release(r->o.split.ctx);
    r->released = true;
}

/* Every held thread is in the thread list (a thread just started may not be). */
static bool held_listed(const take_run *r)
{
    for (size_t k = 0; r->o.split.nheld && k < *r->o.split.nheld; k++) {
        bool found = false;
        for (size_t i = 0; i < r->n && !found; i++) found = r->raw[i].th == r->o.split.held[k];
        if (!found) return false;
    }
    return true;
}

/* The thread list; with a stop callback, the target stopped once it is
 * read, and the list read again where the stop asks for it. */
static rbpeek_status read_threads(take_run *r)
{
    rbpeek_session *s = r->s;
    rbpeek_status st = rbp_threads_collect(s, &r->raw, &r->n, &r->warning);
    if (st != RBPEEK_OK || !r->o.split.stop) return st;
    int how = r->o.split.stop(r->o.split.ctx);
    if (how < 0) return rbp_fail(s, RBPEEK_ERR_STATE, "the target could not be stopped for the sample");
    if (how != RBP_SPLIT_ALL && (how != RBP_SPLIT_HELD || held_listed(r))) return RBPEEK_OK;
    /* Everything stopped after all, or a holder the list read before did
     * not have (a thread just started): read it again, strictly (from
     * after the stop). */
    if (how == RBP_SPLIT_ALL) r->o.split.held = NULL;
    free(r->raw);
    r->raw = NULL;
    bool was = rbp_mem_set_strict(s->mem, how != RBP_SPLIT_ALL);
    st = rbp_threads_collect(s, &r->raw, &r->n, &r->warning);
    rbp_mem_set_strict(s->mem, was);
    return st;
}

/* The snapshot, with room for n threads (and their execution contexts,
 * control frames and native stacks where asked). */
static rbpeek_status new_snapshot(take_run *r)
{
    size_t n = r->n;
    rbpeek_snapshot *snap = r->snap = calloc(1, sizeof *snap);
    bool ok = snap && (snap->threads = rbp_arena_alloc(&snap->arena, n * sizeof *snap->threads));
    if (ok && (r->o.origins || r->o.split.native) && n)
        ok = (snap->ecs = rbp_arena_alloc(&snap->arena, n * sizeof *snap->ecs)) &&
             (snap->origins = rbp_arena_alloc(&snap->arena, n * sizeof *snap->origins)) &&
             (snap->saved_lines = rbp_arena_alloc(&snap->arena, n * sizeof *snap->saved_lines)) &&
             (!r->o.split.native || (snap->native = rbp_arena_alloc(&snap->arena, n * sizeof *snap->native)));
    if (!ok) return rbp_fail(r->s, RBPEEK_ERR_NOMEM, "out of memory");
    if (snap->saved_lines) memset(snap->saved_lines, 0, n * sizeof *snap->saved_lines);
    snap->nthreads = n;
    return RBPEEK_OK;
}

static bool is_held(const take_run *r, size_t i) { return in_set(r->o.split.held, r->nheld, r->raw[i].th); }

/* The held threads: the thread list may come from pages read before the
 * stop (the caller's fence: rbp_mem_fence); a held thread's own facts and
 * stack are read again, from what was read after it stopped (the caller
 * made reads strict). */
static void walk_held(take_run *r)
{
    for (size_t i = 0; i < r->n; i++) {
        if (!is_held(r, i)) continue;
        rbp_thread_raw *raw = &r->raw[i], fresh;
        rbp_thread_read(r->s, raw->th, &fresh);
        raw->self = fresh.self;
        raw->ec = fresh.ec;
        raw->status = fresh.status;
        raw->to_kill = fresh.to_kill;
        raw->name = fresh.name;
        raw->native_tid = fresh.native_tid;
        raw->pthread_id = fresh.pthread_id;
        walk_one(r->s, r->snap, raw, &r->snap->threads[i], r->o.max_frames, &r->frame_budget, false);
    }
}

/* The held threads' machine stacks: their registers and a copy of each
 * stack while they are stopped, unwound once they run again (the unwind
 * is most of a sample's work: native_stack.c). False: out of memory. */
static bool hold_native(take_run *r, held_native **hn_out, size_t *nhn)
{
    rbpeek_snapshot *snap = r->snap;
    *nhn = 0;
    if (!r->o.split.native || !r->nheld) return true;
    held_native *hn = *hn_out = rbp_arena_alloc(&snap->arena, r->nheld * sizeof *hn);
    if (!hn) return false;
    for (size_t i = 0; i < r->n && *nhn < r->nheld; i++) {
        if (!is_held(r, i)) continue;
        held_native *h = &hn[(*nhn)++];
        h->thread = i;
        if (!rbp_native_stack_hold(r->s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i],
                                   r->o.split.native, &h->h, &snap->native[i]))
            return false;
    }
    return true;
}

/* The held stacks unwound from their copies (each hold is let go of, also
 * after a failure); false once memory ran out. */
static bool unwind_held(take_run *r, held_native *hn, size_t nhn, bool ok)
{
    rbpeek_snapshot *snap = r->snap;
    for (size_t k = 0; k < nhn; k++) {
        size_t i = hn[k].thread;
        if (!rbp_native_stack_held(r->s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i],
                                   r->o.split.native->flags, &hn[k].h, ok ? &snap->native[i] : NULL))
            ok = false;
    }
    return ok;
}

/* A thread not held, which may run meanwhile: its stack kept from an
 * earlier sample where the caller's stamp shows it has not run since
 * (stack_keep.c), else walked and checked against direct reads, and that
 * walk kept where the stamp allows (tid: its kernel TID, or -1). */
static void walk_other(take_run *r, size_t i, int64_t tid)
{
    const rbp_snapshot_split *o = &r->o.split;
    rbpeek_snapshot *snap = r->snap;
    const rbp_thread_raw *raw = &r->raw[i];
    rbpeek_thread *t = &snap->threads[i];
    uint64_t st[2];
    bool stamped = o->keep && tid > 0 && o->stamp(o->ctx, tid, st);
    uint32_t **origin = snap->origins ? &snap->origins[i] : NULL;
    int32_t *saved = snap->saved_lines ? &snap->saved_lines[i] : NULL;
    rbp_keep_verdict v = stamped ? rbp_stack_keep_get(o->keep, raw->th, tid, raw->ec, st, &snap->arena, t, origin,
                                                      saved)
                                 : RBP_KEEP_NEW;
    if (v == RBP_KEEP_HIT) {
        thread_facts(r->s, snap, raw, t);
        if (snap->ecs) snap->ecs[i] = raw->ec;
        return;
    }
    walk_one(r->s, snap, raw, t, r->o.max_frames, &r->frame_budget, true);
    if (!stamped) return;
    if (v == RBP_KEEP_WALK)
        rbp_stack_keep_put(o->keep, raw->th, t, origin ? *origin : NULL, saved ? *saved : 0);
    else
        rbp_stack_keep_note(o->keep, raw->th, tid, raw->ec, st, o->asleep(o->ctx, tid));
}

/* The threads that run again: each walk checked against direct reads. */
static bool walk_others(take_run *r, bool ok)
{
    for (size_t i = 0; i < r->n; i++) {
        if (is_held(r, i)) continue;
        /* its kernel TID: the keep's proofs and its registers are asked by it */
        int64_t tid = r->o.split.keep || r->o.split.native ? thread_tid(r->s, &r->raw[i]) : -1;
        walk_other(r, i, tid);
        if (r->o.split.native && ok) {
            r->snap->threads[i].native_tid = tid;
            ok = sample_native(r->s, r->snap, i, r->o.split.native, false);
        }
    }
    if (r->o.split.keep) rbp_stack_keep_sweep(r->o.split.keep);
    return ok;
}

/* Some threads held (rbp_snapshot_take_split): those walked (and their
 * machine stacks copied) first, strictly; then released; then the rest. */
static rbpeek_status walk_split(take_run *r)
{
    rbpeek_session *s = r->s;
    bool was = rbp_mem_set_strict(s->mem, true);
    walk_held(r);
    mark_gc(s, r->snap, r->raw, r->n, r->o.split.held, r->nheld);
    mark_gvl(s, r->snap, r->raw, r->n);
    /* --native asks a thread's registers by its kernel TID: known before
     * the unwinds, not only at the end (Rubies before 3.1). */
    if (r->o.split.native) kernel_tids(s, r->snap, r->raw, r->n);
    held_native *hn = NULL;
    size_t nhn = 0;
    bool ok = hold_native(r, &hn, &nhn);
    rbp_mem_set_strict(s->mem, was);
    let_go(r);
    ok = unwind_held(r, hn, nhn, ok);
    ok = walk_others(r, ok);
    return ok ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

/* Every thread as `running` says (held NULL), then released. */
static rbpeek_status walk_all(take_run *r)
{
    rbpeek_session *s = r->s;
    const rbp_native_source *native = r->o.running ? NULL : r->o.split.native;
    for (size_t i = 0; i < r->n; i++)
        walk_one(s, r->snap, &r->raw[i], &r->snap->threads[i], r->o.max_frames, &r->frame_budget, r->o.running);
    mark_gc(s, r->snap, r->raw, r->n, NULL, 0);
    mark_gvl(s, r->snap, r->raw, r->n);
    bool ok = true;
    if (native) kernel_tids(s, r->snap, r->raw, r->n);   /* before the unwinds, as in walk_split */
    for (size_t i = 0; native && ok && i < r->n; i++) ok = sample_native(s, r->snap, i, native, true);
    let_go(r);
    return ok ? RBPEEK_OK : rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
}

/* Each thread's kernel TID, and the cut thread list said on its last
 * thread, keeping that thread's own error. */
static void finish(take_run *r)
{
    rbpeek_snapshot *snap = r->snap;
    kernel_tids(r->s, snap, r->raw, r->n);
    if (!r->warning || !r->n) return;
    rbpeek_thread *last = &snap->threads[r->n - 1];
    size_t len = strlen(r->warning) + (last->error ? strlen(last->error) + 2 : 0) + 1;
    char *both = rbp_arena_alloc(&snap->arena, len);
    if (both) snprintf(both, len, "%s%s%s", last->error ? last->error : "", last->error ? "; " : "", r->warning);
    last->error = both;
}

/* A snapshot as o says: the thread list, then each thread walked (see
 * rbp_snapshot_take_split for the held ones), then their TIDs. The
 * caller's release is called exactly once, whatever happens. */
static rbpeek_status take(rbpeek_session *s, const take_opts *o, rbpeek_snapshot **out)
{
    take_run r = {.s = s, .o = *o, .frame_budget = SNAPSHOT_FRAME_BUDGET};
    if (!r.o.max_frames) r.o.max_frames = DEFAULT_MAX_FRAMES;
    rbpeek_status st = RBPEEK_OK;
    if (!s || !out) st = rbp_fail(s, RBPEEK_ERR_ARG, "snapshot_take: no output pointer");
    else if (!s->attached) st = rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    else if (r.o.split.native) st = rbp_native_ready(s);
    if (out) *out = NULL;
    if (st == RBPEEK_OK) st = read_threads(&r);
    r.nheld = r.o.split.nheld ? *r.o.split.nheld : 0;
    if (st == RBPEEK_OK) st = new_snapshot(&r);
    if (st == RBPEEK_OK) st = r.o.split.held ? walk_split(&r) : walk_all(&r);
    let_go(&r);
    if (st == RBPEEK_OK) {
        finish(&r);
        *out = r.snap;
    } else {
        rbpeek_snapshot_free(r.snap);
    }
    free(r.raw);
    return st;
}

rbpeek_status rbpeek_snapshot_take(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out)
{
    take_opts o = {.max_frames = max_frames};
    return take(s, &o, out);
}

rbpeek_status rbpeek_snapshot_take_running(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out)
{
    take_opts o = {.max_frames = max_frames, .running = true};
    return take(s, &o, out);
}

rbpeek_status rbp_snapshot_take_split(rbpeek_session *s, size_t max_frames, const rbp_snapshot_split *how,
                                      rbpeek_snapshot **out)
{
    take_opts o = {.max_frames = max_frames, .split = *how};
    return take(s, &o, out);
}

/* The TID of each thread: Ruby's own (3.1+), else read from glibc's
 * descriptor as rbpeek_snapshot_resolve_tids does, against the threads
 * the source knows (a live pid's /proc, a core's notes). */
static void thread_tids(rbpeek_session *s, const rbpeek_snapshot *snap, int64_t *tids)
{
    bool need = false;
    for (size_t i = 0; i < snap->nthreads; i++) {
        tids[i] = snap->threads[i].native_tid;
        need |= tids[i] <= 0 && snap->threads[i].pthread_id;
    }
    if (!need) return;
    int64_t *known = NULL;
    size_t nknown = 0;
    if (s->nthread_ids && (known = malloc(s->nthread_ids * sizeof *known))) {
        memcpy(known, s->thread_ids, s->nthread_ids * sizeof *known);
        nknown = s->nthread_ids;
    } else if (s->core_path) {
        if (!s->core_threads_read) {
            s->ncore_threads = rbp_source_core_threads(s->core_path, &s->core_threads);
            s->core_threads_read = true;
        }
        if (s->ncore_threads && (known = malloc(s->ncore_threads * sizeof *known)))
            for (size_t i = 0; i < s->ncore_threads; i++) known[nknown++] = s->core_threads[i].tid;
    }
    uint64_t *pairs = malloc(2 * snap->nthreads * sizeof *pairs);
    size_t npairs = 0;
    char saved[sizeof s->error];
    memcpy(saved, s->error, sizeof saved); /* a thread without a TID is said in its stack, not as an error */
    if (pairs && (nknown || s->pid > 0))
        rbpeek_snapshot_resolve_tids(s, snap, known, nknown, s->pid, pairs, snap->nthreads, &npairs);
    memcpy(s->error, saved, sizeof saved);
    for (size_t i = 0; i < snap->nthreads; i++)
        for (size_t k = 0; tids[i] <= 0 && k < npairs; k++)
            if (pairs[2 * k] == snap->threads[i].pthread_id) tids[i] = (int64_t)pairs[2 * k + 1];
    free(pairs);
    free(known);
}

rbpeek_status rbpeek_snapshot_take_native(rbpeek_session *s, size_t max_frames, uint32_t flags,
                                          rbpeek_snapshot **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "snapshot_take_native: no output pointer");
    *out = NULL;
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    if (!s->regs_fn && !s->core_path && !(s->pid > 0 && s->hold))
        return rbp_fail(s, RBPEEK_ERR_STATE,
                        s->pid > 0 ? "native stacks of a live process need its threads stopped: hold it first "
                                     "(rbpeek_session_hold)"
                                   : "native stacks need the threads' registers: give a register source "
                                     "(rbpeek_session_use_registers)");
    rbpeek_status st = rbp_native_ready(s);
    if (st != RBPEEK_OK) return st;
    rbpeek_snapshot *snap = NULL;
    take_opts o = {.max_frames = max_frames, .origins = true};
    st = take(s, &o, &snap);
    if (st != RBPEEK_OK) return st;
    int64_t *tids = snap->nthreads ? malloc(snap->nthreads * sizeof *tids) : NULL;
    if (snap->nthreads && (!tids || !(snap->native = rbp_arena_alloc(&snap->arena,
                                                                      snap->nthreads * sizeof *snap->native)))) {
        free(tids);
        rbpeek_snapshot_free(snap);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    }
    if (tids) thread_tids(s, snap, tids);
    for (size_t i = 0; i < snap->nthreads; i++) {
        if (!rbp_native_stack_build(s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i], tids[i], flags,
                                    &snap->native[i])) {
            free(tids);
            rbpeek_snapshot_free(snap);
            return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
        }
    }
    free(tids);
    *out = snap;
    return RBPEEK_OK;
}

const rbpeek_native_stack *rbpeek_snapshot_native(const rbpeek_snapshot *snap, size_t index)
{
    return snap && snap->native && index < snap->nthreads ? &snap->native[index] : NULL;
}

int32_t rbp_snapshot_saved_line(const rbpeek_snapshot *snap, size_t index)
{
    return snap && snap->saved_lines && index < snap->nthreads ? snap->saved_lines[index] : 0;
}

void rbpeek_snapshot_free(rbpeek_snapshot *snap)
{
    if (!snap) return;
    rbp_arena_free(&snap->arena);
    free(snap);
}

size_t rbpeek_snapshot_thread_count(const rbpeek_snapshot *snap) { return snap ? snap->nthreads : 0; }

const rbpeek_thread *rbpeek_snapshot_thread(const rbpeek_snapshot *snap, size_t index)
{
    return snap && index < snap->nthreads ? &snap->threads[index] : NULL;
}

rbpeek_status rbpeek_snapshot_resolve_tids(rbpeek_session *s, const rbpeek_snapshot *snap, const int64_t *known_tids,
                                           size_t nknown, int pid, uint64_t *pairs, size_t max_pairs,
                                           size_t *npairs)
{
    if (!snap) {
        if (npairs) *npairs = 0;
        return rbp_fail(s, RBPEEK_ERR_ARG, "resolve_tids: bad arguments");
    }
    return rbp_kernel_tid_pairs(s, snap->threads, snap->nthreads, known_tids, nknown, pid, pairs, max_pairs, npairs);
}
