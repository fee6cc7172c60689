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

/* What kind of frame a profile frame is. Ruby and C-method frames keep the
 * snapshot's kinds (rbpeek_frame_kind), as will the kinds a snapshot adds
 * later (native and GC frames); the rest are the profile's own. */
typedef enum rbp_pframe_kind {
    RBP_PF_RUBY = RBPEEK_FRAME_RUBY,    /* a Ruby method or block: label, path, line, first line */
    RBP_PF_CFUNC = RBPEEK_FRAME_CFUNC,  /* a C method as Ruby reports it: its label, its caller's path and line */
    RBP_PF_THREAD = 64,                 /* --per-thread's root: 'Thread "NAME" (tid N)', the label alone */
    RBP_PF_NAMED = 65,                  /* known by its display name alone: a folded file's frame,
                                         * rbpeek_profile_add_stack's */
    RBP_PF_PROCESS = 66,                /* the sample options' root_frame: 'COMMAND (pid N)', the label alone */
} rbp_pframe_kind;

/* A frame as a producer describes it (the sampler, the folded reader); its
 * identity in the profile's frame table is every member but first_line.
 * Strings are the caller's for the call; the table keeps copies. NULL and
 * "" are the same (none). */
typedef struct rbp_frame_desc {
    int32_t kind;               /* rbp_pframe_kind */
    const char *label;          /* Ruby's label; for THREAD and NAMED the whole name */
    const char *path;           /* where Ruby says the frame is (its caller's place for a C method) */
    int32_t line;               /* 0: none */
    int32_t first_line;         /* where its method or block starts (the iseq's first line), 0: unknown;
                                 * the first nonzero one seen for a frame is kept (pprof's start_line) */
    /* Room for native frames (the whole-stack issue): */
    const char *module;         /* the mapped file the pc lies in */
    uint64_t pc;
    const char *symbol;         /* the C function's name: a native frame's, or the one a cfunc stands for */
    const char *native_file;    /* its source file and line (DWARF), if known */
    int32_t native_line;
} rbp_frame_desc;

/* One entry of the frame table: the description (strings in the profile's
 * arena, never NULL) and the display name the text writers show (folded,
 * the SVG, top-N), made once from it by rbp_pframe_name_of. */
typedef struct rbp_pframe {
    rbp_frame_desc d;
    uint32_t label_len, path_len;
    uint64_t hash;              /* of the identity, for the table's growth */
} rbp_pframe;

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

    /* The frame table: id -> frame (frames) and its display name (names,
     * name_lens: NUL-terminated). Strings live in an arena so 100k frames
     * are not 100k mallocs. */
    rbp_pframe *frames;
    char **names;
    uint32_t *name_lens;
    uint32_t nnames, names_cap;
    uint32_t *name_table;           /* open addressing by identity, slots hold id + 1 */
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

    uint64_t skipped_lines;         /* malformed lines read_folded skipped */

    /* Every thread the samples saw and its states (thread_state.c). */
    struct rbp_tally *tally;
    size_t ntally, tally_cap;
};

/* One thread's entry of the tally: identity (pid, rb_thread_t, TID) and counts. */
typedef struct rbp_tally {
    int64_t pid, tid;
    uint64_t thread_addr;
    char *name;                     /* malloc'd, "" if none */
    int32_t is_main;
    uint64_t samples;
    uint64_t states[RBPEEK_THREAD_STATES];
    uint64_t recorded[RBPEEK_THREAD_STATES];   /* of those, the samples whose stack was recorded */
} rbp_tally;

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

/* intern.c: the id of the frame d describes, added to the frame table if
 * new (a nonzero first_line fills in one still unknown); UINT32_MAX when out
 * of memory or too many frames. */
uint32_t rbp_profile_frame(rbpeek_profile *p, const rbp_frame_desc *d);
/* The id of a frame known by its name alone (RBP_PF_NAMED). */
uint32_t rbp_intern(rbpeek_profile *p, const char *name);

/* Frame id's name by method: "label (path)" for a Ruby or C-method frame,
 * whatever its line (the lines of one method share it); the display name for
 * the rest. Written to out (room for the returned length + 1) unless out is
 * NULL; returns the length. */
size_t rbp_pframe_method_name(const rbpeek_profile *p, uint32_t id, char *out);

/* Frame id's table entry, and what writers that show a frame's parts take
 * for its label: Ruby's label, or "?" when Ruby gave none. */
static inline const rbp_pframe *rbp_profile_pframe(const rbpeek_profile *p, uint32_t id) { return &p->frames[id]; }
static inline const char *rbp_pframe_label(const rbp_pframe *f) { return *f->d.label ? f->d.label : "?"; }
/* Whether a frame has a place in a Ruby source file (speedscope's file and
 * line, pprof's function file and line): a Ruby or C-method frame whose
 * path Ruby gave. Its line may be 0, as Ruby itself reports for a frame that
 * has not reached its first line (2.7, "path:0:in"): the writers then give
 * the file with no line, not the frame's folded name as a label. */
static inline bool rbp_pframe_has_place(const rbp_pframe *f)
{
    return (f->d.kind == RBP_PF_RUBY || f->d.kind == RBP_PF_CFUNC) && f->path_len > 0;
}
/* The start line known for frame id, or 0. */
static inline int32_t rbp_profile_start_line(const rbpeek_profile *p, uint32_t id) { return p->frames[id].d.first_line; }

/* tree.c: adds count samples of the stack of frame ids (root first; every
 * id from rbp_profile_frame). */
rbpeek_status rbp_profile_add_ids(rbpeek_profile *p, const uint32_t *ids, size_t nframes, uint64_t count);
/* Adds count samples of the stack of frames (root first); ids (nframes
 * entries, may be NULL) gets each frame's id. */
rbpeek_status rbp_profile_add_frames(rbpeek_profile *p, const rbp_frame_desc *frames, size_t nframes,
                                     uint64_t count, uint32_t *ids);

#endif
