/*
 * Tests of the /proc scheduling reads (profile/schedstat.c): the CPU field
 * of a thread's stat line, whatever its command name holds (spaces,
 * parentheses), and a line cut short or garbled gives -1, never a wrong
 * CPU; the thread's own stat and schedstat read back, with the CPU one of
 * the machine's. The cache of open files (rbp_task_files) reads each file
 * afresh, keeps one descriptor per thread and file, drops a thread that
 * ended (another thread may get its TID), never keeps more than its
 * bound (a new one replaces an old one), forgets another process's, and
 * closes every one. The tracing thread keeps off the CPU this names
 * (trace_aside.c): a wrong answer would only make it choose badly, so the
 * parse refuses rather than guesses.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "profile/schedstat.h"

/* A stat line with `comm` as field 2 and `cpu` as field 39 (the fields
 * between are as a sleeping thread's). */
static void stat_line(char *buf, size_t size, const char *comm, const char *cpu)
{
    snprintf(buf, size,
             "4242 (%s) S 1 4242 4242 0 -1 4194560 1181 0 0 0 12 3 0 0 20 0 2 0 98765 12345678 2345 "
             "18446744073709551615 1 1 0 0 0 0 0 4096 1073745148 0 0 0 17 %s 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
             comm, cpu);
}

static void test_cpu_field(void)
{
    char buf[512];
    stat_line(buf, sizeof buf, "ruby", "1");
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), 1);
    stat_line(buf, sizeof buf, "puma 5.6.5 (tcp://127.0.0.1:9292) [app]", "0");
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), 0);
    stat_line(buf, sizeof buf, ") ) 7 8 9", "63");   /* a name made to look like fields */
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), 63);
}

static void test_garbage(void)
{
    char buf[512];
    CU_ASSERT_EQUAL(rbp_stat_cpu(NULL), -1);
    CU_ASSERT_EQUAL(rbp_stat_cpu(""), -1);
    CU_ASSERT_EQUAL(rbp_stat_cpu("4242 (ruby S 1 2 3"), -1);   /* no ')' */
    stat_line(buf, sizeof buf, "ruby", "1");
    buf[strlen(buf) / 2] = '\0';                               /* cut before field 39 */
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), -1);
    stat_line(buf, sizeof buf, "ruby", "x");
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), -1);
    stat_line(buf, sizeof buf, "ruby", "-3");
    CU_ASSERT_EQUAL(rbp_stat_cpu(buf), -1);
}

static void test_own_thread(void)
{
    int cpu = rbp_task_cpu(NULL, getpid(), gettid());
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    CU_ASSERT(cpu >= 0 && cpu < cpus);
    rbp_schedstat st;
    CU_ASSERT_TRUE(rbp_schedstat_read(NULL, getpid(), gettid(), &st));
    CU_ASSERT(st.run_ns > 0 && st.runs > 0);
    CU_ASSERT_EQUAL(rbp_task_cpu(NULL, getpid(), 0), -1);
    CU_ASSERT_FALSE(rbp_schedstat_read(NULL, getpid(), 0, &st));
}

static int open_fds(void)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

static atomic_int spin_stop;
static atomic_int spin_tid;

static void *spin(void *arg)
{
    (void)arg;
    atomic_store(&spin_tid, gettid());
    volatile unsigned x = 0;
    while (!atomic_load(&spin_stop)) x++;
    return NULL;
}

static void test_cache(void)
{
    rbp_task_files *c = calloc(1, sizeof *c);
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    int before = open_fds();
    pthread_t th;
    atomic_store(&spin_stop, 0);
    CU_ASSERT_FATAL(pthread_create(&th, NULL, spin, NULL) == 0);
    while (!atomic_load(&spin_tid)) sched_yield();
    pid_t tid = atomic_load(&spin_tid);

    /* Read again and again through one descriptor, each time afresh. */
    rbp_schedstat a, b;
    CU_ASSERT_TRUE(rbp_schedstat_read(c, getpid(), tid, &a));
    struct timespec ms20 = {0, 20000000};
    nanosleep(&ms20, NULL);
    CU_ASSERT_TRUE(rbp_schedstat_read(c, getpid(), tid, &b));
    CU_ASSERT(b.run_ns > a.run_ns);
    CU_ASSERT(rbp_task_cpu(c, getpid(), tid) >= 0);
    char buf[64];
    CU_ASSERT_TRUE(rbp_task_file_read(c, getpid(), tid, "syscall", buf, sizeof buf));
    CU_ASSERT_EQUAL(c->n, 3);   /* schedstat, stat, syscall */
    CU_ASSERT_EQUAL(open_fds(), before + 3);
    CU_ASSERT_TRUE(rbp_task_file_read(c, getpid(), tid, "status", buf, sizeof buf));   /* not kept */
    CU_ASSERT_EQUAL(c->n, 3);

    /* The thread ends: its reads fail, and its descriptors are let go.
     * pthread_join returns when the kernel clears the thread's TID word,
     * before it has reaped the thread: its /proc entry stays readable a
     * moment longer (under qemu-user, one run in three read it). So wait,
     * at most 5 s, until the kernel has let it go. */
    atomic_store(&spin_stop, 1);
    pthread_join(th, NULL);
    char task[64];
    snprintf(task, sizeof task, "/proc/self/task/%d", (int)tid);
    for (int i = 0; i < 5000 && access(task, F_OK) == 0; i++) nanosleep(&(struct timespec){0, 1000000}, NULL);
    CU_ASSERT_FATAL(access(task, F_OK) != 0);
    CU_ASSERT_FALSE(rbp_schedstat_read(c, getpid(), tid, &b));
    CU_ASSERT_EQUAL(c->n, 2);

    /* Another process: the cache is its alone from then on. */
    pid_t child = fork();
    if (child == 0) {
        pause();
        _exit(0);
    }
    CU_ASSERT_FATAL(child > 0);
    CU_ASSERT_TRUE(rbp_schedstat_read(c, child, child, &a));
    CU_ASSERT_EQUAL(c->n, 1);
    CU_ASSERT_EQUAL(c->pid, child);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);

    /* Never more than the bound: the same file of one thread is one entry,
     * so fill it with made-up entries of our own (copies of one fd). */
    rbp_task_files_close(c);
    c->pid = getpid();
    while (c->n < RBP_TASK_FILES_MAX)
        c->fd[c->n++] = (rbp_task_fd){.tid = 1000000000 + (int64_t)c->n, .kind = 0, .fd = dup(0)};
    int full = open_fds();
    CU_ASSERT_TRUE(rbp_schedstat_read(c, getpid(), gettid(), &a));
    CU_ASSERT_EQUAL(c->n, RBP_TASK_FILES_MAX);   /* it took an old one's place */
    CU_ASSERT_EQUAL(open_fds(), full);
    CU_ASSERT_EQUAL(c->fd[0].tid, gettid());
    rbp_task_files_close(c);
    CU_ASSERT_EQUAL(c->n, 0);
    CU_ASSERT_EQUAL(open_fds(), before);
    rbp_task_files_close(NULL);
    free(c);
}

static const rbp_cu_test TESTS[] = {
    {"the CPU field, whatever the command name", test_cpu_field},
    {"a garbled line gives -1", test_garbage},
    {"the test's own thread", test_own_thread},
    {"the cache of open files", test_cache},
    {NULL, NULL},
};

RBP_CU_MAIN("schedstat", TESTS)
