/*
 * Unit tests for waitgraph.c: elementary cycles and reachability on
 * synthetic waits-for graphs, including the shapes deadlocked Ruby programs
 * make (out-degree <= 1), general graphs with shared nodes, degenerate
 * input, and the bounds.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "locks/waitgraph.h"

#define E(a, b) {(a), (b)}
#define COUNT(x) (sizeof(x) / sizeof((x)[0]))

/* "0>1>2" renderings of every cycle, joined with " | ", for easy asserts. */
static void render(const rbp_cycles *c, char *buf, size_t len)
{
    buf[0] = '\0';
    for (size_t i = 0; i < c->ncycles; i++) {
        if (i) strncat(buf, " | ", len - strlen(buf) - 1);
        for (size_t k = c->start[i]; k < c->start[i + 1]; k++) {
            char num[16];
            snprintf(num, sizeof num, k == c->start[i] ? "%u" : ">%u", c->nodes[k]);
            strncat(buf, num, len - strlen(buf) - 1);
        }
    }
}

static void check(size_t n, const rbp_wg_edge *e, size_t ne, const char *want)
{
    rbp_cycles c;
    char got[1024];
    CU_ASSERT_FATAL(rbp_wg_cycles(n, e, ne, 0, 0, &c));
    render(&c, got, sizeof got);
    if (strcmp(got, want) != 0) printf("\n  cycles: got \"%s\", want \"%s\"\n", got, want);
    CU_ASSERT_STRING_EQUAL(got, want);
    CU_ASSERT_FALSE(c.truncated);
    rbp_cycles_free(&c);
}

static void test_no_cycle(void)
{
    /* main joins worker, worker waits on a Mutex held by a sleeper. */
    rbp_wg_edge e[] = {E(0, 1), E(1, 2)};
    check(4, e, COUNT(e), "");
    check(0, NULL, 0, "");
    check(5, NULL, 0, "");
}

static void test_two_mutex_deadlock(void)
{
    /* 1 -> 2 -> 1, and 0 (main) joins 2: 0 is behind the cycle, not in it. */
    rbp_wg_edge e[] = {E(1, 2), E(2, 1), E(0, 2)};
    check(3, e, COUNT(e), "1>2");
}

static void test_three_cycle_rotated(void)
{
    /* The cycle is reported from its smallest node, whatever order edges come in. */
    rbp_wg_edge e[] = {E(5, 3), E(4, 5), E(3, 4)};
    check(6, e, COUNT(e), "3>4>5");
}

static void test_self_loop(void)
{
    rbp_wg_edge e[] = {E(2, 2), E(0, 1)};
    check(3, e, COUNT(e), "2");
}

static void test_disjoint_cycles(void)
{
    /* Three deadlocks at once (Mutex pair, three-thread ring, join pair), plus
     * threads stuck behind them: each cycle once, ordered by smallest node. */
    rbp_wg_edge e[] = {E(7, 8), E(8, 7), E(1, 2), E(2, 3), E(3, 1), E(4, 5), E(5, 4), E(0, 8), E(6, 3)};
    check(9, e, COUNT(e), "1>2>3 | 4>5 | 7>8");
}

static void test_shared_node(void)
{
    /* Out-degree > 1 (not made by Ruby, but the algorithm must not care):
     * 0 -> 1 -> 0 and 0 -> 2 -> 0 share node 0; 1 -> 2 adds 0>1>2. */
    rbp_wg_edge e[] = {E(0, 1), E(1, 0), E(0, 2), E(2, 0), E(1, 2)};
    check(3, e, COUNT(e), "0>1 | 0>1>2 | 0>2");
}

static void test_complete_graph(void)
{
    /* K4 has 20 elementary cycles: 6 of length 2, 8 of 3, 6 of 4. */
    rbp_wg_edge e[12];
    size_t k = 0;
    for (uint32_t a = 0; a < 4; a++)
        for (uint32_t b = 0; b < 4; b++)
            if (a != b) e[k++] = (rbp_wg_edge)E(a, b);
    rbp_cycles c;
    CU_ASSERT_FATAL(rbp_wg_cycles(4, e, k, 0, 0, &c));
    CU_ASSERT_EQUAL(c.ncycles, 20);
    size_t by_len[5] = {0};
    for (size_t i = 0; i < c.ncycles; i++) {
        size_t len = c.start[i + 1] - c.start[i];
        CU_ASSERT(len >= 2 && len <= 4);
        if (len <= 4) by_len[len]++;
        /* every reported cycle starts at its smallest node */
        for (size_t j = c.start[i] + 1; j < c.start[i + 1]; j++) CU_ASSERT(c.nodes[j] > c.nodes[c.start[i]]);
    }
    CU_ASSERT_EQUAL(by_len[2], 6);
    CU_ASSERT_EQUAL(by_len[3], 8);
    CU_ASSERT_EQUAL(by_len[4], 6);
    rbp_cycles_free(&c);
}

static void test_duplicates_and_bad_edges(void)
{
    /* Duplicate edges give no duplicate cycles; edges off the graph are ignored. */
    rbp_wg_edge e[] = {E(0, 1), E(0, 1), E(1, 0), E(1, 0), E(1, 9), E(9, 1), E(UINT32_MAX, 0)};
    check(3, e, COUNT(e), "0>1");
}

static void test_long_cycle(void)
{
    /* A 100000-thread ring: linear work, no recursion to overflow. */
    size_t n = 100000;
    rbp_wg_edge *e = malloc(n * sizeof *e);
    CU_ASSERT_FATAL(e != NULL);
    for (size_t i = 0; i < n; i++) e[i] = (rbp_wg_edge)E((uint32_t)i, (uint32_t)((i + 1) % n));
    rbp_cycles c;
    CU_ASSERT_FATAL(rbp_wg_cycles(n, e, n, 0, 0, &c));
    CU_ASSERT_EQUAL(c.ncycles, 1);
    CU_ASSERT_EQUAL(c.start[1], n);
    CU_ASSERT_EQUAL(c.nodes[0], 0);
    CU_ASSERT_EQUAL(c.nodes[n - 1], n - 1);
    CU_ASSERT_FALSE(c.truncated);
    rbp_cycles_free(&c);

    /* Many small cycles (50000 Mutex pairs). */
    for (size_t i = 0; i < n; i += 2) {
        e[i] = (rbp_wg_edge)E((uint32_t)i, (uint32_t)(i + 1));
        e[i + 1] = (rbp_wg_edge)E((uint32_t)(i + 1), (uint32_t)i);
    }
    CU_ASSERT_FATAL(rbp_wg_cycles(n, e, n, n, 0, &c));
    CU_ASSERT_EQUAL(c.ncycles, n / 2);
    CU_ASSERT_EQUAL(c.nodes[c.start[7]], 14);
    CU_ASSERT_FALSE(c.truncated);
    rbp_cycles_free(&c);
    free(e);
}

static void test_bounds(void)
{
    /* K8 has thousands of cycles: both bounds stop the search and say so. */
    rbp_wg_edge e[56];
    size_t k = 0;
    for (uint32_t a = 0; a < 8; a++)
        for (uint32_t b = 0; b < 8; b++)
            if (a != b) e[k++] = (rbp_wg_edge)E(a, b);
    rbp_cycles c;
    CU_ASSERT_FATAL(rbp_wg_cycles(8, e, k, 10, 0, &c));
    CU_ASSERT_EQUAL(c.ncycles, 10);
    CU_ASSERT_TRUE(c.truncated);
    rbp_cycles_free(&c);
    CU_ASSERT_FATAL(rbp_wg_cycles(8, e, k, 100000, 50, &c));
    CU_ASSERT_TRUE(c.truncated);
    CU_ASSERT(c.ncycles < 100);
    rbp_cycles_free(&c);
    /* Without bounds in the way: K8 has sum over k=2..8 of C(8,k)(k-1)! = 16064 cycles. */
    CU_ASSERT_FATAL(rbp_wg_cycles(8, e, k, 100000, 0, &c));
    CU_ASSERT_EQUAL(c.ncycles, 16064);
    CU_ASSERT_FALSE(c.truncated);
    rbp_cycles_free(&c);
}

static void test_reaching(void)
{
    /* 0 -> 1 -> 2 -> 1 (cycle 1,2); 3 -> 0; 4 -> 5; 6 alone. Target: the cycle. */
    rbp_wg_edge e[] = {E(0, 1), E(1, 2), E(2, 1), E(3, 0), E(4, 5)};
    bool target[7] = {false, true, true, false, false, false, false};
    bool reach[7];
    CU_ASSERT_FATAL(rbp_wg_reaching(7, e, COUNT(e), target, reach));
    bool want[7] = {true, true, true, true, false, false, false};
    for (int i = 0; i < 7; i++) CU_ASSERT_EQUAL(reach[i], want[i]);
}

static const rbp_cu_test tests[] = {
    {"no cycle", test_no_cycle},
    {"two-Mutex deadlock", test_two_mutex_deadlock},
    {"three-cycle reported from its smallest node", test_three_cycle_rotated},
    {"self loop", test_self_loop},
    {"disjoint cycles", test_disjoint_cycles},
    {"cycles sharing a node", test_shared_node},
    {"complete graph K4", test_complete_graph},
    {"duplicate and out-of-range edges", test_duplicates_and_bad_edges},
    {"long ring and many pairs", test_long_cycle},
    {"bounds", test_bounds},
    {"reaching", test_reaching},
    {NULL, NULL},
};

RBP_CU_MAIN("waitgraph", tests)
