/*
 * What an object references, as the target's GC mark function would report
 * it to ObjectSpace.reachable_objects_from (gc.c's gc_mark_children):
 * special constants skipped, the class first, then the type's own
 * references (ivars, elements, hash pairs, a class's tables and caches).
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Calls fn on each of n VALUEs at addr (from the slot copy if inside it). */
static bool each_value(rbp_heap *h, const rbp_obj *o, uint64_t addr, uint64_t n, rbp_ref_fn fn, void *ctx)
{
    if (n > MAX_VALUES || n > h->ref_budget) return false; /* the walk's budget: this object is incomplete */
    h->ref_budget -= n;
    if (rbp_obj_slot_holds(o, addr, n * 8)) {
        for (uint64_t i = 0; i < n; i++) {
            uint64_t v;
            memcpy(&v, o->slot + (addr - o->addr) + i * 8, 8);
            fn(ctx, v);
        }
        return true;
    }
    uint64_t buf[CHUNK];
    for (uint64_t i = 0; i < n; i += CHUNK) {
        uint64_t k = n - i < CHUNK ? n - i : CHUNK;
        if (!rbp_mem_read(h->s->mem, addr + i * 8, buf, (size_t)k * 8)) return false;
        for (uint64_t j = 0; j < k; j++) fn(ctx, buf[j]);
    }
    return true;
}

/* Filters special constants out, as gc_mark does, before the caller's fn. */
typedef struct ref_filter {
    rbp_heap *h;
    rbp_ref_fn fn;
    void *ctx;
} ref_filter;

static void emit(ref_filter *rf, uint64_t v)
{
    if (rbp_is_heap_ptr(rf->h->s, v)) rf->fn(rf->ctx, v);
}

static void emit_cb(void *ctx, uint64_t v) { emit(ctx, v); }

static void st_value_cb(void *ctx, uint64_t key, uint64_t rec) { emit(ctx, rec); }
static void st_pair_cb(void *ctx, uint64_t key, uint64_t rec)
{
    emit(ctx, key);
    emit(ctx, rec);
}

typedef struct cc_ctx {
    rbp_heap *h;
    ref_filter *rf;
} cc_ctx;

/* One rb_class_cc_entries of a cc table (gc.c's cc_table_mark_i). */
static void cc_entries_cb(void *ctx, uint64_t ccs)
{
    cc_ctx *c = ctx;
    rbp_heap *h = c->h;
    uint64_t cme = 0, len = 0, entries = 0, cme_flags = 0;
    if (!rbp_read_field(h->s, ccs, RBP_L_ccs_cme, &cme) || !rbp_read_field(h->s, ccs, RBP_L_ccs_len, &len) ||
        !rbp_read_field(h->s, ccs, RBP_L_ccs_entries, &entries))
        return;
    /* Invalidated method entries are freed by the marker, not marked. */
    if (cme && rbp_mem_u64(h->s->mem, cme, &cme_flags) && (cme_flags & ME_INVALIDATED)) return;
    emit(c->rf, cme);
    int32_t esz = L(h)->f[RBP_L_ccs_entry_size].size;
    if ((int32_t)len <= 0 || len > 4096 || esz <= 0 || !entries) return;
    for (uint64_t i = 0; i < len; i++) {
        uint64_t e = entries + i * (uint64_t)esz, v;
        if (rbp_has(L(h), RBP_L_ccs_entry_ci) && rbp_read_field(h->s, e, RBP_L_ccs_entry_ci, &v)) emit(c->rf, v);
        if (rbp_read_field(h->s, e, RBP_L_ccs_entry_cc, &v)) emit(c->rf, v);
    }
}

static void const_entry_cb(void *ctx, uint64_t ce)
{
    ref_filter *rf = ctx;
    uint64_t v;
    if (rbp_read_field(rf->h->s, ce, RBP_L_const_entry_value, &v)) emit(rf, v);
    if (rbp_read_field(rf->h->s, ce, RBP_L_const_entry_file, &v)) emit(rf, v);
}

static void cvc_entry_cb(void *ctx, uint64_t entry)
{
    ref_filter *rf = ctx;
    uint64_t v;
    if (rbp_read_field(rf->h->s, entry, RBP_L_cvc_entry_cref, &v)) emit(rf, v);
}

static bool class_refs(rbp_heap *h, const rbp_obj *o, ref_filter *rf)
{
    const rbp_layout *Ly = L(h);
    uint64_t ext = 0, v;
    bool ok = true;
    bool has_ext = rbp_classext(h, o, &ext);
    if (o->type == RBP_T_CLASS && (o->flags & h->c->fl_singleton) && rbp_has(Ly, RBP_L_classext_attached_object) &&
        has_ext && rd(h, o, ext, RBP_L_classext_attached_object, &v))
        emit(rf, v);
    if (o->type == RBP_T_ICLASS) {
        if ((o->flags & (h->c->iclass_is_origin | h->c->iclass_origin_shared_mtbl)) == h->c->iclass_is_origin)
            ok &= rbp_id_table_each(h, rbp_class_m_tbl(h, o, ext), emit_cb, rf);
        emit(rf, rbp_class_super(h, o));
        if (!has_ext) return ok;
        if (h->s->rel.dump.refs_includer && (v = rbp_classext_ptr(h, o, ext, RBP_L_classext_includer))) emit(rf, v);
        ok &= rbp_id_table_each(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_callable_m_tbl), emit_cb, rf);
        cc_ctx cc = {h, rf};
        if (rbp_has(Ly, RBP_L_classext_cc_tbl))
            ok &= rbp_id_table_each(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cc_tbl), cc_entries_cb, &cc);
        return ok;
    }
    emit(rf, rbp_class_super(h, o));
    if (!has_ext) return ok;
    ok &= rbp_id_table_each(h, rbp_class_m_tbl(h, o, ext), emit_cb, rf);
    if (h->s->rel.dump.refs_cvc_table && rbp_has(Ly, RBP_L_cvc_entry_cref))
        ok &= rbp_id_table_each(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cvc_tbl), cvc_entry_cb, rf);
    cc_ctx cc = {h, rf};
    if (rbp_has(Ly, RBP_L_classext_cc_tbl))
        ok &= rbp_id_table_each(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_cc_tbl), cc_entries_cb, &cc);
    if (h->shapes) {
        rbp_shape sh;
        uint64_t ivp = rbp_classext_ptr(h, o, ext, RBP_L_classext_iv_ptr);
        if (rbp_shape_of(h, o->flags, &sh)) {
            if (sh.type == h->c->shape_too_complex) {
                rbp_st_hdr t;
                if (ivp && rbp_st_read(h, NULL, ivp, &t)) ok &= rbp_st_each(h, &t, st_value_cb, rf);
            } else if (ivp) {
                ok &= each_value(h, NULL, ivp, sh.next_iv_index, emit_cb, rf);
            }
        } else {
            ok = false;
        }
    } else {
        rbp_st_hdr t;
        uint64_t tbl = rbp_classext_ptr(h, o, ext, RBP_L_classext_iv_tbl);
        if (tbl && rbp_st_read(h, NULL, tbl, &t)) ok &= rbp_st_each(h, &t, st_value_cb, rf);
    }
    ok &= rbp_id_table_each(h, rbp_classext_ptr(h, o, ext, RBP_L_classext_const_tbl), const_entry_cb, rf);
    if (rbp_has(Ly, RBP_L_classext_classpath) && rd(h, o, ext, RBP_L_classext_classpath, &v)) emit(rf, v);
    return ok;
}

bool rbp_obj_refs(rbp_heap *h, const rbp_obj *o, rbp_ref_fn fn, void *ctx)
{
    ref_filter rf = {h, fn, ctx};
    uint64_t ptr = 0, n = 0, v;
    switch (o->type) {
    case RBP_T_FLOAT: case RBP_T_BIGNUM: case RBP_T_SYMBOL: case RBP_T_IMEMO: case RBP_T_NODE:
    case RBP_T_ZOMBIE: case RBP_T_MOVED: case RBP_T_NONE:
        return true; /* no class reference either (imemos: not decoded) */
    default:
        break;
    }
    emit(&rf, o->klass);
    switch (o->type) {
    case RBP_T_CLASS: case RBP_T_MODULE: case RBP_T_ICLASS:
        return class_refs(h, o, &rf);
    case RBP_T_OBJECT: {
        uint64_t capa, table;
        if (!rbp_object_ivars(h, o, &ptr, &n, &capa, &table)) return false;
        if (table) {
            rbp_st_hdr t;
            return rbp_st_read(h, NULL, table, &t) && rbp_st_each(h, &t, st_value_cb, &rf);
        }
        return each_value(h, o, ptr, n, emit_cb, &rf);
    }
    case RBP_T_ARRAY:
        if (o->flags & h->c->elts_shared) {
            if (!rd(h, o, o->addr, RBP_L_rarray_shared_root, &v)) return false;
            emit(&rf, v);
            return true;
        }
        return rbp_array_body(h, o, &ptr, &n) && each_value(h, o, ptr, n, emit_cb, &rf);
    case RBP_T_HASH: {
        uint64_t tab;
        bool st, ok;
        if (!rbp_hash_table(h, o, &tab, &st)) return false;
        if (st) {
            rbp_st_hdr t;
            ok = rbp_st_read(h, o, tab, &t) && rbp_st_each(h, &t, st_pair_cb, &rf);
        } else {
            ok = rbp_ar_each(h, o, tab, st_pair_cb, &rf);
        }
        if (rd(h, o, o->addr, RBP_L_rhash_ifnone, &v)) emit(&rf, v);
        return ok;
    }
    case RBP_T_STRING:
        if ((o->flags & STR_NOEMBED) && (o->flags & h->c->elts_shared)) {
            if (!rd(h, o, o->addr, RBP_L_rstring_shared, &v)) return false;
            emit(&rf, v);
        }
        return true;
    case RBP_T_STRUCT: {
        bool embedded;
        return rbp_struct_body(h, o, &ptr, &n, &embedded) && each_value(h, o, ptr, n, emit_cb, &rf);
    }
    default:
        return true; /* T_DATA, T_FILE, T_REGEXP, T_MATCH, T_RATIONAL, T_COMPLEX: class only */
    }
}
