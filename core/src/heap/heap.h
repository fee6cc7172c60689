/*
 * The Ruby object heap, read from outside: where the objspace is, which
 * heap pages it has, and a walk that reads each page in ONE call and decodes
 * its slots from the local copy. The per-object decoders on top of it (obj.h)
 * serve the census (census.c) and the dump (heap_dump.c). Nothing here runs
 * code in the target; every count, length and pointer taken from the target
 * is bounded or validated, so a damaged page costs its slots ("unreadable"),
 * never the walk.
 */
#ifndef RBP_HEAP_H
#define RBP_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addrmap.h"
#include "base/walkguard.h"
#include "context/context.h"

/* One heap page, as its header in the target describes it (validated). */
typedef struct rbp_heap_page {
    uint64_t header;        /* struct heap_page */
    uint64_t start;         /* first slot */
    uint32_t slot_size;
    uint32_t total_slots;
} rbp_heap_page;

/* The references a walk reads over all its objects, at most: 256 Mi, some
 * 25 times what a heap of a million objects holds. */
#define RBP_HEAP_REF_BUDGET (UINT64_C(256) << 20)

/* The steps all chain walks of one command may take together (superclass,
 * singleton and iclass chains, shape parents, singletons' attached
 * objects), each walk also capped on its own and cut at a loop: some 16
 * times what naming every class of a large program and walking its
 * objects' shapes takes. */
#define RBP_HEAP_CHAIN_BUDGET ((size_t)1 << 22)

/* "#<Class:#<Class:...>>": singletons named through their attached
 * objects, at most this many levels (h->naming). */
#define RBP_HEAP_NAMING_DEPTH 16

typedef struct rbp_heap {
    rbpeek_session *s;
    uint64_t objspace;
    uint32_t page_align;        /* heap page body alignment (and size bound) */
    rbp_heap_page *pages;       /* valid pages, sorted by start, disjoint */
    size_t npages;
    size_t listed;              /* page pointers in the objspace's table */
    size_t rejected;            /* ...whose header was unreadable or implausible */
    const rbp_object_rules *c;  /* the release's flag bits and masks: &s->rel.obj */
    bool shapes;                /* the release counts ivars by shape, and the layout has shapes */
    uint64_t shape_list;        /* the shapes: vm->shape_list (3.2), rb_shape_tree_ptr->shape_list; 0 if none */
    /* References one walk may still read over all its objects (objects x
     * references is a pairwise walk): an object whose references would
     * overrun it gets none more and counts as incomplete. */
    uint64_t ref_budget;
    /* Steps left to every chain walk of this command (walkguard.h), and
     * the first walk cut, for the one line that says the result is partial
     * (rbp_heap_chain_note). */
    size_t chain_budget;
    uint64_t chain_cuts;
    char chain_cut[160];
    rbp_walk_verdict chain_last; /* why the latest cut walk stopped */
    rbp_recguard naming;        /* rbp_heap_class_name's recursion through attached objects */
    /* the decoders' caches for one walk (freed by rbp_heap_close) */
    rbp_addrmap klass_ok;       /* klass -> (void*)1 valid, (void*)2 invalid */
    rbp_addrmap names;          /* class -> malloc'd name */
    rbp_addrmap real;           /* klass -> real class + 1 (so 0 can be cached) */
    uint64_t id_classpath, id_tmp_classpath, id_attached; /* 0 until seen */
    struct rbp_enc_entry *encs; /* encoding index -> name etc. (obj_string.c), loaded on first use */
} rbp_heap;

/* Finds the objspace and its heap pages. Fails with a one-line error when
 * the objspace or its page table can't be read at all; a page whose header
 * is damaged is counted in h->rejected and left out. */
rbpeek_status rbp_heap_open(rbpeek_session *s, rbp_heap *h);

/* The GC's heap page table as this release keeps it, read from the
 * objspace at objspace: *table where the page pointers start, *count how
 * many. 3.4's heap_pages.sorted is an rb_darray that counts itself;
 * before, heap_pages is a {sorted, allocated_pages} pair. false when it
 * cannot be read (no check that the pages are pages: rbp_heap_open's). */
bool rbp_heap_page_table_read(rbpeek_session *s, uint64_t objspace, uint64_t *table, uint64_t *count);
void rbp_heap_close(rbp_heap *h);

/* "" when no chain walk of this command was cut, else which was first
 * and why (h->chain_cuts says how many). */
const char *rbp_heap_chain_note(rbp_heap *h);

/* A guard for one chain walk (at most limit nodes) drawing on the
 * command's chain budget. */
rbp_walkguard rbp_heap_chain_guard(rbp_heap *h, size_t limit);
/* One step of a chain walk over what (e.g. "the superclass chain of
 * 0x..."): false means stop there; the cut is recorded for the note. */
bool rbp_heap_chain_step(rbp_heap *h, rbp_walkguard *g, uint64_t node, const char *what, uint64_t from);
/* Entering node in a recursion of the heap's decoders (g: h->naming),
 * drawing on the same chain budget: false means do not go down; the
 * refusal is recorded as a cut, like a chain walk's. After true,
 * rbp_rec_leave(g) on the way back. */
bool rbp_heap_rec_enter(rbp_heap *h, rbp_recguard *g, uint64_t node, const char *what, uint64_t from);

/* The page whose slot region contains addr, or NULL. */
const rbp_heap_page *rbp_heap_page_of(const rbp_heap *h, uint64_t addr);
/* True when v is the address of a slot (not necessarily live) in the heap. */
bool rbp_heap_is_slot(const rbp_heap *h, uint64_t v);

/* A live slot, as the walk hands it out. The bytes are a local copy. */
typedef struct rbp_obj {
    uint64_t addr;
    const uint8_t *slot;
    uint32_t slot_size;
    int type;               /* T_ type */
    uint64_t flags, klass;
} rbp_obj;

/* Whether the n bytes at target address at lie within o's slot copy (then
 * they are at o->slot + (at - o->addr)). The test never overflows: at and
 * n come from the target, and a length that wraps past 2^64 must not pass
 * for one inside the slot (it did, for an Array claiming its elements at
 * 0xffff...: a read far outside the copy). */
static inline bool rbp_obj_slot_holds(const rbp_obj *o, uint64_t at, uint64_t n)
{
    return o && at >= o->addr && at - o->addr <= o->slot_size && n <= o->slot_size - (at - o->addr);
}

/* A view of the object at addr, read by address rather than by the walk
 * (a class, a table wrapped in an object): its slot's first bufsize bytes
 * are read into buf. False when addr is not a slot of the heap or the slot
 * is free or unreadable. */
bool rbp_obj_at(rbp_heap *h, uint64_t addr, uint8_t *buf, size_t bufsize, rbp_obj *o);

/* Per-page tallies of a walk. */
typedef struct rbp_walk_page_stats {
    uint32_t live, free, unreadable;
} rbp_walk_page_stats;

/* Called for every live, plausible slot. Return false to stop the walk. */
typedef bool (*rbp_obj_fn)(void *ctx, const rbp_obj *o);
/* Called after each page with its tallies (may be NULL). */
typedef void (*rbp_page_fn)(void *ctx, const rbp_heap_page *pg, const rbp_walk_page_stats *st);

/* Walks every page in address order. A page that can't be read counts all
 * its slots unreadable; a slot whose header is garbage (an impossible type,
 * or a class pointer that is not a class in this heap) counts unreadable. */
rbpeek_status rbp_heap_walk(rbp_heap *h, rbp_obj_fn fn, rbp_page_fn page_fn, void *ctx);

/* Classifies one slot's bytes: returns its T_ type, -1 when the slot is
 * free (flags 0), -2 when it is garbage. Exposed for the unit tests. */
int rbp_heap_classify(rbp_heap *h, const uint8_t *slot, uint32_t slot_size);

#endif
