/*
 * Tests of the list walks of the threads-and-locks collection (waits.c,
 * sync.c) on synthetic images of damaged lists. Issue #12, defect 2: with
 * many threads, every thread's join list walked up to 100,000 nodes, so a
 * join list leading into a loop cost threads x 100,000 reads. Each walk
 * now stops where its list loops (anywhere, not only onto itself), and all
 * walks of one analysis share one budget; either way a note says the
 * result is partial. The image's offsets are the test's own.
 */
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "locks/collect.h"

enum {
    THREADS = 0x100000, /* thread i at THREADS + i * 0x100: join_list at 0, keeping_mutexes at 8 */
    NODES = 0x200000,   /* rb_waiting_list / rb_mutex_t nodes, 16 bytes each: next at 0, thread at 8 */
    NNODES = 4096,
    NTHREADS = 8,
};

static uint64_t thread_at(size_t i) { return THREADS + (uint64_t)i * 0x100; }
static uint64_t node_at(size_t i) { return NODES + (uint64_t)i * 16; }

typedef struct world {
    image im;
    uint8_t *threads, *nodes;
    rbpeek_session *s;
    lk_ctx c;
} world;

static void make(world *w)
{
    memset(w, 0, sizeof *w);
    w->threads = add_region(&w->im, THREADS, NTHREADS * 0x100);
    w->nodes = add_region(&w->im, NODES, NNODES * 16);
    w->s = image_session(&w->im, 3, 4, "3.4.5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w->s);
    rbp_layout *L = &w->s->layout;
    set_field(L, RBP_L_th_join_list, 0, 8);
    set_field(L, RBP_L_th_keeping_mutexes, 8, 8);
    set_field(L, RBP_L_waiting_list_next, 0, 8);
    set_field(L, RBP_L_waiting_list_thread, 8, 8);
    set_field(L, RBP_L_mutex_next_mutex, 0, 8);
    set_field(L, RBP_L_sync_waiter_node, 0, 16);
    set_field(L, RBP_L_sync_waiter_th, 8, 8);
    lk_ctx *c = &w->c;
    *c = (lk_ctx){.s = w->s, .L = L, .n = NTHREADS, .list_budget = LK_LIST_BUDGET};
    c->th = calloc(NTHREADS, sizeof *c->th);
    rbp_addrmap_init(&c->by_th, 0, NULL);
    rbp_addrmap_init(&c->by_data, 0, NULL);
    rbp_addrmap_init(&c->waitqs, 0, lk_waitq_free);
    rbp_sb_init(&c->notes);
    for (size_t i = 0; i < NTHREADS; i++) {
        c->th[i].th = thread_at(i);
        c->th[i].join_waiter_of = -1;
        rbp_addrmap_put(&c->by_th, thread_at(i), lk_idx_val(i));
    }
}

static void drop(world *w)
{
    rbp_addrmap_destroy(&w->c.by_th);
    rbp_addrmap_destroy(&w->c.by_data);
    rbp_addrmap_destroy(&w->c.waitqs);
    rbp_sb_free(&w->c.notes);
    free(w->c.th);
    free(w->c.mx);
    rbpeek_session_free(w->s);
    image_free(&w->im);
}

static void link_node(world *w, size_t i, uint64_t next, uint64_t th)
{
    put64(w->nodes + i * 16, next);
    put64(w->nodes + i * 16 + 8, th);
}

static bool noted(const world *w, const char *what)
{
    return w->c.notes.buf && strstr(w->c.notes.buf, what) != NULL;
}

static void test_join_list_loop_is_cut(void)
{
    world w;
    make(&w);
    /* thread 0's join list: thread 1, thread 2, then round 1 -> 2 -> 1 ... */
    put64(w.threads + 0, node_at(0));
    link_node(&w, 0, node_at(1), thread_at(1));
    link_node(&w, 1, node_at(2), thread_at(2));
    link_node(&w, 2, node_at(1), thread_at(3));
    size_t before = w.c.list_budget;
    lk_walk_join_list(&w.c, 0);
    CU_ASSERT(before - w.c.list_budget < 16); /* found the loop, did not go round it 100,000 times */
    CU_ASSERT_EQUAL(w.c.th[1].join_waiter_of, 0);
    CU_ASSERT_EQUAL(w.c.th[2].join_waiter_of, 0);
    CU_ASSERT_EQUAL(w.c.th[3].join_waiter_of, 0);
    CU_ASSERT(noted(&w, "join list was cut (it loops)"));
    drop(&w);
}

static void test_join_lists_share_one_budget(void)
{
    world w;
    make(&w);
    /* every thread's join list is the same long chain (nodes 0 .. NNODES-1, then null) */
    for (size_t i = 0; i < NNODES; i++) link_node(&w, i, i + 1 < NNODES ? node_at(i + 1) : 0, thread_at(7));
    for (size_t i = 0; i < NTHREADS; i++) put64(w.threads + i * 0x100, node_at(0));
    w.c.list_budget = 3 * NNODES; /* enough for three of the eight walks */
    for (size_t i = 0; i < NTHREADS; i++) lk_walk_join_list(&w.c, i);
    CU_ASSERT_EQUAL(w.c.list_budget, 0);
    CU_ASSERT(noted(&w, "budget"));
    drop(&w);
}

static void test_held_mutexes_loop_is_cut(void)
{
    world w;
    make(&w);
    /* thread 0 holds mutexes 0 -> 1 -> 2 -> 1 */
    w.c.th[0].keeping = node_at(0);
    link_node(&w, 0, node_at(1), 0);
    link_node(&w, 1, node_at(2), 0);
    link_node(&w, 2, node_at(1), 0);
    lk_walk_keeping(&w.c, 0);
    CU_ASSERT_EQUAL(w.c.nmx, 3);
    CU_ASSERT(noted(&w, "held Mutexes was cut"));
    drop(&w);
}

static void test_wait_queue_loop_is_cut(void)
{
    world w;
    make(&w);
    /* a wait queue head (node 0) -> 1 -> 2 -> 3 -> 2, never back to the head */
    link_node(&w, 0, node_at(1), 0);
    link_node(&w, 1, node_at(2), thread_at(1));
    link_node(&w, 2, node_at(3), thread_at(2));
    link_node(&w, 3, node_at(2), thread_at(3));
    long count = 0;
    CU_ASSERT_EQUAL(lk_waitq_has(&w.c, node_at(0), thread_at(2), &count), -1); /* not walked to its end */
    CU_ASSERT_EQUAL(count, -1);
    CU_ASSERT(LK_LIST_BUDGET - w.c.list_budget < 16);
    CU_ASSERT(noted(&w, "wait queue was cut (it loops)"));
    drop(&w);
}

static const rbp_cu_test TESTS[] = {
    {"a join list that loops is cut where it loops, with a note", test_join_list_loop_is_cut},
    {"all join lists of one analysis share one budget", test_join_lists_share_one_budget},
    {"a list of held Mutexes that loops is cut, with a note", test_held_mutexes_loop_is_cut},
    {"a wait queue that loops is cut, with a note", test_wait_queue_loop_is_cut},
    {NULL, NULL},
};

RBP_CU_MAIN("list_walks", TESTS)
