/*
 * What a sample stops (tracer.c's design; docs/sampling.md): in GVL mode
 * the thread holding each ractor's GVL alone, read while the target runs,
 * stopped, and read again once stopped (tr_prepare, then tr_stop_now,
 * called by the walk once it has the thread list: tr_stop_cb); every
 * thread when the holders cannot be stopped alone. For allocation sites
 * (cfg.alloc_sites) only a GVL holder allocates: a sample that finds every
 * GVL free stops nothing, a thread that let the GVL go before its stop is
 * resumed at once, and a stop of every thread is walked as the holders'
 * (issue 37: on a 13-thread worker walking and unwinding every thread
 * while all waited was most of the stop).
 */
#define _GNU_SOURCE  /* tracer.h: cpu_set_t */
#include "profile/tracer.h"

#include <string.h>

#include "context/context.h"
#include "memory/mem.h"
#include "profile/helper_thread.h"
#include "vm/snapshot.h"
#include "vm/threads.h"

/* The TID of a GVL holder, or -1: the kernel's (vm/kernel_tid.c: glibc's
 * descriptor's, or Ruby's record, as /proc/PID/task lists it). */
static pid_t holder_tid(const rbp_gvl_holder *h)
{
    return h->native_tid > 0 ? (pid_t)h->native_tid : -1;
}

/* What a read of the GVL holders found (read_holders). */
enum holders { HOLDERS_STOPPABLE, HOLDERS_NONE, HOLDERS_UNKNOWN };

/* Allocation sites (cfg.alloc_sites): only a thread holding its ractor's
 * GVL allocates Ruby objects, so a sample needs the holders stopped and no
 * other thread: a ractor whose GVL is free allocates nothing then. */
static bool sites_mode(const struct rbpeek_trace *t) { return t->cfg.alloc_sites != NULL; }

/* Reads the GVL holders into tids (appending the ones not there yet; with
 * now, the holders' TIDs alone as well). HOLDERS_UNKNOWN when one cannot
 * be stopped alone: its TID is unknown or untraced, or the holders are
 * unknown, or (but for allocation sites) a GVL is free: anyone may take
 * it. HOLDERS_NONE (allocation sites): every GVL is free. */
static enum holders read_holders(struct rbpeek_trace *t, pid_t *tids, size_t *ntids, bool *all_stopped, pid_t *now,
                                 size_t *nnow)
{
    rbp_gvl_holder h[MAX_HOLDERS];
    size_t n = 0;
    *all_stopped = true;
    t->nheld = 0;
    if (nnow) *nnow = 0;
    if (!rbp_gvl_holders(t->session, h, MAX_HOLDERS, &n)) return HOLDERS_UNKNOWN;
    for (size_t i = 0; i < n; i++) {
        if (!h[i].th && sites_mode(t)) continue;
        if (!h[i].th) return HOLDERS_UNKNOWN;
        t->held_th[t->nheld++] = h[i].th;
        pid_t tid = holder_tid(&h[i]);
        if (tid <= 0 || !tr_is_known(t, tid)) return HOLDERS_UNKNOWN;
        if (!tr_is_stopped(t, tid)) *all_stopped = false;
        if (nnow) now[(*nnow)++] = tid;
        size_t k = 0;
        while (k < *ntids && tids[k] != tid) k++;
        if (k == *ntids && *ntids < MAX_HOLDERS) tids[(*ntids)++] = tid;
    }
    return t->nheld || !sites_mode(t) ? HOLDERS_STOPPABLE : HOLDERS_NONE;   /* as before, but for allocation sites */
}

/* Allocation sites: resumes the threads of tids stopped for this sample
 * that do not hold a GVL now (now[0..nnow)): the GVL changed hands before
 * they stopped, and they allocate nothing; they are not kept waiting while
 * the new holder is stopped. */
static void let_go_of_others(struct rbpeek_trace *t, pid_t *tids, size_t *ntids, const pid_t *now, size_t nnow)
{
    size_t kept = 0;
    for (size_t k = 0; k < *ntids; k++) {
        bool holds = false;
        for (size_t i = 0; i < nnow && !holds; i++) holds = now[i] == tids[k];
        if (holds) tids[kept++] = tids[k];
        else tr_resume_one(t, tids[k]);
    }
    *ntids = kept;
}

/* Before the stop, while the target runs (GVL mode): who holds the GVL,
 * and the pages the last walk used, in one batch. The parked threads'
 * stacks cannot change while the holder keeps the GVL, and are checked
 * against direct reads after the resume anyway (rbp_snapshot_take_split),
 * and the thread list is read from these pages too, before the stop (the
 * walk calls tr_stop_cb once it has it); only what the holder may have
 * changed since is read again once it is stopped: behind a fence, in one
 * batch, the pages its own reads used last time. */
void tr_prepare(struct rbpeek_trace *t)
{
    rbp_mem *mem = t->session->mem;
    memset(&t->cur, 0, sizeof t->cur);
    t->nheld = 0;
    if (t->cfg.stop_mode != RBPEEK_STOP_GVL) return;
    bool stopped;
    /* Uncached: a hint, which must neither put stale pages in the cache
     * nor change what the prefetch fetches. */
    bool was = rbp_mem_set_direct(mem, true);
    enum holders got = read_holders(t, t->cur.tids, &t->cur.ntids, &stopped, NULL, NULL);
    rbp_mem_set_direct(mem, was);
    if (got == HOLDERS_NONE) {   /* allocation sites: nobody allocates now */
        t->cur.skip = true;
        return;
    }
    if (got != HOLDERS_STOPPABLE) return;   /* stop everything (tr_stop_now) */
    tr_aside_step(t, t->cur.tids[0]);   /* off the holder's CPU before it is stopped */
    rbp_mem_invalidate(mem);
    rbp_mem_prefetch(mem);
    t->cur.deferred = true;
}

/* Allocation sites, every thread stopped (the holder could not be stopped
 * alone): who holds the GVL now, read from the stopped target. If that is
 * known, the sample goes on as if the holders alone had been stopped
 * (only they are walked before the release, only their machine stacks
 * copied), and every thread is resumed once they are: walking and unwinding
 * every thread of a many-threaded target while all of them wait was most
 * of such a stop (issue 37). Every GVL free: nothing to sample. False: the
 * holders are still unknown; the sample takes every thread. */
static bool full_to_holders(struct rbpeek_trace *t)
{
    struct sample_state *c = &t->cur;
    rbp_mem *mem = t->session->mem;
    rbp_mem_refresh(mem);
    rbp_mem_prefetch(mem);
    bool stopped, strict = rbp_mem_set_strict(mem, true);
    c->ntids = 0;
    enum holders got = read_holders(t, c->tids, &c->ntids, &stopped, NULL, NULL);
    rbp_mem_set_strict(mem, strict);
    c->nstopped = tr_count(t);
    c->stopped_at = rbp_now_ns();
    c->fresh = true;
    c->full = true;
    if (got == HOLDERS_NONE) {
        c->skip = true;
        return true;
    }
    if (got != HOLDERS_STOPPABLE || !stopped) {
        t->nheld = 0;
        return false;
    }
    c->to_holders = true;
    return true;
}

/* Stops what this sample needs (see the top of this file), in t->cur: the
 * threads that did not stop in time, how many were stopped, whether all,
 * and fresh when the page cache was dropped and refilled after the stop
 * (the walk may use it as is). */
void tr_stop_now(struct rbpeek_trace *t)
{
    rbp_mem *mem = t->session->mem;
    struct sample_state *c = &t->cur;
    if (t->cfg.stop_mode == RBPEEK_STOP_NONE) {
        c->stopped_at = rbp_now_ns();
        return;
    }
    c->held_from = rbp_now_ns();
    bool ok = c->deferred;
    for (int round = 0; ok && round < HOLDER_ROUNDS; round++) {
        bool stopped;
        pid_t now[MAX_HOLDERS];
        size_t nnow = 0;
        if (tr_stop_some(t, c->tids, c->ntids) != 0) break;
        rbp_mem_fence(mem);
        bool strict = rbp_mem_set_strict(mem, true);
        enum holders got = read_holders(t, c->tids, &c->ntids, &stopped, now, &nnow);
        rbp_mem_set_strict(mem, strict);
        if (sites_mode(t) && got != HOLDERS_UNKNOWN) let_go_of_others(t, c->tids, &c->ntids, now, nnow);
        if (got == HOLDERS_NONE) {   /* allocation sites: the GVL was let go before the stop */
            c->skip = true;
            c->stopped_at = rbp_now_ns();
            return;
        }
        ok = got == HOLDERS_STOPPABLE;
        if (ok && stopped) {
            c->fresh = true;
            c->nstopped = c->ntids;
            c->stopped_at = rbp_now_ns();
            return;
        }
    }
    t->nheld = 0;
    c->late = tr_stop_all(t);
    if (sites_mode(t) && full_to_holders(t)) return;
    if (c->deferred) {
        /* Everything is stopped now: the same pages again, all of them
         * fresh (the hot list is kept: refresh, not invalidate). */
        rbp_mem_refresh(mem);
        rbp_mem_prefetch(mem);
        c->fresh = true;
    }
    c->full = true;
    c->nstopped = tr_count(t);
    c->stopped_at = rbp_now_ns();
}

/* The walk's call once it has read the thread list (GVL mode). */
int tr_stop_cb(void *ctx)
{
    struct rbpeek_trace *t = ctx;
    tr_stop_now(t);
    if (t->end != RBPEEK_TRACE_RUNNING || t->cur.skip) return -1;
    return t->cur.full && !t->cur.to_holders ? RBP_SPLIT_ALL : RBP_SPLIT_HELD;
}
