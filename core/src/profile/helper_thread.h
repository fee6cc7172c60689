/*
 * What the core's helper threads (the sampler's timer, kicker.c, and its
 * tracer, tracer.c) share: the clock their deadlines are kept in, and how
 * they are started. They run inside a debugger's process, so they start
 * with every signal blocked: a signal meant for the debugger (Ctrl-C, its
 * SIGCHLD) must never be taken by a thread of ours.
 */
#ifndef RBP_HELPER_THREAD_H
#define RBP_HELPER_THREAD_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC now, in nanoseconds. */
static inline uint64_t rbp_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* pthread_create with every signal blocked in the new thread; returns its
 * error number, 0 on success. */
static inline int rbp_helper_thread_start(pthread_t *thread, void *(*fn)(void *), void *arg)
{
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(thread, NULL, fn, arg);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

#endif
