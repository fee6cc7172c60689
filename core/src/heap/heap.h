/*
 * The Ruby object heap, read from outside: where the objspace is, which
 * heap pages it has, and a walk that reads each page in ONE call and decodes
 * its slots from the local copy. On top of that, per-object decoders (the
 * malloc'd memory an object owns, the objects it references, its class and
 * that class's name) shared by the census (census.c) and the dump
 * (heap_dump.c). Nothing here runs code in the target; every count, length
 * and pointer taken from the target is bounded or validated, so a damaged
 * page costs its slots ("unreadable"), never the walk.
 */
#ifndef RBP_HEAP_H
#define RBP_HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addrmap.h"
#include "context/context.h"

/* One heap page, as its header in the target describes it (validated). */
typedef struct rbp_heap_page {
    uint64_t header;        /* struct heap_page */
    uint64_t start;         /* first slot */
    uint32_t slot_size;
    uint32_t total_slots;
} rbp_heap_page;

/* Version-dependent constants of the object encodings (flag bits, special
 * constants), set once by rbp_heap_open. */
typedef struct rbp_heap_consts {
    uint64_t qnil, qundef;
    uint64_t fl_singleton;      /* FL_USER0, FL_USER1 from 3.4 */
    uint64_t elts_shared;       /* STR_SHARED = ELTS_SHARED: FL_USER2, FL_USER0 from 3.4 */
    uint64_t str_chilled;       /* 3.4: FL_USER2|FL_USER3, else 0 */
    uint64_t iclass_is_origin, iclass_origin_shared_mtbl;
    uint64_t ary_embed_len_mask;    /* after shifting by FL_USHIFT+3 */
    uint64_t struct_embed_len_mask; /* after shifting by FL_USHIFT+1 */
    bool shapes;                /* 3.2+: ivars are counted by the object's shape */
} rbp_heap_consts;

typedef struct rbp_heap {
    rbpeek_session *s;
    uint64_t objspace;
    uint32_t page_align;        /* heap page body alignment (and size bound) */
    rbp_heap_page *pages;       /* valid pages, sorted by start, disjoint */
    size_t npages;
    size_t listed;              /* page pointers in the objspace's table */
    size_t rejected;            /* ...whose header was unreadable or implausible */
    rbp_heap_consts c;
    uint64_t shape_list;        /* rb_shape_tree_ptr->shape_list, 0 if none */
    /* caches for one walk */
    rbp_addrmap klass_ok;       /* klass -> (void*)1 valid, (void*)2 invalid */
    rbp_addrmap names;          /* class -> malloc'd name */
    rbp_addrmap real;           /* klass -> real class + 1 (so 0 can be cached) */
    uint64_t id_classpath, id_tmp_classpath, id_attached; /* 0 until seen */
    struct rbp_enc_entry *encs; /* encoding index -> name etc., loaded on first use */
} rbp_heap;

/* Finds the objspace and its heap pages. Fails with a one-line error when
 * the objspace or its page table can't be read at all; a page whose header
 * is damaged is counted in h->rejected and left out. */
rbpeek_status rbp_heap_open(rbpeek_session *s, rbp_heap *h);
void rbp_heap_close(rbp_heap *h);

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

/* --- object decoders (heap_obj.c) ------------------------------------- */

/* Bytes of malloc'd (or transient-heap) memory the object owns beyond its
 * slot, by the rules of the target's ObjectSpace.memsize_of where we can
 * read what they need (see docs/heap.md for what is left out). */
uint64_t rbp_obj_extra_bytes(rbp_heap *h, const rbp_obj *o);

/* Calls fn for every VALUE the object references, as the target's GC mark
 * function would report it to ObjectSpace.reachable_objects_from: special
 * constants are skipped, the class pointer comes first. Returns false if
 * some of the object's memory could not be read. */
typedef void (*rbp_ref_fn)(void *ctx, uint64_t ref);
bool rbp_obj_refs(rbp_heap *h, const rbp_obj *o, rbp_ref_fn fn, void *ctx);

/* A view of an object in the heap read by address (for classes). */
bool rbp_obj_at(rbp_heap *h, uint64_t addr, uint8_t *buf, size_t bufsize, rbp_obj *o);

/* The class Ruby's obj.class would give for an object whose klass is this:
 * singleton classes and iclasses skipped. 0 if it can't be told. Cached. */
uint64_t rbp_class_real(rbp_heap *h, uint64_t klass);
/* A class or module's name as Module#inspect shows it: "Outer::Inner",
 * or "#<Class:0x000055d5c1a2b3c8>" when anonymous. Cached; never NULL. */
const char *rbp_heap_class_name(rbp_heap *h, uint64_t klass);
/* The permanent path only (Module#name), or NULL. */
const char *rbp_heap_class_path(rbp_heap *h, uint64_t klass);
/* The path a class stores, permanent or temporary ("#<Module:0x...>::C"),
 * as rb_mod_name gives it from 3.0 on; NULL when it has none. Cached. */
const char *rbp_heap_class_stored_path(rbp_heap *h, uint64_t klass);
/* True for a T_OBJECT whose ivars moved to a hash (too-complex shape). */
bool rbp_obj_too_complex(rbp_heap *h, const rbp_obj *o);
/* True when the object is what ObjectSpace hides from each_object and
 * memsize_of_all (internal_object_p): imemos, iclasses, hidden objects
 * (klass 0) and singleton classes of classes. */
bool rbp_obj_internal(rbp_heap *h, const rbp_obj *o);

/* String facts for the dump. */
typedef struct rbp_str_info {
    uint64_t len, capa;     /* capa only when it differs from len (heap, owned) */
    uint64_t ptr;           /* where the bytes are */
    bool embedded, shared, fstring, chilled, has_capa;
    int encindex;
    int coderange;          /* 0 unknown, 1 7bit, 2 valid, 3 broken */
} rbp_str_info;
bool rbp_str_info_of(rbp_heap *h, const rbp_obj *o, rbp_str_info *out);
/* Encoding name for an index ("UTF-8"...), NULL when unknown. The names
 * come from the Encoding objects Encoding's constants hold (the table that
 * names them is static in encoding.c); the twelve built-in indexes are
 * known without them. */
const char *rbp_encoding_name(rbp_heap *h, int encindex);
/* True when the encoding is ASCII-compatible (rb_enc_asciicompat:
 * one-byte minimum length and not a dummy). */
bool rbp_encoding_ascii_compat(rbp_heap *h, int encindex);
void rbp_encodings_free(rbp_heap *h);

/* T_DATA's wrap_struct_name when it is typed data (cached), T_FILE's fd,
 * a heap T_FLOAT's value. */
const char *rbp_data_struct_name(rbp_heap *h, const rbp_obj *o);
bool rbp_file_fd(rbp_heap *h, const rbp_obj *o, int *fd);
bool rbp_float_value(rbp_heap *h, const rbp_obj *o, double *out);

/* Array/hash sizes for the dump. */
bool rbp_ary_len(rbp_heap *h, const rbp_obj *o, uint64_t *len);
bool rbp_hash_size(rbp_heap *h, const rbp_obj *o, uint64_t *size);
/* T_OBJECT ivar count (ROBJECT_IV_COUNT / ROBJECT_NUMIV). */
bool rbp_obj_ivar_count(rbp_heap *h, const rbp_obj *o, uint64_t *n);
/* A class's shape variation_count (3.2+). */
bool rbp_class_variation_count(rbp_heap *h, const rbp_obj *o, uint64_t *out);
/* The superclass of a class/module/iclass (RCLASS_SUPER), 0 if none. */
uint64_t rbp_class_super(rbp_heap *h, const rbp_obj *o);

#endif
