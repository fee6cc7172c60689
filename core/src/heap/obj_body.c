/*
 * Decoding the bodies of T_OBJECT (ivars, by shape from 3.2), Array, Hash
 * (st or ar table), Struct, and the single facts the dump shows of T_DATA
 * (its type's name), T_FILE (its fd) and T_FLOAT (its value). Each
 * embedded-or-not rule follows the target version's own macros.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>


bool rbp_obj_too_complex(rbp_heap *h, const rbp_obj *o)
{
    rbp_shape sh;
    return o->type == RBP_T_OBJECT && h->shapes && rbp_shape_of(h, o->flags, &sh) &&
           sh.type == h->c->shape_too_complex;
}

/* --- T_OBJECT, Array, Hash, Struct ---------------------------------------- */

bool rbp_object_ivars(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *n, uint64_t *capa,
                         uint64_t *table)
{
    *table = 0;
    bool embed = robject_embedded(h, o->flags);
    if (h->shapes) {
        rbp_shape sh;
        if (!rbp_shape_of(h, o->flags, &sh)) return false;
        if (sh.type == h->c->shape_too_complex) {
            if (!rd(h, o, o->addr, RBP_L_robject_ivptr, table)) return false;
            *ptr = *n = *capa = 0;
            return true;
        }
        *n = sh.next_iv_index;
        *capa = sh.capacity;
    } else if (embed) {
        int32_t sz = L(h)->f[RBP_L_robject_ary].size;
        *n = *capa = sz > 0 ? (uint64_t)sz / 8 : 0;
    } else {
        if (!rd(h, o, o->addr, RBP_L_robject_numiv, n)) return false;
        *capa = *n;
    }
    if (embed) *ptr = o->addr + off(h, RBP_L_robject_ary);
    else if (!rd(h, o, o->addr, RBP_L_robject_ivptr, ptr)) return false;
    if (!embed && !*ptr) *n = 0;
    return *n <= MAX_VALUES;
}

bool rbp_obj_ivar_count(rbp_heap *h, const rbp_obj *o, uint64_t *n)
{
    uint64_t ptr, capa, table;
    if (!rbp_object_ivars(h, o, &ptr, n, &capa, &table)) return false;
    rbp_st_hdr t;
    if (table) *n = rbp_st_read(h, NULL, table, &t) ? t.num_entries : 0;
    return true;
}

bool rbp_array_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len)
{
    if (o->flags & ARY_EMBED) {
        *len = (o->flags >> (RBP_FL_USHIFT + 3)) & h->c->ary_embed_len_mask;
        *ptr = o->addr + off(h, RBP_L_rarray_embed_ary);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rarray_heap_len, len) && rd(h, o, o->addr, RBP_L_rarray_heap_ptr, ptr) &&
           *len <= MAX_VALUES;
}

bool rbp_ary_len(rbp_heap *h, const rbp_obj *o, uint64_t *len)
{
    uint64_t ptr;
    return rbp_array_body(h, o, &ptr, len);
}

bool rbp_hash_table(rbp_heap *h, const rbp_obj *o, uint64_t *tab, bool *st)
{
    *st = o->flags & HASH_ST_TABLE;
    if (rbp_has(L(h), RBP_L_rhash_st)) return rd(h, o, o->addr, RBP_L_rhash_st, tab);
    int32_t sz = L(h)->f[RBP_L_rhash_size].size; /* 3.2+: the table follows struct RHash in the slot */
    if (sz <= 0) return false;
    *tab = o->addr + (uint64_t)sz;
    return true;
}

bool rbp_ar_each(rbp_heap *h, const rbp_obj *o, uint64_t tab, rbp_pair_fn fn, void *ctx)
{
    if (!tab) return true;
    uint64_t bound = (o->flags >> (RBP_FL_USHIFT + 8)) & 0xf;
    uint64_t pairs = tab + off(h, RBP_L_ar_table_pairs);
    for (uint64_t i = 0; i < bound && i < 8; i++) {
        uint64_t kv[2];
        if (rbp_obj_slot_holds(o, pairs + i * 16, 16))
            memcpy(kv, o->slot + (pairs + i * 16 - o->addr), 16);
        else if (!rbp_mem_read(h->s->mem, pairs + i * 16, kv, 16))
            return false;
        if (rbp_is_undef(&h->s->rel, kv[0])) continue; /* cleared entry */
        fn(ctx, kv[0], kv[1]);
    }
    return true;
}

bool rbp_hash_size(rbp_heap *h, const rbp_obj *o, uint64_t *size)
{
    uint64_t tab;
    bool st;
    if (!rbp_hash_table(h, o, &tab, &st)) return false;
    if (st) {
        rbp_st_hdr t;
        if (!rbp_st_read(h, o, tab, &t)) return false;
        *size = t.num_entries;
        return true;
    }
    *size = (o->flags >> (RBP_FL_USHIFT + 4)) & 0xf; /* RHASH_AR_TABLE_SIZE */
    return true;
}

bool rbp_struct_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len, bool *embedded)
{
    uint64_t elen = (o->flags >> (RBP_FL_USHIFT + 1)) & h->c->struct_embed_len_mask;
    *embedded = elen != 0;
    if (elen) {
        *len = elen;
        *ptr = o->addr + off(h, RBP_L_rstruct_ary);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rstruct_heap_len, len) && rd(h, o, o->addr, RBP_L_rstruct_heap_ptr, ptr) &&
           *len <= MAX_VALUES;
}

/* --- T_DATA, T_FILE, T_FLOAT ----------------------------------------------- */

const char *rbp_data_struct_name(rbp_heap *h, const rbp_obj *o)
{
    uint64_t type = 0, data = 0, name = 0;
    if (!rbp_obj_typed_data(h, o, &type, &data)) return NULL;
    const char *hit = rbp_addrmap_get(&h->names, type | 4); /* type structs are 8-aligned: own key space */
    if (hit) return hit;
    char buf[128];
    if (!rbp_read_field(h->s, type, RBP_L_data_type_name, &name) || !name ||
        !rbp_mem_cstr(h->s->mem, name, buf, sizeof buf))
        return NULL;
    char *copy = strdup(buf);
    if (!copy) return NULL;
    rbp_addrmap_put(&h->names, type | 4, copy);
    return rbp_addrmap_get(&h->names, type | 4);
}

bool rbp_file_fd(rbp_heap *h, const rbp_obj *o, int *fd)
{
    uint64_t fptr = 0, v = 0;
    if (o->type != RBP_T_FILE || !rd(h, o, o->addr, RBP_L_rfile_fptr, &fptr) || !fptr ||
        !rbp_read_field(h->s, fptr, RBP_L_io_fd, &v))
        return false;
    *fd = (int)(int32_t)v;
    return true;
}

bool rbp_float_value(rbp_heap *h, const rbp_obj *o, double *out)
{
    uint64_t bits;
    if (o->type != RBP_T_FLOAT || !rd(h, o, o->addr, RBP_L_rfloat_value, &bits)) return false;
    memcpy(out, &bits, sizeof *out);
    return true;
}
