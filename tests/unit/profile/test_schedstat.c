/*
 * Tests of the /proc scheduling reads (profile/schedstat.c): the CPU field
 * of a thread's stat line, whatever its command name holds (spaces,
 * parentheses), and a line cut short or garbled gives -1, never a wrong
 * CPU; the thread's own stat and schedstat read back, with the CPU one of
 * the machine's. The tracing thread keeps off the CPU this names
 * (trace_aside.c): a wrong answer would only make it choose badly, so the
 * parse refuses rather than guesses.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <string.h>
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
    int cpu = rbp_task_cpu(getpid(), gettid());
    long cpus = sysconf(_SC_NPROCESSORS_CONF);
    CU_ASSERT(cpu >= 0 && cpu < cpus);
    rbp_schedstat st;
    CU_ASSERT_TRUE(rbp_schedstat_read(getpid(), gettid(), &st));
    CU_ASSERT(st.run_ns > 0 && st.runs > 0);
    CU_ASSERT_EQUAL(rbp_task_cpu(getpid(), 0), -1);
    CU_ASSERT_FALSE(rbp_schedstat_read(getpid(), 0, &st));
}

static const rbp_cu_test TESTS[] = {
    {"the CPU field, whatever the command name", test_cpu_field},
    {"a garbled line gives -1", test_garbage},
    {"the test's own thread", test_own_thread},
    {NULL, NULL},
};

RBP_CU_MAIN("schedstat", TESTS)
