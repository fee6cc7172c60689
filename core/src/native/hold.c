/*
 * Holding a live process stopped for the command line's `bt --native`:
 * every thread is seized (PTRACE_SEIZE) and stopped (PTRACE_INTERRUPT) by
 * the calling thread, so that its registers can be read with
 * PTRACE_GETREGSET, and let go (PTRACE_DETACH, which resumes it) by
 * rbp_hold_release. Threads started meanwhile are found by listing
 * /proc/PID/task again until no new one appears (once every thread is
 * stopped, none can start). Every wait is bounded: a thread that does not
 * stop in time (in an uninterruptible sleep) is not held, and its registers
 * are not read. A thread whose stop is still pending at release is waited
 * for a moment more; if it stops only later it is let go by the kernel
 * when the calling thread's process exits, the one case where a target
 * stays stopped for longer than the command.
 */
#define _GNU_SOURCE
#include "native/native.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define HOLD_MAX_THREADS 65536
#define HOLD_ROUNDS 20
#define STOP_WAIT_NS 1000000000ull    /* for all threads to stop */
#define RELEASE_WAIT_NS 200000000ull  /* for late stops at release */

typedef struct held {
    pid_t tid;
    bool stopped;
    int sig;        /* a signal it stopped to be given: given back at the detach */
} held;

struct rbp_hold {
    pid_t pid;
    held *t;
    size_t n, cap;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static held *find(rbp_hold *h, pid_t tid)
{
    for (size_t i = 0; i < h->n; i++)
        if (h->t[i].tid == tid) return &h->t[i];
    return NULL;
}

bool rbp_hold_has(const rbp_hold *h, pid_t tid)
{
    if (!h) return false;
    for (size_t i = 0; i < h->n; i++)
        if (h->t[i].tid == tid) return h->t[i].stopped;
    return false;
}

/* Seizes and interrupts the threads of /proc/PID/task not held yet.
 * Returns how many were new, or -1 (err set) when none could be. */
static long seize_new(rbp_hold *h, char *err, size_t errlen)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)h->pid);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errlen, "process %d is gone (%s)", (int)h->pid, strerror(errno));
        return -1;
    }
    long added = 0;
    int first_errno = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char *end;
        long tid = strtol(e->d_name, &end, 10);
        if (*end || tid <= 0 || find(h, (pid_t)tid)) continue;
        if (h->n == h->cap) {
            size_t cap = h->cap ? h->cap * 2 : 32;
            held *t = cap <= HOLD_MAX_THREADS ? realloc(h->t, cap * sizeof *t) : NULL;
            if (!t) break;
            h->t = t;
            h->cap = cap;
        }
        if (ptrace(PTRACE_SEIZE, (pid_t)tid, NULL, NULL) != 0) {
            if (errno != ESRCH && !first_errno) first_errno = errno; /* ESRCH: it has just exited */
            continue;
        }
        h->t[h->n++] = (held){(pid_t)tid, false, 0};
        ptrace(PTRACE_INTERRUPT, (pid_t)tid, NULL, NULL);
        added++;
    }
    closedir(d);
    if (!added && !h->n && first_errno) {
        snprintf(err, errlen, "cannot trace process %d (%s)%s", (int)h->pid, strerror(first_errno),
                 first_errno == EPERM ? ": another tracer (a debugger) holds it, or this user may not trace it "
                                        "(kernel.yama.ptrace_scope)" : "");
        return -1;
    }
    return added;
}

/* Collects stops until every held thread has stopped or the deadline. */
static void wait_stops(rbp_hold *h, uint64_t deadline)
{
    for (;;) {
        bool all = true;
        for (size_t i = 0; i < h->n; i++) {
            if (h->t[i].stopped) continue;
            int status;
            pid_t r = waitpid(h->t[i].tid, &status, __WALL | WNOHANG);
            if (r == h->t[i].tid && WIFSTOPPED(status)) {
                h->t[i].stopped = true;
                /* A signal that arrived before the interrupt stops the
                 * thread on its way in (a signal-delivery stop): the
                 * detach delivers it. */
                if ((status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP) h->t[i].sig = WSTOPSIG(status);
                continue;
            }
            if (r == h->t[i].tid || (r < 0 && errno == ECHILD)) { /* exited */
                h->t[i] = h->t[--h->n];
                i--;
                continue;
            }
            all = false;
        }
        if (all || now_ns() >= deadline) return;
        struct timespec ts = {0, 200000}; /* 0.2 ms */
        nanosleep(&ts, NULL);
    }
}

rbp_hold *rbp_hold_take(pid_t pid, char *err, size_t errlen)
{
    rbp_hold *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    h->pid = pid;
    uint64_t deadline = now_ns() + STOP_WAIT_NS;
    for (int round = 0; round < HOLD_ROUNDS; round++) {
        long added = seize_new(h, err, errlen);
        if (added < 0) {
            rbp_hold_release(h);
            return NULL;
        }
        wait_stops(h, deadline);
        if (added == 0) break;
    }
    return h;
}

void rbp_hold_release(rbp_hold *h)
{
    if (!h) return;
    uint64_t deadline = now_ns() + RELEASE_WAIT_NS;
    wait_stops(h, deadline);
    for (size_t i = 0; i < h->n; i++)
        ptrace(PTRACE_DETACH, h->t[i].tid, NULL, (void *)(long)h->t[i].sig);
    free(h->t);
    free(h);
}
