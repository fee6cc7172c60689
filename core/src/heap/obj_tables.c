/*
 * Ruby's own containers read from outside, for the object decoders: st
 * tables (st.c: Hash bodies, ivar tables before 3.2), id tables (id_table.c:
 * method, constant and cache tables of classes) and shapes (shape.c, 3.2+:
 * how many ivars an object has). Each is bounded before it sizes a read.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rbp_st_read(rbp_heap *h, const rbp_obj *o, uint64_t tab, rbp_st_hdr *t)
{
    return tab && rd(h, o, tab, RBP_L_st_entry_power, &t->entry_power) &&
           rd(h, o, tab, RBP_L_st_bin_power, &t->bin_power) && rd(h, o, tab, RBP_L_st_size_ind, &t->size_ind) &&
           rd(h, o, tab, RBP_L_st_num_entries, &t->num_entries) && rd(h, o, tab, RBP_L_st_bins, &t->bins) &&
           rd(h, o, tab, RBP_L_st_entries_start, &t->start) && rd(h, o, tab, RBP_L_st_entries_bound, &t->bound) &&
           rd(h, o, tab, RBP_L_st_entries, &t->entries) && t->entry_power < 31 && t->bin_power < 32 &&
           t->size_ind < 4 && t->start <= t->bound && t->bound <= (UINT64_C(1) << t->entry_power) &&
           t->bound <= MAX_TABLE;
}

uint64_t rbp_st_memsize(rbp_heap *h, const rbp_st_hdr *t)
{
    uint64_t size = (uint64_t)(L(h)->f[RBP_L_st_table_size].size > 0 ? L(h)->f[RBP_L_st_table_size].size : 56);
    if (t->bins && t->entry_power > 0) size += ((((uint64_t)1 << t->bin_power) << t->size_ind) + 7) / 8 * 8;
    return size + ((uint64_t)1 << t->entry_power) * ST_ENTRY;
}

bool rbp_st_each(rbp_heap *h, const rbp_st_hdr *t, rbp_st_fn fn, void *ctx)
{
    uint8_t buf[ST_ENTRY * 256];
    for (uint64_t i = t->start; i < t->bound; i += 256) {
        uint64_t k = t->bound - i < 256 ? t->bound - i : 256;
        if (!rbp_mem_read(h->s->mem, t->entries + i * ST_ENTRY, buf, (size_t)k * ST_ENTRY)) return false;
        for (uint64_t j = 0; j < k; j++) {
            uint64_t e[3];
            memcpy(e, buf + j * ST_ENTRY, sizeof e);
            if (e[0] == ~UINT64_C(0)) continue; /* DELETED_ENTRY_P */
            fn(ctx, e[1], e[2]);
        }
    }
    return true;
}

typedef struct id_tbl {
    uint64_t capa, num, items;
} id_tbl;

/* From 4.0 some class tables (cc_tbl; cvc_tbl from 4.0.4) are managed id
 * tables: a typed T_DATA in the object heap whose data is the rb_id_table.
 * A plain rb_id_table is malloc'd, never inside a heap page, so a table
 * pointer that is a heap slot is unwrapped. Sets *managed accordingly. */
static uint64_t id_table_addr(rbp_heap *h, uint64_t tbl, bool *managed)
{
    *managed = false;
    if (!tbl || !rbp_heap_is_slot(h, tbl)) return tbl;
    uint8_t buf[64];
    rbp_obj o;
    uint64_t type = 0, data = 0;
    *managed = true;
    return rbp_obj_at(h, tbl, buf, sizeof buf, &o) && rbp_obj_typed_data(h, &o, &type, &data) ? data : 0;
}

static bool id_table_read(rbp_heap *h, uint64_t tbl, id_tbl *t)
{
    bool managed;
    tbl = id_table_addr(h, tbl, &managed);
    return tbl && rbp_read_field(h->s, tbl, RBP_L_id_table_capa, &t->capa) &&
           rbp_read_field(h->s, tbl, RBP_L_id_table_num, &t->num) &&
           rbp_read_field(h->s, tbl, RBP_L_id_table_items, &t->items) && (int32_t)t->capa >= 0 &&
           t->capa <= MAX_TABLE;
}

uint64_t rbp_id_table_memsize(rbp_heap *h, uint64_t tbl)
{
    id_tbl t;
    bool managed;
    id_table_addr(h, tbl, &managed);
    if (managed) return 0; /* a heap object of its own: the class does not own its memory */
    return id_table_read(h, tbl, &t) ? t.capa * ID_ITEM + ID_TABLE_HEADER : 0;
}

bool rbp_id_table_each(rbp_heap *h, uint64_t tbl, rbp_ref_fn fn, void *ctx)
{
    id_tbl t;
    if (!id_table_read(h, tbl, &t)) return tbl == 0;
    uint8_t buf[ID_ITEM * 256];
    for (uint64_t i = 0; i < t.capa; i += 256) {
        uint64_t k = t.capa - i < 256 ? t.capa - i : 256;
        if (!rbp_mem_read(h->s->mem, t.items + i * ID_ITEM, buf, (size_t)k * ID_ITEM)) return false;
        for (uint64_t j = 0; j < k; j++) {
            uint32_t key;
            uint64_t val;
            memcpy(&key, buf + j * ID_ITEM, 4);
            memcpy(&val, buf + j * ID_ITEM + 8, 8);
            if (key) fn(ctx, val);
        }
    }
    return true;
}

/* --- shapes (3.2+) ----------------------------------------------------- */

bool rbp_shape_of(rbp_heap *h, uint64_t flags, rbp_shape *out)
{
    uint64_t id = flags >> 32; /* SHAPE_IN_BASIC_FLAGS on 64-bit */
    int32_t sz = L(h)->f[RBP_L_shape_size].size;
    if (!h->shape_list || sz <= 0 || id >= (UINT64_C(1) << 24)) return false;
    uint64_t base = h->shape_list + id * (uint64_t)sz;
    return rbp_read_field(h->s, base, RBP_L_shape_next_iv_index, &out->next_iv_index) &&
           rbp_read_field(h->s, base, RBP_L_shape_capacity, &out->capacity) &&
           rbp_read_field(h->s, base, RBP_L_shape_type, &out->type) && out->next_iv_index <= MAX_VALUES &&
           out->capacity <= MAX_VALUES;
}

bool rbp_shape_chain_readable(rbp_heap *h)
{
    const rbp_layout *Ly = L(h);
    return h->shape_list && Ly->f[RBP_L_shape_size].size > 0 && rbp_has(Ly, RBP_L_shape_edge_name) &&
           rbp_has(Ly, RBP_L_shape_parent_id);
}

bool rbp_shape_edge_of(rbp_heap *h, uint64_t id, rbp_shape_edge *out)
{
    uint64_t base = h->shape_list + id * (uint64_t)L(h)->f[RBP_L_shape_size].size;
    *out = (rbp_shape_edge){0};
    return rbp_read_field(h->s, base, RBP_L_shape_edge_name, &out->edge) &&
           rbp_read_field(h->s, base, RBP_L_shape_next_iv_index, &out->next) &&
           rbp_read_field(h->s, base, RBP_L_shape_type, &out->type) &&
           rbp_read_field(h->s, base, RBP_L_shape_parent_id, &out->parent);
}

/* The index of ivar `name` in an object's ivar array, found as
 * rb_shape_get_iv_index finds it: from the object's shape towards the root,
 * the SHAPE_IVAR shape whose edge is that ivar's ID adds it at
 * next_iv_index - 1. The ID is cached in *cached_id once a name matches.
 * Needs the shape members of 3.2+ (edge_name, parent_id). */
bool rbp_shape_ivar_index(rbp_heap *h, uint64_t flags, const char *name, uint64_t *cached_id, uint64_t *index)
{
    if (!rbp_shape_chain_readable(h)) return false;
    uint64_t id = flags >> 32;
    rbp_walkguard g = rbp_heap_chain_guard(h, MAX_SHAPE_DEPTH);
    /* (ids are keyed + 1: shape 0 is the root, and 0 is no key) */
    while (id < (UINT64_C(1) << 24) && rbp_heap_chain_step(h, &g, id + 1, "the shape chain", flags >> 32)) {
        rbp_shape_edge e;
        if (!rbp_shape_edge_of(h, id, &e)) return false;
        if (e.type == SHAPE_IVAR && e.edge && e.next > 0) {
            bool match = *cached_id ? e.edge == *cached_id : false;
            if (!*cached_id) {
                const char *n = rbp_id_name(h->s, e.edge);
                if (n && strcmp(n, name) == 0) *cached_id = e.edge, match = true;
            }
            if (match) {
                *index = e.next - 1;
                return e.next <= MAX_VALUES;
            }
        }
        id = e.parent;                     /* the root's parent is INVALID_SHAPE_ID, past every shape */
    }
    return false;
}
