/*
 * The sampler's timer (rbpeek_kicker): a helper thread that sends the target
 * one signal at a chosen CLOCK_MONOTONIC moment, unless disarmed first.
 *
 * `ruby sample` runs inside a debugger's Python, which waits in the
 * debugger's "continue" while the target runs; something else must stop the
 * target at the sample time, and a Python thread would need the GIL twice
 * per sample (to wake for the new deadline, and to send the signal), which
 * costs tens of microseconds and jitter. This thread never touches Python.
 *
 * The signal goes through a pidfd (pidfd_open, Linux 5.3+), so once the
 * target has exited it cannot reach another process that was given the
 * same pid; without pidfds it falls back to kill(). The thread waits on a
 * condition variable with a CLOCK_MONOTONIC deadline, so arming, disarming
 * and freeing wake it at once, and every decision to send is taken under the
 * lock: once rbpeek_kicker_disarm has returned, no signal is sent.
 */
#define _GNU_SOURCE
#include "rbpeek.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

struct rbpeek_kicker {
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;       /* CLOCK_MONOTONIC */
    int pid, signo, pidfd;
    bool armed, fired, quit;
    uint64_t deadline_ns, fired_ns;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void send_signal(rbpeek_kicker *k)
{
    if (k->pidfd >= 0) {
        if (syscall(SYS_pidfd_send_signal, k->pidfd, k->signo, NULL, 0) == 0 || errno != ENOSYS) return;
    }
    kill(k->pid, k->signo);   /* errors (ESRCH: the target is gone) are the debugger's to report */
}

static void *kicker_main(void *arg)
{
    rbpeek_kicker *k = arg;
    pthread_mutex_lock(&k->lock);
    while (!k->quit) {
        if (!k->armed) {
            pthread_cond_wait(&k->cond, &k->lock);
            continue;
        }
        uint64_t now = now_ns();
        if (now < k->deadline_ns) {
            struct timespec ts = {.tv_sec = (time_t)(k->deadline_ns / 1000000000u),
                                  .tv_nsec = (long)(k->deadline_ns % 1000000000u)};
            pthread_cond_timedwait(&k->cond, &k->lock, &ts);
            continue;   /* re-check: disarmed, re-armed, quit, or the time has come */
        }
        k->fired_ns = now_ns();   /* before: the target may take it before send_signal returns */
        send_signal(k);
        k->fired = true;
        k->armed = false;
    }
    pthread_mutex_unlock(&k->lock);
    return NULL;
}

rbpeek_kicker *rbpeek_kicker_new(int pid, int signo)
{
    if (pid <= 0 || signo <= 0 || signo >= 65) {
        errno = EINVAL;
        return NULL;
    }
    rbpeek_kicker *k = calloc(1, sizeof *k);
    if (!k) return NULL;
    k->pid = pid;
    k->signo = signo;
    k->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (k->pidfd < 0 && errno == ESRCH) {
        free(k);
        return NULL;
    }
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&k->cond, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&k->lock, NULL);
    /* The thread must not take signals meant for the debugger (Ctrl-C). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&k->thread, NULL, kicker_main, k);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        if (k->pidfd >= 0) close(k->pidfd);
        pthread_cond_destroy(&k->cond);
        pthread_mutex_destroy(&k->lock);
        free(k);
        errno = rc;
        return NULL;
    }
    return k;
}

void rbpeek_kicker_arm(rbpeek_kicker *k, uint64_t deadline_ns)
{
    if (!k) return;
    pthread_mutex_lock(&k->lock);
    k->deadline_ns = deadline_ns;
    k->armed = true;
    k->fired = false;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
}

int rbpeek_kicker_disarm(rbpeek_kicker *k, uint64_t *fired_ns)
{
    if (!k) return 0;
    pthread_mutex_lock(&k->lock);
    int fired = k->fired;
    if (fired_ns) *fired_ns = fired ? k->fired_ns : 0;
    k->armed = false;
    k->fired = false;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
    return fired;
}

uint64_t rbpeek_kicker_now(void) { return now_ns(); }

void rbpeek_kicker_free(rbpeek_kicker *k)
{
    if (!k) return;
    pthread_mutex_lock(&k->lock);
    k->quit = true;
    k->armed = false;
    pthread_cond_signal(&k->cond);
    pthread_mutex_unlock(&k->lock);
    pthread_join(k->thread, NULL);
    if (k->pidfd >= 0) close(k->pidfd);
    pthread_cond_destroy(&k->cond);
    pthread_mutex_destroy(&k->lock);
    free(k);
}
