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

/* One thread: its facts and its walk; running: the thread may run meanwhile
 * (check the walk against direct reads; see the top of this file). */
static void walk_one(rbpeek_session *s, rbpeek_snapshot *snap, const rbp_thread_raw *r, rbpeek_thread *t,
                     size_t max_frames, size_t *frame_budget, bool running)
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
    rbp_stack_mark seen, now;
    size_t idx = (size_t)(t - snap->threads);
    uint32_t **origin = snap->origins ? &snap->origins[idx] : NULL;
    if (snap->ecs) snap->ecs[idx] = r->ec;
    const char *err = rbp_frames_walk_origin(s, r->ec, max_frames, &snap->arena, t, frame_budget, &seen, origin);
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
            err = rbp_frames_walk_origin(s, r->ec, max_frames, &snap->arena, t, frame_budget, &seen, origin);
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

static bool in_set(const uint64_t *set, size_t n, uint64_t v)
{
    for (size_t i = 0; i < n; i++)
        if (set[i] == v) return true;
    return false;
}

/* Each thread's kernel TID (kernel_tid.c), Ruby's own record kept beside
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
        snap->threads[i].native_tid = rbp_kernel_tid(s, raw[i].pthread_id, raw[i].native_tid);
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

/* held == NULL: every thread is as `running` says. Else the threads in
 * held[0..*nheld) are walked first as stopped ones, release(ctx) is called,
 * and the others are walked as running ones. stop (optional) is called once
 * the thread list is read, and may change *nheld (see snapshot.h). */
static rbpeek_status take(rbpeek_session *s, size_t max_frames, bool running, const uint64_t *held,
                          const size_t *nheld_p, int (*stop)(void *), void (*release)(void *), void *ctx,
                          bool origins, const rbp_native_source *native, rbpeek_snapshot **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "snapshot_take: no output pointer");
    *out = NULL;
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    if (!max_frames) max_frames = DEFAULT_MAX_FRAMES;

    rbp_thread_raw *raw = NULL;
    size_t n = 0;
    const char *warning = NULL;
    rbpeek_status st = rbp_threads_collect(s, &raw, &n, &warning);
    if (st == RBPEEK_OK && stop) {
        int how = stop(ctx);
        if (how < 0) {
            st = rbp_fail(s, RBPEEK_ERR_STATE, "the target could not be stopped for the sample");
        } else {
            bool listed = true;
            for (size_t k = 0; how == RBP_SPLIT_HELD && nheld_p && k < *nheld_p; k++) {
                bool found = false;
                for (size_t i = 0; i < n && !found; i++) found = raw[i].th == held[k];
                listed = listed && found;
            }
            if (how == RBP_SPLIT_ALL || !listed) {
                /* Everything stopped after all, or a holder the list read
                 * before did not have (a thread just started): read it
                 * again, strictly (from after the stop). */
                if (how == RBP_SPLIT_ALL) held = NULL;
                free(raw);
                raw = NULL;
                bool was = rbp_mem_set_strict(s->mem, how != RBP_SPLIT_ALL);
                st = rbp_threads_collect(s, &raw, &n, &warning);
                rbp_mem_set_strict(s->mem, was);
            }
        }
    }
    if (st != RBPEEK_OK) {
        free(raw);
        if (release) release(ctx);
        return st;
    }
    size_t nheld = nheld_p ? *nheld_p : 0;
    rbpeek_snapshot *snap = calloc(1, sizeof *snap);
    if (!snap || !(snap->threads = rbp_arena_alloc(&snap->arena, n * sizeof *snap->threads))) {
        free(raw);
        if (snap) rbp_arena_free(&snap->arena);
        free(snap);
        if (release) release(ctx);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    }
    snap->nthreads = n;
    if ((origins || native) && n &&
        (!(snap->ecs = rbp_arena_alloc(&snap->arena, n * sizeof *snap->ecs)) ||
         !(snap->origins = rbp_arena_alloc(&snap->arena, n * sizeof *snap->origins)) ||
         (native && !(snap->native = rbp_arena_alloc(&snap->arena, n * sizeof *snap->native))))) {
        free(raw);
        rbpeek_snapshot_free(snap);
        if (release) release(ctx);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    }
    size_t frame_budget = SNAPSHOT_FRAME_BUDGET;
    rbpeek_thread *walked = snap->threads;
    size_t *budget = &frame_budget;
    if (held) {
        /* The thread list may come from pages read before the stop (the
         * caller's fence: rbp_mem_fence); a held thread's own facts and
         * stack are read strictly, from what was read after it stopped. */
        bool was = rbp_mem_set_strict(s->mem, true);
        for (size_t i = 0; i < n; i++) {
            if (!in_set(held, nheld, raw[i].th)) continue;
            rbp_thread_raw fresh;
            rbp_thread_read(s, raw[i].th, &fresh);
            raw[i].self = fresh.self;
            raw[i].ec = fresh.ec;
            raw[i].status = fresh.status;
            raw[i].to_kill = fresh.to_kill;
            raw[i].name = fresh.name;
            raw[i].native_tid = fresh.native_tid;
            raw[i].pthread_id = fresh.pthread_id;
            walk_one(s, snap, &raw[i], &walked[i], max_frames, budget, false);
        }
        mark_gc(s, snap, raw, n, held, nheld);
        /* --native asks a thread's registers by its kernel TID: known
         * before the unwinds, not only at the end (Rubies before 3.1). */
        if (native) kernel_tids(s, snap, raw, n);
        /* The held threads' machine stacks: their registers and a copy of
         * each stack while they are stopped, unwound once they run again
         * (the unwind is most of a sample's work: native_stack.c). */
        held_native *hn = native && nheld ? rbp_arena_alloc(&snap->arena, nheld * sizeof *hn) : NULL;
        size_t nhn = 0;
        bool nomem = native && nheld && !hn;
        for (size_t i = 0; hn && !nomem && i < n && nhn < nheld; i++) {
            if (!in_set(held, nheld, raw[i].th)) continue;
            hn[nhn].thread = i;
            nomem = !rbp_native_stack_hold(s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i], native,
                                           &hn[nhn].h, &snap->native[i]);
            nhn++;
        }
        rbp_mem_set_strict(s->mem, was);
        if (release) release(ctx);
        for (size_t k = 0; k < nhn; k++) {
            size_t i = hn[k].thread;
            if (!rbp_native_stack_held(s, &snap->arena, &snap->threads[i], snap->origins[i], snap->ecs[i],
                                       native->flags, &hn[k].h, nomem ? NULL : &snap->native[i]))
                nomem = true;
        }
        for (size_t i = 0; i < n; i++) {
            if (in_set(held, nheld, raw[i].th)) continue;
            walk_one(s, snap, &raw[i], &walked[i], max_frames, budget, true);
            if (native && !nomem) {
                snap->threads[i].native_tid = rbp_kernel_tid(s, raw[i].pthread_id, raw[i].native_tid);
                nomem = !sample_native(s, snap, i, native, false);
            }
        }
        if (nomem) {
            free(raw);
            rbpeek_snapshot_free(snap);
            return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
        }
    } else {
        for (size_t i = 0; i < n; i++) walk_one(s, snap, &raw[i], &walked[i], max_frames, budget, running);
        mark_gc(s, snap, raw, n, NULL, 0);
        bool nomem = false;
        if (native && !running) kernel_tids(s, snap, raw, n);   /* before the unwinds, as above */
        for (size_t i = 0; native && !running && !nomem && i < n; i++) nomem = !sample_native(s, snap, i, native, true);
        if (release) release(ctx);
        if (nomem) {
            free(raw);
            rbpeek_snapshot_free(snap);
            return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
        }
    }
    kernel_tids(s, snap, raw, n);
    if (warning && n) { /* the list was cut after the last thread: say so there, keeping its own error */
        rbpeek_thread *last = &snap->threads[n - 1];
        size_t len = strlen(warning) + (last->error ? strlen(last->error) + 2 : 0) + 1;
        char *both = rbp_arena_alloc(&snap->arena, len);
        if (both) snprintf(both, len, "%s%s%s", last->error ? last->error : "", last->error ? "; " : "", warning);
        last->error = both;
    }
    free(raw);
    *out = snap;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_snapshot_take(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out)
{
    return take(s, max_frames, false, NULL, NULL, NULL, NULL, NULL, false, NULL, out);
}

rbpeek_status rbpeek_snapshot_take_running(rbpeek_session *s, size_t max_frames, rbpeek_snapshot **out)
{
    return take(s, max_frames, true, NULL, NULL, NULL, NULL, NULL, false, NULL, out);
}

rbpeek_status rbp_snapshot_take_split(rbpeek_session *s, size_t max_frames, const uint64_t *held,
                                      const size_t *nheld, int (*stop)(void *), void (*release)(void *), void *ctx,
                                      const rbp_native_source *native, rbpeek_snapshot **out)
{
    if (native) {
        rbpeek_status st = rbp_native_ready(s);
        if (st != RBPEEK_OK) {
            if (release) release(ctx);
            return st;
        }
    }
    return take(s, max_frames, false, held, nheld, stop, release, ctx, false, native, out);
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
    st = take(s, max_frames, false, NULL, NULL, NULL, NULL, NULL, true, NULL, &snap);
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

/* --- kernel TIDs as pairs ------------------------------------------------ */

rbpeek_status rbpeek_snapshot_resolve_tids(rbpeek_session *s, const rbpeek_snapshot *snap, const int64_t *known_tids,
                                           size_t nknown, int pid, uint64_t *pairs, size_t max_pairs,
                                           size_t *npairs)
{
    if (npairs) *npairs = 0;
    if (!s || !snap || !npairs || (!pairs && max_pairs) || (!known_tids && nknown) || (!nknown && pid <= 0))
        return rbp_fail(s, RBPEEK_ERR_ARG, "resolve_tids: bad arguments");
    if (!s->attached || !s->mem) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    (void)pid;   /* a live process's list is the session's own (/proc/PID/task) */
    if (nknown && !rbp_kernel_tids_set(s, known_tids, nknown)) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    size_t n = rbpeek_snapshot_thread_count(snap), k = 0;
    bool missing = false;
    for (size_t i = 0; i < n; i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        if (!t || !t->pthread_id) continue;
        /* The snapshot's TIDs were checked against the list it was taken
         * with; against this one, look again. */
        int64_t tid = nknown ? rbp_kernel_tid(s, t->pthread_id, t->ruby_tid) : t->native_tid;
        if (tid <= 0) {
            missing = true;
            continue;
        }
        if (k < max_pairs) {
            pairs[2 * k] = t->pthread_id;
            pairs[2 * k + 1] = (uint64_t)tid;
            k++;
        }
    }
    *npairs = k;
    if (nknown && s->pid > 0) rbp_kernel_tids_set(s, NULL, 0);   /* a live process's own list again */
    if (missing && !k)
        return rbp_fail(s, RBPEEK_ERR_NOT_FOUND, "cannot tell the threads' kernel TIDs: no TID the kernel lists was "
                        "found in Ruby's records or in glibc's thread descriptors");
    return RBPEEK_OK;
}
