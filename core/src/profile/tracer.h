/*
 * The tracer's own state and what its files share (see tracer.c for the
 * design): tracer.c runs the sampling loop, trace_ptrace.c keeps the
 * target's threads traced (seize, stop, resume, events, detach),
 * trace_stop.c decides what each sample stops, and trace_wakeup.c has the
 * timer signal that ends the tracing thread's waits.
 */
#ifndef RBP_PROFILE_TRACER_H
#define RBP_PROFILE_TRACER_H

#include <pthread.h>
#include <sched.h>  /* cpu_set_t: the includers define _GNU_SOURCE */
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "rbpeek.h"
#include "profile/sampler.h"
#include "profile/schedule.h"
#include "vm/native_merge.h"
#include "vm/snapshot.h"

#define STOP_TIMEOUT_NS 100000000ull   /* longest wait for the threads to stop */
#define STOP_SPIN_NS 250000ull         /* polled for, before blocking (trace_ptrace.c) */
#define SEIZE_TRIES 30                 /* 10 ms apart, while a thread is still traced by someone else */
#define WAKE_REPEAT_NS 1000000ull      /* the wake-up timer repeats, in case one came just before the wait */
#define MAX_TRACEES 65536              /* threads: a bound on what garbage /proc could make us track */
#define MAX_HOLDERS 64                 /* ractors whose GVL holders are stopped one by one; more: stop all */
#define HOLDER_ROUNDS 3                /* re-reads while the GVL changes hands, before stopping all */

enum tracee_state { TR_RUNNING, TR_STOPPED, TR_NEW /* auto-attached, first stop not seen yet */ };

typedef struct tracee {
    pid_t tid;
    unsigned char state;
    bool want;         /* to be stopped for this sample */
    bool interrupted;  /* PTRACE_INTERRUPT sent, its stop not seen yet */
    int pending_sig;   /* to deliver on the next resume */
    /* Whether it was on a CPU when this sample asked it to stop: its wait
     * for a CPU (schedstat) read before the PTRACE_INTERRUPT and again once
     * it stopped. One that waited was stopped where it had been preempted,
     * not at the sampled moment (see tracer.c, "on a CPU"). */
    bool probed;       /* wait_ns read before this sample's interrupt */
    bool cpu_known;    /* ... and again at the stop: on_cpu holds */
    bool on_cpu;
    uint64_t wait_ns;
} tracee;

struct rbpeek_trace {
    rbpeek_session *session;
    rbpeek_profile *profile;
    rbpeek_sample_options opt;
    rbpeek_trace_config cfg;
    pid_t pid;

    pthread_t thread;
    pthread_mutex_t lock;        /* guards stats, started, ended */
    pthread_cond_t cond;
    bool started, ended;
    rbpeek_trace_stats stats;
    _Atomic int cancel;

    /* Owned by the tracing thread. */
    tracee *tr;
    size_t ntr, captr;
    int end;                     /* rbpeek_trace_end, RBPEEK_TRACE_RUNNING while going */
    pid_t end_tid;               /* RBPEEK_TRACE_SIGNAL: the thread holding the signal */
    bool end_group_stop;         /* the signal was a job-control stop already in effect */
    bool end_fault;              /* the signal was a fault of the thread's own */
    struct rbp_schedule schedule;      /* the sample times */
    pid_t self_tid;              /* of the tracing thread */
    int wake_sig;                /* the real-time signal that ends its waits */
    struct sigaction wake_old;   /* its disposition before, restored at the end */
    struct sigaction chld_old;   /* SIGCHLD's action before tr_quiet_sigchld */
    bool chld_quieted;           /* ... which set SA_NOCLDSTOP on it */
    timer_t timer;
    bool have_timer;
    uint64_t held_th[MAX_HOLDERS]; /* this sample: the GVL holders stopped alone (rb_thread_t) */
    size_t nheld;
    bool released;               /* this sample: resumed before its walk ended */
    uint64_t resume_from, resume_to;
    uint64_t last_cont;          /* this sample: when the last stopped thread was resumed */
    /* trace_aside.c: the tracing thread's CPUs, and the one it keeps off. */
    cpu_set_t aside_allowed;
    int aside_cpu;
    bool aside_ok;
    rbp_sample_scratch add_scratch;   /* rbp_sample_add_snapshot's, kept from sample to sample */
    /* --native (trace_native.c): where each thread's registers come from,
     * and the thread being unwound: how its registers were had, and its
     * scheduling count when they were read from /proc. */
    rbp_native_source nat;
    rbp_stack_keep *keep;        /* trace_keep.c: Ruby stacks of threads that have not run, kept */
    struct {                     /* ... and the stamp it read last, for the thread's native stack */
        pid_t tid;
        uint64_t runs, run_ns;
    } keep_stamp;
    struct {
        pid_t tid;
        int how;                 /* NAT_HELD, NAT_PEEKED, NAT_STOPPED, NAT_NONE */
        uint64_t runs, run_ns;   /* /proc/PID/task/TID/schedstat at the peek */
        pid_t stamped;           /* the thread whose runs the stamp read, for its begin */
        pid_t asked;             /* the thread the stamp asked whether it is blocked (left out), */
        bool blocked;            /* and the answer, for its begin */
    } nat_cur;
    struct sample_state {        /* this sample: what was stopped (trace_stop.c) */
        pid_t tids[MAX_HOLDERS]; /* the GVL holders' TIDs */
        size_t ntids;
        bool deferred;           /* GVL mode: stopped by the walk, once it has the thread list */
        bool fresh;              /* the page cache was refilled after the stop */
        bool full;               /* every thread was stopped */
        bool to_holders;         /* ... and then taken as the holders' alone (allocation sites) */
        bool skip;               /* allocation sites: every GVL free, nothing to sample */
        size_t late, nstopped;
        uint64_t held_from, stopped_at;
    } cur;
};

/* trace_stop.c: what a sample stops. Before the stop, while the target
 * runs: who holds the GVL (t->cur reset, deferred when the holders alone
 * will be stopped). */
void tr_prepare(struct rbpeek_trace *t);
/* Stops what this sample needs, in t->cur (skip: nothing to sample). */
void tr_stop_now(struct rbpeek_trace *t);
/* The walk's stop callback (rbp_snapshot_split.stop): tr_stop_now, then
 * RBP_SPLIT_HELD, RBP_SPLIT_ALL, or -1 (ended, or nothing to sample). */
int tr_stop_cb(void *ctx);

/* trace_aside.c: the tracing thread keeps off the CPU of the thread it
 * samples. tr_aside_init on the tracing thread, before the first sample;
 * tr_aside_step at each sample, with the GVL holder's TID, once it is
 * known and before the holder is stopped. */
void tr_aside_init(struct rbpeek_trace *t);
void tr_aside_step(struct rbpeek_trace *t, pid_t holder);

/* trace_ptrace.c: the traced threads. */
/* Seizes every thread of the process (false, with stats.message, if none). */
bool tr_seize_all(struct rbpeek_trace *t);
/* Stops every thread; returns the number that did not stop in time. */
size_t tr_stop_all(struct rbpeek_trace *t);
/* Stops the threads tids[0..n) (adding to those already stopped for this
 * sample); returns the number that did not stop in time. */
size_t tr_stop_some(struct rbpeek_trace *t, const pid_t *tids, size_t n);
/* Whether tid, stopped for this sample, was on a CPU when asked to stop:
 * 1 yes, 0 it waited for one, -1 not known. */
int tr_was_on_cpu(struct rbpeek_trace *t, pid_t tid);
/* Whether tid is traced and stopped now. */
bool tr_is_stopped(struct rbpeek_trace *t, pid_t tid);
bool tr_is_known(struct rbpeek_trace *t, pid_t tid);
size_t tr_count(struct rbpeek_trace *t);
void tr_resume_all(struct rbpeek_trace *t);
/* Resumes tid alone, if it is stopped (a parked thread stopped for its
 * native stack: trace_native.c). */
void tr_resume_one(struct rbpeek_trace *t, pid_t tid);
/* Lets the target run until deadline, taking events as they come. */
void tr_run_until(struct rbpeek_trace *t, uint64_t deadline);
/* Stops the target and lets go of it, keeping a signal that ended sampling
 * for the debugger. */
void tr_detach_all(struct rbpeek_trace *t);
/* After the tracing thread has ended: waits up to max_ms until no thread of
 * pid is traced by it any more (false if one still is). */
bool tr_wait_untraced(pid_t pid, pid_t tracer, unsigned max_ms);

/* trace_native.c: the registers of the threads of a sample, for their
 * native stacks (--native). */
void tr_native_init(struct rbpeek_trace *t);
/* After each sample: the frame cache's threads not met dropped, its reuses
 * counted. */
void tr_native_sample_done(struct rbpeek_trace *t);
/* When sampling ends: the frame cache dropped. */
void tr_native_done(struct rbpeek_trace *t);

/* trace_keep.c: Ruby stacks kept from sample to sample (vm/stack_keep.c)
 * for threads that have not run since, with the proof of it. */
void tr_keep_init(struct rbpeek_trace *t);
/* Gives a sample's snapshot the keep and the proofs. */
void tr_keep_split(struct rbpeek_trace *t, rbp_snapshot_split *how);
/* The stamp the keep just read of thread tid, if it was the last it read
 * (true; used once): read before the thread's Ruby stack was, it stands
 * for its native stack too (trace_native.c), as a later read would. */
bool tr_keep_stamp_taken(struct rbpeek_trace *t, pid_t tid, uint64_t *runs, uint64_t *run_ns);
/* After each sample: its reuses counted. */
void tr_keep_sample_done(struct rbpeek_trace *t);
/* When sampling ends: the keep dropped. */
void tr_keep_done(struct rbpeek_trace *t);

/* trace_wakeup.c: the wake-up timer of the tracing thread, and SIGCHLD. */
bool tr_setup_wakeup(struct rbpeek_trace *t);
void tr_teardown_wakeup(struct rbpeek_trace *t);
/* Fires at deadline (CLOCK_MONOTONIC ns), then every WAKE_REPEAT_NS until
 * re-armed; 0 disarms it. */
void tr_arm(struct rbpeek_trace *t, uint64_t deadline);
/* No SIGCHLD to the host for the traced threads' stops while sampling
 * (SA_NOCLDSTOP), and the action put back afterwards. */
void tr_quiet_sigchld(struct rbpeek_trace *t);
void tr_restore_sigchld(struct rbpeek_trace *t);

#endif
