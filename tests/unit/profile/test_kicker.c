/*
 * Tests of the sampler's timer (kicker.c) against a real child process that
 * reports, through a pipe, the CLOCK_MONOTONIC time at which each signal
 * reached it: a signal is sent at the deadline (not before), at once for a
 * deadline in the past, never after a disarm, and freeing the timer while it
 * waits for a far deadline returns at once. A pid with no process behind it
 * is refused.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "rbpeek.h"

#define MS 1000000ull

static int report_fd = -1;

static void on_signal(int sig)
{
    (void)sig;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t t = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    ssize_t w = write(report_fd, &t, sizeof t);
    (void)w;
}

/* A child that reports every SIGUSR1 it gets on *rd; returns its pid. */
static pid_t start_child(int *rd)
{
    int p[2];
    if (pipe(p) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with a test a fatal assertion ended */
        close(p[0]);
        report_fd = p[1];
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGUSR1, &sa, NULL);
        for (;;) pause();
    }
    close(p[1]);
    *rd = p[0];
    usleep(20000);   /* let it install the handler */
    return pid;
}

static void stop_child(pid_t pid, int rd)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(rd);
}

/* The time the child reports for the next signal, or 0 if none comes
 * within timeout_ms. */
static uint64_t next_report(int rd, int timeout_ms)
{
    struct pollfd pfd = {.fd = rd, .events = POLLIN};
    if (poll(&pfd, 1, timeout_ms) != 1) return 0;
    uint64_t t = 0;
    if (read(rd, &t, sizeof t) != (ssize_t)sizeof t) return 0;
    return t;
}

static void test_fires_at_deadline(void)
{
    int rd;
    pid_t pid = start_child(&rd);
    CU_ASSERT_FATAL(pid > 0);
    rbpeek_kicker *k = rbpeek_kicker_new(pid, SIGUSR1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    for (int i = 0; i < 5; i++) {
        uint64_t deadline = rbpeek_kicker_now() + 30 * MS;
        rbpeek_kicker_arm(k, deadline);
        uint64_t got = next_report(rd, 2000);
        CU_ASSERT(got >= deadline);
        /* Late only by scheduling: a loaded machine (a fuzz run at nice 19 on
         * both CPUs) once made it 50 ms. A kicker that used the wrong clock or
         * fired only on the next deadline would be seconds late. */
        CU_ASSERT(got < deadline + 250 * MS);
        uint64_t fired = 0;
        CU_ASSERT_EQUAL(rbpeek_kicker_disarm(k, &fired), 1);
        CU_ASSERT(fired >= deadline && fired <= got);
    }
    /* A deadline already past fires at once. */
    uint64_t before = rbpeek_kicker_now();
    rbpeek_kicker_arm(k, before - 10 * MS);
    uint64_t got = next_report(rd, 2000);
    CU_ASSERT(got >= before && got < before + 50 * MS);
    CU_ASSERT_EQUAL(rbpeek_kicker_disarm(k, NULL), 1);
    rbpeek_kicker_free(k);
    stop_child(pid, rd);
}

static void test_disarm_and_free(void)
{
    int rd;
    pid_t pid = start_child(&rd);
    CU_ASSERT_FATAL(pid > 0);
    rbpeek_kicker *k = rbpeek_kicker_new(pid, SIGUSR1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    /* Disarmed before its deadline: nothing is sent, then or later. */
    rbpeek_kicker_arm(k, rbpeek_kicker_now() + 50 * MS);
    uint64_t fired = 123;
    CU_ASSERT_EQUAL(rbpeek_kicker_disarm(k, &fired), 0);
    CU_ASSERT_EQUAL(fired, 0);
    CU_ASSERT_EQUAL(next_report(rd, 200), 0);
    /* Re-armed for an earlier moment than a pending one: the new one counts. */
    rbpeek_kicker_arm(k, rbpeek_kicker_now() + 10 * 1000 * MS);
    uint64_t soon = rbpeek_kicker_now() + 20 * MS;
    rbpeek_kicker_arm(k, soon);
    uint64_t got = next_report(rd, 2000);
    CU_ASSERT(got >= soon && got < soon + 50 * MS);
    CU_ASSERT_EQUAL(rbpeek_kicker_disarm(k, NULL), 1);
    /* Freed while waiting for a deadline far away: returns at once, sends nothing. */
    rbpeek_kicker_arm(k, rbpeek_kicker_now() + 60 * 1000 * MS);
    uint64_t t0 = rbpeek_kicker_now();
    rbpeek_kicker_free(k);
    CU_ASSERT(rbpeek_kicker_now() - t0 < 500 * MS);
    CU_ASSERT_EQUAL(next_report(rd, 100), 0);
    stop_child(pid, rd);
}

static void test_no_such_process(void)
{
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    CU_ASSERT_FATAL(pid > 0);
    waitpid(pid, NULL, 0);   /* reaped: the pid names no process now */
    errno = 0;
    rbpeek_kicker *k = rbpeek_kicker_new(pid, SIGUSR1);
    CU_ASSERT_PTR_NULL(k);
    rbpeek_kicker_free(k);
    CU_ASSERT_PTR_NULL(rbpeek_kicker_new(0, SIGUSR1));
    CU_ASSERT_PTR_NULL(rbpeek_kicker_new(getpid(), 0));
    rbpeek_kicker_arm(NULL, 0);
    CU_ASSERT_EQUAL(rbpeek_kicker_disarm(NULL, NULL), 0);
}

static const rbp_cu_test TESTS[] = {
    {"a signal at the deadline, and at once for a past one", test_fires_at_deadline},
    {"disarm, re-arm earlier, free while waiting", test_disarm_and_free},
    {"no such process", test_no_such_process},
    {NULL, NULL},
};

RBP_CU_MAIN("kicker", TESTS)
