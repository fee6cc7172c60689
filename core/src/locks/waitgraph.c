/*
 * Waits-for graph algorithms (see waitgraph.h).
 *
 * Cycle enumeration follows Johnson's decomposition: find the strongly
 * connected components (iterative Tarjan, so a long chain cannot overflow
 * the C stack); for each non-trivial component take its smallest node s,
 * list the elementary cycles through s by a path search confined to the
 * component, then drop s and split the rest of the component again. A cycle
 * is therefore found exactly once, from its smallest node. Where Johnson
 * adds blocking sets to make the path search output-linear, we use a plain
 * backtracking search under a step budget instead: waits-for graphs of Ruby
 * threads have out-degree <= 1, where it is linear anyway, and the budget
 * covers anything else.
 */
#include "locks/waitgraph.h"

#include <stdlib.h>
#include <string.h>

#define DEFAULT_MAX_CYCLES 1000
#define DEFAULT_MAX_STEPS 10000000u
#define UNSET UINT32_MAX

/* Compressed adjacency: node v's successors are adj[off[v] .. off[v + 1]). */
typedef struct csr {
    size_t n;
    size_t *off;
    uint32_t *adj;
} csr;

static int edge_cmp(const void *a, const void *b)
{
    const rbp_wg_edge *x = a, *y = b;
    if (x->from != y->from) return x->from < y->from ? -1 : 1;
    if (x->to != y->to) return x->to < y->to ? -1 : 1;
    return 0;
}

/* Builds the adjacency of the valid, de-duplicated edges; reverse swaps
 * each edge's direction. */
static bool csr_build(csr *g, size_t n, const rbp_wg_edge *edges, size_t nedges, bool reverse)
{
    memset(g, 0, sizeof *g);
    g->n = n;
    rbp_wg_edge *e = nedges ? malloc(nedges * sizeof *e) : NULL;
    g->off = calloc(n + 1, sizeof *g->off);
    if ((nedges && !e) || !g->off) {
        free(e);
        free(g->off);
        return false;
    }
    size_t m = 0;
    for (size_t i = 0; i < nedges; i++) {
        if (edges[i].from >= n || edges[i].to >= n) continue;
        e[m].from = reverse ? edges[i].to : edges[i].from;
        e[m].to = reverse ? edges[i].from : edges[i].to;
        m++;
    }
    if (m) qsort(e, m, sizeof *e, edge_cmp);
    size_t u = 0;
    for (size_t i = 0; i < m; i++)
        if (u == 0 || edge_cmp(&e[u - 1], &e[i]) != 0) e[u++] = e[i];
    g->adj = malloc((u ? u : 1) * sizeof *g->adj);
    if (!g->adj) {
        free(e);
        free(g->off);
        return false;
    }
    for (size_t i = 0; i < u; i++) {
        g->off[e[i].from + 1]++;
        g->adj[i] = e[i].to; /* sorted by from, so already in CSR order */
    }
    for (size_t v = 0; v < n; v++) g->off[v + 1] += g->off[v];
    free(e);
    return true;
}

static void csr_free(csr *g)
{
    free(g->off);
    free(g->adj);
}

/* A growable list of node lists (components to process, or found cycles). */
typedef struct lists {
    uint32_t *nodes;
    size_t len, cap;
    size_t *start;      /* start[i] of list i; start[count] == len */
    size_t count, start_cap;
} lists;

static bool lists_begin(lists *l)
{
    if (l->count + 2 > l->start_cap) {
        size_t nc = l->start_cap ? l->start_cap * 2 : 16;
        size_t *ns = realloc(l->start, nc * sizeof *ns);
        if (!ns) return false;
        l->start = ns;
        l->start_cap = nc;
    }
    l->start[l->count] = l->len;
    return true;
}

static bool lists_push(lists *l, uint32_t v)
{
    if (l->len == l->cap) {
        size_t nc = l->cap ? l->cap * 2 : 64;
        uint32_t *nn = realloc(l->nodes, nc * sizeof *nn);
        if (!nn) return false;
        l->nodes = nn;
        l->cap = nc;
    }
    l->nodes[l->len++] = v;
    return true;
}

static void lists_end(lists *l)
{
    l->count++;
    l->start[l->count] = l->len;
}

/* Drops the last list (the worklist is used as a stack). */
static void lists_pop(lists *l)
{
    l->count--;
    l->len = l->start[l->count];
}

typedef struct search {
    const csr *g;
    int64_t *region;    /* node -> region id; a search only enters its region */
    int64_t next_region;
    uint32_t *idx, *low;
    bool *on;           /* on Tarjan's stack, or on the current path */
    uint32_t *stk;      /* Tarjan's node stack */
    uint32_t *path;
    size_t *pos;        /* per stack level: next edge to try */
    size_t steps, max_steps, max_cycles;
    bool truncated;
    lists work;         /* non-trivial components still to process */
    lists cycles;
} search;

static bool has_self_loop(const csr *g, uint32_t v)
{
    for (size_t i = g->off[v]; i < g->off[v + 1]; i++)
        if (g->adj[i] == v) return true;
    return false;
}

static bool over_budget(search *S)
{
    if (++S->steps > S->max_steps) {
        S->truncated = true;
        return true;
    }
    return false;
}

/* Tarjan over the nodes members[0..m) (all in region r), pushing every
 * non-trivial component onto the worklist. */
static bool tarjan(search *S, const uint32_t *members, size_t m, int64_t r)
{
    const csr *g = S->g;
    uint32_t counter = 0;
    size_t sp = 0, cs = 0;
    for (size_t i = 0; i < m; i++) S->idx[members[i]] = UNSET;
    for (size_t i = 0; i < m; i++) {
        uint32_t root = members[i];
        if (S->idx[root] != UNSET) continue;
        S->idx[root] = S->low[root] = counter++;
        S->stk[sp++] = root;
        S->on[root] = true;
        S->path[cs] = root;
        S->pos[cs++] = g->off[root];
        while (cs) {
            uint32_t v = S->path[cs - 1];
            if (S->pos[cs - 1] < g->off[v + 1]) {
                uint32_t w = g->adj[S->pos[cs - 1]++];
                if (over_budget(S)) return true;
                if (S->region[w] != r) continue;
                if (S->idx[w] == UNSET) {
                    S->idx[w] = S->low[w] = counter++;
                    S->stk[sp++] = w;
                    S->on[w] = true;
                    S->path[cs] = w;
                    S->pos[cs++] = g->off[w];
                } else if (S->on[w] && S->idx[w] < S->low[v]) {
                    S->low[v] = S->idx[w];
                }
                continue;
            }
            cs--;
            if (cs) {
                uint32_t u = S->path[cs - 1];
                if (S->low[v] < S->low[u]) S->low[u] = S->low[v];
            }
            if (S->low[v] != S->idx[v]) continue;
            /* v roots a component: the stack down to v. */
            size_t first = sp;
            do first--;
            while (S->stk[first] != v);
            size_t size = sp - first;
            if (size > 1 || has_self_loop(g, v)) {
                if (!lists_begin(&S->work)) return false;
                for (size_t k = first; k < sp; k++)
                    if (!lists_push(&S->work, S->stk[k])) return false;
                lists_end(&S->work);
            }
            for (size_t k = first; k < sp; k++) S->on[S->stk[k]] = false;
            sp = first;
        }
    }
    return true;
}

/* Lists the elementary cycles through s among the nodes of region r. */
static bool cycles_through(search *S, uint32_t s, int64_t r)
{
    const csr *g = S->g;
    size_t d = 0;
    S->path[d] = s;
    S->pos[d++] = g->off[s];
    S->on[s] = true;
    while (d) {
        uint32_t v = S->path[d - 1];
        if (S->pos[d - 1] >= g->off[v + 1]) {
            S->on[v] = false;
            d--;
            continue;
        }
        uint32_t w = g->adj[S->pos[d - 1]++];
        if (over_budget(S)) break;
        if (w == s) {
            if (S->cycles.count >= S->max_cycles) {
                S->truncated = true;
                break;
            }
            if (!lists_begin(&S->cycles)) return false;
            for (size_t k = 0; k < d; k++)
                if (!lists_push(&S->cycles, S->path[k])) return false;
            lists_end(&S->cycles);
        } else if (S->region[w] == r && !S->on[w]) {
            S->on[w] = true;
            S->path[d] = w;
            S->pos[d++] = g->off[w];
        }
    }
    for (size_t k = 0; k < d; k++) S->on[S->path[k]] = false;
    return true;
}

typedef struct cycle_ref {
    uint32_t first;
    size_t index;
} cycle_ref;

static int ref_cmp(const void *a, const void *b)
{
    const cycle_ref *x = a, *y = b;
    if (x->first != y->first) return x->first < y->first ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* Hands the found cycles to out, ordered by their smallest (first) node. */
static bool emit_sorted(search *S, rbp_cycles *out)
{
    size_t c = S->cycles.count;
    out->ncycles = c;
    out->start = malloc((c + 1) * sizeof *out->start);
    out->nodes = malloc((S->cycles.len ? S->cycles.len : 1) * sizeof *out->nodes);
    cycle_ref *refs = malloc((c ? c : 1) * sizeof *refs);
    if (!out->start || !out->nodes || !refs) {
        free(refs);
        return false;
    }
    for (size_t i = 0; i < c; i++) refs[i] = (cycle_ref){S->cycles.nodes[S->cycles.start[i]], i};
    qsort(refs, c, sizeof *refs, ref_cmp);
    size_t len = 0;
    for (size_t i = 0; i < c; i++) {
        size_t a = S->cycles.start[refs[i].index], b = S->cycles.start[refs[i].index + 1];
        out->start[i] = len;
        memcpy(out->nodes + len, S->cycles.nodes + a, (b - a) * sizeof *out->nodes);
        len += b - a;
    }
    out->start[c] = len;
    free(refs);
    return true;
}

bool rbp_wg_cycles(size_t n, const rbp_wg_edge *edges, size_t nedges, size_t max_cycles, size_t max_steps,
                   rbp_cycles *out)
{
    memset(out, 0, sizeof *out);
    if (n > UINT32_MAX - 1) n = UINT32_MAX - 1;
    csr g;
    if (!csr_build(&g, n, edges, nedges, false)) return false;
    search S = {.g = &g, .max_steps = max_steps ? max_steps : DEFAULT_MAX_STEPS,
                .max_cycles = max_cycles ? max_cycles : DEFAULT_MAX_CYCLES};
    size_t nn = n ? n : 1;
    S.region = calloc(nn, sizeof *S.region);
    S.idx = malloc(nn * sizeof *S.idx);
    S.low = malloc(nn * sizeof *S.low);
    S.on = calloc(nn, sizeof *S.on);
    S.stk = malloc(nn * sizeof *S.stk);
    S.path = malloc(nn * sizeof *S.path);
    S.pos = malloc(nn * sizeof *S.pos);
    uint32_t *members = malloc(nn * sizeof *members);
    bool ok = S.region && S.idx && S.low && S.on && S.stk && S.path && S.pos && members;
    if (ok) {
        for (size_t v = 0; v < n; v++) members[v] = (uint32_t)v; /* every node starts in region 0 */
        S.next_region = 1;
        ok = tarjan(&S, members, n, 0);
    }
    while (ok && S.work.count && !S.truncated) {
        /* Take a component off the worklist into its own region. */
        size_t a = S.work.start[S.work.count - 1], b = S.work.len, m = 0;
        int64_t r = S.next_region++;
        uint32_t s = UINT32_MAX;
        for (size_t k = a; k < b; k++) {
            uint32_t v = S.work.nodes[k];
            members[m++] = v;
            S.region[v] = r;
            if (v < s) s = v;
        }
        lists_pop(&S.work);
        ok = cycles_through(&S, s, r);
        if (!ok || S.truncated) break;
        /* Without s, the rest of the component may split into smaller ones. */
        S.region[s] = -1;
        size_t w = 0;
        for (size_t k = 0; k < m; k++)
            if (members[k] != s) members[w++] = members[k];
        ok = tarjan(&S, members, w, r);
    }
    if (ok) ok = emit_sorted(&S, out);
    out->truncated = S.truncated;
    free(S.region);
    free(S.idx);
    free(S.low);
    free(S.on);
    free(S.stk);
    free(S.path);
    free(S.pos);
    free(members);
    free(S.work.nodes);
    free(S.work.start);
    free(S.cycles.nodes);
    free(S.cycles.start);
    csr_free(&g);
    if (!ok) rbp_cycles_free(out);
    return ok;
}

void rbp_cycles_free(rbp_cycles *c)
{
    if (!c) return;
    free(c->nodes);
    free(c->start);
    c->nodes = NULL;
    c->start = NULL;
    c->ncycles = 0;
}

bool rbp_wg_reaching(size_t n, const rbp_wg_edge *edges, size_t nedges, const bool *target, bool *reaches)
{
    csr rev;
    if (!csr_build(&rev, n, edges, nedges, true)) return false;
    uint32_t *queue = malloc((n ? n : 1) * sizeof *queue);
    if (!queue) {
        csr_free(&rev);
        return false;
    }
    size_t head = 0, tail = 0;
    for (size_t v = 0; v < n; v++) {
        reaches[v] = target[v];
        if (target[v]) queue[tail++] = (uint32_t)v;
    }
    while (head < tail) { /* each node enters the queue at most once */
        uint32_t v = queue[head++];
        for (size_t i = rev.off[v]; i < rev.off[v + 1]; i++) {
            uint32_t u = rev.adj[i];
            if (!reaches[u]) {
                reaches[u] = true;
                queue[tail++] = u;
            }
        }
    }
    free(queue);
    csr_free(&rev);
    return true;
}
