/*
 * Tests of the sampler as the target's tracer (tracer.c) on a child process
 * of this test (not a Ruby, so every walk fails and is counted: what is
 * checked here is the tracing). The child has a spinning thread and, when
 * asked, a thread that starts a short-lived thread every millisecond; it
 * reports each SIGUSR2 it receives through a pipe. Checked: the schedule
 * ends after N samples and leaves the child running and untraced; threads
 * born while traced are let go with the rest; signals the debugger would
 * pass on are delivered at once; a stop signal someone sent ends sampling
 * and is left to the caller; threads born of seized ones while seizing are
 * taken as traced, not seized again; the host gets no SIGCHLD for each
 * stop, and its SIGCHLD action back afterwards; a fault ends it with the
 * child group-stopped and the fault pending; the child's exit and a cancel
 * end it; a process that cannot be traced gives an error.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "rbpeek.h"
#include "fixture_emulator.h"

enum { CHILD_SPAWN = 1, CHILD_FAULT = 2, CHILD_BURST = 4 };

static int g_report_fd = -1;

static void on_usr2(int sig)
{
    (void)sig;
    char c = 'u';
    ssize_t n = write(g_report_fd, &c, 1);
    (void)n;
}

static void *spin(void *arg)
{
    (void)arg;
    volatile unsigned long x = 0;
    for (;;) x++;
    return NULL;
}

static void *short_lived(void *arg)
{
    (void)arg;
    usleep(300);
    return NULL;
}

static void *faulter(void *arg)
{
    (void)arg;
    usleep(100000);
    static volatile uintptr_t unmapped = 8;
    *(volatile int *)unmapped = 1;   /* SIGSEGV, SEGV_MAPERR */
    return NULL;
}

static void *spawner(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_t t;
        if (pthread_create(&t, NULL, short_lived, NULL) == 0) pthread_join(t, NULL);
        usleep(1000);
    }
    return NULL;
}

static void *instant(void *arg) { return arg; }

/* Starts threads back to back. Six of them, seized one after another, make
 * a pass over /proc/PID/task likely to meet both a thread born untraced (so
 * another pass follows) and one born traced, of a burster seized before. */
static void *burster(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_t t;
        if (pthread_create(&t, NULL, instant, NULL) == 0) pthread_join(t, NULL);
    }
    return NULL;
}

/* Forks the child; *rd gets the read end of its report pipe. exit_ms > 0:
 * the child exits with status 7 that long after it is ready. */
static pid_t start_child(int flags, int exit_ms, int *rd)
{
    int fds[2];
    if (pipe(fds) != 0) return -1;
    pid_t pid = fork();
    if (pid == 0) {
        /* A failed fatal assertion leaves the test without killing its
         * child, which would spin on: it dies with the test. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(fds[0]);
        g_report_fd = fds[1];
        signal(SIGUSR2, on_usr2);
        pthread_t t;
        pthread_create(&t, NULL, spin, NULL);
        if (flags & CHILD_SPAWN) pthread_create(&t, NULL, spawner, NULL);
        if (flags & CHILD_FAULT) pthread_create(&t, NULL, faulter, NULL);
        for (int i = 0; (flags & CHILD_BURST) && i < 6; i++) pthread_create(&t, NULL, burster, NULL);
        char c = 'r';
        if (write(fds[1], &c, 1) != 1) _exit(3);
        if (exit_ms > 0) {
            usleep((useconds_t)exit_ms * 1000);
            _exit(7);
        }
        for (;;) pause();
    }
    close(fds[1]);
    char c = 0;
    if (pid < 0 || read(fds[0], &c, 1) != 1 || c != 'r') {
        close(fds[0]);
        return -1;
    }
    *rd = fds[0];
    return pid;
}

static void stop_child(pid_t pid, int rd)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(rd);
}

/* Reports of SIGUSR2 received within ms milliseconds. */
static int count_reports(int rd, int want, int ms)
{
    int got = 0;
    while (got < want) {
        struct pollfd p = {rd, POLLIN, 0};
        if (poll(&p, 1, ms) != 1) break;
        char c;
        if (read(rd, &c, 1) != 1) break;
        got += c == 'u';
    }
    return got;
}

/* The state letter of every thread of pid; *traced = any TracerPid set;
 * *pending = signal signo pending on some thread. Returns the thread count. */
static int thread_states(pid_t pid, char *states, int max, int *traced, int signo, int *pending)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    int n = 0;
    *traced = *pending = 0;
    if (!d) return 0;
    struct dirent *de;
    while ((de = readdir(d)) && n < max) {
        if (de->d_name[0] == '.') continue;
        char sp[320], line[256];
        snprintf(sp, sizeof sp, "/proc/%d/task/%s/status", (int)pid, de->d_name);
        FILE *f = fopen(sp, "r");
        if (!f) continue;
        while (fgets(line, sizeof line, f)) {
            if (!strncmp(line, "State:", 6)) states[n] = line[7];
            if (!strncmp(line, "TracerPid:", 10) && atoi(line + 10) != 0) *traced = 1;
            if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7)) {
                unsigned long long mask = strtoull(line + 7, NULL, 16);
                if (mask & (1ull << (signo - 1))) *pending = 1;
            }
        }
        fclose(f);
        n++;
    }
    closedir(d);
    return n;
}

typedef struct fixture {
    rbpeek_session *s;
    rbpeek_profile *p;
    rbpeek_sample_options opt;
    rbpeek_trace_config cfg;
} fixture;

static void fixture_init(fixture *fx, pid_t pid, double interval_s)
{
    fx->s = rbpeek_session_new();
    fx->p = rbpeek_profile_new();
    CU_ASSERT_FATAL(fx->s && fx->p);
    CU_ASSERT_EQUAL(rbpeek_session_use_pid(fx->s, pid), RBPEEK_OK);
    memset(&fx->opt, 0, sizeof fx->opt);
    fx->opt.pid = pid;
    memset(&fx->cfg, 0, sizeof fx->cfg);
    fx->cfg.interval_s = interval_s;
    fx->cfg.seed = 42;
    for (int i = 1; i < 65; i++) fx->cfg.pass_signals[i] = 1;
}

static void fixture_free(fixture *fx)
{
    rbpeek_profile_free(fx->p);
    rbpeek_session_free(fx->s);
}

/* Starts the tracer on the fixture's process; a failure names its reason. */
static rbpeek_status start_trace(fixture *fx, rbpeek_trace **t)
{
    rbpeek_status st = rbpeek_trace_start(fx->s, fx->p, &fx->opt, &fx->cfg, t);
    if (st != RBPEEK_OK) fprintf(stderr, "\nrbpeek_trace_start: %s\n", rbpeek_session_error(fx->s));
    return st;
}

static rbpeek_trace_stats run_to_end(rbpeek_trace *t, int max_ms)
{
    rbpeek_trace_stats st;
    CU_ASSERT(rbpeek_trace_wait(t, max_ms) == 1);
    rbpeek_trace_get_stats(t, &st);
    rbpeek_trace_free(t);
    return st;
}

/* The child's thread states once the tracer has let go (given a moment for
 * the detach to land), asserting none is traced any more; *pending says
 * whether signo is pending. Returns the number of threads. */
static int states_after_let_go(pid_t pid, char *states, int max, int signo, int *pending)
{
    int traced;
    usleep(20000);
    int n = thread_states(pid, states, max, &traced, signo, pending);
    CU_ASSERT_EQUAL(traced, 0);
    return n;
}

static void assert_let_go_running(pid_t pid)
{
    char states[256];
    int pending;
    int n = states_after_let_go(pid, states, (int)sizeof states, SIGUSR1, &pending);
    CU_ASSERT(n >= 2);
    for (int i = 0; i < n; i++) CU_ASSERT(states[i] != 't' && states[i] != 'T');
}

/* Samples pid n times, interval_s apart on average, and returns the
 * tracer's stats (end RBPEEK_TRACE_FAILED if it could not start). */
static rbpeek_trace_stats sample_n(pid_t pid, double interval_s, uint64_t n, int max_ms)
{
    fixture fx;
    fixture_init(&fx, pid, interval_s);
    fx.cfg.max_samples = n;
    rbpeek_trace *t = NULL;
    rbpeek_trace_stats st;
    memset(&st, 0, sizeof st);
    st.end = RBPEEK_TRACE_FAILED;
    rbpeek_status started = start_trace(&fx, &t);
    CU_ASSERT_EQUAL(started, RBPEEK_OK);
    if (started == RBPEEK_OK) st = run_to_end(t, max_ms);
    fixture_free(&fx);
    return st;
}

static void test_samples_then_lets_go(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(CHILD_SPAWN, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    rbpeek_trace_stats st = sample_n(pid, 0.001, 300, 20000);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_DONE);
    CU_ASSERT_EQUAL(st.samples, 300);
    CU_ASSERT_EQUAL(st.failed_samples, 300);   /* not a Ruby: every walk fails, none is fatal */
    CU_ASSERT_EQUAL(st.not_stopped, 0);
    CU_ASSERT(st.message[0] != 0);
    CU_ASSERT(st.elapsed_s > 0.1 && st.elapsed_s < 10.0);
    /* Threads born while traced (about one a millisecond) were let go too. */
    assert_let_go_running(pid);
    stop_child(pid, rd);
}

/* A thread born of one already seized is traced from birth: seizing it
 * again fails with EPERM, which must not fail the start. */
static void test_threads_born_while_seizing(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    for (int round = 0; round < 5; round++) {
        int rd;
        pid_t pid = start_child(CHILD_BURST, 0, &rd);
        CU_ASSERT_FATAL(pid > 0);
        rbpeek_trace_stats st = sample_n(pid, 0.001, 20, 10000);
        CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_DONE);
        /* At once, as a debugger attaching again would look. */
        char states[256];
        int traced, pending;
        thread_states(pid, states, (int)sizeof states, &traced, SIGUSR1, &pending);
        CU_ASSERT_EQUAL(traced, 0);
        assert_let_go_running(pid);
        stop_child(pid, rd);
    }
}

static volatile sig_atomic_t g_sigchld;
static void on_sigchld(int sig)
{
    (void)sig;
    g_sigchld++;
}

/* The stops of a sample send the host no SIGCHLD (each would wake a thread
 * of the debugger: SA_NOCLDSTOP while sampling); the host's action is put
 * back afterwards, and one SIGCHLD tells it to look at its own children. */
static void test_no_sigchld_per_stop(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    struct sigaction mine, old, after;
    memset(&mine, 0, sizeof mine);
    mine.sa_handler = on_sigchld;
    mine.sa_flags = SA_RESTART;
    sigemptyset(&mine.sa_mask);
    sigaction(SIGCHLD, &mine, &old);
    int rd;
    pid_t pid = start_child(0, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    g_sigchld = 0;
    rbpeek_trace_stats st = sample_n(pid, 0.001, 200, 10000);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_DONE);
    CU_ASSERT(st.samples == 200);
    CU_ASSERT(g_sigchld >= 1 && g_sigchld <= 2);   /* the one sent at the end; without the flag, 400 or so */
    sigaction(SIGCHLD, NULL, &after);
    CU_ASSERT(after.sa_handler == on_sigchld);
    CU_ASSERT_EQUAL(after.sa_flags & SA_NOCLDSTOP, 0);
    stop_child(pid, rd);
    sigaction(SIGCHLD, &old, NULL);
}

static void test_pass_and_stop_signals(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(0, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    fixture fx;
    fixture_init(&fx, pid, 0.002);
    fx.cfg.stop_signals[SIGUSR1] = 1;
    rbpeek_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(start_trace(&fx, &t), RBPEEK_OK);
    /* Passed on: delivered at once, while still traced. */
    for (int i = 0; i < 3; i++) {
        kill(pid, SIGUSR2);
        CU_ASSERT_EQUAL(count_reports(rd, 1, 2000), 1);
    }
    CU_ASSERT_EQUAL(rbpeek_trace_wait(t, 0), 0);
    /* Some samples before the stop signal: 50 ms at 500 Hz, and on a loaded
     * machine (the suite's parallel tests) until the first one is counted,
     * at most 5 s more. */
    usleep(50000);
    rbpeek_trace_stats now = {0};
    for (int i = 0; i < 500 && (rbpeek_trace_get_stats(t, &now), now.samples == 0); i++) usleep(10000);
    /* A stop signal someone sent ends it; the signal is not delivered, but
     * left to the caller to send again once the debugger is back, and the
     * child runs on meanwhile. */
    kill(pid, SIGUSR1);
    rbpeek_trace_stats st = run_to_end(t, 5000);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_SIGNAL);
    CU_ASSERT_EQUAL(st.signal, SIGUSR1);
    CU_ASSERT_EQUAL(st.signal_pending, 0);
    CU_ASSERT(st.samples > 0);
    char states[64];
    int pending;
    CU_ASSERT_EQUAL(states_after_let_go(pid, states, (int)sizeof states, SIGUSR1, &pending), 2);
    CU_ASSERT_EQUAL(pending, 0);
    assert_let_go_running(pid);
    fixture_free(&fx);
    stop_child(pid, rd);
}

/* A fault ends it with the child held in a group stop, the signal pending
 * again: the faulting instruction must not run before a debugger is back. */
static void test_fault_left_pending(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(CHILD_FAULT, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    fixture fx;
    fixture_init(&fx, pid, 0.002);
    fx.cfg.stop_signals[SIGSEGV] = 1;
    rbpeek_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(start_trace(&fx, &t), RBPEEK_OK);
    rbpeek_trace_stats st = run_to_end(t, 5000);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_SIGNAL);
    CU_ASSERT_EQUAL(st.signal, SIGSEGV);
    CU_ASSERT_EQUAL(st.signal_pending, 1);
    char states[64];
    int pending;
    int n = states_after_let_go(pid, states, (int)sizeof states, SIGSEGV, &pending);
    CU_ASSERT_EQUAL(n, 3);
    CU_ASSERT_EQUAL(pending, 1);
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(states[i], 'T');
    fixture_free(&fx);
    stop_child(pid, rd);
}

static void test_exit_ends_it(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(CHILD_SPAWN, 150, &rd);
    CU_ASSERT_FATAL(pid > 0);
    fixture fx;
    fixture_init(&fx, pid, 0.001);
    rbpeek_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(start_trace(&fx, &t), RBPEEK_OK);
    rbpeek_trace_stats st = run_to_end(t, 10000);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_EXITED);
    CU_ASSERT_EQUAL(st.exit_code, 7);
    CU_ASSERT_EQUAL(st.signal, 0);
    CU_ASSERT(st.samples > 10);
    fixture_free(&fx);
    waitpid(pid, NULL, WNOHANG);   /* the tracer may have reaped it already */
    close(rd);
}

static void test_cancel_wakes_it(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(0, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    fixture fx;
    fixture_init(&fx, pid, 60.0);   /* the first sample would be a minute away */
    rbpeek_trace *t = NULL;
    CU_ASSERT_EQUAL_FATAL(start_trace(&fx, &t), RBPEEK_OK);
    usleep(50000);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    rbpeek_trace_cancel(t);
    rbpeek_trace_stats st = run_to_end(t, 2000);
    clock_gettime(CLOCK_MONOTONIC, &b);
    CU_ASSERT_EQUAL(st.end, RBPEEK_TRACE_CANCELLED);
    CU_ASSERT((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 < 1000);
    assert_let_go_running(pid);
    fixture_free(&fx);
    stop_child(pid, rd);
}

static long ptrace_seize_for_test(pid_t pid)
{
    return ptrace(PTRACE_SEIZE, pid, NULL, NULL);
}

static void test_cannot_trace(void)
{
    if (fixture_emulated("qemu-user implements no ptrace (ENOSYS) and no SIGEV_THREAD_ID timer (timer_create: "
                         "EINVAL), which the tracer is made of")) return;
    int rd;
    pid_t pid = start_child(0, 0, &rd);
    CU_ASSERT_FATAL(pid > 0);
    /* Someone else traces it already: seizing must fail with a message. */
    pid_t holder = fork();
    if (holder == 0) {
        if (ptrace_seize_for_test(pid) != 0) _exit(1);
        pause();
        _exit(0);
    }
    usleep(100000);
    fixture fx;
    fixture_init(&fx, pid, 0.01);
    rbpeek_trace *t = NULL;
    CU_ASSERT_EQUAL(rbpeek_trace_start(fx.s, fx.p, &fx.opt, &fx.cfg, &t), RBPEEK_ERR_IO);
    CU_ASSERT_PTR_NULL(t);
    CU_ASSERT(strstr(rbpeek_session_error(fx.s), "cannot trace thread") != NULL);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    fixture_free(&fx);
    stop_child(pid, rd);
    /* Bad arguments. */
    CU_ASSERT_EQUAL(rbpeek_trace_start(NULL, NULL, NULL, NULL, &t), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_trace_wait(NULL, 0), 1);
    rbpeek_trace_cancel(NULL);
    rbpeek_trace_free(NULL);
}

static const rbp_cu_test TESTS[] = {
    {"N samples, then the child runs on untraced (threads born meanwhile too)", test_samples_then_lets_go},
    {"threads born of seized ones while seizing are not seized again", test_threads_born_while_seizing},
    {"no SIGCHLD to the host for each stop; its action put back", test_no_sigchld_per_stop},
    {"passed signals delivered at once; a sent stop signal ends it, for the caller to resend",
     test_pass_and_stop_signals},
    {"a fault ends it with the child group-stopped, the fault pending", test_fault_left_pending},
    {"the child's exit ends it, with its status", test_exit_ends_it},
    {"cancel wakes it before a far sample time", test_cancel_wakes_it},
    {"a process traced by someone else: an error", test_cannot_trace},
    {NULL, NULL},
};

RBP_CU_MAIN("tracer", TESTS)
