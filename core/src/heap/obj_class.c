/*
 * Decoding classes, modules and iclasses: the classext and its tables, the
 * superclass, the real class behind singletons and iclasses, and the names
 * Module#name and Module#inspect give (permanent, temporary and singleton
 * paths, as variable.c builds them). Also which objects ObjectSpace hides
 * (internal_object_p), a question mostly about classes.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rbp_classext(rbp_heap *h, const rbp_obj *o, uint64_t *ext)
{
    if (rbp_has(L(h), RBP_L_rclass_and_ext_classext)) {
        *ext = o->addr + off(h, RBP_L_rclass_and_ext_classext);
        return true;
    }
    return rd(h, o, o->addr, RBP_L_rclass_ptr, ext) && *ext;
}

uint64_t rbp_class_m_tbl(rbp_heap *h, const rbp_obj *o, uint64_t ext)
{
    uint64_t t = 0;
    if (rbp_has(L(h), RBP_L_rclass_m_tbl)) rd(h, o, o->addr, RBP_L_rclass_m_tbl, &t);
    else if (ext && rbp_has(L(h), RBP_L_classext_m_tbl)) rd(h, o, ext, RBP_L_classext_m_tbl, &t);
    return t;
}

uint64_t rbp_classext_ptr(rbp_heap *h, const rbp_obj *o, uint64_t ext, rbp_field_id id)
{
    uint64_t v = 0;
    if (ext && rbp_has(L(h), id)) rd(h, o, ext, id, &v);
    return v;
}

bool rbp_class_variation_count(rbp_heap *h, const rbp_obj *o, uint64_t *out)
{
    uint64_t ext;
    return rbp_has(L(h), RBP_L_classext_variation_count) && rbp_classext(h, o, &ext) &&
           rd(h, o, ext, RBP_L_classext_variation_count, out);
}

uint64_t rbp_class_super(rbp_heap *h, const rbp_obj *o)
{
    uint64_t v = 0, ext = 0;
    if (rbp_has(L(h), RBP_L_rclass_super))
        rd(h, o, o->addr, RBP_L_rclass_super, &v);
    else if (rbp_has(L(h), RBP_L_classext_super) && rbp_classext(h, o, &ext)) /* 4.0: the prime classext's */
        rd(h, o, ext, RBP_L_classext_super, &v);
    return v;
}

/* A class ivar by name, for the versions that keep classpaths and a
 * singleton's attached object as hidden ivars (before 3.3): in the
 * classext's st_table before 3.2, in its iv_ptr array at the index the
 * class's shape gives in 3.2. */
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

bool rbp_class_ivar(rbp_heap *h, const rbp_obj *o, const char *name, uint64_t *cached_id, uint64_t *out)
{
    uint64_t ext, tbl, index, ivs;
    rbp_st_hdr t;
    if (h->shapes && rbp_has(L(h), RBP_L_classext_iv_ptr))
        return rbp_shape_ivar_index(h, o->flags, name, cached_id, &index) && rbp_classext(h, o, &ext) &&
               (ivs = rbp_classext_ptr(h, o, ext, RBP_L_classext_iv_ptr)) &&
               rbp_mem_u64(h->s->mem, ivs + index * 8, out);
    if (!rbp_has(L(h), RBP_L_classext_iv_tbl) || !rbp_classext(h, o, &ext) ||
        !(tbl = rbp_classext_ptr(h, o, ext, RBP_L_classext_iv_tbl)) || !rbp_st_read(h, NULL, tbl, &t))
        return false;
    ivar_find f = {h, cached_id, name, 0, false};
    rbp_st_each(h, &t, ivar_find_cb, &f);
    *out = f.value;
    return f.found;
}

uint64_t rbp_class_attached(rbp_heap *h, const rbp_obj *o)
{
    uint64_t ext, v = 0;
    if (rbp_has(L(h), RBP_L_classext_attached_object)) {
        if (rbp_classext(h, o, &ext)) rd(h, o, ext, RBP_L_classext_attached_object, &v);
        return v;
    }
    rbp_class_ivar(h, o, "__attached__", &h->id_attached, &v);
    return v;
}

uint64_t rbp_class_real(rbp_heap *h, uint64_t klass)
{
    void *hit = rbp_addrmap_get(&h->real, klass);
    if (hit) return (uint64_t)(uintptr_t)hit - 1;
    uint64_t cl = klass;
    uint8_t buf[64];
    rbp_walkguard g = rbp_heap_chain_guard(h, MAX_CLASS_HOPS);
    while (cl) {
        if (!rbp_heap_chain_step(h, &g, cl, "the singleton/iclass chain", klass)) { /* a loop, too long, or over budget */
            cl = 0;
            break;
        }
        rbp_obj o;
        if (!rbp_obj_at(h, cl, buf, sizeof buf, &o)) {
            cl = 0;
            break;
        }
        bool singleton = o.type == RBP_T_CLASS && (o.flags & h->c->fl_singleton);
        if (!singleton && o.type != RBP_T_ICLASS) break;
        cl = rbp_class_super(h, &o);
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
    if (!rbp_class_ivar(h, &o, "__classpath__", &h->id_classpath, &str)) return NULL;
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
        if (!rbp_classext(h, o, &ext) || !rd(h, o, ext, RBP_L_classext_classpath, &str) || !str) return NULL;
    } else if (!rbp_class_ivar(h, o, "__tmp_classpath__", &h->id_tmp_classpath, &str)) {
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
    } else if (ok && o.type == RBP_T_CLASS && (o.flags & h->c->fl_singleton)) {
        /* "#<Class:Foo>" for a metaclass, "#<Class:#<Foo:0x...>>" otherwise */
        uint64_t att = rbp_class_attached(h, &o);
        int at = att ? rbp_obj_type(h->s, att) : -1;
        const char *inner = NULL;
        char tmp[64];
        if (at == RBP_T_CLASS || at == RBP_T_MODULE) {
            /* a singleton of a singleton of ... names its attached object
             * in turn; garbage can make that a loop (A attached to B
             * attached to A, or to itself): the recursion goes through the
             * heap's recursion guard, which sees the loop at once, and a
             * chain deeper than RBP_HEAP_NAMING_DEPTH; either is a cut */
            if (rbp_heap_rec_enter(h, &h->naming, klass, "a singleton class's attached objects", klass)) {
                if (att != klass) inner = rbp_heap_class_name(h, att);
                else rbp_heap_rec_enter(h, &h->naming, att, "a singleton class's attached objects", klass);
                rbp_rec_leave(&h->naming);
            }
        } else if (att) {
            /* real is no singleton: its name needs no further name */
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
        if (o->flags & h->c->fl_singleton) {
            /* rb_singleton_class_internal_p: a metaclass that has no
             * metaclass of its own */
            uint64_t att = rbp_class_attached(h, o);
            if (!att || rbp_obj_type(h->s, att) != RBP_T_CLASS) return false;
            uint8_t buf[64];
            rbp_obj meta;
            if (rbp_obj_at(h, o->klass, buf, sizeof buf, &meta) && meta.type == RBP_T_CLASS &&
                (meta.flags & h->c->fl_singleton) && rbp_class_attached(h, &meta) == o->addr)
                return false;
            return true;
        }
        return false;
    default:
        return o->klass == 0;
    }
}
