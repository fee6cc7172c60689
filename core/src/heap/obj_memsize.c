/*
 * The memory an object owns beyond its slot, by the target version's
 * ObjectSpace.memsize_of (gc.c's obj_memsize_of): ivar buffers, string and
 * array bodies, hash tables, class tables. See docs/heap.md for what is left
 * out.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t class_extra(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext = 0, size = 0;
    bool has_ext = rbp_classext(h, o, &ext);
    if (!has_ext) return 0;
    bool inline_ext = rbp_has(L(h), RBP_L_rclass_and_ext_classext);
    size += rbp_id_table_memsize(h, rbp_class_m_tbl(h, o, ext));
    size += rbp_id_table_memsize(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cvc_tbl));
    size += rbp_id_table_memsize(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_const_tbl));
    size += rbp_id_table_memsize(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cc_tbl));
    if (h->shapes) {
        rbp_shape sh;
        uint64_t n = rbp_shape_of(h, o->flags, &sh) ? sh.next_iv_index : 0;
        int bits = 0;
        while (n >> bits) bits++;
        size += (uint64_t)8 << bits; /* class ivars are allocated as powers of two */
    } else {
        rbp_st_hdr t;
        uint64_t tbl = rbp_classext_ptr(h, o, ext, RBP_L_classext_iv_tbl);
        /* counted twice by obj_memsize_of before 3.2 (RCLASS_IV_TBL and
         * RCLASS_EXT()->iv_tbl are the same table) */
        if (tbl && rbp_st_read(h, NULL, tbl, &t)) size += 2 * rbp_st_memsize(h, &t);
    }
    if (!inline_ext && L(h)->f[RBP_L_classext_size].size > 0) size += (uint64_t)L(h)->f[RBP_L_classext_size].size;
    return size;
}

uint64_t rbp_obj_extra_bytes(rbp_heap *h, const rbp_obj *o)
{
    uint64_t v = 0, n = 0;
    switch (o->type) {
    case RBP_T_OBJECT: {
        uint64_t ptr, capa, table;
        if (!rbp_object_ivars(h, o, &ptr, &n, &capa, &table)) return 0;
        if (table) {
            rbp_st_hdr t;
            return rbp_st_read(h, NULL, table, &t) ? rbp_st_memsize(h, &t) : 0;
        }
        return robject_embedded(h, o->flags) || !ptr ? 0 : capa * 8;
    }
    case RBP_T_CLASS:
    case RBP_T_MODULE:
        return class_extra(h, o);
    case RBP_T_ICLASS: {
        uint64_t ext = 0, size = 0;
        rbp_classext(h, o, &ext);
        if ((o->flags & (h->c->iclass_is_origin | h->c->iclass_origin_shared_mtbl)) == h->c->iclass_is_origin)
            size += rbp_id_table_memsize(h, rbp_class_m_tbl(h, o, ext));
        size += rbp_id_table_memsize(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cc_tbl));
        return size;
    }
    case RBP_T_STRING:
        if ((o->flags & (STR_NOEMBED | h->c->elts_shared | STR_NOFREE)) != STR_NOEMBED) return 0;
        if (!rd(h, o, o->addr, RBP_L_rstring_heap_aux_capa, &v) || v > (UINT64_C(1) << 40)) return 0;
        return v + (uint64_t)rbp_enc_termlen(h, (int)((o->flags >> ENC_SHIFT) & 0x7f));
    case RBP_T_ARRAY:
        if (o->flags & (ARY_EMBED | h->c->elts_shared)) return 0;
        return rd(h, o, o->addr, RBP_L_rarray_heap_capa, &v) && v <= MAX_VALUES ? v * 8 : 0;
    case RBP_T_HASH: {
        uint64_t tab;
        bool st;
        if (!rbp_hash_table(h, o, &tab, &st)) return 0;
        bool in_slot = !rbp_has(L(h), RBP_L_rhash_st);
        if (!st) return !in_slot && tab ? (uint64_t)L(h)->f[RBP_L_ar_table_pairs].size : 0;
        rbp_st_hdr t;
        if (!rbp_st_read(h, o, tab, &t)) return 0;
        uint64_t m = rbp_st_memsize(h, &t);
        int32_t tsz = L(h)->f[RBP_L_st_table_size].size;
        return in_slot && tsz > 0 ? m - (uint64_t)tsz : m; /* 3.2+: the st_table is in the slot */
    }
    case RBP_T_STRUCT: {
        bool embedded;
        uint64_t ptr;
        if (!rbp_struct_body(h, o, &ptr, &n, &embedded) || embedded || !ptr) return 0;
        return n * 8;
    }
    default:
        return 0;
    }
}
