/*
 * Tests of the thread locator (threads.c) on synthetic images of damaged
 * thread lists, which no real process shows on demand. Issue #12, defect
 * 2: a ractor's thread-list head pointing into another ractor's intact
 * list sent the walk round that list until the 100,000-thread limit; and
 * a list that loops back to a node other than its head did the same. Each
 * must now end at once, list every thread at most once, and say that the
 * list was cut. The image's offsets are the test's own, not any Ruby's.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/threads.h"

enum {
    VM = 0x100000,     /* 3.x: ractor list head at 0; 2.7: living_threads head at 0 */
    RACTORS = 0x200000, /* ractor i at RACTORS + i * 0x100: list node at 0, thread list head at 16 */
    THREADS = 0x300000, /* thread i at THREADS + i * 0x100: list node at 0, self at 16 */
};

enum { MAX_TEST_THREADS = 256 };

static uint64_t ractor_at(int i) { return RACTORS + (uint64_t)i * 0x100; }
static uint64_t thread_at(int i) { return THREADS + (uint64_t)i * 0x100; }

typedef struct world {
    image im;
    uint8_t *vm, *ractors, *threads;
    rbpeek_session *s;
} world;

static void make(world *w, bool ractors)
{
    memset(w, 0, sizeof *w);
    w->vm = add_region(&w->im, VM, 64);
    w->ractors = add_region(&w->im, RACTORS, 0x1000);
    w->threads = add_region(&w->im, THREADS, 0x100 * MAX_TEST_THREADS);
    w->s = image_session(&w->im, ractors ? 3 : 2, ractors ? 4 : 7, ractors ? "3.4.5" : "2.7.4");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w->s);
    w->s->vm = VM;
    rbp_layout *L = &w->s->layout;
    if (ractors) {
        set_field(L, RBP_L_vm_ractor_set, 0, 16);
        set_field(L, RBP_L_ractor_vmlr_node, 0, 16);
        set_field(L, RBP_L_ractor_threads_set, 16, 16);
        set_field(L, RBP_L_th_lt_node, 0, 16);
    } else {
        set_field(L, RBP_L_vm_living_threads, 0, 16);
        set_field(L, RBP_L_th_vmlt_node, 0, 16);
    }
    set_field(L, RBP_L_th_self, 16, 8);
}

/* Sets where the list link at addr points (the `next` of a ccan node). */
static void link_to(world *w, uint64_t at, uint64_t to)
{
    for (int i = 0; i < w->im.n; i++)
        if (at >= w->im.r[i].addr && at + 8 <= w->im.r[i].addr + w->im.r[i].len)
            put64(w->im.r[i].bytes + (at - w->im.r[i].addr), to);
}

/* No thread appears twice in what was listed. */
static void expect_distinct(const rbp_thread_raw *t, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) CU_ASSERT_NOT_EQUAL(t[i].th, t[j].th);
}

static void test_head_into_another_ractors_list(void)
{
    world w;
    make(&w, true);
    /* two ractors; ractor 1 has threads 2 and 3 in an intact ring; ractor
     * 0's thread-list head points at thread 2's node, into ractor 1's list */
    link_to(&w, VM, ractor_at(0));
    link_to(&w, ractor_at(0), ractor_at(1));
    link_to(&w, ractor_at(1), VM);
    uint64_t head1 = ractor_at(1) + 16;
    link_to(&w, head1, thread_at(2));
    link_to(&w, thread_at(2), thread_at(3));
    link_to(&w, thread_at(3), head1);
    link_to(&w, ractor_at(0) + 16, thread_at(2)); /* the damage */

    rbp_thread_raw *t = NULL;
    size_t n = 0;
    const char *warning = NULL;
    CU_ASSERT_EQUAL(rbp_threads_collect(w.s, &t, &n, &warning), RBPEEK_OK);
    CU_ASSERT(n >= 2 && n <= 3); /* threads 2 and 3, and perhaps ractor 1's head read as one */
    CU_ASSERT_PTR_NOT_NULL(warning);
    if (warning) CU_ASSERT_PTR_NOT_NULL(strstr(warning, "cut"));
    expect_distinct(t, n);
    free(t);
    rbpeek_session_free(w.s);
    image_free(&w.im);
}

static void test_loop_past_the_head(void)
{
    world w;
    make(&w, false);
    /* 2.7's one list: head -> 0 -> 1 -> 2 -> 3 -> 1 (never back to the head) */
    link_to(&w, VM, thread_at(0));
    for (int i = 0; i < 3; i++) link_to(&w, thread_at(i), thread_at(i + 1));
    link_to(&w, thread_at(3), thread_at(1));

    rbp_thread_raw *t = NULL;
    size_t n = 0;
    const char *warning = NULL;
    CU_ASSERT_EQUAL(rbp_threads_collect(w.s, &t, &n, &warning), RBPEEK_OK);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_PTR_NOT_NULL(warning);
    expect_distinct(t, n);
    for (size_t i = 0; i < n; i++) CU_ASSERT_EQUAL(t[i].th, thread_at((int)i));
    free(t);
    rbpeek_session_free(w.s);
    image_free(&w.im);
}

/* Past 64 threads the loop check moves from a scan to a hash set: a loop
 * back to a thread listed before the move, and to one listed after it. */
static void test_loop_in_a_long_list(void)
{
    const int len = 200, back_to[] = {5, 150};
    for (size_t k = 0; k < sizeof back_to / sizeof *back_to; k++) {
        world w;
        make(&w, false);
        link_to(&w, VM, thread_at(0));
        for (int i = 0; i + 1 < len; i++) link_to(&w, thread_at(i), thread_at(i + 1));
        link_to(&w, thread_at(len - 1), thread_at(back_to[k]));
        rbp_thread_raw *t = NULL;
        size_t n = 0;
        const char *warning = NULL;
        CU_ASSERT_EQUAL(rbp_threads_collect(w.s, &t, &n, &warning), RBPEEK_OK);
        CU_ASSERT_EQUAL(n, (size_t)len);
        CU_ASSERT_PTR_NOT_NULL(warning);
        if (warning) CU_ASSERT_PTR_NOT_NULL(strstr(warning, "already listed"));
        for (size_t i = 0; i < n; i++) CU_ASSERT_EQUAL(t[i].th, thread_at((int)i));
        free(t);
        rbpeek_session_free(w.s);
        image_free(&w.im);
    }
}

static void test_intact_lists_have_no_warning(void)
{
    world w;
    make(&w, true);
    link_to(&w, VM, ractor_at(0));
    link_to(&w, ractor_at(0), ractor_at(1));
    link_to(&w, ractor_at(1), VM);
    for (int r = 0; r < 2; r++) { /* ractor r: threads 2r and 2r+1 */
        uint64_t head = ractor_at(r) + 16;
        link_to(&w, head, thread_at(2 * r));
        link_to(&w, thread_at(2 * r), thread_at(2 * r + 1));
        link_to(&w, thread_at(2 * r + 1), head);
    }
    rbp_thread_raw *t = NULL;
    size_t n = 0;
    const char *warning = NULL;
    CU_ASSERT_EQUAL(rbp_threads_collect(w.s, &t, &n, &warning), RBPEEK_OK);
    CU_ASSERT_EQUAL(n, 4);
    CU_ASSERT_PTR_NULL(warning);
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT_EQUAL(t[i].th, thread_at((int)i));
        CU_ASSERT_EQUAL(t[i].ractor_index, (int)i / 2);
    }
    free(t);
    rbpeek_session_free(w.s);
    image_free(&w.im);
}

static const rbp_cu_test TESTS[] = {
    {"a thread-list head into another ractor's list: cut at once, no thread twice",
     test_head_into_another_ractors_list},
    {"a list looping past its head: cut where it loops", test_loop_past_the_head},
    {"a loop in a list of 200: cut where it loops, before and after the set takes over", test_loop_in_a_long_list},
    {"intact ractor lists: every thread once, no warning", test_intact_lists_have_no_warning},
    {NULL, NULL},
};

RBP_CU_MAIN("threads", TESTS)
