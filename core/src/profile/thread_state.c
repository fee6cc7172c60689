/*
 * Thread states in samples: what each thread was doing when a sample
 * stopped the target, and the profile's tally of them per thread.
 *
 * Ruby's scheduler records both ends of the GVL (the snapshot reads them:
 * rbpeek_thread.gvl): its holder, and the queue of the threads waiting for
 * it (gvl.waitq before 3.2, the thread scheduler's readyq from 3.2, M:N
 * threads included). A queued thread waits for the GVL (GVL_WAIT) whatever
 * its status: back from a blocking region (IO, an extension's work without
 * the GVL) or from a sleep, Ruby still calls it "stopped" until it holds
 * the GVL again. Otherwise Ruby's status says whether it is runnable at
 * all: sleep, Mutex#lock, Queue#pop, ConditionVariable#wait, join, a read
 * and Thread.stop leave it "sleep" (STOPPED or STOPPED_FOREVER): BLOCKED.
 * A runnable thread holds its ractor's GVL (RUNNING; GC when the process
 * was collecting garbage) or waits for it (GVL_WAIT: queued, yielding it,
 * or taking it over).
 *
 * Where the queue could not be read (a layout without it, a damaged list)
 * the kernel tells: every Ruby from 2.7 waits for the GVL in
 * pthread_cond_wait, a futex system call. A runnable thread not known to
 * hold the GVL is GVL_WAIT in futex, RUNNING anywhere else; a stopped
 * thread on a futex whose innermost frame is a C method other than sleep,
 * Mutex, Queue, CV, join and Thread.stop (which wait on futexes too, in
 * their own methods) is back from a blocking region: GVL_WAIT.
 *
 * The tally is a flat array searched linearly: a process has tens of
 * threads, and a sample finds each at the index it had the last time.
 */
#include "profile/thread_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#include "profile/profile.h"
#include "profile/schedstat.h"

#define TALLY_MAX 100000    /* threads remembered; more are not tallied */

long rbp_thread_syscall(rbp_task_files *c, int pid, int64_t tid)
{
    char buf[64];
    if (!rbp_task_file_read(c, pid, tid, "syscall", buf, sizeof buf)) return -2;
    if (strncmp(buf, "running", 7) == 0) return -1;
    if (strncmp(buf, "-1", 2) == 0 && (buf[2] == ' ' || buf[2] == '\n' || buf[2] == '\0')) return -1;
    if (buf[0] < '0' || buf[0] > '9') return -2;
    return strtol(buf, NULL, 10);
}

static bool holds_gvl(const rbpeek_thread *t, const rbp_gvl_view *gvl)
{
    for (size_t i = 0; i < gvl->n && i < RBP_GVL_VIEW_MAX; i++)
        if (gvl->th[i] && gvl->th[i] == t->thread_addr) return true;
    return false;
}

/* Methods that put a thread to sleep for Ruby (their waits are futex
 * waits too): a stopped thread in one of them is blocked, whatever the
 * kernel says. */
static const char *const SLEEPING[] = {
    "sleep", "lock", "synchronize", "pop", "shift", "deq", "push", "enq", "<<", "wait", "join", "value",
    "stop", "enter", "mon_enter", "mon_synchronize", "wait_for_cond", "pass", NULL,
};

static bool sleeping_method(const char *label)
{
    if (!label) return false;
    const char *m = label, *p;
    for (p = label; *p; p++)
        if (*p == '#' || *p == '.') m = p + 1;
    for (size_t i = 0; SLEEPING[i]; i++)
        if (!strcmp(m, SLEEPING[i])) return true;
    return false;
}

bool rbp_thread_state_asks_kernel(const rbpeek_thread *t)
{
    return t->status == RBPEEK_THREAD_RUNNABLE || t->status == RBPEEK_THREAD_STOPPED;
}

bool rbp_thread_state_blocked(rbp_task_files *c, const rbpeek_thread *t, int pid, int64_t tid)
{
    if (t->status == RBPEEK_THREAD_RUNNABLE) return false; /* its state needs the GVL's view */
    long sc = rbp_thread_state_asks_kernel(t) && pid > 0 && tid > 0 ? rbp_thread_syscall(c, pid, tid) : -2;
    return rbp_thread_state_of(t, NULL, sc) == RBPEEK_STATE_BLOCKED;
}

rbpeek_thread_state rbp_thread_state_of(const rbpeek_thread *t, const rbp_gvl_view *gvl, long syscall)
{
    /* Queued for the GVL by Ruby's scheduler: it waits for it, whatever
     * its status (back from IO or a sleep it is "stopped" until it holds
     * the GVL again; under M:N no kernel thread of its own waits). */
    if (t->gvl == RBPEEK_GVL_QUEUED) return RBPEEK_STATE_GVL_WAIT;
    if (t->status != RBPEEK_THREAD_RUNNABLE) {
        /* Not queued: its sleep, Mutex, Queue, IO or join is still on. */
        if (t->gvl != RBPEEK_GVL_UNKNOWN) return RBPEEK_STATE_BLOCKED;
        /* The queue not read: a thread back from a blocking region (IO,
         * an extension's work without the GVL) waits for the GVL on a
         * futex, in the C method that released it. */
#ifdef SYS_futex
        if (t->status == RBPEEK_THREAD_STOPPED && syscall == SYS_futex && t->nframes && t->frames &&
            t->frames[0].kind == RBPEEK_FRAME_CFUNC && !sleeping_method(t->frames[0].label))
            return RBPEEK_STATE_GVL_WAIT;
#endif
        return RBPEEK_STATE_BLOCKED;
    }
    /* The snapshot marks the thread a GC step runs on (the GVL holder
     * while the objspace says the GC is at work), with or without a view
     * of the GVL; only a runnable thread can be it (a forked child's GVL
     * record can name a parked thread). */
    if (t->gc != RBPEEK_GC_NONE) return RBPEEK_STATE_GC;
    /* Runnable for Ruby (a blocking region would have made it "stopped")
     * and not the holder: it waits for the GVL, in the queue, or yielding
     * it (2.7 to 3.1 wait for the next holder to take it over), or on a
     * CPU taking it over (a hand-over on a loaded machine lasts
     * milliseconds). */
    if (t->gvl == RBPEEK_GVL_HOLDS) return RBPEEK_STATE_RUNNING;
    if (t->gvl == RBPEEK_GVL_NONE) return RBPEEK_STATE_GVL_WAIT;
    /* Not queued, the holder not read (RBPEEK_GVL_NOT_QUEUED) or nothing
     * read: the holder as the caller knows it, else the kernel. */
    if (gvl && gvl->known) return holds_gvl(t, gvl) ? RBPEEK_STATE_RUNNING : RBPEEK_STATE_GVL_WAIT;
    /* The holder not known: a runnable thread on a futex waits for the GVL.
     * In any other system call it holds the GVL there (a blocking region
     * would have made it "stopped"): the GC's mmap and madvise, a write
     * Ruby makes without releasing it. Counting it blocked dropped a third
     * of an allocating thread's samples (it.gc_share, lldb --via-debugger). */
#ifdef SYS_futex
    if (syscall == SYS_futex) return RBPEEK_STATE_GVL_WAIT;
#endif
    return RBPEEK_STATE_RUNNING;
}

const char *rbpeek_gvl_wait_label(void)
{
    return "[GVL wait]";
}

static rbp_tally *find(rbpeek_profile *p, int64_t pid, uint64_t addr, int64_t tid, size_t hint)
{
    if (hint < p->ntally) {
        rbp_tally *e = &p->tally[hint];
        if (e->pid == pid && e->thread_addr == addr && e->tid == tid) return e;
    }
    for (size_t i = 0; i < p->ntally; i++) {
        rbp_tally *e = &p->tally[i];
        if (e->pid == pid && e->thread_addr == addr && e->tid == tid) return e;
    }
    return NULL;
}

static rbp_tally *entry(rbpeek_profile *p, int64_t pid, uint64_t addr, int64_t tid, const char *name,
                        int32_t is_main, size_t hint)
{
    rbp_tally *e = find(p, pid, addr, tid, hint);
    if (!e) {
        if (p->ntally >= TALLY_MAX) return NULL;
        if (p->ntally == p->tally_cap) {
            size_t cap = p->tally_cap ? 2 * p->tally_cap : 16;
            rbp_tally *nt = realloc(p->tally, cap * sizeof *nt);
            if (!nt) return NULL;
            p->tally = nt;
            p->tally_cap = cap;
        }
        e = &p->tally[p->ntally];
        memset(e, 0, sizeof *e);
        e->pid = pid;
        e->thread_addr = addr;
        e->tid = tid;
        e->name = strdup("");
        if (!e->name) return NULL;
        p->ntally++;
    }
    e->is_main = is_main;
    const char *nm = name ? name : "";
    if (strcmp(e->name, nm) != 0) {   /* a thread may be named after it starts */
        char *copy = strdup(nm);
        if (copy) {
            free(e->name);
            e->name = copy;
        }
    }
    return e;
}

bool rbp_tally_add(rbpeek_profile *p, int64_t pid, const rbpeek_thread *t, int64_t tid, rbpeek_thread_state st,
                   size_t *slot)
{
    /* Where the last sample's thread of the same index was: most samples
     * see the same threads in the same order. */
    static _Thread_local size_t hint;
    *slot = SIZE_MAX;
    rbp_tally *e = entry(p, pid, t->thread_addr, tid, t->name, t->is_main, hint);
    if (!e) return p->ntally >= TALLY_MAX;   /* beyond the cap: not an error */
    *slot = (size_t)(e - p->tally);
    hint = *slot + 1;
    e->samples++;
    e->states[st]++;
    return true;
}

void rbp_tally_recorded(rbpeek_profile *p, size_t slot, rbpeek_thread_state st)
{
    if (slot < p->ntally) p->tally[slot].recorded[st]++;
}

size_t rbpeek_profile_thread_count(const rbpeek_profile *p)
{
    return p ? p->ntally : 0;
}

rbpeek_status rbpeek_profile_thread_tally(const rbpeek_profile *p, size_t i, rbpeek_thread_tally *out)
{
    if (!p || !out || i >= p->ntally) return RBPEEK_ERR_ARG;
    const rbp_tally *e = &p->tally[i];
    *out = (rbpeek_thread_tally){.pid = e->pid, .tid = e->tid, .name = e->name, .is_main = e->is_main,
                                 .samples = e->samples};
    memcpy(out->states, e->states, sizeof out->states);
    memcpy(out->recorded, e->recorded, sizeof out->recorded);
    return RBPEEK_OK;
}

/* Merging (rbpeek_profile_merge, merge.c) adds src's tally to dst's. */
rbpeek_status rbp_tally_merge(rbpeek_profile *dst, const rbpeek_profile *src)
{
    for (size_t i = 0; i < src->ntally; i++) {
        const rbp_tally *s = &src->tally[i];
        rbp_tally *e = entry(dst, s->pid, s->thread_addr, s->tid, s->name, s->is_main, i);
        if (!e) {
            if (dst->ntally >= TALLY_MAX) return RBPEEK_OK;
            return rbp_profile_fail(dst, RBPEEK_ERR_NOMEM, "merge: out of memory");
        }
        e->samples += s->samples;
        for (int k = 0; k < RBPEEK_THREAD_STATES; k++) {
            e->states[k] += s->states[k];
            e->recorded[k] += s->recorded[k];
        }
    }
    return RBPEEK_OK;
}
