/*
 * The per-object decoders, for the census (census.c) and the dump
 * (heap_dump.c): the memory an object owns (obj_memsize.c), what it
 * references (obj_refs.c), class identity and names (obj_class.c), String
 * facts and encodings (obj_string.c), and the sizes and single facts of
 * other types (obj_body.c). Each follows the target version's own code
 * (gc.c's obj_memsize_of and gc_mark_children, variable.c's classpath
 * lookup), read through the layout tables, so the rules live in one place
 * per fact. Members inside the object's slot are taken from the walk's copy
 * of the page; anything outside (ivar buffers, array bodies, tables) is read
 * through the session's memory cache. Every count read from the target is
 * bounded before it sizes a read or a loop.
 */
#ifndef RBP_HEAP_OBJ_H
#define RBP_HEAP_OBJ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap/heap.h"

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
/* Encoding name for an index ("UTF-8"...), NULL when unknown. The twelve
 * built-in indexes (encindex.h) are known without reading anything; the
 * others' names come from the Encoding objects Encoding's constants hold
 * (the table that names them is static in encoding.c). */
const char *rbp_encoding_name(rbp_heap *h, int encindex);
/* True when the encoding is ASCII-compatible (rb_enc_asciicompat:
 * one-byte minimum length and not a dummy). */
bool rbp_encoding_ascii_compat(rbp_heap *h, int encindex);

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
/* The object a singleton class is attached to (RCLASS_ATTACHED_OBJECT,
 * or the hidden __attached__ ivar before 3.3), 0 if unknown. */
uint64_t rbp_class_attached(rbp_heap *h, const rbp_obj *o);
/* The superclass of a class/module/iclass (RCLASS_SUPER), 0 if none. */
uint64_t rbp_class_super(rbp_heap *h, const rbp_obj *o);

/* Checks that classes' method tables and Hashes' tables decode on the
 * first of each in the heap (obj_check.c); refuses the layout, in attach's
 * one line, when most do not. Run after rbp_heap_open, before a walk. */
rbpeek_status rbp_heap_check_decoders(rbp_heap *h);
/* rbp_heap_open, then rbp_heap_check_decoders: the heap of a census or a
 * dump, or an error with nothing left open. */
rbpeek_status rbp_heap_open_checked(rbpeek_session *s, rbp_heap *h);

#endif
