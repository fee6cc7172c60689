/*
 * The signals of the host process while its tracing thread runs (see
 * tracer.c). How that thread wakes from waitpid() at a deadline: a POSIX
 * timer that sends it, and only it, a real-time signal the host process
 * leaves at its default, given an empty handler for the duration and
 * restored afterwards. And SIGCHLD, which the kernel would send the host
 * at every stop of a traced thread (tr_quiet_sigchld).
 */
#define _GNU_SOURCE
#include "profile/tracer.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

void tr_arm(struct rbpeek_trace *t, uint64_t deadline)
{
    struct itimerspec its = {{0, 0}, {0, 0}};
    if (deadline) {
        its.it_value.tv_sec = (time_t)(deadline / 1000000000u);
        its.it_value.tv_nsec = (long)(deadline % 1000000000u);
        its.it_interval.tv_nsec = (long)WAKE_REPEAT_NS;
    }
    timer_settime(t->timer, TIMER_ABSTIME, &its, NULL);
}

static void wake_handler(int sig)
{
    (void)sig;   /* only to interrupt waitpid() */
}

/* Picks a real-time signal the host process leaves at its default, gives
 * it an empty handler, and a timer that sends it to this thread alone. */
bool tr_setup_wakeup(struct rbpeek_trace *t)
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

void tr_teardown_wakeup(struct rbpeek_trace *t)
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

/* Every stop of a traced thread sends SIGCHLD to the tracer's process, and
 * since the tracing thread blocks it, the kernel wakes another thread of
 * the host (the debugger's main thread) to take it, often on the CPU the
 * stopped thread has just left or on the tracer's. That cost the GVL holder
 * about 50 us of each sample on a 2-CPU guest: the reads made while it was
 * held waited for that thread (docs/sampling-cost.md). The kernel sends no
 * SIGCHLD for a stop when the action has SA_NOCLDSTOP (waitpid still
 * reports the stop; exits still send it), so the action gets that flag
 * while sampling. */
void tr_quiet_sigchld(struct rbpeek_trace *t)
{
    struct sigaction cur;
    t->chld_quieted = false;
    if (sigaction(SIGCHLD, NULL, &cur) != 0 || cur.sa_handler == SIG_IGN || (cur.sa_flags & SA_NOCLDSTOP)) return;
    t->chld_old = cur;
    cur.sa_flags |= SA_NOCLDSTOP;
    t->chld_quieted = sigaction(SIGCHLD, &cur, NULL) == 0;
}

/* Puts SIGCHLD's action back, unless the host changed it meanwhile, and
 * sends the host one SIGCHLD if it handles them: a host waiting for a
 * stop of a child of its own (gdb with another inferior running) was told
 * nothing while sampling, and looks again. */
void tr_restore_sigchld(struct rbpeek_trace *t)
{
    if (!t->chld_quieted) return;
    t->chld_quieted = false;
    struct sigaction cur;
    if (sigaction(SIGCHLD, NULL, &cur) != 0 || cur.sa_handler != t->chld_old.sa_handler ||
        cur.sa_flags != (t->chld_old.sa_flags | SA_NOCLDSTOP))
        return;
    sigaction(SIGCHLD, &t->chld_old, NULL);
    if (t->chld_old.sa_handler != SIG_DFL) kill(getpid(), SIGCHLD);
}
