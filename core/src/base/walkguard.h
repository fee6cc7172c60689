/*
 * The two guards of everything that follows target-made pointers, so that
 * no corrupt pointer can make rbpeek loop, run long or overflow its stack:
 * rbp_walkguard for a walk along a list, rbp_recguard for a recursion into
 * a structure. Both give their verdict in the same terms (a loop, a limit,
 * a budget), which the callers say in the same words.
 *
 * The walk guard: every walk over a target-made linked list steps through
 * it. Three checks per step, all O(1) in time and memory:
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

/*
 * The recursion guard: every recursion that follows target data (the
 * value printer into a value's parts, a singleton class's name through its
 * attached object, 3.4's label of a block through its local iseq, the
 * DWARF reader through types and DIEs) enters it before going one level
 * down and leaves it on the way back up. Three checks per entry:
 *
 *  - depth: at most limit levels (at most RBP_REC_MAX_LIMIT), since the C
 *    stack is finite, and a debugger's stack is not ours to overflow;
 *  - a loop: a node already being entered further up is refused (a
 *    Rational whose numerator is itself, two singleton classes attached
 *    to each other, a typedef of itself), found at once, not after the
 *    limit's levels of work; the path is kept, so the check costs at most
 *    the depth in comparisons, and callers that show recursion as Ruby
 *    does ([...]) ask rbp_rec_on_path;
 *  - optionally a budget of entries shared with other recursions and
 *    walks (the objects one command prints), so that a wide structure
 *    within the depth still ends.
 *
 * Nodes are whatever identifies what is entered (an address, a DIE
 * offset); 0 is never a node.
 */
enum { RBP_REC_MAX_LIMIT = 128 };

typedef struct rbp_recguard {
    unsigned depth, limit;
    size_t *budget;                     /* shared, or NULL */
    uint64_t path[RBP_REC_MAX_LIMIT];   /* the nodes entered, outermost first */
} rbp_recguard;

/* A guard for a recursion of at most limit levels, drawing on *budget if
 * given. Only depth, limit and budget are set: the path is written as it
 * grows. */
static inline void rbp_recguard_init(rbp_recguard *g, unsigned limit, size_t *budget)
{
    g->depth = 0;
    g->limit = limit < RBP_REC_MAX_LIMIT ? limit : RBP_REC_MAX_LIMIT;
    g->budget = budget;
}

/* Whether node is being entered further up. */
static inline int rbp_rec_on_path(const rbp_recguard *g, uint64_t node)
{
    for (unsigned i = g->depth; i > 0; i--)
        if (g->path[i - 1] == node) return 1;
    return 0;
}

/* Enters node: RBP_WALK_OK (then rbp_rec_leave once done with it), or why
 * not (RBP_WALK_CYCLE: node is being entered further up; RBP_WALK_LIMIT:
 * limit levels are entered; RBP_WALK_BUDGET: the budget is spent), and
 * then nothing was entered. */
static inline rbp_walk_verdict rbp_rec_enter(rbp_recguard *g, uint64_t node)
{
    if (rbp_rec_on_path(g, node)) return RBP_WALK_CYCLE;
    if (g->depth >= g->limit) return RBP_WALK_LIMIT;
    if (g->budget) {
        if (*g->budget == 0) return RBP_WALK_BUDGET;
        --*g->budget;
    }
    g->path[g->depth++] = node;
    return RBP_WALK_OK;
}

static inline void rbp_rec_leave(rbp_recguard *g)
{
    if (g->depth) g->depth--;
}

/* Why a recursion was refused, for markers, warnings and notes. */
static inline const char *rbp_rec_verdict_str(rbp_walk_verdict v)
{
    switch (v) {
    case RBP_WALK_CYCLE: return "it contains itself";
    case RBP_WALK_LIMIT: return "it nests too deep";
    case RBP_WALK_BUDGET: return "the budget of work is spent";
    default: return "";
    }
}

#endif
