/*
 * rbpeek_profile_merge: the stacks and thread tallies of one profile added
 * to another. Sampling several processes runs one tracer per process, each
 * filling a profile of its own (a profile is not shared between threads);
 * their profiles become one at the end, each stack under its process's
 * root frame. Frames are matched by their description (intern.c), so the
 * same method seen by two tracers is one frame of the result.
 *
 * A node of the prefix tree is created after its parent, so one pass in
 * node order maps every node of src to its node in dst.
 */
#include <stdlib.h>

#include "profile/profile.h"
#include "profile/thread_state.h"

rbpeek_status rbpeek_profile_merge(rbpeek_profile *dst, const rbpeek_profile *src)
{
    if (!dst || !src || dst == src) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(dst);
    rbpeek_status st = RBPEEK_OK;
    uint32_t *fmap = malloc(((size_t)src->nnames + 1) * sizeof *fmap);
    uint32_t *path = malloc(((size_t)src->max_depth + 1) * sizeof *path);
    if (!fmap || !path) {
        st = rbp_profile_fail(dst, RBPEEK_ERR_NOMEM, "merge: out of memory");
        goto out;
    }
    for (uint32_t f = 0; f < src->nnames; f++) {
        fmap[f] = rbp_profile_frame(dst, &src->frames[f].d);
        if (fmap[f] == UINT32_MAX) {
            st = rbp_profile_fail(dst, RBPEEK_ERR_NOMEM, "merge: out of memory");
            goto out;
        }
    }
    for (uint32_t n = 1; n < src->nnodes; n++) {
        uint64_t self = src->nodes[n].self;
        if (!self) continue;
        size_t depth = 0;
        /* Bounded: a node's depth is at most max_depth, and parents come first. */
        for (uint32_t k = n; k != 0 && k != RBP_NO_NODE && depth <= src->max_depth; k = src->nodes[k].parent)
            path[depth++] = fmap[src->nodes[k].frame];
        for (size_t i = 0; i < depth / 2; i++) {   /* leaf first -> root first */
            uint32_t x = path[i];
            path[i] = path[depth - 1 - i];
            path[depth - 1 - i] = x;
        }
        st = rbp_profile_add_ids(dst, path, depth, self);
        if (st != RBPEEK_OK) goto out;
    }
    st = rbp_tally_merge(dst, src);
out:
    free(fmap);
    free(path);
    return st;
}
