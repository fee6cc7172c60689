/*
 * Waits-for graphs: the pure graph work behind deadlock detection, kept
 * apart from target memory so it can be tested on synthetic graphs.
 *
 * Nodes are 0..n-1 (threads); an edge a -> b means "a waits for something
 * only b can release" (a Mutex b owns, or b finishing for a Thread#join).
 * A deadlock is an elementary cycle. Ruby threads wait on one thing at a
 * time, so real graphs have out-degree <= 1, but nothing here assumes it:
 * every elementary cycle is enumerated once (Johnson-style: rooted at its
 * smallest node, searching only the strongly connected component that node
 * lies in among the nodes >= it), under explicit bounds so a hostile or
 * corrupt graph cannot make the search explode.
 */
#ifndef RBP_WAITGRAPH_H
#define RBP_WAITGRAPH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rbp_wg_edge {
    uint32_t from, to;
} rbp_wg_edge;

typedef struct rbp_cycles {
    uint32_t *nodes;    /* the cycles' nodes, concatenated, each in edge order */
    size_t *start;      /* cycle i is nodes[start[i] .. start[i + 1]) */
    size_t ncycles;
    bool truncated;     /* a bound was hit: there may be more cycles */
} rbp_cycles;

/* Finds every elementary cycle (a self-loop is a cycle of one node). Each
 * cycle is reported once, starting at its smallest node; cycles come out
 * ordered by that node. Edges naming nodes >= n are ignored; duplicate
 * edges are harmless. At most max_cycles cycles are kept and at most
 * max_steps search steps taken (0 = defaults); hitting either sets
 * truncated. Returns false only when out of memory. */
bool rbp_wg_cycles(size_t n, const rbp_wg_edge *edges, size_t nedges, size_t max_cycles, size_t max_steps,
                   rbp_cycles *out);
void rbp_cycles_free(rbp_cycles *c);

/* Marks in reaches[] every node from which some node with target[] set can
 * be reached by following edges (including the targets themselves).
 * Returns false only when out of memory. */
bool rbp_wg_reaching(size_t n, const rbp_wg_edge *edges, size_t nedges, const bool *target, bool *reaches);

#endif
