/*
 * The sampler's timer (rbpeek_kicker): a helper thread that sends the target
 * one signal at a chosen CLOCK_MONOTONIC moment, unless disarmed first.
 *
 * `ruby sample` runs inside a debugger's Python, which waits in the
 * debugger's "continue" while the target runs; something else must stop the
 * target at the sample time. A Python thread would need the GIL twice per
 * sample; this one never touches Python, and arming and disarming cost the
 * sampler no thread wake-up: the thread sleeps in read() on a timerfd, which
 * the kernel wakes at the deadline, so arming is one timerfd_settime() and
 * disarming after the signal went out is a few atomic operations. (A mutex
 * and condition variable measured 20-30 us per arm and disarm on the test
 * machine, mostly waking the other thread.)
 *
 * Every decision to send is taken by one compare-and-swap of the state from
 * ARMED to SENDING, and a disarm that finds SENDING waits the few
 * microseconds until FIRED: once rbpeek_kicker_disarm has returned, no
 * signal is sent. The signal goes through a pidfd (pidfd_open, Linux 5.3+),
 * so once the target has exited it cannot reach another process that was
 * given the same pid; without pidfds it falls back to kill().
 */
#define _GNU_SOURCE
#include "rbpeek.h"

#include "profile/helper_thread.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_pidfd_send_signal
#define SYS_pidfd_send_signal 424
#endif

enum { K_IDLE, K_ARMED, K_SENDING, K_FIRED, K_QUIT };

struct rbpeek_kicker {
    pthread_t thread;
    int pid, signo, pidfd, tfd;
    _Atomic int state;
    _Atomic uint64_t deadline_ns;   /* of the current arming */
    _Atomic uint64_t fired_ns;
};

static void set_timer(int tfd, uint64_t at_ns)
{
    /* it_value 0 disarms, so a deadline at or before "now" is set to 1 ns
     * into the epoch: already past, it fires at once. */
    if (at_ns == 0) at_ns = 1;
    struct itimerspec its = {.it_value = {.tv_sec = (time_t)(at_ns / 1000000000u),
                                          .tv_nsec = (long)(at_ns % 1000000000u)}};
    timerfd_settime(tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void clear_timer(int tfd)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    timerfd_settime(tfd, 0, &its, NULL);
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
    for (;;) {
        uint64_t expirations;
        ssize_t n = read(k->tfd, &expirations, sizeof expirations);
        if (n < 0 && errno != EINTR && errno != EAGAIN) return NULL;
        int st = atomic_load(&k->state);
        if (st == K_QUIT) return NULL;
        /* A wake-up left over from an earlier arming (disarmed, then armed
         * for later) must not fire the new one early. */
        if (st != K_ARMED || rbp_now_ns() < atomic_load(&k->deadline_ns)) continue;
        int expected = K_ARMED;
        if (!atomic_compare_exchange_strong(&k->state, &expected, K_SENDING)) continue;
        atomic_store(&k->fired_ns, rbp_now_ns());   /* before: the target may take it before send returns */
        send_signal(k);
        atomic_store(&k->state, K_FIRED);
    }
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
    if (k->pidfd < 0 && (errno == ESRCH || (kill(pid, 0) != 0 && errno == ESRCH))) {
        free(k);
        errno = ESRCH;
        return NULL;
    }
    k->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
    if (k->tfd < 0) goto fail;
    atomic_init(&k->state, K_IDLE);
    atomic_init(&k->deadline_ns, 0);
    atomic_init(&k->fired_ns, 0);
    int rc = rbp_helper_thread_start(&k->thread, kicker_main, k);
    if (rc != 0) {
        errno = rc;
        goto fail;
    }
    return k;
fail:
    if (k->tfd >= 0) close(k->tfd);
    if (k->pidfd >= 0) close(k->pidfd);
    free(k);
    return NULL;
}

/* Waits out a send in progress, so that the state is IDLE, ARMED or FIRED. */
static int settle(rbpeek_kicker *k)
{
    int st;
    while ((st = atomic_load(&k->state)) == K_SENDING) sched_yield();
    return st;
}

void rbpeek_kicker_arm(rbpeek_kicker *k, uint64_t deadline_ns)
{
    if (!k) return;
    settle(k);
    atomic_store(&k->deadline_ns, deadline_ns);
    atomic_store(&k->state, K_ARMED);
    set_timer(k->tfd, deadline_ns);
}

int rbpeek_kicker_disarm(rbpeek_kicker *k, uint64_t *fired_ns)
{
    if (!k) return 0;
    int expected = K_ARMED;
    int fired;
    if (atomic_compare_exchange_strong(&k->state, &expected, K_IDLE)) {
        clear_timer(k->tfd);   /* not sent, and now it will not be */
        fired = 0;
    } else {
        fired = settle(k) == K_FIRED;
        atomic_store(&k->state, K_IDLE);
    }
    if (fired_ns) *fired_ns = fired ? atomic_load(&k->fired_ns) : 0;
    return fired;
}

uint64_t rbpeek_kicker_now(void) { return rbp_now_ns(); }

void rbpeek_kicker_free(rbpeek_kicker *k)
{
    if (!k) return;
    settle(k);
    atomic_store(&k->state, K_QUIT);
    set_timer(k->tfd, 1);   /* wake the thread now */
    pthread_join(k->thread, NULL);
    close(k->tfd);
    if (k->pidfd >= 0) close(k->pidfd);
    free(k);
}
