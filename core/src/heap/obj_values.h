/*
 * An object's values with their names, for the value printer (inspect/):
 * a T_OBJECT's instance variables in the order rb_ivar_foreach gives them,
 * a Hash's pairs in insertion order, a Struct's members and values. The
 * census and dump need counts and references only (obj.h); these also need
 * the names, which live in the class (iv_index_tbl before 3.2, __members__)
 * or in the shape tree (3.2+).
 */
#ifndef RBP_HEAP_OBJ_VALUES_H
#define RBP_HEAP_OBJ_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap/heap.h"

enum {
    RBP_VALUES_OK = 1,
    RBP_VALUES_UNREADABLE = 0,  /* some memory could not be read */
    RBP_VALUES_NO_LAYOUT = -1,  /* this layout lacks the members that name them */
};

/* fn(ctx, id, value) per ivar (internal ones like "mesg" included; the
 * caller tells them by name). Stops early when fn returns false. */
typedef bool (*rbp_named_fn)(void *ctx, uint64_t id, uint64_t value);
int rbp_obj_ivars_each(rbp_heap *h, const rbp_obj *o, rbp_named_fn fn, void *ctx);

/* fn(ctx, key, value) per live pair, in insertion order (ar or st table). */
typedef bool (*rbp_kv_fn)(void *ctx, uint64_t key, uint64_t value);
bool rbp_hash_each(rbp_heap *h, const rbp_obj *o, rbp_kv_fn fn, void *ctx);
/* The hash's size as Hash#size gives it. */
bool rbp_hash_count(rbp_heap *h, const rbp_obj *o, uint64_t *n);

/* A Struct's (or Data's, or Range's) values: where they are and how many. */
bool rbp_struct_values(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len);
/* The Array of member Symbols (the class's __members__, searched up the
 * superclasses as rb_struct_s_members does), or 0. */
uint64_t rbp_struct_members(rbp_heap *h, uint64_t klass);
/* An Array's element buffer and length. */
bool rbp_array_values(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *len);

/* Where the parts are, for --raw: a T_OBJECT's ivar buffer (or its
 * too-complex table), a Hash's ar or st table. */
bool rbp_obj_ivar_storage(rbp_heap *h, const rbp_obj *o, uint64_t *ptr, uint64_t *n, uint64_t *capa, uint64_t *table);
bool rbp_hash_storage(rbp_heap *h, const rbp_obj *o, uint64_t *table, bool *st);

#endif
