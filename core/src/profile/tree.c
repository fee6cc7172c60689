/*
 * The prefix tree (trie) of interned frames that holds a profile (see
 * profile.h for why a trie): merging a stack into it (find or add the path
 * root -> a -> b -> c, one hash probe per level, then bump the counts along
 * it), and reading it back in a stable order for the writers: children
 * sorted by name, and a depth-first walk that never recurses on the C
 * stack, because one runaway recursion in the target gives a 5,000-deep
 * (or deeper) path.
 */
#include "profile/profile.h"

#include <stdlib.h>
#include <string.h>

#include "profile/table.h"

static uint64_t rbp_child_key(uint32_t parent, uint32_t frame)
{
    return rbp_hash_u64(((uint64_t)parent << 32) | frame);
}

static uint64_t rbp_child_rehash(const rbpeek_profile *p, uint32_t node)
{
    return rbp_child_key(p->nodes[node].parent, p->nodes[node].frame);
}

/* Returns the child of parent for frame, adding it if new; RBP_NO_NODE when
 * out of memory. */
static uint32_t rbp_child(rbpeek_profile *p, uint32_t parent, uint32_t frame)
{
    if (!rbp_table_grow(&p->child_table, &p->child_table_cap, p->nnodes, rbp_child_rehash, p))
        return RBP_NO_NODE;
    size_t mask = p->child_table_cap - 1, j = rbp_child_key(parent, frame) & mask;
    for (uint32_t v; (v = p->child_table[j]) != 0; j = (j + 1) & mask) {
        const rbp_pnode *n = &p->nodes[v - 1];
        if (n->parent == parent && n->frame == frame) return v - 1;
    }
    if (p->nnodes >= UINT32_MAX - 2) return RBP_NO_NODE;
    if (p->nnodes == p->nodes_cap) {
        uint32_t ncap = p->nodes_cap > UINT32_MAX / 2 ? UINT32_MAX - 1 : p->nodes_cap * 2;
        rbp_pnode *nn = realloc(p->nodes, (size_t)ncap * sizeof *nn);
        if (!nn) return RBP_NO_NODE;
        p->nodes = nn;
        p->nodes_cap = ncap;
    }
    uint32_t id = p->nnodes++;
    rbp_pnode *par = &p->nodes[parent];
    p->nodes[id] = (rbp_pnode){.parent = parent, .frame = frame,
                               .first_child = RBP_NO_NODE, .next_sibling = par->first_child,
                               .depth = par->depth + 1};
    par->first_child = id;
    if (p->nodes[id].depth > p->max_depth) p->max_depth = p->nodes[id].depth;
    p->child_table[j] = id + 1;
    return id;
}

/* Checks what every way of adding a stack shares. */
static rbpeek_status check_stack(rbpeek_profile *p, size_t nframes, uint64_t count)
{
    if (nframes == 0) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: empty stack");
    if (nframes >= UINT32_MAX - 2)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: stack of %zu frames is too deep", nframes);
    if (count && p->nodes[0].total + count < p->nodes[0].total)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: sample count overflows 64 bits");
    return RBPEEK_OK;
}

rbpeek_status rbp_profile_add_ids(rbpeek_profile *p, const uint32_t *ids, size_t nframes, uint64_t count)
{
    rbpeek_status st = check_stack(p, nframes, count);
    if (st != RBPEEK_OK || count == 0) return st;
    /* Find or build the path first; counts are only touched once it exists,
     * so a failure half-way leaves zero-count nodes, which writers skip. */
    uint32_t node = 0;
    for (size_t i = 0; i < nframes; i++) {
        node = rbp_child(p, node, ids[i]);
        if (node == RBP_NO_NODE) return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    }
    if (p->nodes[node].self == 0) p->nstacks++;
    p->nodes[node].self += count;
    for (uint32_t n = node; n != RBP_NO_NODE; n = p->nodes[n].parent) p->nodes[n].total += count;
    return RBPEEK_OK;
}

rbpeek_status rbp_profile_add_frames(rbpeek_profile *p, const rbp_frame_desc *frames, size_t nframes,
                                     uint64_t count, uint32_t *ids)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbpeek_status st = check_stack(p, nframes, count);
    if (st != RBPEEK_OK || count == 0) return st;
    uint32_t small[64], *own = NULL;
    if (!ids) ids = nframes <= 64 ? small : (own = malloc(nframes * sizeof *own));
    if (!ids) return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    for (size_t i = 0; i < nframes && st == RBPEEK_OK; i++)
        if ((ids[i] = rbp_profile_frame(p, &frames[i])) == UINT32_MAX)
            st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    if (st == RBPEEK_OK) st = rbp_profile_add_ids(p, ids, nframes, count);
    free(own);
    return st;
}

rbpeek_status rbpeek_profile_add_stack(rbpeek_profile *p, const char *const *frames,
                                       size_t nframes, uint64_t count)
{
    if (!p) return RBPEEK_ERR_ARG;
    if (!frames) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: empty stack");
    rbpeek_status st = check_stack(p, nframes, count);
    if (st != RBPEEK_OK || count == 0) return st;
    for (size_t i = 0; i < nframes; i++)
        if (!frames[i]) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: frame %zu is NULL", i);
    uint32_t small[64], *ids = nframes <= 64 ? small : malloc(nframes * sizeof *ids);
    if (!ids) return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    for (size_t i = 0; i < nframes && st == RBPEEK_OK; i++)
        if ((ids[i] = rbp_intern(p, frames[i])) == UINT32_MAX)
            st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    if (st == RBPEEK_OK) st = rbp_profile_add_ids(p, ids, nframes, count);
    if (ids != small) free(ids);
    return st;
}

/* --- sorted children and the walk ----------------------------------------- */

typedef struct rbp_sort_item {
    const char *name;
    uint32_t id;
} rbp_sort_item;

static int rbp_sort_item_cmp(const void *a, const void *b)
{
    const rbp_sort_item *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->id < y->id ? -1 : x->id > y->id;
}

rbpeek_status rbp_children_build(const rbpeek_profile *p, rbp_children *out)
{
    out->off = calloc((size_t)p->nnodes + 1, sizeof *out->off);
    out->ids = malloc(((size_t)p->nnodes + 1) * sizeof *out->ids);
    uint32_t *fill = malloc(((size_t)p->nnodes + 1) * sizeof *fill);
    rbp_sort_item *tmp = NULL;
    if (!out->off || !out->ids || !fill) goto nomem;
    for (uint32_t n = 1; n < p->nnodes; n++) out->off[p->nodes[n].parent + 1]++;
    uint32_t widest = 0;
    for (uint32_t n = 0; n < p->nnodes; n++) {
        uint32_t c = out->off[n + 1];
        if (c > widest) widest = c;
        out->off[n + 1] += out->off[n];
    }
    memcpy(fill, out->off, (size_t)p->nnodes * sizeof *fill);
    for (uint32_t n = 1; n < p->nnodes; n++) out->ids[fill[p->nodes[n].parent]++] = n;
    free(fill);
    fill = NULL;
    tmp = malloc(((size_t)widest + 1) * sizeof *tmp);
    if (!tmp) goto nomem;
    for (uint32_t n = 0; n < p->nnodes; n++) {
        uint32_t a = out->off[n], b = out->off[n + 1];
        if (b - a < 2) continue;
        for (uint32_t i = a; i < b; i++)
            tmp[i - a] = (rbp_sort_item){p->names[p->nodes[out->ids[i]].frame], out->ids[i]};
        qsort(tmp, b - a, sizeof *tmp, rbp_sort_item_cmp);
        for (uint32_t i = a; i < b; i++) out->ids[i] = tmp[i - a].id;
    }
    free(tmp);
    return RBPEEK_OK;
nomem:
    free(fill);
    free(tmp);
    rbp_children_free(out);
    return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory sorting the profile");
}

void rbp_children_free(rbp_children *c)
{
    free(c->off);
    free(c->ids);
    c->off = c->ids = NULL;
}

rbpeek_status rbp_profile_walk(const rbpeek_profile *p, const rbp_children *ch,
                               rbp_visit_fn visit, void *ctx)
{
    /* One slot per level: the node and the index of its next child to
     * visit. Depth is bounded by max_depth, which the trie tracks. */
    size_t cap = (size_t)p->max_depth + 2;
    uint32_t *stk_node = malloc(cap * sizeof *stk_node);
    uint32_t *stk_next = malloc(cap * sizeof *stk_next);
    if (!stk_node || !stk_next) {
        free(stk_node);
        free(stk_next);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory walking the profile");
    }
    rbpeek_status st = RBPEEK_OK;
    size_t sp = 0;
    int r = visit(ctx, 0, true);
    if (r < 0) goto aborted;
    stk_node[0] = 0;
    stk_next[0] = r == 0 ? ch->off[0] : ch->off[1];
    sp = 1;
    while (sp > 0) {
        uint32_t n = stk_node[sp - 1];
        if (stk_next[sp - 1] >= ch->off[n + 1]) {
            if (visit(ctx, n, false) < 0) goto aborted;
            sp--;
            continue;
        }
        uint32_t c = ch->ids[stk_next[sp - 1]++];
        if (p->nodes[c].total == 0) continue;   /* left by a failed add */
        r = visit(ctx, c, true);
        if (r < 0) goto aborted;
        if (sp >= cap) {   /* cannot happen: depth <= max_depth */
            st = rbp_profile_fail(p, RBPEEK_ERR_CORRUPT, "profile deeper than recorded");
            goto out;
        }
        stk_node[sp] = c;
        stk_next[sp] = r == 0 ? ch->off[c] : ch->off[c + 1];
        sp++;
    }
    goto out;
aborted:
    st = RBPEEK_ERR_IO;   /* visitors abort only on write errors; they set the message */
out:
    free(stk_node);
    free(stk_next);
    return st;
}
