/*
 * The guard every walk over a target-made linked list steps through, so
 * that no corrupt pointer can make a walk loop or run long. Three checks
 * per step, all O(1) in time and memory:
 *
 *  - a cycle anywhere in the list, not only a node pointing at itself or
 *    back at the head: Brent's algorithm remembers one node and replaces it
 *    at every power of two steps, so a walk that has entered a loop meets
 *    the remembered node again within about twice the loop's length plus
 *    the steps before it (a node pointing into another, intact circular
 *    list is such a loop);
 *  - a per-list limit on the number of nodes;
 *  - optionally a budget shared by many walks (a pairwise analysis such as
 *    every thread's join list, every Mutex's wait queue), so that n lists
 *    of n nodes cannot cost n^2 reads in total; the caller says that its
 *    result is partial when the budget runs out.
 *
 * Keys are whatever identifies a node (its address); 0 is never a node.
 */
#ifndef RBP_WALKGUARD_H
#define RBP_WALKGUARD_H

#include <stddef.h>
#include <stdint.h>

typedef enum rbp_walk_verdict {
    RBP_WALK_OK = 0,
    RBP_WALK_CYCLE,   /* the node was met before: the list loops */
    RBP_WALK_LIMIT,   /* the list is longer than its limit */
    RBP_WALK_BUDGET,  /* the shared budget is spent */
} rbp_walk_verdict;

typedef struct rbp_walkguard {
    uint64_t saved;       /* Brent's remembered node */
    size_t power, lam;    /* steps until the next replacement, steps since the last */
    size_t steps, limit;
    size_t *budget;       /* shared by several walks, or NULL */
} rbp_walkguard;

/* A guard for a walk of at most limit nodes, drawing on *budget if given. */
static inline rbp_walkguard rbp_walkguard_start(size_t limit, size_t *budget)
{
    return (rbp_walkguard){.saved = 0, .power = 1, .lam = 0, .steps = 0, .limit = limit, .budget = budget};
}

/* Records that the walk reached node; anything but RBP_WALK_OK means stop
 * before using it. */
static inline rbp_walk_verdict rbp_walkguard_step(rbp_walkguard *g, uint64_t node)
{
    if (g->saved && node == g->saved) return RBP_WALK_CYCLE;
    if (g->steps >= g->limit) return RBP_WALK_LIMIT;
    if (g->budget) {
        if (*g->budget == 0) return RBP_WALK_BUDGET;
        --*g->budget;
    }
    g->steps++;
    if (++g->lam >= g->power || !g->saved) {
        g->saved = node;
        g->power *= 2;
        g->lam = 0;
    }
    return RBP_WALK_OK;
}

/* A short description of why a walk stopped, for warnings and notes. */
static inline const char *rbp_walk_verdict_str(rbp_walk_verdict v)
{
    switch (v) {
    case RBP_WALK_CYCLE: return "it loops";
    case RBP_WALK_LIMIT: return "it is implausibly long";
    case RBP_WALK_BUDGET: return "the analysis' read budget is spent";
    default: return "";
    }
}

#endif
