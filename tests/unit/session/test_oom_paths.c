/*
 * Every early return frees what it took (issue #12): each public operation
 * a debugger command runs, on a real Ruby's core, is run again and again
 * with its 1st, 2nd, ... allocation failing (fixture_oom.h wraps the core's
 * malloc family at link time; nothing in the core knows). After each run
 * and the freeing of its session, every block the core took must be free
 * again and no file descriptor may be left open. The operation must fail with an error or
 * succeed; it must not crash. The fixture is Debian's ruby3.1 parked by
 * fixtures/walk_target.rb and gcore'd (as test_walk_core does); without
 * them the test says it was skipped.
 *
 * Under valgrind (ctest -L memcheck) the same runs are checked for
 * definite leaks by memcheck too, with fewer failure points per operation.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_ruby_core.h"
#include "fixture_oom.h"
#include "rbpeek.h"


static char g_dir[512], g_core[600];
static int g_ready; /* 0 not tried, 1 ready, -1 unavailable */


static bool setup(void)
{
    if (g_ready) return g_ready > 0;
    g_ready = -1;
    if (!fixture_ruby_core("oom_paths", g_dir, sizeof g_dir, g_core, sizeof g_core)) return false;
    g_ready = 1;
    return true;
}

static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* One operation on an attached session; returns its status. */
typedef rbpeek_status (*op_fn)(rbpeek_session *s);

static rbpeek_status op_attach(rbpeek_session *s) { return rbpeek_session_attach(s); }

static rbpeek_status op_snapshot_render(rbpeek_session *s)
{
    rbpeek_snapshot *snap = NULL;
    rbpeek_status st = rbpeek_snapshot_take(s, 0, &snap);
    if (st != RBPEEK_OK) return st;
    char *out = NULL;
    st = rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_TEXT, -1, &out);
    rbpeek_free(out);
    out = NULL;
    if (st == RBPEEK_OK) st = rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_JSON, -1, &out);
    rbpeek_free(out);
    out = NULL;
    if (st == RBPEEK_OK) st = rbpeek_locks_render_json(s, snap, &out);
    rbpeek_free(out);
    out = NULL;
    if (st == RBPEEK_OK && rbpeek_snapshot_thread_count(snap) > 0)
        st = rbpeek_thread_locals(s, rbpeek_snapshot_thread(snap, 0), NULL, &out);
    rbpeek_free(out);
    rbpeek_snapshot_free(snap);
    return st;
}

static rbpeek_status op_profile(rbpeek_session *s)
{
    rbpeek_snapshot *snap = NULL;
    rbpeek_status st = rbpeek_snapshot_take(s, 0, &snap);
    if (st != RBPEEK_OK) return st;
    rbpeek_profile *p = rbpeek_profile_new();
    if (!p) {
        rbpeek_snapshot_free(snap);
        return RBPEEK_ERR_NOMEM;
    }
    st = rbpeek_profile_add_snapshot(p, snap, NULL, NULL);
    char path[700];
    snprintf(path, sizeof path, "%s/out.pb.gz", g_dir);
    if (st == RBPEEK_OK) st = rbpeek_profile_write_pprof(p, path, NULL);
    snprintf(path, sizeof path, "%s/out.folded", g_dir);
    if (st == RBPEEK_OK) st = rbpeek_profile_write_folded(p, path);
    if (st == RBPEEK_OK) st = rbpeek_profile_read_folded(p, path);
    snprintf(path, sizeof path, "%s/out.svg", g_dir);
    if (st == RBPEEK_OK) st = rbpeek_profile_write_svg(p, path, NULL);
    snprintf(path, sizeof path, "%s/out.speedscope.json", g_dir);
    if (st == RBPEEK_OK) st = rbpeek_profile_write_speedscope(p, path);
    rbpeek_profile_free(p);
    rbpeek_snapshot_free(snap);
    return st;
}

static rbpeek_status op_census(rbpeek_session *s)
{
    rbpeek_census *c = NULL;
    rbpeek_status st = rbpeek_heap_census(s, &c);
    if (st != RBPEEK_OK) return st;
    char *out = NULL;
    st = rbpeek_census_render(c, RBPEEK_FORMAT_TEXT, 20, 0, &out);
    rbpeek_free(out);
    out = NULL;
    if (st == RBPEEK_OK) st = rbpeek_census_render(c, RBPEEK_FORMAT_JSON, 20, 1, &out);
    rbpeek_free(out);
    rbpeek_census_free(c);
    return st;
}

static rbpeek_status op_dump(rbpeek_session *s)
{
    char path[700];
    snprintf(path, sizeof path, "%s/heap.json", g_dir);
    return rbpeek_heap_dump(s, path, NULL);
}

static uint64_t g_page_addr; /* a class object in the heap, for ruby page */

static rbpeek_status op_page(rbpeek_session *s)
{
    char *out = NULL;
    rbpeek_status st = rbpeek_page_render(s, g_page_addr, RBPEEK_FORMAT_TEXT, &out);
    rbpeek_free(out);
    out = NULL;
    if (st == RBPEEK_OK) st = rbpeek_page_render(s, g_page_addr, RBPEEK_FORMAT_JSON, &out);
    rbpeek_free(out);
    return st;
}

static rbpeek_status op_gc_describe(rbpeek_session *s)
{
    char *out = NULL;
    rbpeek_status st = rbpeek_gc_render(s, RBPEEK_FORMAT_JSON, &out);
    rbpeek_free(out);
    out = NULL;
    rbpeek_status st2 = rbpeek_session_describe(s, &out);
    rbpeek_free(out);
    return st != RBPEEK_OK ? st : st2;
}

/* Native stacks: the unwinder, each thread's unwind and merge. */
static rbpeek_status op_native(rbpeek_session *s)
{
    rbpeek_snapshot *snap = NULL;
    rbpeek_status st = rbpeek_snapshot_take_native(s, 0, RBPEEK_NATIVE_LINES, &snap);
    rbpeek_snapshot_free(snap);
    return st;
}

/* Runs op with its k-th allocation failing, for k = 0, stride, 2*stride,
 * ... up to the allocation count of a clean run, each on a new session
 * (attached cleanly unless the operation is attach itself). Reports how
 * many runs leaked blocks or descriptors. */
static void drive(const char *what, op_fn op, bool is_attach)
{
    if (!setup()) {
        CU_PASS("skipped: needs /usr/bin/ruby3.1 and gcore");
        return;
    }
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_use_core(s, g_core), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_attach(s), RBPEEK_OK);

    /* a clean run: fills the session's caches and counts the allocations */
    oom_fail_at(-1);
    size_t before = oom_allocs();
    CU_ASSERT_EQUAL(op(s), RBPEEK_OK);
    size_t total = oom_allocs() - before;
    CU_ASSERT(total > 0);

    const char *max_env = getenv("RBPEEK_OOM_RUNS");
    size_t max_runs = max_env && *max_env ? (size_t)strtoul(max_env, NULL, 10) : 400;
    if (max_runs == 0) max_runs = 1;
    size_t stride = total / max_runs + 1;
    size_t runs = 0, leaks = 0, fd_leaks = 0, never_failed = 0;
    const char *only = getenv("RBPEEK_OOM_ONLY"); /* "census": that operation; "census:36": that run alone */
    size_t only_k = 0;
    if (only && *only) {
        const char *colon = strrchr(only, ':');
        if (strncmp(only, what, colon ? (size_t)(colon - only) : strlen(only)) != 0) {
            rbpeek_session_free(s);
            return;
        }
        if (colon) { /* one failure point; without one, all of this operation's */
            only_k = (size_t)strtoul(colon + 1, NULL, 10);
            stride = total;
        }
    }
    for (size_t k = only_k; k < total; k += stride) {
        /* a session of its own for every run: what its caches hold goes
         * with it, so any block still live afterwards is a leak */
        oom_fail_at(-1);
        size_t live = oom_live();
        int fds = open_fds();
        rbpeek_session *t = rbpeek_session_new();
        rbpeek_session_use_core(t, g_core);
        if (!is_attach) rbpeek_session_attach(t);
        oom_fail_at((long)k);
        (void)op(t);
        bool hit = oom_failed();
        oom_fail_at(-1);
        if (!hit) never_failed++;
        rbpeek_session_free(t);
        if (oom_live() != live) {
            if (leaks < 5)
                fprintf(stderr, "%s: allocation %zu failing left %zd more live blocks\n", what, k,
                        (ssize_t)oom_live() - (ssize_t)live);
            leaks++;
        }
        if (open_fds() != fds) {
            if (fd_leaks < 5) fprintf(stderr, "%s: allocation %zu failing left a descriptor open\n", what, k);
            fd_leaks++;
        }
        runs++;
    }
    fprintf(stderr, "%s: %zu allocations, %zu runs with one failing (stride %zu), %zu leaked, %zu left fds, %zu never reached the failure\n",
            what, total, runs, stride, leaks, fd_leaks, never_failed);
    CU_ASSERT_EQUAL(leaks, 0);
    CU_ASSERT_EQUAL(fd_leaks, 0);
    rbpeek_session_free(s);
}

static void test_attach(void) { drive("attach", op_attach, true); }
static void test_snapshot_render(void) { drive("snapshot+render+locks+locals", op_snapshot_render, false); }
static void test_profile(void) { drive("profile+writers", op_profile, false); }
static void test_census(void) { drive("census", op_census, false); }
static void test_dump(void) { drive("heap dump", op_dump, false); }
static void test_page(void)
{
    if (setup() && !g_page_addr) {
        rbpeek_session *s = rbpeek_session_new();
        rbpeek_census *c = NULL;
        if (rbpeek_session_use_core(s, g_core) == RBPEEK_OK && rbpeek_session_attach(s) == RBPEEK_OK &&
            rbpeek_heap_census(s, &c) == RBPEEK_OK) {
            for (size_t i = 0; !g_page_addr && rbpeek_census_class_at(c, i); i++)
                g_page_addr = rbpeek_census_class_at(c, i)->address;
        }
        rbpeek_census_free(c);
        rbpeek_session_free(s);
        CU_ASSERT_FATAL(g_page_addr != 0);
    }
    drive("page", op_page, false);
}
static void test_gc_describe(void) { drive("gc+describe", op_gc_describe, false); }
static void test_native(void) { drive("native stacks", op_native, false); }

static const rbp_cu_test TESTS[] = {
    {"attach frees what it took when an allocation fails", test_attach},
    {"snapshot, render, locks, locals free what they took", test_snapshot_render},
    {"profile and its writers free what they took", test_profile},
    {"heap census frees what it took", test_census},
    {"heap dump frees what it took", test_dump},
    {"page frees what it took", test_page},
    {"gc and describe free what they took", test_gc_describe},
    {"native stacks free what they took", test_native},
    {NULL, NULL},
};

RBP_CU_MAIN("oom_paths", TESTS)
