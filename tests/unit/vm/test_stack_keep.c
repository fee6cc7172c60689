/*
 * The Ruby stacks a sampler keeps from one sample to the next
 * (vm/stack_keep.c): a thread's stack comes back only after it was seen
 * asleep under a stamp and walked again at a later sample under the same
 * stamp; it comes back as it was walked (a copy, strings included: the
 * walk's arena dies with its snapshot), origins and saved line too; a stamp,
 * TID or execution context that moved drops it; a torn or failed walk is
 * not kept; a thread not met during a sample is dropped by the sweep that
 * ends it; and what is kept is bounded.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "vm/stack_keep.h"

#define TH 0x5555000010a0u
#define EC 0x5555000020b0u

/* A walked stack of n frames in a, distinct per thread and frame. */
static void walked(rbp_arena *a, uint64_t th, size_t n, rbpeek_thread *t, uint32_t **origin)
{
    memset(t, 0, sizeof *t);
    rbpeek_frame *f = rbp_arena_alloc(a, n * sizeof *f);
    *origin = rbp_arena_alloc(a, n * sizeof **origin);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*origin);
    for (size_t k = 0; k < n; k++) {
        char label[64], path[64];
        snprintf(label, sizeof label, "Object#m%zu_%llx", k, (unsigned long long)th);
        snprintf(path, sizeof path, "/app/lib/m%zu.rb", k);
        f[k] = (rbpeek_frame){.label = rbp_arena_strdup(a, label), .path = rbp_arena_strdup(a, path),
                              .absolute_path = k % 2 ? NULL : rbp_arena_strdup(a, path), .lineno = (int32_t)(10 + k),
                              .first_lineno = 9, .iseq = 0x7000 + k, .lineno_unknown = k == 0};
        (*origin)[k] = (uint32_t)(2 * k);
    }
    t->frames = f;
    t->nframes = n;
    t->truncated = n > 3;
}

static void test_kept_after_a_second_walk_under_one_stamp(void)
{
    rbp_stack_keep *k = rbp_stack_keep_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    rbp_arena walk = {0}, snap = {0};
    rbpeek_thread t, out;
    uint32_t *origin, *got_origin;
    int32_t saved;
    uint64_t st[2] = {41, 123456789};
    /* first met: walked, and noted asleep */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, &got_origin, &saved), RBP_KEEP_NEW);
    rbp_stack_keep_note(k, TH, 77, EC, st, true);
    rbp_stack_keep_sweep(k);
    /* the next sample, not run: walked again (the first walk's pages may
     * predate the stamp), and that walk kept */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, &got_origin, &saved), RBP_KEEP_WALK);
    walked(&walk, TH, 6, &t, &origin);
    rbpeek_frame want[6];
    memcpy(want, t.frames, sizeof want);
    char *labels[6];
    for (size_t i = 0; i < 6; i++) labels[i] = strdup(t.frames[i].label);
    rbp_stack_keep_put(k, TH, &t, origin, 17);
    rbp_arena_free(&walk); /* the walk's snapshot is freed: what was kept is a copy */
    rbp_stack_keep_sweep(k);
    /* the sample after: given back, strings, origins and saved line */
    memset(&out, 0, sizeof out);
    got_origin = NULL;
    saved = 0;
    CU_ASSERT_EQUAL_FATAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, &got_origin, &saved), RBP_KEEP_HIT);
    CU_ASSERT_EQUAL_FATAL(out.nframes, 6);
    for (size_t i = 0; i < 6; i++) {
        CU_ASSERT_STRING_EQUAL(out.frames[i].label, labels[i]);
        CU_ASSERT_EQUAL(out.frames[i].lineno, (int32_t)(10 + i));
        CU_ASSERT_EQUAL(out.frames[i].absolute_path == NULL, i % 2 == 1);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got_origin);
        CU_ASSERT_EQUAL(got_origin[i], 2 * i);
        free(labels[i]);
    }
    CU_ASSERT_EQUAL(out.truncated, 1);
    CU_ASSERT_EQUAL(saved, 17);
    /* without origins asked (no native stacks): given too */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_HIT);
    CU_ASSERT_EQUAL(rbp_stack_keep_hits(k), 2);
    CU_ASSERT_EQUAL(out.frames[3].iseq, want[3].iseq);
    rbp_arena_free(&snap);
    rbp_stack_keep_free(k);
}

/* A kept stack of 4 frames for TH (tid 77, EC) under st. */
static void keep_one(rbp_stack_keep *k, const uint64_t st[2])
{
    rbp_arena walk = {0}, snap = {0};
    rbpeek_thread t, out;
    uint32_t *origin;
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    rbp_stack_keep_note(k, TH, 77, EC, st, true);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_WALK);
    walked(&walk, TH, 4, &t, &origin);
    rbp_stack_keep_put(k, TH, &t, origin, 0);
    rbp_arena_free(&walk);
    rbp_arena_free(&snap);
}

static void test_dropped_when_the_thread_ran(void)
{
    rbp_stack_keep *k = rbp_stack_keep_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    rbp_arena snap = {0};
    rbpeek_thread out;
    uint64_t st[2] = {41, 123456789};
    const uint64_t moved[][2] = {{42, 123456789}, {41, 123456790}};
    for (size_t i = 0; i < 2; i++) {
        keep_one(k, st);
        /* it ran (its runs, or its time on a CPU, moved): walked anew, and
         * what was kept is gone even under the old stamp */
        CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, moved[i], &snap, &out, NULL, NULL), RBP_KEEP_NEW);
        rbp_stack_keep_note(k, TH, 77, EC, moved[i], true);
        CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    }
    /* another fiber (execution context), or the same rb_thread_t on another TID */
    keep_one(k, st);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC + 0x100, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    keep_one(k, st);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 78, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    /* a thread not seen asleep after its stamp (on a CPU: its time there is
     * brought up to date only at a tick) is never kept */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    rbp_stack_keep_note(k, TH, 77, EC, st, false);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    CU_ASSERT_EQUAL(rbp_stack_keep_hits(k), 0);
    rbp_arena_free(&snap);
    rbp_stack_keep_free(k);
}

static void test_torn_or_failed_walks_not_kept(void)
{
    rbp_stack_keep *k = rbp_stack_keep_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    rbp_arena walk = {0}, snap = {0};
    rbpeek_thread t, out;
    uint32_t *origin;
    uint64_t st[2] = {5, 6};
    for (int bad = 0; bad < 2; bad++) {
        CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
        rbp_stack_keep_note(k, TH, 77, EC, st, true);
        CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_WALK);
        walked(&walk, TH, 3, &t, &origin);
        if (bad) t.torn = 1;
        else t.error = "its stack changed while it was read (torn)";
        rbp_stack_keep_put(k, TH, &t, origin, 0);
        /* walked again at the next sample, not given */
        CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_WALK);
        rbp_stack_keep_note(k, TH, 77, EC, (uint64_t[2]){0, 0}, false);   /* start over */
    }
    /* kept without origins, asked with them (native stacks began): walked */
    keep_one(k, st);
    uint32_t *got;
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, &got, NULL), RBP_KEEP_HIT);
    walked(&walk, TH, 3, &t, &origin);
    rbp_stack_keep_put(k, TH, &t, NULL, 0);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, TH, 77, EC, st, &snap, &out, &got, NULL), RBP_KEEP_WALK);
    rbp_arena_free(&walk);
    rbp_arena_free(&snap);
    rbp_stack_keep_free(k);
}

static void test_sweep_and_bounds(void)
{
    rbp_stack_keep *k = rbp_stack_keep_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    rbp_arena walk = {0}, snap = {0};
    rbpeek_thread t, out;
    uint32_t *origin;
    uint64_t st[2] = {1, 2};
    /* more threads than the bound: the ones past it are walked every time */
    for (uint64_t i = 1; i <= RBP_STACK_KEEP_THREADS + 8; i++) rbp_stack_keep_note(k, i, (int64_t)i, EC, st, true);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, RBP_STACK_KEEP_THREADS, RBP_STACK_KEEP_THREADS, EC, st, &snap, &out, NULL,
                                       NULL), RBP_KEEP_WALK);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, RBP_STACK_KEEP_THREADS + 1, RBP_STACK_KEEP_THREADS + 1, EC, st, &snap, &out,
                                       NULL, NULL), RBP_KEEP_NEW);
    rbp_stack_keep_sweep(k); /* ends the sample: all were met */
    /* the next sample meets thread 1 alone: the others are dropped at its end */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, 1, 1, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_WALK);
    rbp_stack_keep_sweep(k);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, 2, 2, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    /* room again: a new thread is noted */
    rbp_stack_keep_note(k, RBP_STACK_KEEP_THREADS + 1, RBP_STACK_KEEP_THREADS + 1, EC, st, true);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, RBP_STACK_KEEP_THREADS + 1, RBP_STACK_KEEP_THREADS + 1, EC, st, &snap, &out,
                                       NULL, NULL), RBP_KEEP_WALK);
    /* a stack deeper than the bound is not kept */
    walked(&walk, 1, RBP_STACK_KEEP_FRAMES + 1, &t, &origin);
    rbp_stack_keep_put(k, 1, &t, origin, 0);
    CU_ASSERT_EQUAL(rbp_stack_keep_get(k, 1, 1, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_WALK);
    /* nothing for a NULL keep or a thread never noted */
    CU_ASSERT_EQUAL(rbp_stack_keep_get(NULL, 1, 1, EC, st, &snap, &out, NULL, NULL), RBP_KEEP_NEW);
    rbp_stack_keep_put(k, 0xdead, &t, origin, 0);
    rbp_stack_keep_note(NULL, 1, 1, EC, st, true);
    rbp_stack_keep_sweep(NULL);
    CU_ASSERT_EQUAL(rbp_stack_keep_hits(NULL), 0);
    rbp_arena_free(&walk);
    rbp_arena_free(&snap);
    rbp_stack_keep_free(k);
    rbp_stack_keep_free(NULL);
}

static const rbp_cu_test TESTS[] = {
    {"a stack is kept from the second walk under one stamp, and given back whole",
     test_kept_after_a_second_walk_under_one_stamp},
    {"a thread that ran, changed fiber or TID, or was not seen asleep is walked anew",
     test_dropped_when_the_thread_ran},
    {"torn or failed walks, and walks without the origins asked, are not given", test_torn_or_failed_walks_not_kept},
    {"a sample's sweep drops the threads it did not meet; threads and frames bounded", test_sweep_and_bounds},
    {NULL, NULL},
};

RBP_CU_MAIN("stack_keep", TESTS)
