/*
 * Tests of the kernel-TID resolution (vm/kernel_tid.c) on a real child
 * process of the test: not a Ruby, but real glibc thread descriptors. The
 * child forks a grandchild (as a pre-forking server forks a worker), which
 * starts three threads and reports each one's pthread_t and gettid(); the
 * grandchild's main thread is the one that called fork(), whose TID is
 * the grandchild's pid, while a Ruby 3.1 would still record the parent's.
 *
 * Through /proc/PID/mem (use_pid, glibc's published offset, /proc/PID/task
 * asked): every pthread_t resolves to its gettid(), also when given the
 * parent's pid as Ruby's record; Ruby's record alone counts only when the
 * kernel lists it. Through a reader with no mapped regions (no symbol, so
 * the offset is found by calibration) and the kernel's list given: the
 * same answers; a list without the TID gives -1, never a wrong TID.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_main.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/kernel_tid.h"
#include "fixture_emulator.h"

enum { NTHREADS = 3 };

typedef struct report {
    int pid;                        /* the grandchild */
    uint64_t pthread[NTHREADS + 1]; /* [0] its main thread */
    int64_t tid[NTHREADS + 1];
} report;

static int out_fd;
static report rep;
static pthread_mutex_t lk = PTHREAD_MUTEX_INITIALIZER;
static int started;

static void *thread_main(void *arg)
{
    int i = (int)(intptr_t)arg;
    pthread_mutex_lock(&lk);
    rep.pthread[i] = (uint64_t)pthread_self();
    rep.tid[i] = (int64_t)syscall(SYS_gettid);
    started++;
    pthread_mutex_unlock(&lk);
    for (;;) pause();
    return NULL;
}

static void grandchild(void)
{
    rep.pid = getpid();
    rep.pthread[0] = (uint64_t)pthread_self();
    rep.tid[0] = (int64_t)syscall(SYS_gettid);
    for (int i = 1; i <= NTHREADS; i++) {
        pthread_t t;
        pthread_create(&t, NULL, thread_main, (void *)(intptr_t)i);
    }
    for (;;) {
        pthread_mutex_lock(&lk);
        int n = started;
        pthread_mutex_unlock(&lk);
        if (n == NTHREADS) break;
        usleep(1000);
    }
    if (write(out_fd, &rep, sizeof rep) != (ssize_t)sizeof rep) _exit(3);
    for (;;) pause();
}

/* The child forks the grandchild and waits; killing the child's process
 * group ends both. */
static pid_t child_pid;

static bool start(void)
{
    int p[2];
    if (pipe(p) != 0) return false;
    child_pid = fork();
    if (child_pid < 0) return false;
    if (child_pid == 0) {
        setpgid(0, 0);
        close(p[0]);
        out_fd = p[1];
        pid_t g = fork();
        if (g == 0) grandchild();
        for (;;) pause();
    }
    setpgid(child_pid, child_pid);
    close(p[1]);
    ssize_t n = read(p[0], &rep, sizeof rep);
    close(p[0]);
    return n == (ssize_t)sizeof rep;
}

static void stop(void)
{
    kill(-child_pid, SIGKILL);
    waitpid(child_pid, NULL, 0);
}

static long read_mem(void *ctx, uint64_t addr, void *buf, size_t len)
{
    int fd = *(int *)ctx;
    ssize_t n = pread(fd, buf, len, (off_t)addr);
    return n > 0 ? (long)n : -1;
}

static void check_resolves(rbpeek_session *s)
{
    for (int i = 0; i <= NTHREADS; i++) {
        CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[i], -1), rep.tid[i]);
        /* Ruby's stale record (the parent's pid) gives way to the kernel's. */
        CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[i], (int64_t)child_pid), rep.tid[i]);
    }
    CU_ASSERT_EQUAL(rep.tid[0], rep.pid);
    /* No descriptor: Ruby's record counts only if the kernel lists it. */
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, 0, rep.tid[2]), rep.tid[2]);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, 0, (int64_t)child_pid), -1);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, 0, -1), -1);
    /* A descriptor pointer into nothing: Ruby's record, checked. */
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, 0x10, rep.tid[1]), rep.tid[1]);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, 0x10, (int64_t)child_pid), -1);
}

static void test_live_pid(void)
{
    if (fixture_emulated("the forked child is a qemu process: /proc/PID/maps and task/ show qemu's own libc and "
                         "threads beside the guest's")) return;
    CU_ASSERT_FATAL(start());
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_use_pid(s, rep.pid), RBPEEK_OK);
    check_resolves(s);
    /* Asked again (the remembered pairs): the same. */
    check_resolves(s);
    CU_ASSERT_TRUE(rbp_kernel_tid_listed(s, rep.tid[3]));
    CU_ASSERT_FALSE(rbp_kernel_tid_listed(s, child_pid));
    rbpeek_session_free(s);
    stop();
}

static void test_calibrated_with_a_list(void)
{
    CU_ASSERT_FATAL(start());
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", rep.pid);
    int fd = open(path, O_RDONLY);
    CU_ASSERT_FATAL(fd >= 0);
    rbpeek_session *s = rbpeek_session_new();
    /* A reader and no regions: no symbol to find, so no published offset. */
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_use_reader(s, read_mem, &fd), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_set_kernel_tids(s, rep.tid, NTHREADS + 1), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[1], -1), -1);   /* not calibrated yet */
    rbp_kernel_tid_calibrate(s, rep.pthread[0], &rep.pthread[1], NTHREADS);
    check_resolves(s);
    /* A list without a thread: never a TID the list lacks. */
    CU_ASSERT_EQUAL(rbpeek_session_set_kernel_tids(s, rep.tid, 2), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[1], -1), rep.tid[1]);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[3], -1), -1);
    CU_ASSERT_EQUAL(rbp_kernel_tid(s, rep.pthread[3], rep.tid[3]), -1);
    rbpeek_session_free(s);
    close(fd);
    stop();
}

static const rbp_cu_test tests[] = {
    {"a forked child's threads through /proc", test_live_pid},
    {"calibrated, against a given list", test_calibrated_with_a_list},
    {NULL, NULL},
};

RBP_CU_MAIN("kernel_tid", tests)
