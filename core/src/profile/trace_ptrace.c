/*
 * The tracer's hold on the target's threads (see tracer.c for the design):
 * the table of traced threads, seizing them all (PTRACE_SEIZE, new threads
 * through PTRACE_O_TRACECLONE), stopping them for a sample
 * (PTRACE_INTERRUPT, each wait bounded), resuming them, handling every
 * event waitpid() reports (signals to pass on or to stop for, exits,
 * exec), and letting go with a signal that ended sampling kept for the
 * debugger.
 */
#define _GNU_SOURCE
#include "profile/tracer.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "profile/helper_thread.h"
#include "profile/schedstat.h"

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
    e->want = false;
    e->interrupted = false;
    e->probed = e->cpu_known = e->on_cpu = false;
    e->wait_ns = 0;
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
    e->want = false;
    e->interrupted = false;
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
    e->interrupted = false;
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

/* Takes reports until deadline (or until done() holds). Blocking in
 * waitpid, the caller has armed the timer for the deadline; polling (poll),
 * it spins on waitpid(WNOHANG) until then and needs no timer. */
static void wait_until(struct rbpeek_trace *t, uint64_t deadline, bool running, bool (*done)(struct rbpeek_trace *),
                       bool poll)
{
    int flags = __WALL | __WNOTHREAD | (poll ? WNOHANG : 0);
    while (t->end == RBPEEK_TRACE_RUNNING || !running) {
        if (done && done(t)) return;
        if (running && atomic_load(&t->cancel)) return;
        if (rbp_now_ns() >= deadline) return;
        int status;
        pid_t tid = waitpid(-1, &status, flags);
        if (tid > 0) {
            handle(t, tid, status, running);
        } else if (tid == 0) {
            continue; /* polling, and no report yet */
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

static bool wanted_stopped(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++)
        if (t->tr[i].want && t->tr[i].state != TR_STOPPED) return false;
    return true;
}

/* Before a thread's PTRACE_INTERRUPT: its wait for a CPU so far. */
static void probe(struct rbpeek_trace *t, tracee *e)
{
    rbp_schedstat st = {0};
    e->cpu_known = false;
    e->probed = rbp_schedstat_read(&t->add_scratch.files, t->pid, e->tid, &st);
    e->wait_ns = st.wait_ns;
}

/* Once it stopped: if its wait for a CPU did not grow, it was on one when
 * interrupted, and stopped where it ran (the interrupt reaches a running
 * thread within microseconds); if it grew, it had been preempted, and
 * stopped where the scheduler had taken it off its CPU. */
static void settle(struct rbpeek_trace *t, tracee *e)
{
    if (!e->probed || e->state != TR_STOPPED) return;
    rbp_schedstat st;
    e->probed = false;
    e->cpu_known = rbp_schedstat_read(&t->add_scratch.files, t->pid, e->tid, &st);
    e->on_cpu = e->cpu_known && st.wait_ns == e->wait_ns;
}

int tr_was_on_cpu(struct rbpeek_trace *t, pid_t tid)
{
    tracee *e = find(t, tid);
    return e && e->cpu_known ? (e->on_cpu ? 1 : 0) : -1;
}

/* Interrupts the wanted threads still running and waits (bounded) for them. */
static size_t stop_wanted(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++) {
        tracee *e = &t->tr[i];
        if (!e->want || e->state != TR_RUNNING || e->interrupted) continue;
        probe(t, e);
        if (pt(PTRACE_INTERRUPT, e->tid, 0) == 0) e->interrupted = true;
        else if (errno == ESRCH) e->state = TR_STOPPED;   /* gone: its exit report follows */
    }
    /* Polled for a moment first. A thread on another CPU stops within
     * 50-150 us of its PTRACE_INTERRUPT, and is held for as long as the
     * sampler takes to notice: blocked in waitpid, the sampler's CPU goes
     * idle, and on a virtual machine waking it again costs tens of
     * microseconds more of the holder's time. Polling spends the sampler's
     * own CPU instead. */
    uint64_t now = rbp_now_ns(), give_up = now + STOP_TIMEOUT_NS;
    wait_until(t, now + STOP_SPIN_NS, false, wanted_stopped, true);
    if (!wanted_stopped(t)) {
        /* Only now the timer: arming it is two system calls, made while
         * the threads already stopped are held. */
        tr_arm(t, give_up);
        wait_until(t, give_up, false, wanted_stopped, false);
        tr_arm(t, 0);
    }
    for (size_t i = 0; i < t->ntr; i++) settle(t, &t->tr[i]);
    size_t late = 0;
    for (size_t i = 0; i < t->ntr;) {
        if (!t->tr[i].want || t->tr[i].state == TR_STOPPED) {
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

size_t tr_stop_all(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < t->ntr; i++) t->tr[i].want = true;
    return stop_wanted(t);
}

size_t tr_stop_some(struct rbpeek_trace *t, const pid_t *tids, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        tracee *e = find(t, tids[k]);
        if (e) e->want = true;
    }
    return stop_wanted(t);
}

bool tr_is_known(struct rbpeek_trace *t, pid_t tid) { return find(t, tid) != NULL; }

size_t tr_count(struct rbpeek_trace *t) { return t->ntr; }

bool tr_is_stopped(struct rbpeek_trace *t, pid_t tid)
{
    tracee *e = find(t, tid);
    return e && e->state == TR_STOPPED;
}

void tr_resume_all(struct rbpeek_trace *t)
{
    t->last_cont = rbp_now_ns();
    for (size_t i = 0; i < t->ntr; i++) {
        if (t->tr[i].state == TR_STOPPED) {
            /* The thread runs from inside this call: the time the tracer
             * may lose after it (the woken thread preempting it) is not
             * time the target was held. */
            t->last_cont = rbp_now_ns();
            resume(t, &t->tr[i]);
        }
        t->tr[i].want = false;
    }
}

void tr_resume_one(struct rbpeek_trace *t, pid_t tid)
{
    tracee *e = find(t, tid);
    if (e && e->state == TR_STOPPED) resume(t, e);
    if (e) e->want = false;
}

void tr_run_until(struct rbpeek_trace *t, uint64_t deadline)
{
    tr_arm(t, deadline);
    wait_until(t, deadline, true, NULL, false);
}

/* -- attaching and detaching ------------------------------------------------ */

/* Takes the reports already waiting, without blocking; a thread that
 * reported a stop is resumed (the target is meant to run). */
static void take_waiting(struct rbpeek_trace *t)
{
    for (size_t i = 0; i < MAX_TRACEES; i++) {
        int status;
        pid_t tid = waitpid(-1, &status, __WALL | __WNOTHREAD | WNOHANG);
        if (tid <= 0) return;
        handle(t, tid, status, true);
    }
}

/* Seizes every thread of the process, reading /proc/PID/task until a pass
 * finds none new (threads may start meanwhile; later ones are traced
 * through their creator's PTRACE_O_TRACECLONE). */
bool tr_seize_all(struct rbpeek_trace *t)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)t->pid);
    const unsigned long opts = PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC;
    for (int pass = 0; pass < 100; pass++) {
        take_waiting(t);   /* threads born traced since the last pass are known, not seized again */
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
            int err = 0, tries = 0;
            while ((rc = pt(PTRACE_SEIZE, (pid_t)tid, opts)) != 0 && (err = errno) == EPERM && ++tries < SEIZE_TRIES) {
                /* EPERM: traced already. Either by us, born of a thread
                 * seized earlier (PTRACE_O_TRACECLONE), which its creator's
                 * clone report tells; or by the debugger that just detached
                 * and may still be letting go (lldb-server detaches after it
                 * has answered). */
                take_waiting(t);
                if (find(t, (pid_t)tid)) break;
                struct timespec ts = {0, 10 * 1000000L};
                nanosleep(&ts, NULL);
            }
            if (rc != 0) {
                if (err == ESRCH || find(t, (pid_t)tid)) continue;   /* it exited meanwhile, or is ours */
                snprintf(t->stats.message, sizeof t->stats.message, "cannot trace thread %ld of process %d: %s",
                         tid, (int)t->pid, strerror(err));
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
void tr_detach_all(struct rbpeek_trace *t)
{
    if (t->end == RBPEEK_TRACE_EXITED) return;
    tr_stop_all(t);
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

/* Whether some thread of pid names tracer as its tracer (/proc's TracerPid:
 * the tracing thread's TID). */
static bool traced_by(pid_t pid, pid_t tracer)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    if (!d) return false;   /* gone */
    bool found = false;
    struct dirent *de;
    for (size_t n = 0; !found && n < MAX_TRACEES && (de = readdir(d)); n++) {
        if (de->d_name[0] < '0' || de->d_name[0] > '9') continue;
        char sp[96], buf[1024];
        snprintf(sp, sizeof sp, "/proc/%d/task/%.16s/status", (int)pid, de->d_name);
        int fd = open(sp, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t got = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (got <= 0) continue;
        buf[got] = 0;
        const char *at = strstr(buf, "\nTracerPid:");
        if (at && strtol(at + 11, NULL, 10) == tracer) found = true;
    }
    closedir(d);
    return found;
}

/* A thread PTRACE_DETACH could not let go (one that never stopped in time)
 * stays traced until the tracing thread is gone; pthread_join returns
 * before the kernel has let go of it (the thread's TID is cleared before
 * its tracees are released), and a debugger attaching at that moment would
 * fail with EPERM. So the caller waits, bounded, until none is. */
bool tr_wait_untraced(pid_t pid, pid_t tracer, unsigned max_ms)
{
    if (tracer <= 0) return true;
    for (unsigned ms = 0; ms < max_ms; ms++) {
        if (!traced_by(pid, tracer)) return true;
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    return !traced_by(pid, tracer);
}
