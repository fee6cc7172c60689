/*
 * The frame cache (native/frame_cache.c), a sampler's unwinds of parked
 * threads kept from one sample to the next: a thread's frames come back
 * only under the stamp and the unwinder generation they were kept with, and
 * as they were kept (a copy: the caller's buffer is reused at the next
 * unwind); a stamp or generation that moved drops them; a thread neither
 * found nor kept during a sample is dropped by the sweep that ends it; and
 * what is kept is bounded in threads and in frames per thread.
 */
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "native/native.h"

/* n frames for thread tid, distinct per thread and per frame. */
static void frames_of(int64_t tid, size_t n, rbpeek_native_frame *f, rbp_native_extra *x)
{
    static const char *const names[] = {"clock_nanosleep", "rb_thread_sleep", "rb_vm_exec", "main"};
    for (size_t k = 0; k < n; k++) {
        f[k] = (rbpeek_native_frame){.pc = 0x400000u + (uint64_t)tid * 0x10000u + k * 16u,
                                     .symbol = names[k % 4], .module = "libruby.so", .activation = k == 0};
        x[k] = (rbp_native_extra){.lo = f[k].pc - 8, .hi = f[k].pc + 8, .jit = k % 3 == 1};
    }
}

static void same(const rbpeek_native_frame *a, const rbp_native_extra *ax, const rbpeek_native_frame *b,
                 const rbp_native_extra *bx, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        CU_ASSERT_EQUAL(a[k].pc, b[k].pc);
        CU_ASSERT_PTR_EQUAL(a[k].symbol, b[k].symbol);
        CU_ASSERT_EQUAL(a[k].activation, b[k].activation);
        CU_ASSERT_EQUAL(ax[k].lo, bx[k].lo);
        CU_ASSERT_EQUAL(ax[k].jit, bx[k].jit);
    }
}

static void test_reuse_only_under_the_same_stamp(void)
{
    rbp_frame_cache *c = rbp_frame_cache_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    rbpeek_native_frame f[12], want[12];
    rbp_native_extra x[12], wantx[12];
    const rbpeek_native_frame *gf;
    const rbp_native_extra *gx;
    size_t n = 0;
    uint64_t st[2] = {1234, 987654321};
    frames_of(77, 12, f, x);
    memcpy(want, f, sizeof f);
    memcpy(wantx, x, sizeof x);
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 77, st, &gf, &gx, &n)); /* nothing kept yet */
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, 77, st, f, x, 12));
    memset(f, 0, sizeof f); /* the unwinder's buffer, reused at the next unwind */
    memset(x, 0, sizeof x);
    rbp_frame_cache_sweep(c);
    /* the next sample: not run (same runs and run time) */
    CU_ASSERT_TRUE_FATAL(rbp_frame_cache_get(c, 1, 77, st, &gf, &gx, &n));
    CU_ASSERT_EQUAL_FATAL(n, 12);
    same(gf, gx, want, wantx, n);
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 78, st, &gf, &gx, &n)); /* another thread */
    rbp_frame_cache_sweep(c);
    /* it ran: its count of runs moved; then it is gone for good */
    uint64_t ran[2] = {1235, 987654321};
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 77, ran, &gf, &gx, &n));
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 77, st, &gf, &gx, &n));
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 0);
    /* its time on a CPU moved alone */
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, 77, st, want, wantx, 12));
    uint64_t longer[2] = {1234, 987654322};
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 77, longer, &gf, &gx, &n));
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 0);
    /* the unwinder's modules or JIT regions changed: the strings may be gone */
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, 77, st, want, wantx, 12));
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 2, 77, st, &gf, &gx, &n));
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 0);
    /* a new unwind replaces what was kept */
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 2, 77, st, want, wantx, 12));
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 2, 77, ran, want + 2, wantx + 2, 10));
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 1);
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 2, 77, st, &gf, &gx, &n));
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 2, 77, ran, want + 2, wantx + 2, 10));
    CU_ASSERT_TRUE_FATAL(rbp_frame_cache_get(c, 2, 77, ran, &gf, &gx, &n));
    CU_ASSERT_EQUAL_FATAL(n, 10);
    same(gf, gx, want + 2, wantx + 2, n);
    CU_ASSERT_EQUAL(rbp_frame_cache_hits(c), 2);
    rbp_frame_cache_free(c);
}

static void test_sweep_drops_threads_not_met(void)
{
    rbp_frame_cache *c = rbp_frame_cache_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    rbpeek_native_frame f[4];
    rbp_native_extra x[4];
    const rbpeek_native_frame *gf;
    const rbp_native_extra *gx;
    size_t n;
    uint64_t st[2] = {5, 6};
    for (int64_t tid = 100; tid < 110; tid++) {
        frames_of(tid, 4, f, x);
        CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, tid, st, f, x, 4));
    }
    rbp_frame_cache_sweep(c); /* all kept during the sample: all stay */
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 10);
    /* the next sample meets the even ones only (the odd ones exited, or held the GVL) */
    for (int64_t tid = 100; tid < 110; tid += 2) CU_ASSERT_TRUE(rbp_frame_cache_get(c, 1, tid, st, &gf, &gx, &n));
    rbp_frame_cache_sweep(c);
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 5);
    for (int64_t tid = 100; tid < 110; tid++)
        CU_ASSERT_EQUAL(rbp_frame_cache_get(c, 1, tid, st, &gf, &gx, &n), tid % 2 == 0);
    /* a sample that meets none (it failed): all dropped */
    rbp_frame_cache_sweep(c);
    rbp_frame_cache_sweep(c);
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), 0);
    rbp_frame_cache_free(c);
    rbp_frame_cache_free(NULL);
}

static void test_bounded(void)
{
    rbp_frame_cache *c = rbp_frame_cache_new();
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    size_t big = RBP_FRAME_CACHE_FRAMES + 1;
    rbpeek_native_frame *f = calloc(big, sizeof *f);
    rbp_native_extra *x = calloc(big, sizeof *x);
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_PTR_NOT_NULL_FATAL(x);
    const rbpeek_native_frame *gf;
    const rbp_native_extra *gx;
    size_t n;
    uint64_t st[2] = {1, 2};
    frames_of(1, big, f, x);
    /* a stack deeper than the bound is not kept (and drops what was) */
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, 1, st, f, x, RBP_FRAME_CACHE_FRAMES));
    CU_ASSERT_FALSE(rbp_frame_cache_put(c, 1, 1, st, f, x, big));
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 1, st, &gf, &gx, &n));
    CU_ASSERT_FALSE(rbp_frame_cache_put(c, 1, 1, st, f, x, 0)); /* nor an empty one */
    CU_ASSERT_FALSE(rbp_frame_cache_put(c, 1, 0, st, f, x, 3)); /* nor a thread without id */
    /* no more threads than the bound; the ones kept stay usable */
    for (int64_t tid = 1; tid <= RBP_FRAME_CACHE_THREADS; tid++)
        CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, tid, st, f, x, 3));
    CU_ASSERT_FALSE(rbp_frame_cache_put(c, 1, RBP_FRAME_CACHE_THREADS + 1, st, f, x, 3));
    CU_ASSERT_EQUAL(rbp_frame_cache_count(c), RBP_FRAME_CACHE_THREADS);
    CU_ASSERT_TRUE(rbp_frame_cache_get(c, 1, RBP_FRAME_CACHE_THREADS, st, &gf, &gx, &n));
    CU_ASSERT_EQUAL(n, 3);
    /* one dropped: room for another */
    uint64_t moved[2] = {9, 9};
    CU_ASSERT_FALSE(rbp_frame_cache_get(c, 1, 1, moved, &gf, &gx, &n));
    CU_ASSERT_TRUE(rbp_frame_cache_put(c, 1, RBP_FRAME_CACHE_THREADS + 1, st, f, x, 3));
    free(f);
    free(x);
    rbp_frame_cache_free(c);
}

static const rbp_cu_test TESTS[] = {
    {"frames come back only under the stamp and generation they were kept with", test_reuse_only_under_the_same_stamp},
    {"a sample's sweep drops the threads it did not meet", test_sweep_drops_threads_not_met},
    {"bounded: frames per thread and threads", test_bounded},
    {NULL, NULL},
};

RBP_CU_MAIN("frame_cache", TESTS)
