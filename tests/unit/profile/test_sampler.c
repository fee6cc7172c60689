/*
 * Tests of the sampler's fast path (sampler.c) on hand-built threads: frame
 * names and root-first order, the thread root frame, thread selection by TID
 * and by pthread_t (with the pthread -> TID map older Rubies need), failed
 * and empty walks, and the on-CPU test, whose kernel half is checked against
 * real threads of this test process: one spinning, one blocked in read().
 * The folded output of a profile built through these paths is compared
 * byte for byte.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "profile/profile.h"
#include "rbpeek.h"
#include "profile/sampler.h"

static const rbpeek_frame FRAMES_A[] = {
    /* innermost first, as a snapshot holds them */
    {.label = "Integer#times", .path = "/app/work.rb", .lineno = 7, .kind = RBPEEK_FRAME_CFUNC},
    {.label = "Worker#crunch", .path = "/app/work.rb", .lineno = 7, .kind = RBPEEK_FRAME_RUBY},
    {.label = "<main>", .path = "main.rb", .lineno = 3, .kind = RBPEEK_FRAME_RUBY},
};

static const rbpeek_frame FRAMES_B[] = {
    {.label = "Kernel#sleep", .path = "", .lineno = 0, .kind = RBPEEK_FRAME_CFUNC},
    {.label = "block in <main>", .path = "main.rb", .lineno = 0, .kind = RBPEEK_FRAME_RUBY},
};

static rbpeek_thread thread_with(const rbpeek_frame *frames, size_t n)
{
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    t.frames = frames;
    t.nframes = n;
    t.native_tid = -1;
    t.status = RBPEEK_THREAD_RUNNABLE;
    return t;
}

static char *folded(rbpeek_profile *p)
{
    char path[256];
    tmp_path(path, sizeof path, "sampler", "out.folded");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(p, path), RBPEEK_OK);
    char *buf = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(buf);
    unlink(path);
    return buf;
}

static void test_names_and_order(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    bool unknown;
    rbpeek_thread a = thread_with(FRAMES_A, 3), b = thread_with(FRAMES_B, 2);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &a, NULL, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &a, NULL, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &b, NULL, &s, &unknown), RBP_SAMPLE_ADDED);
    char *out = folded(p);
    /* A path without a line keeps the path; no path at all is the label alone. */
    CU_ASSERT_STRING_EQUAL(out,
                           "<main> (main.rb:3);Worker#crunch (/app/work.rb:7);Integer#times (/app/work.rb:7) 2\n"
                           "block in <main> (main.rb);Kernel#sleep 1\n");
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 3);
    free(out);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static void test_thread_root_frame(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    bool unknown;
    rbpeek_sample_options opt = {.per_thread = 1};
    rbpeek_thread main_t = thread_with(FRAMES_B, 2), named = thread_with(FRAMES_B, 2),
                  anon = thread_with(FRAMES_B, 2);
    main_t.is_main = 1;
    main_t.native_tid = 100;
    named.name = "worker";
    named.native_tid = 101;
    anon.thread_addr = 0x5000;
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &main_t, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &named, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &anon, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    char *out = folded(p);
    CU_ASSERT_STRING_EQUAL(out,
                           "Thread \"worker\" (tid 101);block in <main> (main.rb);Kernel#sleep 1\n"
                           "Thread 0x5000;block in <main> (main.rb);Kernel#sleep 1\n"
                           "Thread main (tid 100);block in <main> (main.rb);Kernel#sleep 1\n");
    free(out);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

static void test_selection_and_failures(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    bool unknown;
    rbpeek_thread by_tid = thread_with(FRAMES_A, 3), other = thread_with(FRAMES_A, 3),
                  old_ruby = thread_with(FRAMES_B, 2);
    by_tid.native_tid = 4242;
    other.native_tid = 4243;
    old_ruby.pthread_id = 0x7f0000001000;   /* no TID kept, as before 3.1 */

    rbpeek_sample_options opt = {.only_tid = 4242};
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &by_tid, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &other, &opt, &s, &unknown), RBP_SAMPLE_FILTERED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &old_ruby, &opt, &s, &unknown), RBP_SAMPLE_FILTERED);

    /* The same thread chosen by pthread_t, and by TID through the map. */
    rbpeek_sample_options by_pthread = {.only_pthread = 0x7f0000001000};
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &old_ruby, &by_pthread, &s, &unknown), RBP_SAMPLE_ADDED);
    const uint64_t map[] = {0x7f0000002000, 7, 0x7f0000001000, 4444};
    rbpeek_sample_options mapped = {.only_tid = 4444, .tid_map = map, .tid_map_pairs = 2};
    CU_ASSERT_EQUAL(rbp_sample_thread_tid(&old_ruby, &mapped), 4444);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &old_ruby, &mapped, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &by_tid, &mapped, &s, &unknown), RBP_SAMPLE_FILTERED);

    /* A walk that failed is skipped, never recorded half-way. */
    rbpeek_thread torn = thread_with(FRAMES_A, 2);
    torn.error = "part of its control frame array is unreadable";
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &torn, NULL, &s, &unknown), RBP_SAMPLE_FAILED);
    rbpeek_thread empty = thread_with(NULL, 0);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &empty, NULL, &s, &unknown), RBP_SAMPLE_EMPTY);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 3);
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), 2);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
}

/* Threads of this process: one spinning in user code, one parked in read()
 * on a pipe nobody writes. (The calling thread itself would show the read()
 * of the /proc file it is reading.) */
static volatile int spinner_stop;
static volatile pid_t spinner_tid;
static void *spinner(void *arg)
{
    (void)arg;
    spinner_tid = (pid_t)syscall(SYS_gettid);
    volatile unsigned long x = 0;
    while (!spinner_stop) x++;
    return NULL;
}

static int blocker_pipe[2];
static volatile pid_t blocker_tid;
static void *blocker(void *arg)
{
    (void)arg;
    blocker_tid = (pid_t)syscall(SYS_gettid);
    char c;
    ssize_t r = read(blocker_pipe[0], &c, 1);
    (void)r;
    return NULL;
}

static void test_on_cpu(void)
{
    rbpeek_thread t = thread_with(FRAMES_A, 3);
    bool unknown;
    /* Without a pid, Ruby's status decides. */
    rbpeek_sample_options no_pid = {.on_cpu = 1};
    CU_ASSERT_TRUE(rbp_sample_on_cpu(&t, &no_pid, &unknown));
    CU_ASSERT_FALSE(unknown);
    t.status = RBPEEK_THREAD_STOPPED;
    CU_ASSERT_FALSE(rbp_sample_on_cpu(&t, &no_pid, &unknown));
    t.status = RBPEEK_THREAD_STOPPED_FOREVER;
    CU_ASSERT_FALSE(rbp_sample_on_cpu(&t, &no_pid, &unknown));
    t.status = RBPEEK_THREAD_RUNNABLE;

    /* With a pid, the kernel is asked: this thread is running, the blocker
     * sits in read(), a TID that does not exist cannot be judged. */
    CU_ASSERT_EQUAL_FATAL(pipe(blocker_pipe), 0);
    pthread_t th, sp;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th, NULL, blocker, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&sp, NULL, spinner, NULL), 0);
    for (int i = 0; i < 200 && (!blocker_tid || !spinner_tid); i++) usleep(1000);
    usleep(50000);   /* let it enter read() */
    rbpeek_sample_options live = {.on_cpu = 1, .pid = getpid()};
    t.native_tid = spinner_tid;
    CU_ASSERT_TRUE(rbp_sample_on_cpu(&t, &live, &unknown));
    CU_ASSERT_FALSE(unknown);
    t.native_tid = blocker_tid;
    CU_ASSERT_FALSE(rbp_sample_on_cpu(&t, &live, &unknown));
    CU_ASSERT_FALSE(unknown);
    t.native_tid = 0x7ffffff0;
    CU_ASSERT_TRUE(rbp_sample_on_cpu(&t, &live, &unknown));
    CU_ASSERT_TRUE(unknown);

    /* Through add_thread: the blocked one is filtered. */
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    t.native_tid = blocker_tid;
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &t, &live, &s, &unknown), RBP_SAMPLE_FILTERED);
    t.native_tid = spinner_tid;
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &t, &live, &s, &unknown), RBP_SAMPLE_ADDED);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);

    spinner_stop = 1;
    pthread_join(sp, NULL);
    CU_ASSERT_EQUAL(write(blocker_pipe[1], "x", 1), 1);
    pthread_join(th, NULL);
    close(blocker_pipe[0]);
    close(blocker_pipe[1]);
}

static void test_add_snapshot_args(void)
{
    rbpeek_profile *p = rbpeek_profile_new();
    rbpeek_sample_result r = {.added = 9};
    CU_ASSERT_EQUAL(rbpeek_profile_add_snapshot(p, NULL, NULL, &r), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(r.added, 0);
    CU_ASSERT_STRING_NOT_EQUAL(rbpeek_profile_error(p), "");
    CU_ASSERT_EQUAL(rbpeek_profile_add_snapshot(NULL, NULL, NULL, NULL), RBPEEK_ERR_ARG);
    rbpeek_profile_free(p);
}

static void test_deep_stack(void)
{
    /* Deeper than the scratch's first allocation, to exercise its growth. */
    enum { DEPTH = 5000 };
    rbpeek_frame *frames = calloc(DEPTH, sizeof *frames);
    CU_ASSERT_PTR_NOT_NULL_FATAL(frames);
    for (int i = 0; i < DEPTH; i++) {
        frames[i].label = i == DEPTH - 1 ? "<main>" : "Object#recurse";
        frames[i].path = "r.rb";
        frames[i].lineno = i == DEPTH - 1 ? 9 : 2;
    }
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    bool unknown;
    rbpeek_thread t = thread_with(frames, DEPTH);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &t, NULL, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &t, NULL, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbpeek_profile_total(p), 2);
    CU_ASSERT_EQUAL(rbpeek_profile_stack_count(p), 1);
    char *top = NULL;
    CU_ASSERT_EQUAL(rbpeek_profile_top(p, 1, 1, &top), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(top, "Object#recurse (r.rb:2)"));
    free(top);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);
    free(frames);
}

static const rbp_cu_test TESTS[] = {
    {"frame names, root-first order, merging", test_names_and_order},
    {"thread root frame", test_thread_root_frame},
    {"thread selection, failed and empty walks", test_selection_and_failures},
    {"on-CPU: Ruby status and the kernel's view", test_on_cpu},
    {"add_snapshot argument checks", test_add_snapshot_args},
    {"a 5,000-frame stack", test_deep_stack},
    {NULL, NULL},
};

RBP_CU_MAIN("sampler", TESTS)
