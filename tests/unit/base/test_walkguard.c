/*
 * Tests of the walk guard (base/walkguard.h) on lists made of numbers: a
 * list of mu distinct nodes leading into a loop of lambda nodes must be
 * found to loop within a few times mu + lambda steps, for every shape up
 * to a few hundred nodes (self-loops, a loop back to the first node, a
 * long tail into a short loop and the reverse); a list without a loop
 * must never be taken for one; the per-list limit and the shared budget
 * must stop walks exactly where they say. And the recursion guard beside
 * it: loops of every length up to 100 seen when they close, the depth
 * limit, a budget shared with a walk.
 */
#include <stdio.h>

#include "cu_main.h"
#include "base/walkguard.h"

/* Node k's successor in a list of mu tail nodes and a loop of lambda
 * nodes, numbered from 1. */
static uint64_t succ(uint64_t k, uint64_t mu, uint64_t lambda)
{
    return k < mu + lambda ? k + 1 : mu + 1;
}

static void test_every_loop_is_found_soon(void)
{
    size_t worst = 0;
    for (uint64_t mu = 0; mu <= 300; mu += mu < 20 ? 1 : 7) {
        for (uint64_t lambda = 1; lambda <= 300; lambda += lambda < 20 ? 1 : 11) {
            rbp_walkguard g = rbp_walkguard_start(SIZE_MAX, NULL);
            uint64_t k = 1;
            size_t steps = 0;
            rbp_walk_verdict v;
            while ((v = rbp_walkguard_step(&g, k)) == RBP_WALK_OK) {
                k = succ(k, mu, lambda);
                steps++;
                if (steps > 100000) break;
            }
            CU_ASSERT_EQUAL(v, RBP_WALK_CYCLE);
            /* Brent: found within about 2 * (mu + lambda) + lambda steps */
            CU_ASSERT(steps <= 2 * (mu + lambda) + lambda + 2);
            /* and never before every node was met once */
            CU_ASSERT(steps >= mu + lambda);
            if (steps > worst) worst = steps;
        }
    }
    fprintf(stderr, "  (longest: %zu steps)\n", worst);
}

static void test_no_false_loops(void)
{
    rbp_walkguard g = rbp_walkguard_start(SIZE_MAX, NULL);
    for (uint64_t k = 1; k <= 1000000; k++)
        if (rbp_walkguard_step(&g, k * 0x40 + 0x100000) != RBP_WALK_OK) {
            CU_FAIL("a list without a loop was taken for one");
            return;
        }
}

static void test_limit_and_budget(void)
{
    rbp_walkguard g = rbp_walkguard_start(10, NULL);
    for (uint64_t k = 1; k <= 10; k++) CU_ASSERT_EQUAL(rbp_walkguard_step(&g, k), RBP_WALK_OK);
    CU_ASSERT_EQUAL(rbp_walkguard_step(&g, 11), RBP_WALK_LIMIT);

    size_t budget = 25;
    size_t walked = 0;
    for (int list = 0; list < 5; list++) { /* five lists of ten share 25 steps */
        rbp_walkguard w = rbp_walkguard_start(100, &budget);
        for (uint64_t k = 1; k <= 10 && rbp_walkguard_step(&w, (uint64_t)list * 100 + k) == RBP_WALK_OK; k++) walked++;
    }
    CU_ASSERT_EQUAL(walked, 25);
    CU_ASSERT_EQUAL(budget, 0);
    rbp_walkguard w = rbp_walkguard_start(100, &budget);
    CU_ASSERT_EQUAL(rbp_walkguard_step(&w, 1), RBP_WALK_BUDGET);
}

/* The recursion guard: a node met again further up is refused at once,
 * at any depth; one met again beside itself (after a leave) is not; the
 * depth limit and the shared budget stop entries exactly where they say,
 * and nothing refused is entered. */
static void test_recursion_guard(void)
{
    rbp_recguard g;
    rbp_recguard_init(&g, 10, NULL);
    for (uint64_t k = 1; k <= 10; k++) CU_ASSERT_EQUAL(rbp_rec_enter(&g, k), RBP_WALK_OK);
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 11), RBP_WALK_LIMIT);
    for (uint64_t k = 1; k <= 10; k++) CU_ASSERT_EQUAL(rbp_rec_enter(&g, k), RBP_WALK_CYCLE);
    CU_ASSERT_EQUAL(g.depth, 10);
    for (int k = 0; k < 10; k++) rbp_rec_leave(&g);
    rbp_rec_leave(&g); /* one too many: stays at 0 */
    CU_ASSERT_EQUAL(g.depth, 0);
    /* siblings: the same node twice, not inside itself */
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 7), RBP_WALK_OK);
    rbp_rec_leave(&g);
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 7), RBP_WALK_OK);
    CU_ASSERT(rbp_rec_on_path(&g, 7));
    CU_ASSERT(!rbp_rec_on_path(&g, 8));
    rbp_rec_leave(&g);

    /* a loop of any length: a -> b -> ... -> a is seen when it closes */
    for (uint64_t len = 1; len <= 100; len++) {
        rbp_recguard_init(&g, RBP_REC_MAX_LIMIT, NULL);
        uint64_t k = 1, steps = 0;
        while (rbp_rec_enter(&g, k) == RBP_WALK_OK) {
            k = k % len + 1;
            steps++;
        }
        CU_ASSERT_EQUAL(steps, len);
    }
    /* the limit is capped by the path's room */
    rbp_recguard_init(&g, 100000, NULL);
    CU_ASSERT_EQUAL(g.limit, RBP_REC_MAX_LIMIT);

    /* a budget shared with a walk: entries draw on it, refusals do not */
    size_t budget = 5;
    rbp_recguard_init(&g, 10, &budget);
    for (uint64_t k = 1; k <= 3; k++) CU_ASSERT_EQUAL(rbp_rec_enter(&g, k), RBP_WALK_OK);
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 2), RBP_WALK_CYCLE);
    CU_ASSERT_EQUAL(budget, 2);
    rbp_walkguard w = rbp_walkguard_start(10, &budget);
    CU_ASSERT_EQUAL(rbp_walkguard_step(&w, 100), RBP_WALK_OK);
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 4), RBP_WALK_OK);
    CU_ASSERT_EQUAL(rbp_rec_enter(&g, 5), RBP_WALK_BUDGET);
    CU_ASSERT_EQUAL(g.depth, 4);
    CU_ASSERT_STRING_EQUAL(rbp_rec_verdict_str(RBP_WALK_CYCLE), "it contains itself");
}

static const rbp_cu_test TESTS[] = {
    {"every tail-and-loop shape is found to loop, soon", test_every_loop_is_found_soon},
    {"a million distinct nodes are no loop", test_no_false_loops},
    {"the per-list limit and the shared budget", test_limit_and_budget},
    {"the recursion guard: loops, depth, budget", test_recursion_guard},
    {NULL, NULL},
};

RBP_CU_MAIN("walkguard", TESTS)
