/*
 * An object's values with their names (obj_values.h), for the value
 * printer. Instance variable names come from where the target version
 * keeps them: before 3.2 the class's iv_index_tbl (an st_table of ID to
 * index in 2.7, of ID to rb_iv_index_tbl_entry in 3.0/3.1), iterated in
 * its insertion order as rb_ivar_foreach does; from 3.2 the object's shape,
 * walked to the root (each SHAPE_IVAR shape adds one ivar at
 * next_iv_index - 1); a too-complex object (3.3+) keeps an st_table of ID
 * to value. Every walk is bounded.
 */
#include "heap/obj_values.h"

#include <stdlib.h>
#include <string.h>

#include "heap/obj_internal.h"

enum { MAX_IVARS = 1 << 16 };

/* --- ivars --------------------------------------------------------------- */

typedef struct ivar_slot {
    uint64_t id, index;
} ivar_slot;

typedef struct iv_walk {
    rbp_heap *h;
    ivar_slot *slots;
    size_t n, cap;
    bool entry_ptr;  /* 3.0/3.1: the record is an rb_iv_index_tbl_entry */
    bool bad;
} iv_walk;

static void push_slot(iv_walk *w, uint64_t id, uint64_t index)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        ivar_slot *p = cap <= MAX_IVARS ? realloc(w->slots, cap * sizeof *p) : NULL;
        if (!p) {
            w->bad = true;
            return;
        }
        w->slots = p;
        w->cap = cap;
    }
    w->slots[w->n++] = (ivar_slot){id, index};
}

static void iv_index_cb(void *ctx, uint64_t key, uint64_t rec)
{
    iv_walk *w = ctx;
    uint64_t index = rec;
    if (w->entry_ptr && !rbp_read_field(w->h->s, rec, RBP_L_iv_index_entry_index, &index)) {
        w->bad = true;
        return;
    }
    push_slot(w, key, index & 0xffffffffu);
}

/* The shape chain from the object's shape to the root, in ivar order. */
static bool shape_slots(rbp_heap *h, uint64_t flags, iv_walk *w)
{
    if (!rbp_shape_chain_readable(h)) return false;
    uint64_t id = flags >> 32;
    /* a loop of parents would fill the slot list with one ivar over and
     * over: the guard stops it (ids keyed + 1: shape 0 is the root) */
    rbp_walkguard g = rbp_heap_chain_guard(h, MAX_SHAPE_DEPTH);
    while (id < (UINT64_C(1) << 24)) {
        if (!rbp_heap_chain_step(h, &g, id + 1, "the shape chain", flags >> 32)) return false;
        rbp_shape_edge e;
        if (!rbp_shape_edge_of(h, id, &e)) return false;
        if (e.type == SHAPE_IVAR && e.edge && e.next > 0) push_slot(w, e.edge, e.next - 1);
        if (w->bad || e.parent == id) return false;
        id = e.parent;
    }
    /* collected leaf first: reverse into the order the ivars were added */
    for (size_t i = 0; i < w->n / 2; i++) {
        ivar_slot t = w->slots[i];
        w->slots[i] = w->slots[w->n - 1 - i];
        w->slots[w->n - 1 - i] = t;
    }
    return true;
}

typedef struct st_named {
    rbp_named_fn fn;
    void *ctx;
    bool stop;
} st_named;

static void st_named_cb(void *ctx, uint64_t key, uint64_t rec)
{
    st_named *n = ctx;
    if (!n->stop && !n->fn(n->ctx, key, rec)) n->stop = true;
}

static bool rd_value(rbp_heap *h, const rbp_obj *o, uint64_t at, uint64_t *v)
{
    if (rbp_obj_slot_holds(o, at, 8)) {
        memcpy(v, o->slot + (at - o->addr), 8);
        return true;
    }
    return rbp_mem_u64(h->s->mem, at, v);
}

int rbp_obj_ivars_each(rbp_heap *h, const rbp_obj *o, rbp_named_fn fn, void *ctx)
{
    uint64_t ptr = 0, n = 0, capa = 0, table = 0;
    if (!rbp_object_ivars(h, o, &ptr, &n, &capa, &table)) return RBP_VALUES_UNREADABLE;
    if (table) { /* too complex: st_table of ID -> VALUE */
        rbp_st_hdr t;
        st_named sn = {fn, ctx, false};
        return rbp_st_read(h, NULL, table, &t) && rbp_st_each(h, &t, st_named_cb, &sn) ? RBP_VALUES_OK
                                                                                        : RBP_VALUES_UNREADABLE;
    }
    if (n == 0) return RBP_VALUES_OK;
    iv_walk w = {.h = h};
    if (h->shapes) {
        if (!shape_slots(h, o->flags, &w)) {
            free(w.slots);
            return rbp_has(L(h), RBP_L_shape_edge_name) ? RBP_VALUES_UNREADABLE : RBP_VALUES_NO_LAYOUT;
        }
    } else {
        /* ROBJECT_IV_INDEX_TBL: the object's own pointer when its ivars are
         * on the heap, else its class's (rb_obj_class: the real class) */
        uint64_t tbl = 0, ext = 0;
        if (!rbp_has(L(h), RBP_L_classext_iv_index_tbl)) return RBP_VALUES_NO_LAYOUT;
        if (!robject_embedded(h, o->flags) && rbp_has(L(h), RBP_L_robject_iv_index_tbl)) {
            if (!rd(h, o, o->addr, RBP_L_robject_iv_index_tbl, &tbl)) return RBP_VALUES_UNREADABLE;
        } else {
            uint8_t buf[64];
            rbp_obj c;
            uint64_t real = rbp_class_real(h, o->klass);
            if (!real || !rbp_obj_at(h, real, buf, sizeof buf, &c) || !rbp_classext(h, &c, &ext))
                return RBP_VALUES_UNREADABLE;
            tbl = rbp_classext_ptr(h, &c, ext, RBP_L_classext_iv_index_tbl);
        }
        rbp_st_hdr t;
        if (!tbl) return RBP_VALUES_OK; /* no ivar was ever set on an object of the class */
        if (!rbp_st_read(h, NULL, tbl, &t)) return RBP_VALUES_UNREADABLE;
        w.entry_ptr = rbp_has(L(h), RBP_L_iv_index_entry_index);
        if (!rbp_st_each(h, &t, iv_index_cb, &w) || w.bad) {
            free(w.slots);
            return RBP_VALUES_UNREADABLE;
        }
    }
    int status = RBP_VALUES_OK;
    for (size_t i = 0; i < w.n; i++) {
        uint64_t v;
        if (w.slots[i].index >= n) continue; /* an ivar the class knows but this object has no room for */
        uint64_t at = ptr + w.slots[i].index * 8;
        if (!rd_value(h, o, at, &v)) {
            status = RBP_VALUES_UNREADABLE;
            break;
        }
        if (rbp_is_undef(&h->s->rel, v)) continue; /* removed, or never set on this object */
        if (!fn(ctx, w.slots[i].id, v)) break;
    }
    free(w.slots);
    return status;
}

/* --- hashes, structs, arrays --------------------------------------------- */

typedef struct kv_ctx {
    rbp_kv_fn fn;
    void *ctx;
    bool stop;
} kv_ctx;

static void kv_cb(void *ctx, uint64_t key, uint64_t val)
{
    kv_ctx *k = ctx;
    if (!k->stop && !k->fn(k->ctx, key, val)) k->stop = true;
}

bool rbp_hash_each(rbp_heap *h, const rbp_obj *o, rbp_kv_fn fn, void *ctx)
{
    uint64_t tab;
    bool st;
    kv_ctx k = {fn, ctx, false};
    if (!rbp_hash_table(h, o, &tab, &st)) return false;
    if (!st) return rbp_ar_each(h, o, tab, kv_cb, &k);
    rbp_st_hdr t;
    return rbp_st_read(h, o, tab, &t) && rbp_st_each(h, &t, kv_cb, &k);
}

bool rbp_hash_count(rbp_heap *h, const rbp_obj *o, uint64_t *n)
{
    return rbp_hash_size(h, o, n);
}

bool rbp_struct_values(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len)
{
    bool embedded;
    return rbp_struct_body(h, o, ptr, len, &embedded);
}

bool rbp_array_values(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len)
{
    return rbp_array_body(h, o, ptr, len);
}

uint64_t rbp_struct_members(rbp_heap *h, uint64_t klass)
{
    static const char name[] = "__members__";
    uint64_t cached = 0, cl = klass;
    uint8_t buf[64];
    rbp_walkguard g = rbp_heap_chain_guard(h, MAX_SUPER);
    while (cl && rbp_heap_chain_step(h, &g, cl, "the superclass chain", klass)) {
        rbp_obj c;
        uint64_t v = 0;
        if (!rbp_obj_at(h, cl, buf, sizeof buf, &c)) return 0;
        if (rbp_class_ivar(h, &c, name, &cached, &v) && v && !rbp_is_nil(&h->s->rel, v)) return v;
        cl = rbp_class_super(h, &c);
    }
    return 0;
}

bool rbp_obj_ivar_storage(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *n, uint64_t *capa, uint64_t *table)
{
    return rbp_object_ivars(h, o, ptr, n, capa, table);
}

bool rbp_hash_storage(rbp_heap *h, const rbp_obj *o, uint64_t *table, bool *st)
{
    return rbp_hash_table(h, o, table, st);
}
