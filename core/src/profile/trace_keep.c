/*
 * The tracer's part in keeping Ruby stacks from sample to sample
 * (vm/stack_keep.c): the proof the snapshot asks of a thread it does not
 * hold, that it has not run since an earlier sample. Its stamp is its
 * count of runs on a CPU and its time there (/proc/PID/task/TID/schedstat),
 * which move whenever it is scheduled; whether it sleeps in the kernel is
 * what /proc/PID/task/TID/syscall says: a system call's number when it
 * is blocked in one, "running" when it is on a CPU or runnable. Both are
 * read through the trace's open descriptors (profile/schedstat.c). The
 * stamp read for a thread's Ruby stack serves its native stack too
 * (trace_native.c), which is read right after: one read of schedstat per
 * thread and sample, not two.
 */
#include "profile/tracer.h"

#include "profile/schedstat.h"
#include "profile/thread_state.h"

static bool stamp(void *ctx, int64_t tid, uint64_t st[2])
{
    struct rbpeek_trace *t = ctx;
    rbp_schedstat ss;
    t->keep_stamp.tid = 0;
    if (!rbp_schedstat_read(&t->add_scratch.files, t->pid, (pid_t)tid, &ss)) return false;
    st[0] = ss.runs;
    st[1] = ss.run_ns;
    t->keep_stamp.tid = (pid_t)tid;
    t->keep_stamp.runs = ss.runs;
    t->keep_stamp.run_ns = ss.run_ns;
    return true;
}

bool tr_keep_stamp_taken(struct rbpeek_trace *t, pid_t tid, uint64_t *runs, uint64_t *run_ns)
{
    if (!tid || t->keep_stamp.tid != tid) return false;
    t->keep_stamp.tid = 0;
    *runs = t->keep_stamp.runs;
    *run_ns = t->keep_stamp.run_ns;
    return true;
}

static bool asleep(void *ctx, int64_t tid)
{
    struct rbpeek_trace *t = ctx;
    /* a system call's number: blocked in it (-1: on a CPU, waiting for
     * one, or stopped outside a system call; -2: not known) */
    return rbp_thread_syscall(&t->add_scratch.files, (int)t->pid, tid) >= 0;
}

void tr_keep_init(struct rbpeek_trace *t)
{
    t->keep = rbp_stack_keep_new(); /* NULL (out of memory): every thread walked at every sample */
}

void tr_keep_split(struct rbpeek_trace *t, rbp_snapshot_split *how)
{
    t->keep_stamp.tid = 0; /* none stands from a sample before */
    if (!t->keep) return;
    how->keep = t->keep;
    how->stamp = stamp;
    how->asleep = asleep;
}

void tr_keep_sample_done(struct rbpeek_trace *t)
{
    if (!t->keep) return;
    pthread_mutex_lock(&t->lock);
    t->stats.ruby_reused = rbp_stack_keep_hits(t->keep);
    pthread_mutex_unlock(&t->lock);
}

void tr_keep_done(struct rbpeek_trace *t)
{
    rbp_stack_keep_free(t->keep);
    t->keep = NULL;
}
