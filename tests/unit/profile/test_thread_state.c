/*
 * Tests of thread states in samples (thread_state.c) and of merging
 * profiles (merge.c): the state of hand-built threads against real threads
 * of this test process (one spinning, one blocked in read(), one waiting on
 * a futex in pthread_cond_wait, as a thread waiting for Ruby's GVL does),
 * the GVL holder, the tally per thread, drop_idle and the process root
 * frame, and a merge of two profiles compared byte for byte as folded text.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_files.h"
#include "profile/profile.h"
#include "profile/sampler.h"
#include "profile/thread_state.h"
#include "rbpeek.h"
#include "fixture_emulator.h"

static const rbpeek_frame FRAMES[] = {
    {.label = "Object#work", .path = "/app/w.rb", .lineno = 4, .kind = RBPEEK_FRAME_RUBY},
    {.label = "<main>", .path = "/app/w.rb", .lineno = 9, .kind = RBPEEK_FRAME_RUBY},
};

static rbpeek_thread thread_of(int64_t tid, uint64_t addr, int32_t status)
{
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    t.frames = FRAMES;
    t.nframes = 2;
    t.native_tid = tid;
    t.thread_addr = addr;
    t.status = status;
    return t;
}

static volatile pid_t spin_tid, read_tid, cond_tid;
static volatile int stop_all;
static int pipefd[2];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;

static void *spinner(void *a)
{
    (void)a;
    spin_tid = (pid_t)syscall(SYS_gettid);
    while (!stop_all) __asm__ volatile("" ::: "memory");
    return NULL;
}

static void *reader(void *a)
{
    (void)a;
    read_tid = (pid_t)syscall(SYS_gettid);
    char c;
    ssize_t r = read(pipefd[0], &c, 1);
    (void)r;
    return NULL;
}

static void *waiter(void *a)
{
    (void)a;
    pthread_mutex_lock(&mu);
    cond_tid = (pid_t)syscall(SYS_gettid);
    while (!stop_all) pthread_cond_wait(&cv, &mu);
    pthread_mutex_unlock(&mu);
    return NULL;
}

static char *folded(rbpeek_profile *p)
{
    char path[256];
    tmp_path(path, sizeof path, "thread_state", "out.folded");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_folded(p, path), RBPEEK_OK);
    char *buf = slurp(path, NULL);
    unlink(path);
    return buf;
}

static void test_states(void)
{
    if (fixture_emulated("/proc/PID/task/TID/syscall of the test's threads shows the emulator's own host system "
                         "calls (x86-64 numbers), not the aarch64 ones the threads made")) return;
    CU_ASSERT_EQUAL_FATAL(pipe(pipefd), 0);
    pthread_t a, b, c;
    CU_ASSERT_EQUAL_FATAL(pthread_create(&a, NULL, spinner, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&b, NULL, reader, NULL), 0);
    CU_ASSERT_EQUAL_FATAL(pthread_create(&c, NULL, waiter, NULL), 0);
    for (int i = 0; i < 500 && (!spin_tid || !read_tid || !cond_tid); i++) usleep(1000);
    usleep(100000);   /* into read() and the futex */
    int pid = getpid();
    CU_ASSERT_EQUAL(rbp_thread_syscall(NULL, pid, read_tid), SYS_read);
    CU_ASSERT_EQUAL(rbp_thread_syscall(NULL, pid, cond_tid), SYS_futex);
    CU_ASSERT_EQUAL(rbp_thread_syscall(NULL, pid, spin_tid), -1);
    CU_ASSERT_EQUAL(rbp_thread_syscall(NULL, pid, 0x7ffffff0), -2);
    CU_ASSERT_EQUAL(rbp_thread_syscall(NULL, 0, spin_tid), -2);

    rbp_gvl_view gvl = {.known = true, .n = 1, .th = {0x1000}};
    rbpeek_thread holder = thread_of(cond_tid, 0x1000, RBPEEK_THREAD_RUNNABLE);
    rbpeek_thread waiting = thread_of(cond_tid, 0x2000, RBPEEK_THREAD_RUNNABLE);
    rbpeek_thread io = thread_of(read_tid, 0x3000, RBPEEK_THREAD_RUNNABLE);
    rbpeek_thread nogvl = thread_of(spin_tid, 0x4000, RBPEEK_THREAD_RUNNABLE);
    rbpeek_thread sleeping = thread_of(spin_tid, 0x5000, RBPEEK_THREAD_STOPPED_FOREVER);
    /* The holder runs whatever the kernel says; in GC when the process collects. */
    CU_ASSERT_EQUAL(rbp_thread_state_of(&holder, &gvl, rbp_thread_syscall(NULL, pid, cond_tid)), RBPEEK_STATE_RUNNING);
    holder.gc = RBPEEK_GC_MARKING;   /* the snapshot's mark: a GC step runs on it */
    CU_ASSERT_EQUAL(rbp_thread_state_of(&holder, &gvl, -1), RBPEEK_STATE_GC);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&holder, &(rbp_gvl_view){0}, -1), RBPEEK_STATE_GC);
    holder.gc = RBPEEK_GC_NONE;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&waiting, &gvl, rbp_thread_syscall(NULL, pid, cond_tid)), RBPEEK_STATE_GVL_WAIT);
    /* Runnable for Ruby and not the holder: waiting for the GVL, whatever
     * the kernel says (in a blocking region Ruby would say "stopped"). */
    CU_ASSERT_EQUAL(rbp_thread_state_of(&io, &gvl, rbp_thread_syscall(NULL, pid, read_tid)), RBPEEK_STATE_GVL_WAIT);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&nogvl, &gvl, rbp_thread_syscall(NULL, pid, spin_tid)), RBPEEK_STATE_GVL_WAIT);
    /* The holder not known: the kernel decides. */
    rbp_gvl_view unknown_gvl = {0};
    CU_ASSERT_EQUAL(rbp_thread_state_of(&waiting, &unknown_gvl, rbp_thread_syscall(NULL, pid, cond_tid)),
                    RBPEEK_STATE_GVL_WAIT);
    /* runnable in read: it holds the GVL there (blocking IO would be "stopped") */
    CU_ASSERT_EQUAL(rbp_thread_state_of(&io, &unknown_gvl, rbp_thread_syscall(NULL, pid, read_tid)), RBPEEK_STATE_RUNNING);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&nogvl, &unknown_gvl, rbp_thread_syscall(NULL, pid, spin_tid)),
                    RBPEEK_STATE_RUNNING);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&sleeping, &gvl, -1), RBPEEK_STATE_BLOCKED);
    /* Back from a blocking region (IO#write done), waiting for the GVL on a
     * futex with Ruby's status still "stopped"; asleep in Kernel#sleep on a
     * futex too, but blocked; in write() itself, blocked. */
    static const rbpeek_frame IO_WRITE[] = {
        {.label = "IO#write", .path = "/app/w.rb", .lineno = 3, .kind = RBPEEK_FRAME_CFUNC},
    };
    static const rbpeek_frame SLEEP[] = {
        {.label = "sleep", .path = "/app/w.rb", .lineno = 5, .kind = RBPEEK_FRAME_CFUNC},
    };
    rbpeek_thread back = thread_of(cond_tid, 0x6000, RBPEEK_THREAD_STOPPED);
    back.frames = IO_WRITE;
    back.nframes = 1;
    CU_ASSERT_TRUE(rbp_thread_state_asks_kernel(&back));
    CU_ASSERT_EQUAL(rbp_thread_state_of(&back, &gvl, SYS_futex), RBPEEK_STATE_GVL_WAIT);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&back, &gvl, SYS_write), RBPEEK_STATE_BLOCKED);
    back.frames = SLEEP;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&back, &gvl, SYS_futex), RBPEEK_STATE_BLOCKED);
    back.status = RBPEEK_THREAD_STOPPED_FOREVER;
    back.frames = IO_WRITE;
    CU_ASSERT_FALSE(rbp_thread_state_asks_kernel(&back));
    CU_ASSERT_EQUAL(rbp_thread_state_of(&back, &gvl, SYS_futex), RBPEEK_STATE_BLOCKED);
    /* Blocked without the GVL's view (what the sampler need not unwind):
     * stopped forever; stopped, asking the kernel: in read() blocked, on a
     * futex back from IO#write waiting for the GVL; never a runnable one. */
    CU_ASSERT_TRUE(rbp_thread_state_blocked(NULL, &back, pid, cond_tid));
    back.status = RBPEEK_THREAD_STOPPED;
    CU_ASSERT_FALSE(rbp_thread_state_blocked(NULL, &back, pid, cond_tid));
    CU_ASSERT_TRUE(rbp_thread_state_blocked(NULL, &back, pid, read_tid));
    CU_ASSERT_FALSE(rbp_thread_state_blocked(NULL, &waiting, pid, cond_tid));
    CU_ASSERT_TRUE(rbp_thread_state_blocked(NULL, &sleeping, pid, spin_tid));
    /* Not known who holds it, and the kernel not asked: runnable runs. */
    rbp_gvl_view none = {0};
    CU_ASSERT_EQUAL(rbp_thread_state_of(&waiting, &none, -2), RBPEEK_STATE_RUNNING);

    /* Ruby's scheduler's word (rbpeek_thread.gvl) over the kernel's and the
     * frames': queued for the GVL it waits, whatever its status (back from
     * IO#write or a sleep, still "stopped"; under M:N on no futex of its
     * own); a stopped thread not queued is blocked even on a futex in a C
     * method; a runnable one holds it or waits for it. */
    rbpeek_thread q = thread_of(spin_tid, 0x7000, RBPEEK_THREAD_STOPPED);
    q.frames = IO_WRITE;
    q.nframes = 1;
    q.gvl = RBPEEK_GVL_QUEUED;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, -1), RBPEEK_STATE_GVL_WAIT);
    CU_ASSERT_FALSE(rbp_thread_state_blocked(NULL, &q, pid, spin_tid));
    q.frames = SLEEP;
    q.status = RBPEEK_THREAD_STOPPED_FOREVER;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &gvl, SYS_futex), RBPEEK_STATE_GVL_WAIT);
    q.gvl = RBPEEK_GVL_NONE;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &gvl, SYS_futex), RBPEEK_STATE_BLOCKED);
    q.status = RBPEEK_THREAD_STOPPED;
    q.frames = IO_WRITE;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &gvl, SYS_futex), RBPEEK_STATE_BLOCKED);
    q.status = RBPEEK_THREAD_RUNNABLE;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, -1), RBPEEK_STATE_GVL_WAIT);   /* handing it over */
    q.gvl = RBPEEK_GVL_NOT_QUEUED;   /* the GVL changing hands: the queue still read */
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, SYS_futex), RBPEEK_STATE_GVL_WAIT);
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, -1), RBPEEK_STATE_RUNNING);
    q.status = RBPEEK_THREAD_STOPPED;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &gvl, SYS_futex), RBPEEK_STATE_BLOCKED);   /* not queued: its IO is on */
    q.status = RBPEEK_THREAD_RUNNABLE;
    q.gvl = RBPEEK_GVL_HOLDS;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, SYS_futex), RBPEEK_STATE_RUNNING);
    q.gc = RBPEEK_GC_SWEEPING;
    CU_ASSERT_EQUAL(rbp_thread_state_of(&q, &none, -1), RBPEEK_STATE_GC);
    CU_ASSERT_STRING_EQUAL(rbpeek_gvl_wait_label(), "[GVL wait]");

    /* Through the sampler: each thread tallied, the blocked ones left out
     * with drop_idle, every stack under the process's root frame. */
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch s = {0};
    s.gvl = gvl;
    rbpeek_sample_options opt = {.pid = pid, .drop_idle = 1, .root_frame = "ruby w.rb (pid 7)"};
    bool unknown;
    holder.name = "web";
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &holder, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
        CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &waiting, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
        CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &io, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
        CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &sleeping, &opt, &s, &unknown), RBP_SAMPLE_FILTERED);
    }
    opt.drop_idle = 0;
    CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &sleeping, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_count(p), 4);
    rbpeek_thread_tally tt;
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 0, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.pid, pid);
    CU_ASSERT_EQUAL(tt.tid, cond_tid);
    CU_ASSERT_STRING_EQUAL(tt.name, "web");
    CU_ASSERT_EQUAL(tt.samples, 3);
    CU_ASSERT_EQUAL(tt.states[RBPEEK_STATE_RUNNING], 3);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 1, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.states[RBPEEK_STATE_GVL_WAIT], 3);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 2, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.states[RBPEEK_STATE_GVL_WAIT], 3);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 3, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.samples, 4);
    CU_ASSERT_EQUAL(tt.states[RBPEEK_STATE_BLOCKED], 4);
    /* Recorded: what the profile holds. The sleeping thread's 3 samples
     * left out by drop_idle are seen, not recorded; every thread's
     * recorded samples add up to the profile's total (the summaries'
     * denominator, the folded file's sum). */
    CU_ASSERT_EQUAL(tt.recorded[RBPEEK_STATE_BLOCKED], 1);
    uint64_t recorded = 0;
    for (size_t i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, i, &tt), RBPEEK_OK);
        for (int k = 0; k < RBPEEK_THREAD_STATES; k++) recorded += tt.recorded[k];
    }
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 0, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.recorded[RBPEEK_STATE_RUNNING], 3);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 1, &tt), RBPEEK_OK);
    CU_ASSERT_EQUAL(tt.recorded[RBPEEK_STATE_GVL_WAIT], 3);
    CU_ASSERT_EQUAL(recorded, rbpeek_profile_total(p));
    CU_ASSERT_EQUAL(recorded, 10);
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(p, 4, &tt), RBPEEK_ERR_ARG);
    char *text = folded(p);
    /* a wait for the GVL names itself on top of the line that waits */
    CU_ASSERT_STRING_EQUAL(text, "ruby w.rb (pid 7);<main> (/app/w.rb:9);Object#work (/app/w.rb:4) 4\n"
                                 "ruby w.rb (pid 7);<main> (/app/w.rb:9);Object#work (/app/w.rb:4);[GVL wait] 6\n");
    free(text);
    rbp_sample_scratch_free(&s);
    rbpeek_profile_free(p);

    stop_all = 1;
    pthread_mutex_lock(&mu);
    pthread_cond_broadcast(&cv);
    pthread_mutex_unlock(&mu);
    CU_ASSERT_EQUAL(write(pipefd[1], "x", 1), 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    pthread_join(c, NULL);
    close(pipefd[0]);
    close(pipefd[1]);
}

static void add(rbpeek_profile *p, const char *root, int64_t pid, int64_t tid, int n)
{
    rbp_sample_scratch s = {0};
    rbpeek_sample_options opt = {.root_frame = root, .per_thread = 1};
    rbpeek_thread t = thread_of(tid, 0x1000 + (uint64_t)tid, RBPEEK_THREAD_STOPPED);
    (void)pid;
    bool unknown;
    for (int i = 0; i < n; i++) CU_ASSERT_EQUAL(rbp_sample_add_thread(p, &t, &opt, &s, &unknown), RBP_SAMPLE_ADDED);
    rbp_sample_scratch_free(&s);
}

static void test_merge(void)
{
    rbpeek_profile *a = rbpeek_profile_new(), *b = rbpeek_profile_new(), *all = rbpeek_profile_new();
    add(a, "ruby one (pid 11)", 11, 11, 2);
    add(b, "ruby two (pid 12)", 12, 12, 3);
    add(b, "ruby one (pid 11)", 11, 11, 1);   /* the same stack from another profile adds up */
    const char *names[] = {"a", "b"};
    CU_ASSERT_EQUAL(rbpeek_profile_add_stack(b, names, 2, 5), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_merge(all, a), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_merge(all, b), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_profile_merge(all, all), RBPEEK_ERR_ARG);
    CU_ASSERT_EQUAL(rbpeek_profile_total(all), 11);
    char *text = folded(all);
    CU_ASSERT_STRING_EQUAL(text,
                           "a;b 5\n"
                           "ruby one (pid 11);Thread (tid 11);<main> (/app/w.rb:9);Object#work (/app/w.rb:4) 3\n"
                           "ruby two (pid 12);Thread (tid 12);<main> (/app/w.rb:9);Object#work (/app/w.rb:4) 3\n");
    free(text);
    /* speedscope: one profile per process and thread, named by them, its
     * stacks without those frames; the stack under neither apart. */
    char path[256];
    tmp_path(path, sizeof path, "thread_state", "all.speedscope.json");
    CU_ASSERT_EQUAL_FATAL(rbpeek_profile_write_speedscope(all, path), RBPEEK_OK);
    char *ss = slurp(path, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(ss);
    unlink(path);
    size_t nprof = 0;
    for (const char *q = ss; (q = strstr(q, "\"type\":\"sampled\"")); q++) nprof++;
    CU_ASSERT_EQUAL(nprof, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(ss, "\"name\":\"ruby one (pid 11) / Thread (tid 11)\",\"unit\":\"none\","
                                      "\"startValue\":0,\"endValue\":3"));
    CU_ASSERT_PTR_NOT_NULL(strstr(ss, "\"name\":\"ruby two (pid 12) / Thread (tid 12)\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(ss, "\"name\":\"(other stacks)\",\"unit\":\"none\",\"startValue\":0,"
                                      "\"endValue\":5"));
    free(ss);
    /* Tallies: tid 11 seen 3 times over both profiles, tid 12 three times. */
    CU_ASSERT_EQUAL(rbpeek_profile_thread_count(all), 2);
    rbpeek_thread_tally t;
    CU_ASSERT_EQUAL(rbpeek_profile_thread_tally(all, 0, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(t.tid, 11);
    CU_ASSERT_EQUAL(t.samples, 3);
    CU_ASSERT_EQUAL(t.states[RBPEEK_STATE_BLOCKED], 3);
    CU_ASSERT_EQUAL(t.recorded[RBPEEK_STATE_BLOCKED], 3);   /* kept: no drop_idle */
    rbpeek_profile_free(a);
    rbpeek_profile_free(b);
    rbpeek_profile_free(all);
}

static const rbp_cu_test TESTS[] = {
    {"states of real threads, the tally, drop_idle, the process root", test_states},
    {"merging profiles: stacks and tallies", test_merge},
    {NULL, NULL},
};

RBP_CU_MAIN("thread_state", TESTS)
