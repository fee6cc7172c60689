/*
 * What the object decoders (obj_*.c) share and nothing else needs: the
 * bounds on target-derived counts, the flag bits they test, reading one
 * member of an object (from the walk's copy of its slot when the member lies
 * inside it, else through the session's memory cache), and the readers one
 * decoder file lends another. The decoders' interface for the census and
 * the dump is obj.h.
 */
#ifndef RBP_HEAP_OBJ_INTERNAL_H
#define RBP_HEAP_OBJ_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/walkguard.h"
#include "context/context.h"
#include "heap/heap.h"
#include "heap/obj.h"
#include "vm/rdata.h"
#include "vm/robject.h"

enum {
    MAX_VALUES = 1 << 26,       /* elements of one array/struct/ivar buffer */
    MAX_TABLE = 1 << 24,        /* entries of one st/id table */
    CHUNK = 1024,               /* VALUEs read per call for long buffers */
    MAX_CLASS_HOPS = 256,       /* singleton/iclass chain in rbp_class_real */
    MAX_SUPER = 64,             /* superclass chains searched for a class or a hidden ivar */
    SHAPE_IVAR = 1,             /* enum shape_type, 3.2+: the shape adds the ivar edge_name */
    MAX_SHAPE_DEPTH = 1 << 16,  /* shapes walked from one to the root */
    ST_ENTRY = 24,              /* st_table_entry: hash, key, record */
    ID_ITEM = 16,               /* id_table item_t on 64-bit: u32 key, int collision, VALUE val */
    ID_TABLE_HEADER = 24,       /* sizeof(struct rb_id_table) */
};

#define L(h) (&(h)->s->layout)
#define STR_NOEMBED RBP_FL_USER(1)
#define STR_NOFREE RBP_FL_USER(18)
#define RSTRING_FSTR RBP_FL_USER(17)
#define ARY_EMBED RBP_FL_USER(1)
#define HASH_ST_TABLE RBP_FL_USER(3)
#define ME_INVALIDATED RBP_FL_USER(9)  /* METHOD_ENTRY_INVALIDATED: IMEMO_FL_USER5 */
#define ENC_SHIFT (RBP_FL_USHIFT + 10)
#define ENC_CR_SHIFT (RBP_FL_USHIFT + 8)

/* --- reading members --------------------------------------------------- */

static inline size_t field_bytes(const rbp_field *f)
{
    if (f->bit_size) return (size_t)(f->bit_offset + f->bit_size + 7) / 8;
    return f->size > 0 && f->size <= 8 ? (size_t)f->size : 8;
}

/* Member id of a struct at base; from the slot copy when base..member lies
 * inside the object's slot, else from memory. */
static inline bool rd(rbp_heap *h, const rbp_obj *o, uint64_t base, rbp_field_id id, uint64_t *out)
{
    const rbp_field *f = &L(h)->f[id];
    if (f->offset < 0) return false;
    if (o && base >= o->addr && base - o->addr + (uint64_t)f->offset + field_bytes(f) <= o->slot_size) {
        *out = rbp_field_extract(L(h), id, o->slot + (base - o->addr));
        return true;
    }
    return rbp_read_field(h->s, base, id, out);
}

static inline uint64_t off(rbp_heap *h, rbp_field_id id) { return (uint64_t)rbp_off(L(h), id); }

/* A typed T_DATA's rb_data_type_t and C struct (vm/rdata.h), its words
 * read through the walk's slot copy (rd). */
typedef struct rbp_slot_words {
    rbp_heap *h;
    const rbp_obj *o;
} rbp_slot_words;

static inline bool rbp_slot_word(void *ctx, rbp_field_id id, uint64_t *out)
{
    const rbp_slot_words *w = ctx;
    return rd(w->h, w->o, w->o->addr, id, out);
}

static inline bool rbp_obj_typed_data(rbp_heap *h, const rbp_obj *o, uint64_t *type, uint64_t *data)
{
    rbp_slot_words w = {h, o};
    return rbp_typed_data_decode(h->s, o->addr, o->flags, rbp_slot_word, &w, type, data);
}

/* Whether a T_OBJECT keeps its fields in its slot (ROBJECT_EMBED before
 * 4.0, no ROBJECT_HEAP from 4.0). */
static inline bool robject_embedded(rbp_heap *h, uint64_t flags)
{
    return h->c->robject_heap ? !(flags & h->c->robject_heap) : (flags & h->c->robject_embed) != 0;
}

/* --- st tables, id tables and shapes (obj_tables.c) --------------------- */

typedef struct rbp_st_hdr {
    uint64_t entry_power, bin_power, size_ind, num_entries, bins, start, bound, entries;
} rbp_st_hdr;
bool rbp_st_read(rbp_heap *h, const rbp_obj *o, uint64_t tab, rbp_st_hdr *t);
/* st.c's st_memsize: the table, its bins and its entry array. */
uint64_t rbp_st_memsize(rbp_heap *h, const rbp_st_hdr *t);
/* Calls fn(ctx, key, record) for every live entry, in entry order. */
typedef void (*rbp_st_fn)(void *ctx, uint64_t key, uint64_t rec);
bool rbp_st_each(rbp_heap *h, const rbp_st_hdr *t, rbp_st_fn fn, void *ctx);

uint64_t rbp_id_table_memsize(rbp_heap *h, uint64_t tbl);
/* Calls fn(ctx, value) for every occupied item (rb_id_table_foreach_values). */
bool rbp_id_table_each(rbp_heap *h, uint64_t tbl, rbp_ref_fn fn, void *ctx);

typedef struct rbp_shape {
    uint64_t next_iv_index, capacity, type;
} rbp_shape;
/* The shape of an object (3.2+) from the shape id in its flags. */
bool rbp_shape_of(rbp_heap *h, uint64_t flags, rbp_shape *out);
/* Where ivar `name` is in the ivar array of an object with these flags
 * (3.2+, by its shape); *cached_id keeps the ivar's ID once found. */
bool rbp_shape_ivar_index(rbp_heap *h, uint64_t flags, const char *name, uint64_t *cached_id, uint64_t *index);
/* Whether the layout has what a walk of the shape chain reads (3.2+: the
 * shape list, a shape's size, edge_name and parent_id). */
bool rbp_shape_chain_readable(rbp_heap *h);
/* What a walk of the shape chain reads of shape id: its ivar edge (the
 * ivar's ID), next_iv_index, shape type and parent. False when unreadable. */
typedef struct rbp_shape_edge {
    uint64_t edge, next, type, parent;
} rbp_shape_edge;
bool rbp_shape_edge_of(rbp_heap *h, uint64_t id, rbp_shape_edge *out);

/* --- classes (obj_class.c) ---------------------------------------------- */

/* The classext: inline after RClass from 3.3, a pointer before. */
bool rbp_classext(rbp_heap *h, const rbp_obj *o, uint64_t *ext);
uint64_t rbp_class_m_tbl(rbp_heap *h, const rbp_obj *o, uint64_t ext);
/* A pointer member of the classext, 0 when absent. */
uint64_t rbp_classext_ptr(rbp_heap *h, const rbp_obj *o, uint64_t ext, rbp_field_id id);

/* A class's ivar by name (hidden ones too: "__classpath__", "__members__"):
 * the classext's st_table before 3.2, its iv_ptr at the shape's index after;
 * *cached_id keeps the ID once found. */
bool rbp_class_ivar(rbp_heap *h, const rbp_obj *o, const char *name, uint64_t *cached_id, uint64_t *out);

/* --- bodies of objects, arrays, hashes, structs (obj_body.c) ------------ */

/* T_OBJECT's ivars: where they are and how many (too_complex: an st_table). */
bool rbp_object_ivars(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *n, uint64_t *capa, uint64_t *table);
bool rbp_array_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len);
/* Where a hash's table is: the st_table or ar_table address (0 for an
 * empty ar table before 3.2). */
bool rbp_hash_table(rbp_heap *h, const rbp_obj *o, uint64_t *tab, bool *st);
typedef void (*rbp_pair_fn)(void *ctx, uint64_t key, uint64_t val);
bool rbp_ar_each(rbp_heap *h, const rbp_obj *o, uint64_t tab, rbp_pair_fn fn, void *ctx);
bool rbp_struct_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len, bool *embedded);

/* --- encodings (obj_string.c) -------------------------------------------- */

/* The terminator length of an encoding (1 for unknown ones). */
int rbp_enc_termlen(rbp_heap *h, int idx);

#endif
