/*
 * Per-object decoders for the census and the dump (see heap.h): the memory
 * an object owns, what it references, string facts, and class identity and
 * names. Each follows the target version's own code (gc.c's
 * obj_memsize_of and gc_mark_children, variable.c's classpath lookup), read
 * through the layout tables, so the rules live in one place per fact.
 *
 * Members that lie inside the object's slot are taken from the walk's local
 * copy of the page; anything outside (ivar buffers, array bodies, tables) is
 * read through the session's memory cache. Every count read from the target
 * is bounded before it sizes a read or a loop.
 */
#include "heap/heap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/robject.h"

enum {
    MAX_VALUES = 1 << 26,       /* elements of one array/struct/ivar buffer */
    MAX_TABLE = 1 << 24,        /* entries of one st/id table */
    CHUNK = 1024,               /* VALUEs read per call for long buffers */
    MAX_CLASS_HOPS = 256,       /* singleton/iclass chain in rbp_class_real */
    SHAPE_TOO_COMPLEX = 4,      /* enum shape_type SHAPE_OBJ_TOO_COMPLEX (3.2+) */
    ST_ENTRY = 24,              /* st_table_entry: hash, key, record */
    ID_ITEM = 16,               /* id_table item_t on 64-bit: u32 key, int collision, VALUE val */
    ID_TABLE_HEADER = 24,       /* sizeof(struct rb_id_table) */
};

#define L(h) (&(h)->s->layout)
#define ROBJECT_EMBED RBP_FL_USER(1)
#define STR_NOEMBED RBP_FL_USER(1)
#define STR_NOFREE RBP_FL_USER(18)
#define RSTRING_FSTR RBP_FL_USER(17)
#define ARY_EMBED RBP_FL_USER(1)
#define HASH_ST_TABLE RBP_FL_USER(3)
#define ME_INVALIDATED RBP_FL_USER(9)  /* METHOD_ENTRY_INVALIDATED: IMEMO_FL_USER5 */
#define ENC_SHIFT (RBP_FL_USHIFT + 10)
#define ENC_CR_SHIFT (RBP_FL_USHIFT + 8)

/* --- reading members --------------------------------------------------- */

static size_t field_bytes(const rbp_field *f)
{
    if (f->bit_size) return (size_t)(f->bit_offset + f->bit_size + 7) / 8;
    return f->size > 0 && f->size <= 8 ? (size_t)f->size : 8;
}

/* Member id of a struct at base; from the slot copy when base..member lies
 * inside the object's slot, else from memory. */
static bool rd(rbp_heap *h, const rbp_obj *o, uint64_t base, rbp_field_id id, uint64_t *out)
{
    const rbp_field *f = &L(h)->f[id];
    if (f->offset < 0) return false;
    if (o && base >= o->addr && base - o->addr + (uint64_t)f->offset + field_bytes(f) <= o->slot_size) {
        *out = rbp_field_extract(L(h), id, o->slot + (base - o->addr));
        return true;
    }
    return rbp_read_field(h->s, base, id, out);
}

static uint64_t off(rbp_heap *h, rbp_field_id id) { return (uint64_t)rbp_off(L(h), id); }

/* Calls fn on each of n VALUEs at addr (from the slot copy if inside it). */
static bool each_value(rbp_heap *h, const rbp_obj *o, uint64_t addr, uint64_t n, rbp_ref_fn fn, void *ctx)
{
    if (n > MAX_VALUES) return false;
    if (o && addr >= o->addr && addr - o->addr + n * 8 <= o->slot_size) {
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

/* --- st tables and id tables ------------------------------------------- */

typedef struct st_hdr {
    uint64_t entry_power, bin_power, size_ind, num_entries, bins, start, bound, entries;
} st_hdr;

static bool st_read(rbp_heap *h, const rbp_obj *o, uint64_t tab, st_hdr *t)
{
    return tab && rd(h, o, tab, RBP_L_st_entry_power, &t->entry_power) &&
           rd(h, o, tab, RBP_L_st_bin_power, &t->bin_power) && rd(h, o, tab, RBP_L_st_size_ind, &t->size_ind) &&
           rd(h, o, tab, RBP_L_st_num_entries, &t->num_entries) && rd(h, o, tab, RBP_L_st_bins, &t->bins) &&
           rd(h, o, tab, RBP_L_st_entries_start, &t->start) && rd(h, o, tab, RBP_L_st_entries_bound, &t->bound) &&
           rd(h, o, tab, RBP_L_st_entries, &t->entries) && t->entry_power < 31 && t->bin_power < 32 &&
           t->size_ind < 4 && t->start <= t->bound && t->bound <= (UINT64_C(1) << t->entry_power) &&
           t->bound <= MAX_TABLE;
}

/* st.c's st_memsize: the table, its bins and its entry array. */
static uint64_t st_memsize(rbp_heap *h, const st_hdr *t)
{
    uint64_t size = (uint64_t)(L(h)->f[RBP_L_st_table_size].size > 0 ? L(h)->f[RBP_L_st_table_size].size : 56);
    if (t->bins && t->entry_power > 0) size += ((((uint64_t)1 << t->bin_power) << t->size_ind) + 7) / 8 * 8;
    return size + ((uint64_t)1 << t->entry_power) * ST_ENTRY;
}

/* Calls fn(ctx, key, record) for every live entry, in entry order. */
typedef void (*st_fn)(void *ctx, uint64_t key, uint64_t rec);
static bool st_each(rbp_heap *h, const st_hdr *t, st_fn fn, void *ctx)
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

static void st_value_cb(void *ctx, uint64_t key, uint64_t rec) { emit(ctx, rec); }
static void st_pair_cb(void *ctx, uint64_t key, uint64_t rec)
{
    emit(ctx, key);
    emit(ctx, rec);
}

typedef struct id_tbl {
    uint64_t capa, num, items;
} id_tbl;

static bool id_table_read(rbp_heap *h, uint64_t tbl, id_tbl *t)
{
    return tbl && rbp_read_field(h->s, tbl, RBP_L_id_table_capa, &t->capa) &&
           rbp_read_field(h->s, tbl, RBP_L_id_table_num, &t->num) &&
           rbp_read_field(h->s, tbl, RBP_L_id_table_items, &t->items) && (int32_t)t->capa >= 0 &&
           t->capa <= MAX_TABLE;
}

static uint64_t id_table_memsize(rbp_heap *h, uint64_t tbl)
{
    id_tbl t;
    return id_table_read(h, tbl, &t) ? t.capa * ID_ITEM + ID_TABLE_HEADER : 0;
}

/* Calls fn(ctx, value) for every occupied item (rb_id_table_foreach_values). */
static bool id_table_each(rbp_heap *h, uint64_t tbl, rbp_ref_fn fn, void *ctx)
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

typedef struct shape {
    uint64_t next_iv_index, capacity, type;
} shape;

static bool shape_of(rbp_heap *h, uint64_t flags, shape *out)
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

/* --- classes ----------------------------------------------------------- */

/* The classext: inline after RClass from 3.3, a pointer before. */
static bool classext(rbp_heap *h, const rbp_obj *o, uint64_t *ext)
{
    if (rbp_has(L(h), RBP_L_rclass_and_ext_classext)) {
        *ext = o->addr + off(h, RBP_L_rclass_and_ext_classext);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rclass_ptr, ext) && *ext;
}

static uint64_t class_m_tbl(rbp_heap *h, const rbp_obj *o, uint64_t ext)
{
    uint64_t t = 0;
    if (rbp_has(L(h), RBP_L_rclass_m_tbl)) rd(h, o, o->addr, RBP_L_rclass_m_tbl, &t);
    else if (ext && rbp_has(L(h), RBP_L_classext_m_tbl)) rd(h, o, ext, RBP_L_classext_m_tbl, &t);
    return t;
}

static uint64_t ext_ptr(rbp_heap *h, const rbp_obj *o, uint64_t ext, rbp_field_id id)
{
    uint64_t v = 0;
    if (ext && rbp_has(L(h), id)) rd(h, o, ext, id, &v);
    return v;
}

bool rbp_class_variation_count(rbp_heap *h, const rbp_obj *o, uint64_t *out)
{
    uint64_t ext;
    return rbp_has(L(h), RBP_L_classext_variation_count) && classext(h, o, &ext) &&
           rd(h, o, ext, RBP_L_classext_variation_count, out);
}

uint64_t rbp_class_super(rbp_heap *h, const rbp_obj *o)
{
    uint64_t v = 0;
    rd(h, o, o->addr, RBP_L_rclass_super, &v);
    return v;
}

bool rbp_obj_at(rbp_heap *h, uint64_t addr, uint8_t *buf, size_t bufsize, rbp_obj *o)
{
    const rbp_heap_page *pg = rbp_heap_page_of(h, addr);
    if (!pg || (addr - pg->start) % pg->slot_size) return false;
    size_t n = pg->slot_size < bufsize ? pg->slot_size : bufsize;
    if (!rbp_mem_read(h->s->mem, addr, buf, n)) return false;
    *o = (rbp_obj){.addr = addr, .slot = buf, .slot_size = (uint32_t)n};
    memcpy(&o->flags, buf, 8);
    memcpy(&o->klass, buf + 8, 8);
    o->type = (int)(o->flags & RBP_T_MASK);
    return o->flags != 0;
}

/* A class ivar by name: the shape-indexed iv_ptr can't be searched by name
 * without walking the shape tree, so this is only for the versions that keep
 * class ivars in an st_table (before 3.2), where classpaths also live. */
typedef struct ivar_find {
    rbp_heap *h;
    uint64_t *cached_id;
    const char *name;
    uint64_t value;
    bool found;
} ivar_find;

static void ivar_find_cb(void *ctx, uint64_t key, uint64_t rec)
{
    ivar_find *f = ctx;
    if (f->found) return;
    if (*f->cached_id) {
        if (key != *f->cached_id) return;
    } else {
        const char *name = rbp_id_name(f->h->s, key);
        if (!name || strcmp(name, f->name) != 0) return;
        *f->cached_id = key;
    }
    f->value = rec;
    f->found = true;
}

static bool class_ivar(rbp_heap *h, const rbp_obj *o, const char *name, uint64_t *cached_id, uint64_t *out)
{
    uint64_t ext, tbl;
    st_hdr t;
    if (!rbp_has(L(h), RBP_L_classext_iv_tbl) || !classext(h, o, &ext) ||
        !(tbl = ext_ptr(h, o, ext, RBP_L_classext_iv_tbl)) || !st_read(h, NULL, tbl, &t))
        return false;
    ivar_find f = {h, cached_id, name, 0, false};
    st_each(h, &t, ivar_find_cb, &f);
    *out = f.value;
    return f.found;
}

static uint64_t attached_object(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext, v = 0;
    if (rbp_has(L(h), RBP_L_classext_attached_object)) {
        if (classext(h, o, &ext)) rd(h, o, ext, RBP_L_classext_attached_object, &v);
        return v;
    }
    class_ivar(h, o, "__attached__", &h->id_attached, &v);
    return v;
}

uint64_t rbp_class_real(rbp_heap *h, uint64_t klass)
{
    void *hit = rbp_addrmap_get(&h->real, klass);
    if (hit) return (uint64_t)(uintptr_t)hit - 1;
    uint64_t cl = klass;
    uint8_t buf[64];
    for (int i = 0; cl && i < MAX_CLASS_HOPS; i++) {
        rbp_obj o;
        if (!rbp_obj_at(h, cl, buf, sizeof buf, &o)) {
            cl = 0;
            break;
        }
        bool singleton = o.type == RBP_T_CLASS && (o.flags & h->c.fl_singleton);
        if (!singleton && o.type != RBP_T_ICLASS) break;
        cl = rbp_class_super(h, &o);
        if (i == MAX_CLASS_HOPS - 1) cl = 0;
    }
    rbp_addrmap_put(&h->real, klass, (void *)(uintptr_t)(cl + 1));
    return cl;
}

const char *rbp_heap_class_path(rbp_heap *h, uint64_t klass)
{
    if (rbp_has(L(h), RBP_L_classext_classpath)) {
        bool permanent;
        return rbp_class_path(h->s, klass, &permanent);
    }
    /* Before 3.3 a permanent path is the hidden ivar __classpath__ (cached
     * under klass|1 in the names map, apart from display names). */
    const char *hit = rbp_addrmap_get(&h->names, klass | 1);
    if (hit) return hit;
    uint8_t buf[64];
    rbp_obj o;
    uint64_t str;
    if (!rbp_obj_at(h, klass, buf, sizeof buf, &o) || (o.type != RBP_T_CLASS && o.type != RBP_T_MODULE)) return NULL;
    if (!class_ivar(h, &o, "__classpath__", &h->id_classpath, &str)) return NULL;
    char *name = rbp_string_dup(h->s, str);
    if (!name) return NULL;
    rbp_addrmap_put(&h->names, klass | 1, name);
    return rbp_addrmap_get(&h->names, klass | 1);
}

/* A temporary path ("#<Module:0x...>::Inner"), which inspect shows for a
 * class named under an anonymous namespace; malloc'd or NULL. */
static char *temporary_path(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext, str = 0;
    if (rbp_has(L(h), RBP_L_classext_classpath)) {
        if (!classext(h, o, &ext) || !rd(h, o, ext, RBP_L_classext_classpath, &str) || !str) return NULL;
    } else if (!class_ivar(h, o, "__tmp_classpath__", &h->id_tmp_classpath, &str)) {
        return NULL;
    }
    return rbp_string_dup(h->s, str);
}

const char *rbp_heap_class_stored_path(rbp_heap *h, uint64_t klass)
{
    const char *p = rbp_heap_class_path(h, klass);
    if (p) return p;
    const char *hit = rbp_addrmap_get(&h->names, klass | 2);
    if (hit) return hit;
    uint8_t buf[64];
    rbp_obj o;
    if (!rbp_obj_at(h, klass, buf, sizeof buf, &o) || (o.type != RBP_T_CLASS && o.type != RBP_T_MODULE)) return NULL;
    char *tmp = temporary_path(h, &o);
    if (!tmp) return NULL;
    rbp_addrmap_put(&h->names, klass | 2, tmp);
    return rbp_addrmap_get(&h->names, klass | 2);
}

bool rbp_obj_too_complex(rbp_heap *h, const rbp_obj *o)
{
    shape sh;
    return o->type == RBP_T_OBJECT && h->c.shapes && shape_of(h, o->flags, &sh) && sh.type == SHAPE_TOO_COMPLEX;
}

const char *rbp_heap_class_name(rbp_heap *h, uint64_t klass)
{
    const char *hit = rbp_addrmap_get(&h->names, klass);
    if (hit) return hit;
    char *name = NULL;
    const char *path = rbp_heap_class_path(h, klass);
    uint8_t buf[64];
    rbp_obj o;
    bool ok = rbp_obj_at(h, klass, buf, sizeof buf, &o);
    if (path) {
        name = strdup(path);
    } else if (ok && o.type == RBP_T_CLASS && (o.flags & h->c.fl_singleton)) {
        /* "#<Class:Foo>" for a metaclass, "#<Class:#<Foo:0x...>>" otherwise */
        uint64_t att = attached_object(h, &o);
        int at = att ? rbp_obj_type(h->s, att) : -1;
        const char *inner = NULL;
        char tmp[64];
        if (at == RBP_T_CLASS || at == RBP_T_MODULE) {
            inner = att != klass ? rbp_heap_class_name(h, att) : NULL;
        } else if (att) {
            uint64_t real = 0, aklass = 0;
            if (rbp_mem_u64(h->s->mem, att + 8, &aklass)) real = rbp_class_real(h, aklass);
            snprintf(tmp, sizeof tmp, "0x%016llx", (unsigned long long)att);
            const char *cn = real ? rbp_heap_class_name(h, real) : "?";
            size_t n = strlen(cn) + strlen(tmp) + 8;
            name = malloc(n + 16);
            if (name) snprintf(name, n + 16, "#<Class:#<%s:%s>>", cn, tmp);
        }
        if (!name) {
            size_t n = (inner ? strlen(inner) : 20) + 16;
            name = malloc(n);
            if (name) {
                if (inner)
                    snprintf(name, n, "#<Class:%s>", inner);
                else
                    snprintf(name, n, "#<Class:0x%016llx>", (unsigned long long)klass);
            }
        }
    } else if (ok && (o.type == RBP_T_CLASS || o.type == RBP_T_MODULE)) {
        name = temporary_path(h, &o);
        if (!name && (name = malloc(40)))
            snprintf(name, 40, "#<%s:0x%016llx>", o.type == RBP_T_MODULE ? "Module" : "Class",
                     (unsigned long long)klass);
    }
    if (!name && (name = malloc(40))) snprintf(name, 40, "(not a class: 0x%llx)", (unsigned long long)klass);
    if (!name) return "(out of memory)";
    rbp_addrmap_put(&h->names, klass, name);
    const char *got = rbp_addrmap_get(&h->names, klass);
    return got ? got : "(out of memory)";
}

bool rbp_obj_internal(rbp_heap *h, const rbp_obj *o)
{
    switch (o->type) {
    case RBP_T_NONE: case RBP_T_MOVED: case RBP_T_IMEMO: case RBP_T_ICLASS: case RBP_T_ZOMBIE: case RBP_T_NODE:
        return true;
    case RBP_T_CLASS:
        if (!o->klass) return true;
        if (o->flags & h->c.fl_singleton) {
            /* rb_singleton_class_internal_p: a metaclass that has no
             * metaclass of its own */
            uint64_t att = attached_object(h, o);
            if (!att || rbp_obj_type(h->s, att) != RBP_T_CLASS) return false;
            uint8_t buf[64];
            rbp_obj meta;
            if (rbp_obj_at(h, o->klass, buf, sizeof buf, &meta) && meta.type == RBP_T_CLASS &&
                (meta.flags & h->c.fl_singleton) && attached_object(h, &meta) == o->addr)
                return false;
            return true;
        }
        return false;
    default:
        return o->klass == 0;
    }
}

/* --- object bodies ----------------------------------------------------- */

/* T_OBJECT's ivars: where they are and how many (too_complex: an st_table). */
static bool object_ivars(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *n, uint64_t *capa,
                         uint64_t *table)
{
    *table = 0;
    bool embed = o->flags & ROBJECT_EMBED;
    if (h->c.shapes) {
        shape sh;
        if (!shape_of(h, o->flags, &sh)) return false;
        if (sh.type == SHAPE_TOO_COMPLEX) {
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
    if (!object_ivars(h, o, &ptr, n, &capa, &table)) return false;
    st_hdr t;
    if (table) *n = st_read(h, NULL, table, &t) ? t.num_entries : 0;
    return true;
}

static bool array_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len)
{
    if (o->flags & ARY_EMBED) {
        *len = (o->flags >> (RBP_FL_USHIFT + 3)) & h->c.ary_embed_len_mask;
        *ptr = o->addr + off(h, RBP_L_rarray_embed_ary);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rarray_heap_len, len) && rd(h, o, o->addr, RBP_L_rarray_heap_ptr, ptr) &&
           *len <= MAX_VALUES;
}

bool rbp_ary_len(rbp_heap *h, const rbp_obj *o, uint64_t *len)
{
    uint64_t ptr;
    return array_body(h, o, &ptr, len);
}

/* Where a hash's table is: the st_table or ar_table address (0 for an
 * empty ar table before 3.2). */
static bool hash_table(rbp_heap *h, const rbp_obj *o, uint64_t *tab, bool *st)
{
    *st = o->flags & HASH_ST_TABLE;
    if (rbp_has(L(h), RBP_L_rhash_st)) return rd(h, o, o->addr, RBP_L_rhash_st, tab);
    int32_t sz = L(h)->f[RBP_L_rhash_size].size; /* 3.2+: the table follows struct RHash in the slot */
    if (sz <= 0) return false;
    *tab = o->addr + (uint64_t)sz;
    return true;
}

typedef void (*pair_fn)(void *ctx, uint64_t key, uint64_t val);
static bool ar_each(rbp_heap *h, const rbp_obj *o, uint64_t tab, pair_fn fn, void *ctx)
{
    if (!tab) return true;
    uint64_t bound = (o->flags >> (RBP_FL_USHIFT + 8)) & 0xf;
    uint64_t pairs = tab + off(h, RBP_L_ar_table_pairs);
    for (uint64_t i = 0; i < bound && i < 8; i++) {
        uint64_t kv[2];
        if (pairs >= o->addr && pairs - o->addr + (i + 1) * 16 <= o->slot_size)
            memcpy(kv, o->slot + (pairs - o->addr) + i * 16, 16);
        else if (!rbp_mem_read(h->s->mem, pairs + i * 16, kv, 16))
            return false;
        if (kv[0] == h->c.qundef) continue; /* cleared entry */
        fn(ctx, kv[0], kv[1]);
    }
    return true;
}

bool rbp_hash_size(rbp_heap *h, const rbp_obj *o, uint64_t *size)
{
    uint64_t tab;
    bool st;
    if (!hash_table(h, o, &tab, &st)) return false;
    if (st) {
        st_hdr t;
        if (!st_read(h, o, tab, &t)) return false;
        *size = t.num_entries;
        return true;
    }
    *size = (o->flags >> (RBP_FL_USHIFT + 4)) & 0xf; /* RHASH_AR_TABLE_SIZE */
    return true;
}

static bool struct_body(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len, bool *embedded)
{
    uint64_t elen = (o->flags >> (RBP_FL_USHIFT + 1)) & h->c.struct_embed_len_mask;
    *embedded = elen != 0;
    if (elen) {
        *len = elen;
        *ptr = o->addr + off(h, RBP_L_rstruct_ary);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rstruct_heap_len, len) && rd(h, o, o->addr, RBP_L_rstruct_heap_ptr, ptr) &&
           *len <= MAX_VALUES;
}

/* --- memsize ------------------------------------------------------------ */

static int enc_termlen(rbp_heap *h, int idx);

static uint64_t class_extra(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext = 0, size = 0;
    bool has_ext = classext(h, o, &ext);
    if (!has_ext) return 0;
    bool inline_ext = rbp_has(L(h), RBP_L_rclass_and_ext_classext);
    size += id_table_memsize(h, class_m_tbl(h, o, ext));
    size += id_table_memsize(h, ext_ptr(h, o, ext, RBP_L_classext_cvc_tbl));
    size += id_table_memsize(h, ext_ptr(h, o, ext, RBP_L_classext_const_tbl));
    size += id_table_memsize(h, ext_ptr(h, o, ext, RBP_L_classext_cc_tbl));
    if (h->c.shapes) {
        shape sh;
        uint64_t n = shape_of(h, o->flags, &sh) ? sh.next_iv_index : 0;
        int bits = 0;
        while (n >> bits) bits++;
        size += (uint64_t)8 << bits; /* class ivars are allocated as powers of two */
    } else {
        st_hdr t;
        uint64_t tbl = ext_ptr(h, o, ext, RBP_L_classext_iv_tbl);
        /* counted twice by obj_memsize_of before 3.2 (RCLASS_IV_TBL and
         * RCLASS_EXT()->iv_tbl are the same table) */
        if (tbl && st_read(h, NULL, tbl, &t)) size += 2 * st_memsize(h, &t);
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
        if (!object_ivars(h, o, &ptr, &n, &capa, &table)) return 0;
        if (table) {
            st_hdr t;
            return st_read(h, NULL, table, &t) ? st_memsize(h, &t) : 0;
        }
        return (o->flags & ROBJECT_EMBED) || !ptr ? 0 : capa * 8;
    }
    case RBP_T_CLASS:
    case RBP_T_MODULE:
        return class_extra(h, o);
    case RBP_T_ICLASS: {
        uint64_t ext = 0, size = 0;
        classext(h, o, &ext);
        if ((o->flags & (h->c.iclass_is_origin | h->c.iclass_origin_shared_mtbl)) == h->c.iclass_is_origin)
            size += id_table_memsize(h, class_m_tbl(h, o, ext));
        size += id_table_memsize(h, ext_ptr(h, o, ext, RBP_L_classext_cc_tbl));
        return size;
    }
    case RBP_T_STRING:
        if ((o->flags & (STR_NOEMBED | h->c.elts_shared | STR_NOFREE)) != STR_NOEMBED) return 0;
        if (!rd(h, o, o->addr, RBP_L_rstring_heap_aux_capa, &v) || v > (UINT64_C(1) << 40)) return 0;
        return v + (uint64_t)enc_termlen(h, (int)((o->flags >> ENC_SHIFT) & 0x7f));
    case RBP_T_ARRAY:
        if (o->flags & (ARY_EMBED | h->c.elts_shared)) return 0;
        return rd(h, o, o->addr, RBP_L_rarray_heap_capa, &v) && v <= MAX_VALUES ? v * 8 : 0;
    case RBP_T_HASH: {
        uint64_t tab;
        bool st;
        if (!hash_table(h, o, &tab, &st)) return 0;
        bool in_slot = !rbp_has(L(h), RBP_L_rhash_st);
        if (!st) return !in_slot && tab ? (uint64_t)L(h)->f[RBP_L_ar_table_pairs].size : 0;
        st_hdr t;
        if (!st_read(h, o, tab, &t)) return 0;
        uint64_t m = st_memsize(h, &t);
        int32_t tsz = L(h)->f[RBP_L_st_table_size].size;
        return in_slot && tsz > 0 ? m - (uint64_t)tsz : m; /* 3.2+: the st_table is in the slot */
    }
    case RBP_T_STRUCT: {
        bool embedded;
        uint64_t ptr;
        if (!struct_body(h, o, &ptr, &n, &embedded) || embedded || !ptr) return 0;
        return n * 8;
    }
    default:
        return 0;
    }
}

/* --- references ---------------------------------------------------------- */

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
    bool has_ext = classext(h, o, &ext);
    if (o->type == RBP_T_CLASS && (o->flags & h->c.fl_singleton) && rbp_has(Ly, RBP_L_classext_attached_object) &&
        has_ext && rd(h, o, ext, RBP_L_classext_attached_object, &v))
        emit(rf, v);
    if (o->type == RBP_T_ICLASS) {
        if ((o->flags & (h->c.iclass_is_origin | h->c.iclass_origin_shared_mtbl)) == h->c.iclass_is_origin)
            ok &= id_table_each(h, class_m_tbl(h, o, ext), emit_cb, rf);
        emit(rf, rbp_class_super(h, o));
        if (!has_ext) return ok;
        if (rbp_ver_ge(h->s, 3, 3) && (v = ext_ptr(h, o, ext, RBP_L_classext_includer))) emit(rf, v);
        ok &= id_table_each(h, ext_ptr(h, o, ext, RBP_L_classext_callable_m_tbl), emit_cb, rf);
        cc_ctx cc = {h, rf};
        if (rbp_has(Ly, RBP_L_classext_cc_tbl))
            ok &= id_table_each(h, ext_ptr(h, o, ext, RBP_L_classext_cc_tbl), cc_entries_cb, &cc);
        return ok;
    }
    emit(rf, rbp_class_super(h, o));
    if (!has_ext) return ok;
    ok &= id_table_each(h, class_m_tbl(h, o, ext), emit_cb, rf);
    if (rbp_ver_ge(h->s, 3, 2) && rbp_has(Ly, RBP_L_cvc_entry_cref))
        ok &= id_table_each(h, ext_ptr(h, o, ext, RBP_L_classext_cvc_tbl), cvc_entry_cb, rf);
    cc_ctx cc = {h, rf};
    if (rbp_has(Ly, RBP_L_classext_cc_tbl))
        ok &= id_table_each(h, ext_ptr(h, o, ext, RBP_L_classext_cc_tbl), cc_entries_cb, &cc);
    if (h->c.shapes) {
        shape sh;
        uint64_t ivp = ext_ptr(h, o, ext, RBP_L_classext_iv_ptr);
        if (shape_of(h, o->flags, &sh)) {
            if (sh.type == SHAPE_TOO_COMPLEX) {
                st_hdr t;
                if (ivp && st_read(h, NULL, ivp, &t)) ok &= st_each(h, &t, st_value_cb, rf);
            } else if (ivp) {
                ok &= each_value(h, NULL, ivp, sh.next_iv_index, emit_cb, rf);
            }
        } else {
            ok = false;
        }
    } else {
        st_hdr t;
        uint64_t tbl = ext_ptr(h, o, ext, RBP_L_classext_iv_tbl);
        if (tbl && st_read(h, NULL, tbl, &t)) ok &= st_each(h, &t, st_value_cb, rf);
    }
    ok &= id_table_each(h, ext_ptr(h, o, ext, RBP_L_classext_const_tbl), const_entry_cb, rf);
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
        if (!object_ivars(h, o, &ptr, &n, &capa, &table)) return false;
        if (table) {
            st_hdr t;
            return st_read(h, NULL, table, &t) && st_each(h, &t, st_value_cb, &rf);
        }
        return each_value(h, o, ptr, n, emit_cb, &rf);
    }
    case RBP_T_ARRAY:
        if (o->flags & h->c.elts_shared) {
            if (!rd(h, o, o->addr, RBP_L_rarray_shared_root, &v)) return false;
            emit(&rf, v);
            return true;
        }
        return array_body(h, o, &ptr, &n) && each_value(h, o, ptr, n, emit_cb, &rf);
    case RBP_T_HASH: {
        uint64_t tab;
        bool st, ok;
        if (!hash_table(h, o, &tab, &st)) return false;
        if (st) {
            st_hdr t;
            ok = st_read(h, o, tab, &t) && st_each(h, &t, st_pair_cb, &rf);
        } else {
            ok = ar_each(h, o, tab, st_pair_cb, &rf);
        }
        if (rd(h, o, o->addr, RBP_L_rhash_ifnone, &v)) emit(&rf, v);
        return ok;
    }
    case RBP_T_STRING:
        if ((o->flags & STR_NOEMBED) && (o->flags & h->c.elts_shared)) {
            if (!rd(h, o, o->addr, RBP_L_rstring_shared, &v)) return false;
            emit(&rf, v);
        }
        return true;
    case RBP_T_STRUCT: {
        bool embedded;
        return struct_body(h, o, &ptr, &n, &embedded) && each_value(h, o, ptr, n, emit_cb, &rf);
    }
    default:
        return true; /* T_DATA, T_FILE, T_REGEXP, T_MATCH, T_RATIONAL, T_COMPLEX: class only */
    }
}

/* --- strings ------------------------------------------------------------- */

bool rbp_str_info_of(rbp_heap *h, const rbp_obj *o, rbp_str_info *out)
{
    const rbp_layout *Ly = L(h);
    memset(out, 0, sizeof *out);
    if (o->type != RBP_T_STRING) return false;
    uint64_t f = o->flags;
    out->embedded = !(f & STR_NOEMBED);
    /* STR_SHARED_P needs NOEMBED too: before 3.2 an embedded string keeps
     * its length in the flag bits STR_SHARED uses. */
    out->shared = !out->embedded && (f & h->c.elts_shared);
    out->fstring = (f & RSTRING_FSTR) != 0;
    out->chilled = h->c.str_chilled && (f & h->c.str_chilled);
    out->encindex = (int)((f >> ENC_SHIFT) & 0x7f);
    out->coderange = (int)((f >> ENC_CR_SHIFT) & 3);
    if (rbp_has(Ly, RBP_L_rstring_len)) { /* 3.2+: one len for both forms */
        if (!rd(h, o, o->addr, RBP_L_rstring_len, &out->len)) return false;
        if (out->embedded) out->ptr = o->addr + off(h, RBP_L_rstring_embed_ary);
        else if (!rd(h, o, o->addr, RBP_L_rstring_heap_ptr, &out->ptr)) return false;
    } else if (!out->embedded) {
        if (!rd(h, o, o->addr, RBP_L_rstring_heap_len, &out->len) ||
            !rd(h, o, o->addr, RBP_L_rstring_heap_ptr, &out->ptr))
            return false;
    } else {
        if (rbp_has(Ly, RBP_L_rstring_embed_len)) {
            if (!rd(h, o, o->addr, RBP_L_rstring_embed_len, &out->len)) return false;
        } else {
            out->len = (f >> (RBP_FL_USHIFT + 2)) & 0x1f;
        }
        rbp_field_id ary = rbp_has(Ly, RBP_L_rstring_embed_ary) ? RBP_L_rstring_embed_ary : RBP_L_rstring_ary;
        if (!rbp_has(Ly, ary)) return false;
        out->ptr = o->addr + off(h, ary);
    }
    if (out->len > (UINT64_C(1) << 40)) return false;
    /* rb_str_capacity for an owned heap string: aux.capa (NOFREE/shared: len) */
    if (!out->embedded && !out->shared && !(f & STR_NOFREE)) {
        uint64_t capa;
        if (rd(h, o, o->addr, RBP_L_rstring_heap_aux_capa, &capa) && capa != out->len) {
            out->capa = capa;
            out->has_capa = true;
        }
    }
    return true;
}

/* --- encodings ------------------------------------------------------------ */

enum { MAX_ENCODINGS = 256, ENC_DUMMY_FLAG = 1 << 24, ENC_INDEX_MASK = (1 << 24) - 1 };

struct rbp_enc_entry {
    char name[48];
    bool known, ascii_compat;
    uint8_t termlen;
};

/* The encodings every Ruby registers first, at fixed indexes (encindex.h). */
static const char *const BUILTIN_ENCODINGS[] = {
    "ASCII-8BIT", "UTF-8", "US-ASCII", "UTF-16BE", "UTF-16LE", "UTF-32BE",
    "UTF-32LE", "UTF-16", "UTF-32", "UTF8-MAC", "EUC-JP", "Windows-31J",
};

/* One constant of Encoding: an Encoding object wrapping an rb_encoding. */
static void enc_const_cb(void *ctx, uint64_t ce)
{
    rbp_heap *h = ctx;
    uint64_t v = 0, flag = 0, enc = 0, name = 0, minlen = 0, index = 0;
    uint8_t buf[64];
    rbp_obj o;
    if (!rbp_read_field(h->s, ce, RBP_L_const_entry_value, &v) || !rbp_obj_at(h, v, buf, sizeof buf, &o) ||
        o.type != RBP_T_DATA || !rd(h, &o, o.addr, RBP_L_typeddata_typed_flag, &flag) || flag < 1 || flag > 3 ||
        !rd(h, &o, o.addr, RBP_L_typeddata_data, &enc) || !enc)
        return;
    if (!rbp_read_field(h->s, enc, RBP_L_onigenc_name, &name) ||
        !rbp_read_field(h->s, enc, RBP_L_onigenc_min_len, &minlen) ||
        !rbp_read_field(h->s, enc, RBP_L_onigenc_index, &index))
        return;
    uint64_t idx = index & ENC_INDEX_MASK;
    struct rbp_enc_entry *e = &h->encs[idx < MAX_ENCODINGS ? idx : 0];
    if (idx >= MAX_ENCODINGS || e->known) return; /* aliases repeat an index */
    if (!rbp_mem_cstr(h->s->mem, name, e->name, sizeof e->name)) return;
    e->known = true;
    e->ascii_compat = (int32_t)minlen == 1 && !(index & ENC_DUMMY_FLAG);
    e->termlen = (int32_t)minlen >= 1 && (int32_t)minlen <= 4 ? (uint8_t)minlen : 1;
}

static struct rbp_enc_entry *encodings(rbp_heap *h)
{
    if (h->encs) return h->encs;
    h->encs = calloc(MAX_ENCODINGS, sizeof *h->encs);
    if (!h->encs) return NULL;
    uint64_t sym = 0, klass = 0, ext = 0, tbl = 0;
    uint8_t buf[64];
    rbp_obj o;
    const rbp_layout *Ly = L(h);
    if (rbp_has(Ly, RBP_L_onigenc_name) && rbp_has(Ly, RBP_L_onigenc_index) && rbp_has(Ly, RBP_L_typeddata_data) &&
        rbp_symbol_lookup(h->s, "rb_cEncoding", &sym, NULL) && rbp_mem_u64(h->s->mem, sym, &klass) &&
        rbp_obj_at(h, klass, buf, sizeof buf, &o) && o.type == RBP_T_CLASS && classext(h, &o, &ext) &&
        (tbl = ext_ptr(h, &o, ext, RBP_L_classext_const_tbl)))
        id_table_each(h, tbl, enc_const_cb, h);
    /* the built-in indexes are known even when the objects can't be read */
    for (int i = 0; i < (int)(sizeof BUILTIN_ENCODINGS / sizeof BUILTIN_ENCODINGS[0]); i++) {
        struct rbp_enc_entry *e = &h->encs[i];
        if (e->known) continue;
        snprintf(e->name, sizeof e->name, "%s", BUILTIN_ENCODINGS[i]);
        e->known = true;
        bool wide = i >= 3 && i <= 8; /* UTF-16/32 and their dummies */
        e->ascii_compat = !wide;
        e->termlen = (i == 3 || i == 4 || i == 7) ? 2 : (i == 5 || i == 6 || i == 8) ? 4 : 1;
    }
    return h->encs;
}

void rbp_encodings_free(rbp_heap *h)
{
    free(h->encs);
    h->encs = NULL;
}

const char *rbp_encoding_name(rbp_heap *h, int encindex)
{
    struct rbp_enc_entry *t = encodings(h);
    if (!t || encindex < 0 || encindex >= MAX_ENCODINGS || !t[encindex].known) return NULL;
    return t[encindex].name;
}

bool rbp_encoding_ascii_compat(rbp_heap *h, int encindex)
{
    struct rbp_enc_entry *t = encodings(h);
    if (!t || encindex < 0 || encindex >= MAX_ENCODINGS || !t[encindex].known) return true; /* most are */
    return t[encindex].ascii_compat;
}

static int enc_termlen(rbp_heap *h, int idx)
{
    struct rbp_enc_entry *t = encodings(h);
    return t && idx >= 0 && idx < MAX_ENCODINGS && t[idx].known ? t[idx].termlen : 1;
}

/* --- T_DATA, T_FILE, T_FLOAT facts for the dump ----------------------------- */

const char *rbp_data_struct_name(rbp_heap *h, const rbp_obj *o)
{
    uint64_t flag = 0, type = 0, name = 0;
    if (o->type != RBP_T_DATA || !rd(h, o, o->addr, RBP_L_typeddata_typed_flag, &flag)) return NULL;
    /* RTYPEDDATA_P: typed_flag 1, or 1..3 from 3.3 (embedded/frozen bits) */
    if (!(flag == 1 || (rbp_ver_ge(h->s, 3, 3) && flag >= 1 && flag <= 3))) return NULL;
    if (!rd(h, o, o->addr, RBP_L_typeddata_type, &type) || !type || (type & 7)) return NULL;
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
