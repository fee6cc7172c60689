/*
 * Objects built from a fuzz input inside a replayed Ruby (target.h), for
 * the harnesses of `ruby p`, `bt --locals`, `ruby page` and the census
 * (fuzz_objects, fuzz_heappage). Patching a recorded image reaches only
 * the objects the recording happened to hold, and a random patch mostly
 * breaks an object at its first check; objects built whole reach every
 * branch of the printers: Strings in every form and encoding, dynamic
 * Symbols, heap Floats, Bignums, Rationals, Complexes, Arrays and Hashes
 * (embedded, on the heap, ar and st tables), Structs, Ranges, plain
 * objects with their ivars (the class's iv_index_tbl before 3.2, shapes
 * from it), Procs, Methods and Times with the target's own rb_data_type_t
 * (found in the image, so rbpeek recognises them as it does a live
 * Ruby's), Regexps, copies of the image's real objects (exceptions, Data,
 * Encodings, ...), nested and pointing at one another in any shape,
 * cycles included.
 *
 * At start (ob_world_init) the image gets heap pages of its own: one per
 * slot size the Ruby has (40 bytes before 3.2 with one size; 40 to 640
 * from 3.4), with headers copied from a real page and registered in the
 * GC's page table, so rbpeek sees them as heap pages; plus an arena for
 * what objects point to (array bodies, tables, typed-data structs,
 * environments). The slots are free and the arena zero between inputs;
 * an input's objects are written undoably (image.h) and gone after it.
 *
 * Input: records of OB_REC bytes, one object each, in slot order:
 *   [0] kind (ob_kind, mod the count)
 *   [1] variant bits (embedded or not, encoding, flags; per kind,
 *       objbuild.c and objbuild_typed.c)
 *   [2-3] u16 n: a length or count (bounded per kind)
 *   [4-9] six references (below)
 *   [10-15] payload: numbers, offsets into the input (the byte stream
 *           element lists and String bytes are taken from)
 * A reference byte c: c < 0x40 the built object c (mod their count: any
 * object, forward, backward or itself), 0x40-0x5f the Fixnum c - 0x50,
 * 0x60-0x6f nil, true, false, undef, 0, wild and interior pointers,
 * Flonums; 0x70-0x7f a class of the image (Object, Holder, Point,
 * String, Array, Hash, Integer, Symbol, Struct, RuntimeError, Kernel,
 * Comparable, BasicObject, Encoding, Data, Time); 0x80-0xbf one of the
 * image's real objects; 0xc0-0xff one of its static Symbols.
 */
#ifndef RBP_FUZZ_OBJBUILD_H
#define RBP_FUZZ_OBJBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap/heap.h"
#include "target.h"

#define OB_REC 16
#define OB_MAX_OBJS 48
#define OB_MAX_PAGES 6
#define OB_POOL 64

typedef enum ob_kind {
    OB_STRING, OB_SYMBOL, OB_FLOAT, OB_BIGNUM, OB_RATIONAL, OB_COMPLEX, OB_ARRAY, OB_HASH, OB_STRUCT,
    OB_RANGE, OB_OBJECT, OB_PROC, OB_METHOD, OB_TIME, OB_REGEXP, OB_CLONE, OB_DATA, OB_NKINDS
} ob_kind;

typedef struct ob_page {
    uint64_t header, body, start;
    uint32_t slot_size, total;
    uint64_t heap;              /* 3.4: the objspace's rb_heap_t of this slot size */
    uint64_t tmpl;              /* the real page header it was copied from */
} ob_page;

/* What a target offers the builder, found once. */
typedef struct ob_world {
    fuzz_target *t;
    rbp_object_rules c;
    uint32_t page_align;
    bool shapes;
    ob_page pages[OB_MAX_PAGES];
    size_t npages;
    uint64_t arena, arena_len;
    /* classes by the role they play (the C_ roles of objbuild_int.h, named in objworld.c), 0 if absent */
    uint64_t cls[32];
    uint64_t classes[OB_POOL];  /* other classes and modules of the image */
    size_t nclasses;
    uint64_t values[OB_POOL];   /* real objects of the image, of every type */
    size_t nvalues;
    uint64_t syms[OB_POOL];     /* static Symbols (tagged VALUEs) */
    size_t nsyms;
    uint64_t iseqs[32];         /* iseqs of the pristine stacks */
    size_t niseqs;
    uint64_t shape_ids[32];     /* 3.2+: shapes of real objects with ivars */
    size_t nshapes;
    uint64_t shape_list;        /* 3.2+: where the shapes are */
    uint64_t too_complex;       /* 3.3+: a shape id of that type, or UINT64_MAX */
    uint64_t holder_ivtbl;      /* before 3.2: Holder's iv_index_tbl, 0 if none */
    uint64_t type_proc, type_method, type_time, type_other; /* rb_data_type_t addresses */
    uint64_t mes[16];           /* method entries of real Methods and frames */
    size_t nmes;
    uint64_t iv_ids[16];        /* ivar IDs (from the image's objects) */
    size_t niv_ids;
    /* a Ruby frame with locals, as bt --locals gets it */
    uint64_t frame_iseq, frame_self, frame_me, frame_env_flags;
    uint32_t frame_nlocals;
} ob_world;

/* One input's objects. */
typedef struct ob_build {
    ob_world *w;
    const uint8_t *in;          /* the whole input: the byte stream */
    size_t in_size;
    uint64_t obj[OB_MAX_OBJS];
    uint8_t kind[OB_MAX_OBJS];
    size_t nobj;
    uint64_t arena_used;
    img_focus written;          /* the words the builder wrote */
} ob_build;

/* Adds the pages and the arena to t's image, registers the pages, finds
 * the pools. False (with a line on stderr) when the image lacks something
 * this needs. */
bool ob_world_init(ob_world *w, fuzz_target *t);

/* Builds the objects of recs[0..nrec) (input is the whole input). The
 * written words are in b->written (freed by ob_build_end). */
void ob_build_objects(ob_build *b, ob_world *w, const uint8_t *recs, size_t nrec, const uint8_t *input,
                      size_t input_size);
/* A reference byte as a VALUE (see above). */
uint64_t ob_ref(ob_build *b, uint8_t c);
/* An environment for bt --locals whose locals are the stream's references
 * from offset off: returns its ep (0 when the world has no frame). */
uint64_t ob_build_env(ob_build *b, uint16_t off, uint8_t me_ref);
void ob_build_end(ob_build *b);
/* Writes member id (a bitfield too) of the struct at base, undoably, and
 * adds its words to b->written; nothing when the layout lacks it. */
void ob_put_field(ob_build *b, uint64_t base, rbp_field_id id, uint64_t v);

#endif
