/*
 * The sampler as the target's own tracer (rbpeek_trace_*): `ruby sample`'s
 * fast path for a live local process.
 *
 * Stopping and resuming a target through gdb or lldb costs 0.4-1.2 ms per
 * sample (their bookkeeping: thread lists, registers, breakpoints, events,
 * lldb-server round trips; docs/sampling.md), which is most of a sample's
 * cost and more than a profiler may take. So the debugger detaches for the
 * duration of the command, and this module traces the process instead, from
 * a thread of its own, with nothing but what a sample needs: each sample is
 * one PTRACE_INTERRUPT and one wait per thread, the walk (the same calls as
 * `ruby bt`), and one PTRACE_CONT per thread. The whole loop runs in C; the
 * caller only waits for it to end (rbpeek_trace_wait) and shows progress.
 *
 * Why a thread of its own: ptrace requests must come from the tracing
 * thread, and waitpid(-1, __WNOTHREAD) on a fresh thread sees only its own
 * tracees, never the debugger's children (lldb-server, a shell).
 *
 * PTRACE_SEIZE and PTRACE_INTERRUPT, not PTRACE_ATTACH and SIGSTOP: no
 * signal is ever sent, so none can be blocked by the target, none is left
 * pending if the debugger dies, and the target's own signals are untouched.
 * New threads are traced from their first instruction (PTRACE_O_TRACECLONE)
 * and sampled like the rest; forked children are not traced.
 *
 * The tracing thread sleeps in waitpid() both while the target runs and
 * while it stops: polling for the stops instead (even with short sleeps)
 * measured two to three times slower, as the poller takes CPU time from
 * the threads it waits for. Deadlines (the next sample; the bound on a
 * stop) wake it with a POSIX timer that sends it, and only it, a real-time
 * signal with an empty handler (an unused one, whose handler is restored
 * afterwards), which interrupts the wait. Events are handled as they come:
 * a signal the debugger would pass on is delivered at once; one it would
 * stop for (stop_signals) ends sampling, and is kept for the debugger (see
 * detach_all): a fault is queued again with the process held in a group
 * stop, a signal someone sent is left to the caller to send again once the
 * debugger has attached. The target's exit and exec() end sampling too.
 * Each sample's walk starts with one batched read of the pages the last
 * walk used (rbp_mem_prefetch).
 *
 * Every wait is bounded: a thread that does not stop within STOP_TIMEOUT_NS
 * (uninterruptible sleep in the kernel, so not running Ruby code either) is
 * counted and the sample taken without it.
 */
#define _GNU_SOURCE
#include "rbpeek.h"

#include "profile/helper_thread.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "context/context.h"
#include "target/mem.h"

#define STOP_TIMEOUT_NS 100000000ull   /* longest wait for the threads to stop */
#define SEIZE_TRIES 30                 /* 10 ms apart, while a thread is still traced by someone else */
#define WAKE_REPEAT_NS 1000000ull      /* the wake-up timer repeats, in case one came just before the wait */
#define MAX_TRACEES 65536              /* threads: a bound on what garbage /proc could make us track */
#define BACKLOG 5                      /* intervals the schedule may fall behind before it restarts */
#define TID_MAP_REFRESH_NS 1000000000ull

enum tracee_state { TR_RUNNING, TR_STOPPED, TR_NEW /* auto-attached, first stop not seen yet */ };

typedef struct tracee {
    pid_t tid;
    unsigned char state;
    int pending_sig;   /* to deliver on the next resume */
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
    uint64_t rng;
    pid_t self_tid;              /* of the tracing thread */
    int wake_sig;                /* the real-time signal that ends its waits */
    struct sigaction wake_old;   /* its disposition before, restored at the end */
    timer_t timer;
    bool have_timer;
    uint64_t *tid_map;           /* (pthread_t, TID) pairs for Rubies before 3.1 */
    size_t tid_map_cap;
    uint64_t tid_map_at;
};

/* Exponentially distributed gap of mean mean_ns (Poisson sampling: see
 * docs/sampling.md), from a xorshift generator. */
static uint64_t next_gap(struct rbpeek_trace *t, double mean_ns)
{
    uint64_t x = t->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    t->rng = x;
    double u = ((double)(x >> 11) + 0.5) / 9007199254740992.0;   /* (0, 1) */
    double g = -mean_ns * __builtin_log(u);
    return g < 1.0 ? 1u : (uint64_t)g;
}

static long pt(int req, pid_t tid, unsigned long data)
{
    return ptrace((enum __ptrace_request)req, tid, NULL, (void *)data);
}

/* -- the thread table ------------------------------------------------------ */

static tracee *find(struct rbpeek_trace *t, pid_t tid)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->tr[i].tid == tid) return &t->tr[i];
    return NULL;
}

static tracee *add(struct rbpeek_trace *t, pid_t tid, int state)
{
    tracee *e = find(t, tid);
    if (e) return e;
    if (t->ntr == t->captr) {
        size_t cap = t->captr ? t->captr * 2 : 16;
        if (cap > MAX_TRACEES) return NULL;
        tracee *n = realloc(t->tr, cap * sizeof *n);
        if (!n) return NULL;
        t->tr = n;
        t->captr = cap;
    }
    e = &t->tr[t->ntr++];
    e->tid = tid;
    e->state = (unsigned char)state;
    e->pending_sig = 0;
    return e;
}

static void drop(struct rbpeek_trace *t, pid_t tid)
{
    tracee *e = find(t, tid);
    if (e) *e = t->tr[--t->ntr];
}

static bool thread_exists(struct rbpeek_trace *t, pid_t tid)
{
    return syscall(SYS_tgkill, t->pid, tid, 0) == 0 || errno != ESRCH;
}

static void set_end(struct rbpeek_trace *t, int end)
{
    if (t->end == RBPEEK_TRACE_RUNNING) t->end = end;
}

static void resume(struct rbpeek_trace *t, tracee *e)
{
    if (pt(PTRACE_CONT, e->tid, (unsigned long)e->pending_sig) == 0 || errno == ESRCH) {
        /* ESRCH: it died while stopped; its exit is reported by waitpid. */
        e->state = TR_RUNNING;
        e->pending_sig = 0;
    }
}

/* -- events ---------------------------------------------------------------- */

/* One waitpid() report. While the target is meant to run (running), a thread
 * that stopped for an event of no interest is resumed at once. */
static void handle(struct rbpeek_trace *t, pid_t tid, int status, bool running)
{
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        drop(t, tid);
        if (tid == t->pid) {
            /* The leader is reported last, once the whole process is gone. */
            t->stats.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
            t->stats.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
            t->end = RBPEEK_TRACE_EXITED;
        }
        return;
    }
    if (!WIFSTOPPED(status)) return;
    tracee *e = add(t, tid, TR_STOPPED);   /* a new thread may report before its clone event */
    if (!e) {
        set_end(t, RBPEEK_TRACE_FAILED);
        snprintf(t->stats.message, sizeof t->stats.message, "too many threads to trace (out of memory)");
        return;
    }
    e->state = TR_STOPPED;
    int sig = WSTOPSIG(status), event = status >> 16;
    if (event == PTRACE_EVENT_CLONE) {
        unsigned long child = 0;
        /* The new thread may have reported its first stop, and even its
         * exit, before this event: a thread already reaped must not be
         * waited for. */
        if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &child) == 0 && child > 0 && thread_exists(t, (pid_t)child)) {
            tracee *c = add(t, (pid_t)child, TR_NEW);
            if (!c) set_end(t, RBPEEK_TRACE_FAILED);
            e = find(t, tid);   /* add() may have moved the table */
        }
    } else if (event == PTRACE_EVENT_EXEC) {
        set_end(t, RBPEEK_TRACE_EXEC);
    } else if (event == PTRACE_EVENT_STOP) {
        if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU) {
            /* A group stop: the process was stopped by job control. */
            if (t->end == RBPEEK_TRACE_RUNNING) {
                t->end = RBPEEK_TRACE_SIGNAL;
                t->stats.signal = sig;
                t->end_group_stop = true;
            }
        }
        /* else: our PTRACE_INTERRUPT, or a new thread's first stop */
    } else if (event == 0) {
        /* Signal-delivery stop. */
        if (sig > 0 && sig < 65 && t->cfg.stop_signals[sig] && t->end == RBPEEK_TRACE_RUNNING) {
            siginfo_t si;
            memset(&si, 0, sizeof si);
            t->end = RBPEEK_TRACE_SIGNAL;
            t->stats.signal = sig;
            t->end_tid = tid;
            /* A fault (the kernel's SIGSEGV, SIGBUS...) would strike again
             * as soon as the thread ran; a sent signal would not. */
            t->end_fault = ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) == 0 && si.si_code > 0 &&
                           (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGTRAP ||
                            sig == SIGSYS);
            e->pending_sig = sig;
        } else {
            e->pending_sig = (sig > 0 && sig < 65 && t->cfg.pass_signals[sig]) ? sig : 0;
        }
    }
    if (running && t->end == RBPEEK_TRACE_RUNNING) resume(t, e);
}

/* The wake-up timer: fires at deadline (CLOCK_MONOTONIC ns), then every
 * WAKE_REPEAT_NS until re-armed; 0 disarms it. */
static void arm(struct rbpeek_trace *t, uint64_t deadline)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (deadline) {
        its.it_value.tv_sec = (time_t)(deadline / 1000000000u);
        its.it_value.tv_nsec = (long)(deadline % 1000000000u);
        its.it_interval.tv_nsec = (long)WAKE_REPEAT_NS;
    }
    timer_settime(t->timer, TIMER_ABSTIME, &its, NULL);
}

/* Takes reports until deadline (or until done() holds); the caller has
 * armed the timer for the deadline. */
static void wait_until(struct rbpeek_trace *t, uint64_t deadline, bool running, bool (*done)(struct rbpeek_trace *))
{
    while (t->end == RBPEEK_TRACE_RUNNING || !running) {
        if (done && done(t)) return;
        if (running && atomic_load(&t->cancel)) return;
        if (rbp_now_ns() >= deadline) return;
        int status;
        pid_t tid = waitpid(-1, &status, __WALL | __WNOTHREAD);
        if (tid > 0) {
            handle(t, tid, status, running);
        } else if (errno == ECHILD) {
            /* Nothing left to trace: the process is gone. */
            set_end(t, RBPEEK_TRACE_EXITED);
            t->ntr = 0;
            return;
        } else if (errno != EINTR) {
            return;
        }
        if (t->end == RBPEEK_TRACE_EXITED) return;
    }
}

static bool all_stopped(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->tr[i].state != TR_STOPPED) return false;
    return true;
}

/* Stops every thread; returns the number that did not stop in time. */
static size_t stop_all(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->tr[i].state == TR_RUNNING && pt(PTRACE_INTERRUPT, t->tr[i].tid, 0) != 0 && errno == ESRCH)
            t->tr[i].state = TR_STOPPED;   /* gone: its exit report follows */
    uint64_t give_up = rbp_now_ns() + STOP_TIMEOUT_NS;
    arm(t, give_up);
    wait_until(t, give_up, false, all_stopped);
    arm(t, 0);
    size_t late = 0;
    for (size_t i = 0; i < t->ntr;) {
        if (t->tr[i].state == TR_STOPPED) {
            i++;
        } else if (!thread_exists(t, t->tr[i].tid)) {
            t->tr[i] = t->tr[--t->ntr];   /* gone without a report we saw */
        } else {
            late++;
            i++;
        }
    }
    return late;
}

static void resume_all(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->tr[i].state == TR_STOPPED) resume(t, &t->tr[i]);
}

/* Lets the target run until deadline, taking events as they come. */
static void run_until(struct rbpeek_trace *t, uint64_t deadline)
{
    arm(t, deadline);
    wait_until(t, deadline, true, NULL);
}

static void wake_handler(int sig)
{
    (void)sig;   /* only to interrupt waitpid() */
}

/* Picks a real-time signal the host process leaves at its default, gives
 * it an empty handler, and a timer that sends it to this thread alone. */
static bool setup_wakeup(struct rbpeek_trace *t)
{
    t->self_tid = (pid_t)syscall(SYS_gettid);
    for (int sig = SIGRTMAX; sig >= SIGRTMIN + 2 && !t->wake_sig; sig--) {
        struct sigaction cur;
        if (sigaction(sig, NULL, &cur) != 0 || cur.sa_handler != SIG_DFL || (cur.sa_flags & SA_SIGINFO)) continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = wake_handler;   /* no SA_RESTART: the wait must return */
        sigemptyset(&sa.sa_mask);
        if (sigaction(sig, &sa, &t->wake_old) == 0) t->wake_sig = sig;
    }
    if (!t->wake_sig) {
        snprintf(t->stats.message, sizeof t->stats.message, "no free real-time signal for the sampling thread's timer");
        return false;
    }
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = t->wake_sig;
    sev._sigev_un._tid = t->self_tid;
    if (timer_create(CLOCK_MONOTONIC, &sev, &t->timer) != 0) {
        snprintf(t->stats.message, sizeof t->stats.message, "cannot create a timer: %s", strerror(errno));
        return false;
    }
    t->have_timer = true;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, t->wake_sig);
    pthread_sigmask(SIG_UNBLOCK, &one, NULL);
    return true;
}

static void teardown_wakeup(struct rbpeek_trace *t)
{
    if (t->have_timer) timer_delete(t->timer);
    t->have_timer = false;
    if (t->wake_sig) {
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, t->wake_sig);
        pthread_sigmask(SIG_BLOCK, &one, NULL);
        /* A signal of ours still in flight stays pending on this thread,
         * which blocks it and is about to exit: it never reaches the host. */
        sigaction(t->wake_sig, &t->wake_old, NULL);
    }
}

/* -- attaching and detaching ------------------------------------------------ */

/* Seizes every thread of the process, reading /proc/PID/task until a pass
 * finds none new (threads may start meanwhile; later ones are traced
 * through their creator's PTRACE_O_TRACECLONE). */
static bool seize_all(struct rbpeek_trace *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
    const unsigned long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    for (int pass = 0; pass < 100; pass++) {
        DIR *d = opendir(path);
        if (!d) {
            snprintf(t->stats.message, sizeof t->stats.message, "cannot list %s: %s", path, strerror(errno));
            return false;
        }
        bool fresh = false;
        struct dirent *de;
        while ((de = readdir(d))) {
            char *end;
            long tid = strtol(de->d_name, &end, 10);
            if (*end || tid <= 0 || find(t, (pid_t)tid)) continue;
            long rc;
            int tries = 0;
            while ((rc = pt(PTRACE_SEIZE, (pid_t)tid, opts)) != 0 && errno == EPERM && ++tries < SEIZE_TRIES) {
                /* The debugger that just detached may still be letting go
                 * (lldb-server detaches after it has answered). */
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
            if (rc != 0) {
                if (errno == ESRCH) continue;   /* it exited meanwhile */
                snprintf(t->stats.message, sizeof t->stats.message, "cannot trace thread %ld of process %d: %s",
                         tid, (int)t->pid, strerror(errno));
                closedir(d);
                return false;
            }
            if (!add(t, (pid_t)tid, TR_RUNNING)) {
                closedir(d);
                snprintf(t->stats.message, sizeof t->stats.message, "too many threads to trace");
                return false;
            }
            fresh = true;
        }
        closedir(d);
        if (!fresh && pass > 0) return find(t, t->pid) != NULL;
    }
    snprintf(t->stats.message, sizeof t->stats.message, "the process kept starting threads faster than they could be traced");
    return false;
}

/* Stops the target and lets go of it. A signal that ended sampling is not
 * delivered now: a signal someone sent is left for the caller to send again
 * once the debugger has attached (stats.signal_pending 0), since the target
 * may run a moment in between; a fault is queued again with the process
 * held in a group stop (signal_pending 1), since the faulting instruction
 * would otherwise run again, untraced, before the debugger is back. */
static void detach_all(struct rbpeek_trace *t)
{
    if (t->end == RBPEEK_TRACE_EXITED) return;
    stop_all(t);
    tracee *first = NULL;
    if (t->end == RBPEEK_TRACE_SIGNAL) {
        t->stats.signal_pending = t->end_group_stop || t->end_fault;
        if (t->end_fault) first = find(t, t->end_tid);
        tracee *e = find(t, t->end_tid);
        if (e && !t->end_fault) e->pending_sig = 0;
    }
    if (first) {
        /* Its delivery stop took the signal off the queue: queue it again
         * (its siginfo becomes SI_TKILL's) and detach with SIGSTOP in its
         * place, which starts a group stop before the thread can return to
         * user code; the other threads join it as they are let go. */
        syscall(SYS_tgkill, t->pid, first->tid, first->pending_sig);
        pt(PTRACE_DETACH, first->tid, SIGSTOP);
    }
    for (size_t i = 0; i < t->ntr; i++) {
        if (&t->tr[i] == first) continue;
        /* Pending signals the debugger would pass on are delivered. */
        pt(PTRACE_DETACH, t->tr[i].tid, (unsigned long)(t->tr[i].state == TR_STOPPED ? t->tr[i].pending_sig : 0));
    }
    t->ntr = 0;
}

/* -- one sample ------------------------------------------------------------- */

static void refresh_tid_map(struct rbpeek_trace *t, const rbpeek_snapshot *snap, uint64_t now)
{
    t->tid_map_at = now;
    size_t n = rbpeek_snapshot_thread_count(snap), got = 0;
    if (2 * n > t->tid_map_cap) {
        uint64_t *m = realloc(t->tid_map, 2 * n * sizeof *m);
        if (!m) return;
        t->tid_map = m;
        t->tid_map_cap = 2 * n;
    }
    int64_t *known = malloc((t->ntr ? t->ntr : 1) * sizeof *known);
    if (!known) return;
    for (size_t i = 0; i < t->ntr; i++) known[i] = t->tr[i].tid;
    if (rbpeek_snapshot_resolve_tids(t->session, snap, known, t->ntr, t->pid, t->tid_map, n, &got) == RBPEEK_OK) {
        t->opt.tid_map = t->tid_map;
        t->opt.tid_map_pairs = got;
    }
    free(known);
}

static void take_sample(struct rbpeek_trace *t)
{
    rbpeek_snapshot *snap = NULL;
    rbpeek_sample_result res = {0};
    rbpeek_session_invalidate(t->session);
    rbp_mem_prefetch(t->session->mem);   /* the pages the last walk used, in one batch */
    if (rbpeek_snapshot_take(t->session, (size_t)(t->cfg.max_frames > 0 ? t->cfg.max_frames : 0), &snap) !=
        RBPEEK_OK) {
        pthread_mutex_lock(&t->lock);
        t->stats.samples++;
        t->stats.failed_samples++;
        snprintf(t->stats.message, sizeof t->stats.message, "%s", rbpeek_session_error(t->session));
        pthread_mutex_unlock(&t->lock);
        return;
    }
    rbpeek_status st = rbpeek_profile_add_snapshot(t->profile, snap, &t->opt, &res);
    if (st == RBPEEK_OK && res.tid_unknown && rbp_now_ns() - t->tid_map_at > TID_MAP_REFRESH_NS)
        refresh_tid_map(t, snap, rbp_now_ns());
    rbpeek_snapshot_free(snap);
    pthread_mutex_lock(&t->lock);
    t->stats.samples++;
    if (st != RBPEEK_OK) {
        snprintf(t->stats.message, sizeof t->stats.message, "%s", rbpeek_profile_error(t->profile));
        t->end = RBPEEK_TRACE_FAILED;
    }
    t->stats.failed_threads += res.failed;
    t->stats.filtered += res.filtered;
    t->stats.tid_unknown += res.tid_unknown;
    pthread_mutex_unlock(&t->lock);
}

/* -- the loop ---------------------------------------------------------------- */

static void finish(struct rbpeek_trace *t, int end)
{
    pthread_mutex_lock(&t->lock);
    t->stats.end = end;
    t->started = t->ended = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static void *tracer_main(void *arg)
{
    struct rbpeek_trace *t = arg;
    /* Deadlines are a few hundred microseconds apart at high rates. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    if (!setup_wakeup(t) || !seize_all(t)) {
        detach_all(t);
        teardown_wakeup(t);
        finish(t, RBPEEK_TRACE_FAILED);
        return NULL;
    }
    pthread_mutex_lock(&t->lock);
    t->started = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);

    const double mean = t->cfg.interval_s * 1e9;
    const uint64_t t0 = rbp_now_ns();
    const uint64_t until = t->cfg.duration_s > 0 ? t0 + (uint64_t)(t->cfg.duration_s * 1e9) : 0;
    uint64_t fire = t0 + next_gap(t, mean);
    while (t->end == RBPEEK_TRACE_RUNNING) {
        if (t->cfg.max_samples && t->stats.samples >= t->cfg.max_samples) {
            t->end = RBPEEK_TRACE_DONE;
            break;
        }
        if (atomic_load(&t->cancel)) {
            t->end = RBPEEK_TRACE_CANCELLED;
            break;
        }
        uint64_t now = rbp_now_ns();
        if (until && now >= until) {
            t->end = RBPEEK_TRACE_DONE;
            break;
        }
        if (fire + (uint64_t)(BACKLOG * mean) < now) fire = now;   /* cannot keep up: restart the schedule */
        run_until(t, until && fire > until ? until : fire);
        if (t->end != RBPEEK_TRACE_RUNNING || atomic_load(&t->cancel) || (until && rbp_now_ns() >= until)) continue;
        fire += next_gap(t, mean);

        uint64_t a = rbp_now_ns();
        size_t late = stop_all(t);
        if (t->end != RBPEEK_TRACE_RUNNING) break;
        uint64_t b = rbp_now_ns();
        take_sample(t);
        uint64_t c = rbp_now_ns();
        resume_all(t);
        uint64_t d = rbp_now_ns();
        pthread_mutex_lock(&t->lock);
        t->stats.not_stopped += late;
        t->stats.stop_s += (double)(b - a) * 1e-9;
        t->stats.walk_s += (double)(c - b) * 1e-9;
        t->stats.resume_s += (double)(d - c) * 1e-9;
        t->stats.elapsed_s = (double)(d - t0) * 1e-9;
        pthread_mutex_unlock(&t->lock);
    }
    int end = t->end;
    detach_all(t);
    teardown_wakeup(t);
    pthread_mutex_lock(&t->lock);
    t->stats.elapsed_s = (double)(rbp_now_ns() - t0) * 1e-9;
    pthread_mutex_unlock(&t->lock);
    finish(t, end);
    return NULL;
}

/* -- the API ----------------------------------------------------------------- */

rbpeek_status rbpeek_trace_start(rbpeek_session *s, rbpeek_profile *p, const rbpeek_sample_options *opt,
                                 const rbpeek_trace_config *cfg, rbpeek_trace **out)
{
    if (!s || !p || !cfg || !out) return RBPEEK_ERR_ARG;
    *out = NULL;
    if (!opt || opt->pid <= 0 || !(cfg->interval_s > 0)) return RBPEEK_ERR_ARG;
    struct rbpeek_trace *t = calloc(1, sizeof *t);
    if (!t) return RBPEEK_ERR_NOMEM;
    t->session = s;
    t->profile = p;
    t->opt = *opt;
    t->opt.tid_map = NULL;      /* the tracer keeps its own, from the threads it traces */
    t->opt.tid_map_pairs = 0;
    t->cfg = *cfg;
    t->pid = opt->pid;
    t->rng = cfg->seed ? cfg->seed : (rbp_now_ns() | 1u);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);

    int rc = rbp_helper_thread_start(&t->thread, tracer_main, t);
    if (rc != 0) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        free(t);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "cannot start the sampling thread: %s", strerror(rc));
    }
    pthread_mutex_lock(&t->lock);
    while (!t->started) pthread_cond_wait(&t->cond, &t->lock);
    bool failed = t->ended && t->stats.end == RBPEEK_TRACE_FAILED;
    pthread_mutex_unlock(&t->lock);
    if (failed) {
        char msg[sizeof t->stats.message];
        memcpy(msg, t->stats.message, sizeof msg);
        rbpeek_trace_free(t);
        return rbp_fail(s, RBPEEK_ERR_IO, "%s", msg);
    }
    *out = t;
    return RBPEEK_OK;
}

int rbpeek_trace_wait(rbpeek_trace *t, int timeout_ms)
{
    if (!t) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&t->lock);
    while (!t->ended && timeout_ms != 0) {
        if (pthread_cond_timedwait(&t->cond, &t->lock, &ts) == ETIMEDOUT) break;
    }
    bool ended = t->ended;
    pthread_mutex_unlock(&t->lock);
    return ended ? 1 : 0;
}

void rbpeek_trace_cancel(rbpeek_trace *t)
{
    if (!t) return;
    atomic_store(&t->cancel, 1);
    /* Wake it if it sleeps until a far sample time. */
    pthread_mutex_lock(&t->lock);
    if (!t->ended && t->wake_sig) pthread_kill(t->thread, t->wake_sig);
    pthread_mutex_unlock(&t->lock);
}

void rbpeek_trace_get_stats(rbpeek_trace *t, rbpeek_trace_stats *out)
{
    if (!t || !out) return;
    pthread_mutex_lock(&t->lock);
    *out = t->stats;
    if (!t->ended) out->end = RBPEEK_TRACE_RUNNING;
    pthread_mutex_unlock(&t->lock);
}

void rbpeek_trace_free(rbpeek_trace *t)
{
    if (!t) return;
    rbpeek_trace_cancel(t);
    pthread_join(t->thread, NULL);   /* it detaches from the target before it returns */
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    free(t->tr);
    free(t->tid_map);
    free(t);
}
