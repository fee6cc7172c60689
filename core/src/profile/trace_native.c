/*
 * The registers of a sample's threads, for their native stacks (`ruby
 * sample --native`, docs/native.md), as the snapshot asks for them thread
 * by thread (rbp_native_source, vm/native_merge.h):
 *
 *  - a thread the sample stopped (the GVL holder; every thread when all
 *    are stopped) is in a ptrace stop of the tracing thread:
 *    PTRACE_GETREGSET, unwound before it is resumed;
 *  - a parked thread (blocked in a system call, not holding the GVL) is not
 *    stopped at all: /proc/PID/task/TID/syscall gives the stack and
 *    instruction pointers it entered the kernel with, which is all the CFI
 *    of the functions a parked Ruby thread sits in needs (libc's wrappers,
 *    libruby's and the extensions' functions address their frames from the
 *    stack pointer, and the registers they save are on the stack). Its
 *    stack cannot change while it stays in the kernel, and whether it did
 *    is told exactly: its count of runs on a CPU (/proc/.../schedstat) is
 *    read before and after the unwind, and must not have moved;
 *  - otherwise (the thread runs outside the GVL, in C code; it ran during
 *    the unwind; an unwind from two registers was cut) it is stopped for
 *    its unwind alone (PTRACE_INTERRUPT), and resumed right after.
 * A thread the sample leaves out (blocked, when idle threads are dropped:
 * a server's parked threads) is not unwound at all. The counts of each way
 * go to the trace's stats.
 *
 * A parked thread's stamp (stamp below) is its count of runs and its time
 * on a CPU, read before anything else: when they are those of a thread
 * read from /proc at an earlier sample, it never ran since, and the frames
 * then unwound (kept in the trace's frame cache, native/frame_cache.c)
 * are its frames now: neither /proc/.../syscall nor its stack is read.
 */
#define _GNU_SOURCE
#include "profile/tracer.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "native/native.h"
#include "profile/schedstat.h"
#include "profile/thread_state.h"

/* NAT_LEFT_OUT: a thread the sample does not record (not the allocating
 * GVL holder; blocked, with idle threads dropped): neither unwound nor
 * counted, as it is no stack of the profile. */
enum { NAT_NONE, NAT_HELD, NAT_PEEKED, NAT_STOPPED, NAT_LEFT_OUT };

/* A thread's runs on a CPU and its time there: both move whenever it is
 * scheduled. */
static bool runs_of(struct rbpeek_trace *t, pid_t tid, uint64_t *runs, uint64_t *run_ns)
{
    rbp_schedstat st;
    if (!rbp_schedstat_read(&t->add_scratch.files, t->pid, tid, &st)) return false;
    *run_ns = st.run_ns;
    *runs = st.runs;
    return true;
}

/* The stack and instruction pointers of a thread blocked in a system call
 * ("NR ARG1..ARG6 SP PC"); false when it runs ("running") or is not in one. */
static bool syscall_pointers(struct rbpeek_trace *t, pid_t tid, uint64_t *sp, uint64_t *pc)
{
    char buf[256];
    if (!rbp_task_file_read(&t->add_scratch.files, t->pid, tid, "syscall", buf, sizeof buf) || buf[0] < '0' ||
        buf[0] > '9')
        return false;
    char *tok[9];
    size_t n = 0;
    for (char *save = NULL, *p = strtok_r(buf, " \n", &save); p && n < 9; p = strtok_r(NULL, " \n", &save))
        tok[n++] = p;
    if (n != 9) return false;
    *sp = strtoull(tok[7], NULL, 16);
    *pc = strtoull(tok[8], NULL, 16);
    return *sp && *pc;
}

static void count(struct rbpeek_trace *t, int how)
{
    pthread_mutex_lock(&t->lock);
    switch (how) {
    case NAT_HELD: t->stats.native_held++; break;
    case NAT_PEEKED: t->stats.native_peeked++; break;
    case NAT_STOPPED: t->stats.native_stopped++; break;
    default: t->stats.native_none++; break;
    }
    pthread_mutex_unlock(&t->lock);
}

/* A thread the source would read without stopping it (not held, not
 * stopped by the sample): its key (TID) and stamp (runs, run_ns), kept
 * for the begin that follows. */
static bool stamp(void *ctx, const rbpeek_thread *th, int64_t *key, uint64_t st[2])
{
    struct rbpeek_trace *t = ctx;
    int64_t tid = rbp_sample_thread_tid(th, &t->opt);
    t->nat_cur.stamped = t->nat_cur.asked = 0;
    if (tid <= 0 || t->cfg.alloc_sites || !tr_is_known(t, (pid_t)tid)) return false;
    /* A thread the sample leaves out costs no read of /proc: asked once,
     * for begin too. */
    t->nat_cur.asked = (pid_t)tid;
    t->nat_cur.blocked = t->opt.drop_idle && rbp_thread_state_blocked(&t->add_scratch.files, th, (int)t->pid, tid);
    if (t->nat_cur.blocked || tr_is_stopped(t, (pid_t)tid)) return false;
    /* The stamp read for its Ruby stack a moment ago (trace_keep.c) is
     * read before anything of its native stack is, as this one would be. */
    if (!tr_keep_stamp_taken(t, (pid_t)tid, &t->nat_cur.runs, &t->nat_cur.run_ns) &&
        !runs_of(t, (pid_t)tid, &t->nat_cur.runs, &t->nat_cur.run_ns))
        return false;
    t->nat_cur.stamped = (pid_t)tid;
    *key = tid;
    st[0] = t->nat_cur.runs;
    st[1] = t->nat_cur.run_ns;
    return true;
}

static rbp_regmask begin(void *ctx, const rbpeek_thread *th, bool held, int attempt, uint64_t regs[RBP_REGS_MAX],
                         char *why, size_t whylen)
{
    struct rbpeek_trace *t = ctx;
    const rbp_regset *rs = rbp_native_regset(t->session->native);
    int64_t tid = rbp_sample_thread_tid(th, &t->opt);
    t->nat_cur.tid = (pid_t)tid;
    t->nat_cur.how = NAT_NONE;
    /* what the stamp just found of this thread, if it was asked: used once */
    bool stamped = tid > 0 && t->nat_cur.stamped == (pid_t)tid, asked = tid > 0 && t->nat_cur.asked == (pid_t)tid;
    t->nat_cur.stamped = t->nat_cur.asked = 0;
    if (tid <= 0 || !tr_is_known(t, (pid_t)tid)) {
        snprintf(why, whylen, "its kernel thread id is not known");
        return 0;
    }
    if (t->cfg.alloc_sites && !held) {
        /* allocation sites: only a thread holding the GVL allocates */
        snprintf(why, whylen, "not the GVL holder");
        t->nat_cur.how = NAT_LEFT_OUT;
        return 0;
    }
    if (asked ? t->nat_cur.blocked
              : t->opt.drop_idle && rbp_thread_state_blocked(&t->add_scratch.files, th, (int)t->pid, tid)) {
        /* The sample leaves it out (idle threads are dropped): its unwind
         * would be the sampler's CPU, which a busy target waits for. Held
         * too: a sample that found the GVL free stops every thread (a
         * server's worker between requests, most of the time), and a puma
         * worker's sample unwound its 11 threads for the 1 or 2 it kept
         * (16,168 unwinds for 1,094 stacks, 2026-11-28). A thread that
         * holds the GVL is runnable, never blocked. */
        snprintf(why, whylen, "blocked, left out of the profile");
        t->nat_cur.how = NAT_LEFT_OUT;
        return 0;
    }
    if (held || tr_is_stopped(t, (pid_t)tid)) {
        if (!rbp_native_regs_ptrace((pid_t)tid, rs, regs, why, whylen)) return 0;
        t->nat_cur.how = NAT_HELD;
        return rbp_regset_all(rs);
    }
    uint64_t sp, pc;
    /* the runs the stamp just read, if it did: frames kept from this
     * unwind then stand for a thread that never ran since that read */
    if (attempt == 0 && (stamped || runs_of(t, (pid_t)tid, &t->nat_cur.runs, &t->nat_cur.run_ns)) &&
        rs && syscall_pointers(t, (pid_t)tid, &sp, &pc)) {
        regs[rs->sp] = sp;
        regs[rs->pc] = pc;
        t->nat_cur.how = NAT_PEEKED;
        return ((rbp_regmask)1 << rs->sp) | ((rbp_regmask)1 << rs->pc) | RBP_NATIVE_PEEKED;
    }
    pid_t one = (pid_t)tid;
    if (tr_stop_some(t, &one, 1) != 0 || !tr_is_stopped(t, one)) {
        snprintf(why, whylen, "it did not stop in time");
        return 0;
    }
    if (!rbp_native_regs_ptrace(one, rs, regs, why, whylen)) {
        tr_resume_one(t, one);
        return 0;
    }
    t->nat_cur.how = NAT_STOPPED;
    return rbp_regset_all(rs);
}

static bool end(void *ctx, const rbpeek_thread *th, bool held, int attempt, bool cut)
{
    (void)th;
    (void)held;
    (void)attempt;
    struct rbpeek_trace *t = ctx;
    int how = t->nat_cur.how;
    if (how == NAT_PEEKED) {
        uint64_t runs, run_ns;
        if (!runs_of(t, t->nat_cur.tid, &runs, &run_ns) || runs != t->nat_cur.runs ||
            run_ns != t->nat_cur.run_ns)
            return false; /* it ran: what was read may mix two stacks; once more, stopped */
        if (cut) return false; /* a register beyond the two read may have been needed: once more, stopped */
    } else if (how == NAT_STOPPED) {
        tr_resume_one(t, t->nat_cur.tid);
    } else if (how == NAT_LEFT_OUT) {
        return true;
    }
    count(t, how);
    return true;
}

void tr_native_init(struct rbpeek_trace *t)
{
    /* the cache: parked threads' frames, kept while they do not run (none,
     * out of memory: no reuse) */
    t->nat = (rbp_native_source){.begin = begin, .end = end, .stamp = stamp,
                                 .cache = t->cfg.native ? rbp_frame_cache_new() : NULL, .ctx = t, .flags = 0};
}

void tr_native_sample_done(struct rbpeek_trace *t)
{
    if (!t->nat.cache) return;
    rbp_frame_cache_sweep(t->nat.cache);
    pthread_mutex_lock(&t->lock);
    t->stats.native_reused = rbp_frame_cache_hits(t->nat.cache);
    pthread_mutex_unlock(&t->lock);
}

void tr_native_done(struct rbpeek_trace *t)
{
    rbp_frame_cache_free(t->nat.cache);
    t->nat.cache = NULL;
}
