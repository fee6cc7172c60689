/*
 * What the object builder's files share (objbuild.c builds an input's
 * objects, objbuild_typed.c the typed data and Regexps among them,
 * objworld.c gives the image their pages and finds the pools): the roles
 * classes play, reading and writing the image directly, member by member
 * where the target's layout puts them, each write undoable and recorded in
 * the build's written words, and the decoded record and the helpers the
 * kinds' writers use.
 */
#ifndef RBP_FUZZ_OBJBUILD_INT_H
#define RBP_FUZZ_OBJBUILD_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "objbuild.h"

enum {
    PAGE_SLOTS = 48,            /* slots of each built page */
    ARENA_PAGES = 128,          /* 512 KiB for what objects point to */
    TABLE_PAGES = 8,            /* the GC's page table, copied with ours added */
    HEADER_MAX = 4096,
};

/* Classes by the role they play (ob_world.cls): ob_ref's 0x70-0x7f and
 * the kinds' default classes. objworld.c names them. */
enum {
    C_STRING, C_SYMBOL, C_FLOAT, C_INTEGER, C_RATIONAL, C_COMPLEX, C_ARRAY, C_HASH, C_STRUCT, C_RANGE, C_OBJECT,
    C_PROC, C_METHOD, C_UNBOUND, C_TIME, C_REGEXP, C_POINT, C_HOLDER, C_RUNTIMEERROR, C_EXCEPTION, C_DATA,
    C_ENCODING, C_BASICOBJECT, C_KERNEL, C_COMPARABLE, C_NROLES
};

/* ---- raw access to the image (no reader side effects) ---- */

static inline bool peek(const image *img, uint64_t addr, void *buf, size_t len)
{
    uint8_t *d = buf;
    for (size_t i = 0; i < len;) {
        size_t w;
        uint64_t a = (addr + i) & ~(uint64_t)7;
        if (!img_word_of(img, a, &w)) return false;
        uint64_t v = img_get_word(img, w);
        for (unsigned b = (unsigned)((addr + i) & 7); b < 8 && i < len; b++, i++) d[i] = (uint8_t)(v >> (8 * b));
    }
    return true;
}

static inline uint64_t peek64(const image *img, uint64_t addr)
{
    uint64_t v = 0;
    return peek(img, addr, &v, 8) ? v : 0;
}

/* ---- writing ---- */

static inline image *IMG(ob_build *b) { return &b->w->t->img; }
static inline const rbp_layout *LY(const ob_world *w) { return &w->t->s->layout; }

static inline void wr(ob_build *b, uint64_t addr, const void *data, size_t len)
{
    if (!addr || !len || !img_write(IMG(b), addr, data, len)) return;
    img_focus_add_range(IMG(b), &b->written, addr, len);
}

static inline void wr64(ob_build *b, uint64_t addr, uint64_t v) { wr(b, addr, &v, 8); }

/* Writes member id of the struct at base (a bitfield too); nothing when
 * the layout lacks it. */
static inline void wrf(ob_build *b, uint64_t base, rbp_field_id id, uint64_t v)
{
    const rbp_field *f = &LY(b->w)->f[id];
    if (!base || f->offset < 0) return;
    uint64_t at = base + (uint64_t)f->offset;
    if (f->bit_size > 0) {
        size_t n = (size_t)(f->bit_offset + f->bit_size + 7) / 8;
        if (n > 8) return;
        uint64_t cur = 0;
        if (!peek(IMG(b), at, &cur, n)) return;
        uint64_t mask = (f->bit_size < 64 ? (UINT64_C(1) << f->bit_size) - 1 : ~UINT64_C(0)) << f->bit_offset;
        cur = (cur & ~mask) | ((v << f->bit_offset) & mask);
        wr(b, at, &cur, n);
        return;
    }
    size_t n = f->size > 0 && f->size <= 8 ? (size_t)f->size : 8;
    wr(b, at, &v, n);
}

static inline uint64_t ofs(const ob_world *w, rbp_field_id id) { return (uint64_t)rbp_off(LY(w), id); }

/* Member id of the struct at base, from the image as it is now. */
static inline bool rdf(const ob_world *w, uint64_t base, rbp_field_id id, uint64_t *out)
{
    const rbp_field *f = &LY(w)->f[id];
    size_t n = f->bit_size ? (size_t)(f->bit_offset + f->bit_size + 7) / 8 : f->size > 0 && f->size <= 8 ? (size_t)f->size : 8;
    uint64_t v = 0;
    if (!base || f->offset < 0 || n > 8 || !peek(&w->t->img, base + (uint64_t)f->offset, &v, n)) return false;
    if (f->bit_size) {
        v >>= f->bit_offset;
        if (f->bit_size < 64) v &= (UINT64_C(1) << f->bit_size) - 1;
    }
    *out = v;
    return true;
}

/* A shape's ivar count and capacity (3.2+). */
static inline bool shape_info(const ob_world *w, uint64_t id, uint64_t *next, uint64_t *capa, uint64_t *type)
{
    int32_t sz = LY(w)->f[RBP_L_shape_size].size;
    if (!w->shape_list || sz <= 0 || id >= (UINT64_C(1) << 24)) return false;
    uint64_t base = w->shape_list + id * (uint64_t)sz;
    return rdf(w, base, RBP_L_shape_next_iv_index, next) && rdf(w, base, RBP_L_shape_capacity, capa) &&
           rdf(w, base, RBP_L_shape_type, type);
}
static inline bool has(const ob_world *w, rbp_field_id id) { return rbp_has(LY(w), id); }


static inline void add_u64(uint64_t *v, size_t *n, size_t max, uint64_t x)
{
    for (size_t i = 0; i < *n; i++)
        if (v[i] == x) return;
    if (*n < max) v[(*n)++] = x;
}

/* ---- the kinds' writers (objbuild.c, objbuild_typed.c) ---- */

#define FL_FREEZE (UINT64_C(1) << 11)

/* One record of the input (objbuild.h), decoded. */
typedef struct ob_rec {
    uint8_t kind, v;
    uint16_t n;
    uint8_t ref[6];
    uint8_t pay[6];
} ob_rec;

static inline size_t pay16(const ob_rec *r, int i) { return (size_t)r->pay[i] | (size_t)r->pay[i + 1] << 8; }

/* n bytes of the arena (16-aligned), or 0 when it is full. */
static inline uint64_t arena(ob_build *b, size_t n)
{
    uint64_t at = (b->arena_used + 15) & ~(uint64_t)15;
    if (at + n > b->w->arena_len) return 0;
    b->arena_used = at + n;
    return b->w->arena + at;
}

static inline uint64_t fix(int64_t n) { return ((uint64_t)n << 1) | 1; }

/* The stream: element lists, String bytes and locals come from the input
 * itself, from an offset a record names. */
static inline uint8_t stream(const ob_build *b, size_t off, size_t i) { return b->in[(off + i) % b->in_size]; }

static inline uint64_t klass_or(ob_build *b, int role, uint8_t ref, bool use_ref)
{
    if (use_ref) return ob_ref(b, ref);
    uint64_t k = b->w->cls[role];
    return k ? k : b->w->cls[C_OBJECT];
}

static inline void header(ob_build *b, uint64_t o, uint64_t flags, uint64_t klass)
{
    wr64(b, o, flags);
    wr64(b, o + 8, klass);
}

static inline int enc_of(uint8_t sel, uint8_t other)
{
    static const int E[4] = {1, 0, 2, -1}; /* UTF-8, ASCII-8BIT, US-ASCII, any */
    return E[sel & 3] >= 0 ? E[sel & 3] : other % 64;
}

static inline uint64_t sym_id(uint64_t v, uint8_t dflt) { return (v & 0xff) == 0x0c ? v >> 8 : dflt; }

/* objbuild_typed.c: the kinds build_one hands on. */
void ob_build_proc(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r);
void ob_build_method(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r);
void ob_build_time(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r);
void ob_build_regexp(ob_build *b, uint64_t o, const ob_rec *r);
void ob_build_data(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r);

#endif
