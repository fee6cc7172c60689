/*
 * Objects built from a fuzz input (objbuild.h): the references between
 * them, the slot each record takes, the writers of the core kinds (Strings,
 * Symbols, numbers, Arrays, Hashes, Structs, Ranges, plain objects, copies
 * of real objects; objbuild_typed.c writes Procs, Methods, Times, Regexps
 * and other typed data), and the environment of bt --locals. Every
 * member is written where the target's layout puts it, with the flag bits
 * of its version (rbp_object_rules and the masks the decoders use), so an
 * object built from a pristine-looking record is one rbpeek decodes as a
 * live Ruby's; the variant bits, the references and the patches a harness
 * adds on top make it every other shape.
 */
#include "objbuild_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/robject.h"

enum { MAX_STR = 300, MAX_ARY = 70, MAX_HASH = 40, MAX_STRUCT = 20, MAX_BIG = 64, MAX_IVS = 40 };

/* The classes reference bytes 0x70-0x7f name (ob_ref). */
static const int REF_ROLE[16] = {
    C_OBJECT, C_HOLDER, C_POINT, C_STRING, C_ARRAY, C_HASH, C_INTEGER, C_SYMBOL,
    C_STRUCT, C_RUNTIMEERROR, C_KERNEL, C_COMPARABLE, C_BASICOBJECT, C_ENCODING, C_DATA, C_TIME,
};

#define ROBJ_EMBED RBP_FL_USER(1)

/* ---- references ---- */

/* rb_float_new_inline: a Flonum, or 0 when d has none. */
static uint64_t flonum(double d)
{
    uint64_t t;
    memcpy(&t, &d, 8);
    int bits = (int)((t >> 60) & 7);
    if (t != UINT64_C(0x3000000000000000) && !((bits - 3) & ~1)) return (((t << 3) | (t >> 61)) & ~UINT64_C(1)) | 2;
    if (t == 0) return UINT64_C(0x8000000000000002);
    return 0;
}

uint64_t ob_ref(ob_build *b, uint8_t c)
{
    const ob_world *w = b->w;
    uint64_t nil = w->c.qnil;
    if (c < 0x40) return b->nobj ? b->obj[c % b->nobj] : nil;
    if (c < 0x60) return fix((int64_t)c - 0x50);
    if (c < 0x70) {
        static const double FL[] = {1.5, -0.25, 100.0, 1e-5, 3.14159, 0.0};
        const ob_page *p0 = &w->pages[0];
        switch (c) {
        case 0x60: return nil;
        case 0x61: return 0x14;                     /* true */
        case 0x62: return 0;                        /* false */
        case 0x63: return w->c.qundef;
        case 0x64: return 0xdeadbeef1;              /* odd: neither an immediate's tag nor aligned */
        case 0x65: return b->nobj ? b->obj[0] + 8 : nil;  /* inside a slot */
        case 0x66: return w->arena;                 /* readable, in no heap page */
        case 0x67: return p0->start + (uint64_t)(p0->total - 1) * p0->slot_size; /* a free slot, mostly */
        case 0x68: return p0->header;
        case 0x69: return UINT64_C(0x00007ffffffff000); /* unreadable */
        default: return flonum(FL[(c - 0x6a) % 6]);
        }
    }
    if (c < 0x80) {
        uint64_t k = w->cls[REF_ROLE[c - 0x70]];
        return k ? k : w->nclasses ? w->classes[c % w->nclasses] : nil;
    }
    if (c < 0xc0) return w->nvalues ? w->values[(c - 0x80) % w->nvalues] : nil;
    return w->nsyms ? w->syms[(c - 0xc0) % w->nsyms] : fix(c);
}

/* ---- the kinds ---- */

static void build_string(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    size_t len = r->n % (MAX_STR + 1), so = pay16(r, 0);
    uint8_t bytes[MAX_STR + 1];
    for (size_t i = 0; i < len; i++) bytes[i] = stream(b, so, i);
    bytes[len] = 0;
    uint64_t flags = RBP_T_STRING | (uint64_t)enc_of(r->v >> 1, r->pay[2]) << (RBP_FL_USHIFT + 10) |
                     (uint64_t)((r->v >> 3) & 3) << (RBP_FL_USHIFT + 8);
    if (r->v & 0x20) flags |= RBP_FL_USER(17) | FL_FREEZE; /* an fstring */
    if (r->v & 0x40) flags |= w->c.str_chilled ? w->c.str_chilled : RBP_FL_USER(18);
    rbp_field_id ary = has(w, RBP_L_rstring_embed_ary) ? RBP_L_rstring_embed_ary : RBP_L_rstring_ary;
    bool len_field = has(w, RBP_L_rstring_len), embed_len = has(w, RBP_L_rstring_embed_len);
    uint64_t cap = has(w, ary) && slot > ofs(w, ary) ? slot - ofs(w, ary) : 0;
    if (!len_field && !embed_len && cap > 32) cap = 32; /* the length's 5 flag bits */
    if ((r->v & 1) && len + 1 <= cap) {
        if (!len_field && !embed_len) flags |= (uint64_t)len << (RBP_FL_USHIFT + 2);
        header(b, o, flags, klass_or(b, C_STRING, r->ref[5], r->v & 0x80));
        if (len_field) wrf(b, o, RBP_L_rstring_len, len);
        else if (embed_len) wrf(b, o, RBP_L_rstring_embed_len, len);
        wr(b, o + ofs(w, ary), bytes, len + 1);
        return;
    }
    uint64_t ptr = arena(b, len + 1);
    wr(b, ptr, bytes, len + 1);
    flags |= RBP_FL_USER(1); /* STR_NOEMBED */
    if (r->v & 0x80) flags |= w->c.elts_shared;
    header(b, o, flags, klass_or(b, C_STRING, 0, false));
    wrf(b, o, len_field ? RBP_L_rstring_len : RBP_L_rstring_heap_len, len);
    wrf(b, o, RBP_L_rstring_heap_ptr, ptr);
    if (r->v & 0x80) wrf(b, o, RBP_L_rstring_shared, ob_ref(b, r->ref[0]));
    else wrf(b, o, RBP_L_rstring_heap_aux_capa, len + r->pay[3] % 16);
}

static void build_bignum(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    size_t words = 1 + r->n % MAX_BIG, so = pay16(r, 0);
    uint8_t digits[MAX_BIG * 4];
    for (size_t i = 0; i < words * 4; i++) digits[i] = stream(b, so, i);
    uint64_t flags = RBP_T_BIGNUM | FL_FREEZE | ((r->v & 1) ? RBP_FL_USER(1) : 0);
    bool embed = (r->v & 2) && words <= 7 && has(w, RBP_L_rbignum_ary) && ofs(w, RBP_L_rbignum_ary) + words * 4 <= slot;
    if (embed) {
        header(b, o, flags | RBP_FL_USER(2) | (uint64_t)words << (RBP_FL_USHIFT + 3), klass_or(b, C_INTEGER, 0, false));
        wr(b, o + ofs(w, RBP_L_rbignum_ary), digits, words * 4);
        return;
    }
    uint64_t ptr = arena(b, words * 4);
    wr(b, ptr, digits, words * 4);
    header(b, o, flags, klass_or(b, C_INTEGER, 0, false));
    wrf(b, o, RBP_L_rbignum_heap_len, words);
    wrf(b, o, RBP_L_rbignum_heap_digits, ptr);
}

/* A list of n references from the stream, as VALUEs into dst. */
static void values(ob_build *b, uint64_t *dst, size_t n, size_t so)
{
    for (size_t i = 0; i < n; i++) dst[i] = ob_ref(b, stream(b, so, i));
}

static void build_array(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    size_t len = r->n % (MAX_ARY + 1);
    uint64_t vals[MAX_ARY];
    values(b, vals, len, pay16(r, 0));
    uint64_t flags = RBP_T_ARRAY | ((r->v & 4) ? FL_FREEZE : 0);
    uint64_t cap = slot > ofs(w, RBP_L_rarray_embed_ary) ? (slot - ofs(w, RBP_L_rarray_embed_ary)) / 8 : 0;
    if (cap > w->c.ary_embed_len_mask) cap = w->c.ary_embed_len_mask;
    uint64_t klass = klass_or(b, C_ARRAY, r->ref[5], r->v & 0x80);
    if ((r->v & 1) && len <= cap) {
        header(b, o, flags | RBP_FL_USER(1) | (uint64_t)len << (RBP_FL_USHIFT + 3), klass);
        wr(b, o + ofs(w, RBP_L_rarray_embed_ary), vals, len * 8);
        return;
    }
    uint64_t ptr = arena(b, len * 8 + 8);
    wr(b, ptr, vals, len * 8);
    if (r->v & 2) flags |= w->c.elts_shared;
    header(b, o, flags, klass);
    wrf(b, o, RBP_L_rarray_heap_len, len);
    wrf(b, o, RBP_L_rarray_heap_ptr, ptr);
    if (r->v & 2) wrf(b, o, RBP_L_rarray_shared_root, ob_ref(b, r->ref[0]));
    else wrf(b, o, RBP_L_rarray_heap_capa, len + r->pay[2] % 8);
}

static void build_st(ob_build *b, uint64_t tab, size_t n, size_t so, uint8_t v, uint8_t extra)
{
    int power = 2;
    while (((size_t)1 << power) < n && power < 20) power++;
    uint64_t entries = arena(b, ((size_t)1 << power) * 24);
    size_t live = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t e[3] = {stream(b, so, 2 * i) * UINT64_C(0x9e3779b97f4a7c15), ob_ref(b, stream(b, so, 2 * i)),
                         ob_ref(b, stream(b, so, 2 * i + 1))};
        if ((v & 2) && i % 3 == 1) e[0] = ~UINT64_C(0); /* DELETED_ENTRY */
        else live++;
        wr(b, entries + i * 24, e, sizeof e);
    }
    wrf(b, tab, RBP_L_st_entry_power, (uint64_t)power);
    wrf(b, tab, RBP_L_st_bin_power, (uint64_t)power + 1);
    wrf(b, tab, RBP_L_st_size_ind, 0);
    wrf(b, tab, RBP_L_st_num_entries, (v & 4) ? extra : live);
    wrf(b, tab, RBP_L_st_bins, 0);
    wrf(b, tab, RBP_L_st_entries_start, (v & 8) ? extra % 4 : 0);
    wrf(b, tab, RBP_L_st_entries_bound, n);
    wrf(b, tab, RBP_L_st_entries, entries);
}

static void build_hash(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    size_t n = r->n % (MAX_HASH + 1), so = pay16(r, 0);
    uint64_t flags = RBP_T_HASH | ((r->v & 0x10) ? FL_FREEZE : 0);
    bool in_slot = !has(w, RBP_L_rhash_st); /* 3.2+: the table follows the RHash in its slot */
    uint64_t rhash = (uint64_t)(LY(w)->f[RBP_L_rhash_size].size > 0 ? LY(w)->f[RBP_L_rhash_size].size : 32);
    uint64_t st_size = (uint64_t)(LY(w)->f[RBP_L_st_table_size].size > 0 ? LY(w)->f[RBP_L_st_table_size].size : 56);
    uint64_t ar_size = ofs(w, RBP_L_ar_table_pairs) + 8 * 16;
    bool ar = (r->v & 1) && n <= 8 && (!in_slot || rhash + ar_size <= slot);
    uint64_t klass = klass_or(b, C_HASH, r->ref[5], r->v & 0x80);
    uint64_t tab = 0;
    if (ar) {
        tab = in_slot ? o + rhash : arena(b, ar_size);
        size_t live = 0;
        for (size_t i = 0; i < n; i++) {
            uint64_t kv[2] = {ob_ref(b, stream(b, so, 2 * i)), ob_ref(b, stream(b, so, 2 * i + 1))};
            if ((r->v & 2) && i % 3 == 1) kv[0] = w->c.qundef; /* a cleared entry */
            else live++;
            wr(b, tab + ofs(w, RBP_L_ar_table_pairs) + i * 16, kv, 16);
        }
        if (r->v & 4) live = r->pay[3] & 15;
        flags |= (uint64_t)live << (RBP_FL_USHIFT + 4) | (uint64_t)n << (RBP_FL_USHIFT + 8);
        header(b, o, flags, klass);
        if (!in_slot) wrf(b, o, RBP_L_rhash_st, (r->v & 8) && !n ? 0 : tab);
    } else {
        if (in_slot && rhash + st_size > slot) { /* no room for the table: say so in a way Ruby never would */
            header(b, o, flags | RBP_FL_USER(3), klass);
            return;
        }
        tab = in_slot ? o + rhash : arena(b, st_size);
        header(b, o, flags | RBP_FL_USER(3), klass); /* RHASH_ST_TABLE_FLAG */
        build_st(b, tab, n, so, r->v, r->pay[3]);
        if (!in_slot) wrf(b, o, RBP_L_rhash_st, tab);
    }
    wrf(b, o, RBP_L_rhash_ifnone, (r->v & 0x20) ? ob_ref(b, r->ref[1]) : w->c.qnil);
}

static void build_struct(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r, bool range)
{
    const ob_world *w = b->w;
    size_t len = range ? 3 : r->n % (MAX_STRUCT + 1);
    uint64_t vals[MAX_STRUCT];
    if (range) {
        vals[0] = ob_ref(b, r->ref[0]);
        vals[1] = ob_ref(b, r->ref[1]);
        vals[2] = (r->v & 2) ? ob_ref(b, r->ref[2]) : (r->v & 1) ? 0x14 : 0;
    } else {
        values(b, vals, len, pay16(r, 0));
    }
    uint64_t klass = range ? klass_or(b, C_RANGE, r->ref[5], r->v & 0x80)
                           : klass_or(b, w->cls[C_POINT] ? C_POINT : C_STRUCT, r->ref[5], r->v & 0x80);
    uint64_t cap = slot > ofs(w, RBP_L_rstruct_ary) ? (slot - ofs(w, RBP_L_rstruct_ary)) / 8 : 0;
    if (cap > w->c.struct_embed_len_mask) cap = w->c.struct_embed_len_mask;
    uint64_t flags = RBP_T_STRUCT | ((r->v & 4) ? FL_FREEZE : 0);
    if ((range || (r->v & 1)) && len && len <= cap) {
        header(b, o, flags | (uint64_t)len << (RBP_FL_USHIFT + 1), klass);
        wr(b, o + ofs(w, RBP_L_rstruct_ary), vals, len * 8);
        return;
    }
    uint64_t ptr = arena(b, len * 8 + 8);
    wr(b, ptr, vals, len * 8);
    header(b, o, flags, klass);
    wrf(b, o, RBP_L_rstruct_heap_len, len);
    wrf(b, o, RBP_L_rstruct_heap_ptr, ptr);
}

static void build_object(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    uint64_t klass = klass_or(b, w->cls[C_HOLDER] ? C_HOLDER : C_OBJECT, r->ref[5], r->v & 0x80);
    if (w->cls[C_RUNTIMEERROR] && (r->v & 0x40)) klass = w->cls[C_RUNTIMEERROR];
    size_t so = pay16(r, 0);
    uint64_t vals[MAX_IVS];
    uint64_t embed_cap = slot > ofs(w, RBP_L_robject_ary) ? (slot - ofs(w, RBP_L_robject_ary)) / 8 : 0;
    if (!w->shapes) {
        /* before 3.2: as many ivars as the class's iv_index_tbl names */
        if (r->v & 1) {
            values(b, vals, 3, so);
            header(b, o, RBP_T_OBJECT | ROBJ_EMBED, klass);
            wr(b, o + ofs(w, RBP_L_robject_ary), vals, (embed_cap < 3 ? embed_cap : 3) * 8);
            return;
        }
        size_t n = r->n % (MAX_IVS + 1);
        values(b, vals, n, so);
        uint64_t ptr = arena(b, n * 8 + 8);
        wr(b, ptr, vals, n * 8);
        header(b, o, RBP_T_OBJECT, klass);
        wrf(b, o, RBP_L_robject_numiv, n);
        wrf(b, o, RBP_L_robject_ivptr, ptr);
        /* the object's own copy of its class's table (3.0/3.1), or none */
        wrf(b, o, RBP_L_robject_iv_index_tbl, (r->v & 4) ? 0 : w->holder_ivtbl);
        return;
    }
    /* 3.2+: the shape says how many ivars there are and what they are */
    uint64_t shape = (r->v & 4) || !w->nshapes ? r->n : w->shape_ids[r->pay[2] % w->nshapes];
    uint64_t next = 0, capa = 0, type = 0;
    if ((r->v & 8) && w->too_complex != UINT64_MAX) {
        /* too complex: the ivars are an st_table of ID to value */
        uint64_t tab = arena(b, 64);
        size_t n = r->n % 12, so2 = pay16(r, 0);
        header(b, o, RBP_T_OBJECT | w->too_complex << 32 | w->c.robject_heap, klass);
        int power = 4;
        uint64_t entries = arena(b, ((size_t)1 << power) * 24);
        for (size_t i = 0; i < n; i++) {
            uint64_t id = sym_id(w->nsyms ? w->syms[stream(b, so2, 2 * i) % w->nsyms] : 0, 1);
            if (w->niv_ids && !(stream(b, so2, 2 * i) & 0x80)) id = w->iv_ids[stream(b, so2, 2 * i) % w->niv_ids];
            uint64_t e[3] = {id * 31, id, ob_ref(b, stream(b, so2, 2 * i + 1))};
            wr(b, entries + i * 24, e, sizeof e);
        }
        wrf(b, tab, RBP_L_st_entry_power, (uint64_t)power);
        wrf(b, tab, RBP_L_st_bin_power, (uint64_t)power + 1);
        wrf(b, tab, RBP_L_st_num_entries, n);
        wrf(b, tab, RBP_L_st_entries_bound, n);
        wrf(b, tab, RBP_L_st_entries, entries);
        wrf(b, o, RBP_L_robject_ivptr, tab);
        return;
    }
    shape_info(w, shape, &next, &capa, &type);
    size_t n = next < MAX_IVS ? (size_t)next : MAX_IVS;
    values(b, vals, n, so);
    uint64_t flags = RBP_T_OBJECT | shape << 32;
    if ((r->v & 1) && n <= embed_cap) {
        header(b, o, flags | w->c.robject_embed, klass);
        wr(b, o + ofs(w, RBP_L_robject_ary), vals, n * 8);
        return;
    }
    uint64_t ptr = arena(b, (capa > n ? capa : n) * 8 + 8);
    wr(b, ptr, vals, n * 8);
    header(b, o, flags | w->c.robject_heap, klass);
    wrf(b, o, RBP_L_robject_ivptr, ptr);
}

/* A copy of one of the image's real objects (what no kind here builds:
 * exceptions, Data, Encodings, Files, ...), with some of its words
 * replaced by references. */
static void build_clone(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    if (!w->nvalues) return;
    uint64_t from = w->values[r->pay[0] % w->nvalues];
    uint8_t buf[640];
    size_t n = slot < sizeof buf ? slot : sizeof buf;
    memset(buf, 0, sizeof buf);
    if (!peek(&w->t->img, from, buf, n)) peek(&w->t->img, from, buf, 40 < n ? 40 : n);
    wr(b, o, buf, n);
    for (size_t i = 0; i < (size_t)(r->n % 4) && 2 + i < n / 8; i++) wr64(b, o + 16 + 8 * ((r->pay[1] + i) % (n / 8 - 2)), ob_ref(b, r->ref[i]));
}

static void build_one(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    switch (r->kind) {
    case OB_STRING: build_string(b, o, slot, r); break;
    case OB_SYMBOL:
        header(b, o, RBP_T_SYMBOL | FL_FREEZE, klass_or(b, C_SYMBOL, r->ref[5], r->v & 0x80));
        wrf(b, o, RBP_L_rsymbol_fstr, ob_ref(b, r->ref[0]));
        break;
    case OB_FLOAT: {
        uint64_t bits = 0;
        memcpy(&bits, r->pay, 6);
        bits |= (uint64_t)r->n << 48;
        header(b, o, RBP_T_FLOAT | FL_FREEZE, klass_or(b, C_FLOAT, r->ref[5], r->v & 0x80));
        wrf(b, o, RBP_L_rfloat_value, bits);
        break;
    }
    case OB_BIGNUM: build_bignum(b, o, slot, r); break;
    case OB_RATIONAL:
    case OB_COMPLEX: {
        bool rat = r->kind == OB_RATIONAL;
        header(b, o, (rat ? RBP_T_RATIONAL : RBP_T_COMPLEX) | FL_FREEZE,
               klass_or(b, rat ? C_RATIONAL : C_COMPLEX, r->ref[5], r->v & 0x80));
        wrf(b, o, rat ? RBP_L_rrational_num : RBP_L_rcomplex_real, ob_ref(b, r->ref[0]));
        wrf(b, o, rat ? RBP_L_rrational_den : RBP_L_rcomplex_imag, ob_ref(b, r->ref[1]));
        break;
    }
    case OB_ARRAY: build_array(b, o, slot, r); break;
    case OB_HASH: build_hash(b, o, slot, r); break;
    case OB_STRUCT: build_struct(b, o, slot, r, false); break;
    case OB_RANGE: build_struct(b, o, slot, r, true); break;
    case OB_OBJECT: build_object(b, o, slot, r); break;
    case OB_PROC: ob_build_proc(b, o, slot, r); break;
    case OB_METHOD: ob_build_method(b, o, slot, r); break;
    case OB_TIME: ob_build_time(b, o, slot, r); break;
    case OB_REGEXP: ob_build_regexp(b, o, r); break;
    case OB_CLONE: build_clone(b, o, slot, r); break;
    default: ob_build_data(b, o, slot, r); break;
    }
    (void)w;
}

/* The slot size an object of this record wants (Ruby 3.4 puts an object
 * in the smallest size pool it fits). */
static uint32_t wanted_size(const ob_world *w, const ob_rec *r)
{
    switch (r->kind) {
    case OB_STRING: return (r->v & 1) ? (uint32_t)(ofs(w, RBP_L_rstring_embed_ary) + r->n % (MAX_STR + 1) + 1) : 40;
    case OB_ARRAY: return (r->v & 1) ? (uint32_t)(16 + 8 * (r->n % (MAX_ARY + 1))) : 40;
    case OB_HASH: return (r->v & 1) ? 160 : 80;
    case OB_STRUCT: return (r->v & 1) ? (uint32_t)(16 + 8 * (r->n % (MAX_STRUCT + 1))) : 40;
    case OB_OBJECT: return (r->v & 1) ? 80 : 40;
    case OB_PROC: case OB_TIME: return (r->v & 1) ? 160 : 40;
    case OB_CLONE: return 40u << (r->pay[3] % 5);
    default: return 40;
    }
}

void ob_build_objects(ob_build *b, ob_world *w, const uint8_t *recs, size_t nrec, const uint8_t *input,
                      size_t input_size)
{
    memset(b, 0, sizeof *b);
    b->w = w;
    b->in = input;
    b->in_size = input_size ? input_size : 1;
    static const uint8_t zero = 0;
    if (!input_size) b->in = &zero;
    ob_rec rs[OB_MAX_OBJS];
    uint32_t used[OB_MAX_PAGES] = {0};
    uint32_t slot_of[OB_MAX_OBJS];
    /* first every object's address, so that references may point forward */
    for (size_t i = 0; i < nrec && b->nobj < OB_MAX_OBJS; i++) {
        const uint8_t *p = recs + i * OB_REC;
        ob_rec r = {.kind = (uint8_t)(p[0] % OB_NKINDS), .v = p[1], .n = (uint16_t)(p[2] | p[3] << 8)};
        memcpy(r.ref, p + 4, 6);
        memcpy(r.pay, p + 10, 6);
        uint32_t want = wanted_size(w, &r);
        size_t pick = OB_MAX_PAGES;
        for (size_t k = 0; k < w->npages; k++) {
            if (used[k] >= w->pages[k].total) continue;
            if (pick == OB_MAX_PAGES || (w->pages[k].slot_size >= want &&
                                         (w->pages[pick].slot_size < want || w->pages[k].slot_size < w->pages[pick].slot_size)))
                pick = k;
            else if (w->pages[pick].slot_size < want && w->pages[k].slot_size > w->pages[pick].slot_size)
                pick = k;
        }
        if (pick == OB_MAX_PAGES) break;
        const ob_page *pg = &w->pages[pick];
        rs[b->nobj] = r;
        slot_of[b->nobj] = pg->slot_size;
        b->kind[b->nobj] = r.kind;
        b->obj[b->nobj++] = pg->start + (uint64_t)used[pick]++ * pg->slot_size;
    }
    for (size_t i = 0; i < b->nobj; i++) build_one(b, b->obj[i], slot_of[i], &rs[i]);
}

uint64_t ob_build_env(ob_build *b, uint16_t off_, uint8_t me_ref)
{
    const ob_world *w = b->w;
    if (!w->frame_iseq) return 0;
    size_t n = w->frame_nlocals;
    uint64_t env = arena(b, (n + 4) * 8);
    if (!env) return 0;
    uint64_t ep = env + (n + 2) * 8;
    for (size_t i = 0; i < n; i++) wr64(b, env + i * 8, ob_ref(b, stream(b, off_, i)));
    wr64(b, ep - 16, me_ref == 0xff ? w->frame_me : ob_ref(b, me_ref)); /* me/cref */
    wr64(b, ep - 8, 0);                                                 /* specval */
    wr64(b, ep, w->frame_env_flags);
    return ep;
}

void ob_build_end(ob_build *b) { img_focus_free(&b->written); }

void ob_put_field(ob_build *b, uint64_t base, rbp_field_id id, uint64_t v) { wrf(b, base, id, v); }