/*
 * The profile aggregator's internals: the profile object (profile.c), its
 * frame interner (intern.c) and prefix tree (tree.c), shared with the
 * sampler and with the writers in output/ (folded stacks, speedscope, the
 * top-N table and the SVG flamegraph).
 *
 * Samples are kept as a prefix tree (trie) of interned frame ids: a stack
 * a;b;c adds or finds the path root -> a -> b -> c and bumps the counts on
 * it. Identical stacks therefore merge for free, shared prefixes are stored
 * once, and the tree is exactly the shape a flamegraph draws. Child lookup
 * goes through one hash table keyed by (parent node, frame id), so a node
 * with thousands of children still costs O(1) per step.
 *
 * Nothing here recurses: the tree may be as deep as the deepest stack
 * (thousands of frames for runaway recursion), so every walk uses an
 * explicit stack on the heap.
 */
#ifndef RBP_PROFILE_H
#define RBP_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "rbpeek.h"
#include "base/arena.h"

#define RBP_NO_NODE UINT32_MAX
#define RBP_ROOT_FRAME UINT32_MAX   /* the root node's frame: the "all" box */

typedef struct rbp_pnode {
    uint32_t parent;        /* RBP_NO_NODE for the root */
    uint32_t frame;         /* interned frame id; RBP_ROOT_FRAME for the root */
    uint32_t first_child;   /* children in insertion order, linked by next */
    uint32_t next_sibling;
    uint32_t depth;         /* root = 0 */
    uint64_t self;          /* samples whose stack ends here */
    uint64_t total;         /* samples whose stack passes through here */
} rbp_pnode;

typedef struct rbp_meta {
    char *key, *value;
} rbp_meta;

struct rbpeek_profile {
    /* Error text lives behind a pointer so that writers taking a const
     * profile can still report why they failed. */
    char *err;

    /* Interned frame names: id -> NUL-terminated string. The strings live
     * in an arena so 100k frames are not 100k mallocs. */
    char **names;
    uint32_t *name_lens;
    uint32_t nnames, names_cap;
    uint32_t *name_table;           /* open addressing, slots hold id + 1 */
    size_t name_table_cap;          /* power of two */
    rbp_arena arena;

    /* The trie. nodes[0] is the root. */
    rbp_pnode *nodes;
    uint32_t nnodes, nodes_cap;
    uint32_t *child_table;          /* open addressing, slots hold node + 1 */
    size_t child_table_cap;         /* power of two */
    uint32_t max_depth;             /* deepest node */
    uint64_t nstacks;               /* distinct stacks (nodes with self > 0) */

    rbp_meta *meta;
    size_t nmeta;

    /* Where each frame's method or block starts (its iseq's first line),
     * by frame id, 0 where unknown; as long as the sampler has told
     * (start_lines_len entries). For the pprof writer's functions. */
    int32_t *start_lines;
    uint32_t start_lines_len;

    uint64_t skipped_lines;         /* malformed lines read_folded skipped */
};

/* Children of every node, sorted by frame name (then id), as one flat array:
 * the children of node n are ids[off[n] .. off[n+1]). Writers sort so that
 * their output does not depend on sample arrival order, as flamegraph.pl
 * does, which also makes neighbouring boxes easy to compare by eye. */
typedef struct rbp_children {
    uint32_t *off;      /* nnodes + 1 entries */
    uint32_t *ids;
} rbp_children;

rbpeek_status rbp_children_build(const rbpeek_profile *p, rbp_children *out);
void rbp_children_free(rbp_children *c);

/* Visits the tree depth-first in sorted order, root (node 0) included;
 * nodes with a zero total are skipped. visit is called with entering = true
 * and returns 0 to descend, 1 to skip the node's children, -1 to abort (after
 * setting the profile's error); every entered node is later left (entering =
 * false). Uses a heap stack of max_depth entries, never the C stack. */
typedef int (*rbp_visit_fn)(void *ctx, uint32_t node, bool entering);
rbpeek_status rbp_profile_walk(const rbpeek_profile *p, const rbp_children *ch,
                               rbp_visit_fn visit, void *ctx);

/* The display name of a node ("all" for the root). */
const char *rbp_profile_node_name(const rbpeek_profile *p, uint32_t node);

/* Sets the profile's error message; returns status for `return rbp_perr(...)`. */
rbpeek_status rbp_profile_fail(const rbpeek_profile *p, rbpeek_status status,
                               const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Empties the profile's error message (the writers and the reader start so). */
void rbp_profile_clear_error(const rbpeek_profile *p);

/* intern.c: the id of a frame name, added if new; UINT32_MAX when out of
 * memory. */
uint32_t rbp_intern(rbpeek_profile *p, const char *name);

/* tree.c: rbpeek_profile_add_stack, also giving each frame's id in ids
 * (nframes entries) when ids is not NULL and count > 0. */
rbpeek_status rbp_profile_add_stack_ids(rbpeek_profile *p, const char *const *frames, size_t nframes,
                                        uint64_t count, uint32_t *ids);

/* profile.c: notes where frame id's method starts (first_lineno > 0); the
 * first note for an id stands. false when out of memory. */
bool rbp_profile_note_start_line(rbpeek_profile *p, uint32_t id, int32_t first_lineno);
/* The start line noted for frame id, or 0. */
int32_t rbp_profile_start_line(const rbpeek_profile *p, uint32_t id);

#endif
