/*
 * Decoding Strings (length, where the bytes are, embedded, shared, frozen
 * literal, chilled, encoding and code range, as string.c keeps them per
 * version) and naming their encodings: the twelve built-in ones by their
 * fixed indexes, the others from the Encoding objects that Encoding's
 * constants hold.
 */
#include "heap/obj_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool rbp_str_info_of(rbp_heap *h, const rbp_obj *o, rbp_str_info *out)
{
    const rbp_layout *Ly = L(h);
    memset(out, 0, sizeof *out);
    if (o->type != RBP_T_STRING) return false;
    uint64_t f = o->flags;
    out->embedded = !(f & STR_NOEMBED);
    /* STR_SHARED_P needs NOEMBED too: before 3.2 an embedded string keeps
     * its length in the flag bits STR_SHARED uses. */
    out->shared = !out->embedded && (f & h->c->elts_shared);
    out->fstring = (f & RSTRING_FSTR) != 0;
    out->chilled = h->c->str_chilled && (f & h->c->str_chilled);
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

/* The encodings every Ruby registers first, at fixed indexes (encindex.h,
 * the same from 2.7 to 4.0): their names, whether ASCII-compatible
 * (UTF-16/32 and their dummies are not) and their terminator lengths. */
static const struct rbp_enc_entry BUILTIN_ENCODINGS[] = {
    {"ASCII-8BIT", true, true, 1}, {"UTF-8", true, true, 1},     {"US-ASCII", true, true, 1},
    {"UTF-16BE", true, false, 2},  {"UTF-16LE", true, false, 2}, {"UTF-32BE", true, false, 4},
    {"UTF-32LE", true, false, 4},  {"UTF-16", true, false, 2},   {"UTF-32", true, false, 4},
    {"UTF8-MAC", true, true, 1},   {"EUC-JP", true, true, 1},    {"Windows-31J", true, true, 1},
};
enum { NBUILTIN = sizeof BUILTIN_ENCODINGS / sizeof BUILTIN_ENCODINGS[0] };

/* One constant of Encoding: an Encoding object wrapping an rb_encoding. */
static void enc_const_cb(void *ctx, uint64_t ce)
{
    rbp_heap *h = ctx;
    uint64_t v = 0, type = 0, enc = 0, name = 0, minlen = 0, index = 0;
    uint8_t buf[64];
    rbp_obj o;
    if (!rbp_read_field(h->s, ce, RBP_L_const_entry_value, &v) || !rbp_obj_at(h, v, buf, sizeof buf, &o) ||
        !rbp_obj_typed_data(h, &o, &type, &enc) || !enc)
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
        rbp_obj_at(h, klass, buf, sizeof buf, &o) && o.type == RBP_T_CLASS && rbp_classext(h, &o, &ext) &&
        (tbl = rbp_classext_ptr(h, &o, ext, RBP_L_classext_const_tbl)))
        rbp_id_table_each(h, tbl, enc_const_cb, h);
    return h->encs;
}

/* An index's entry: a built-in one without reading the Encoding table
 * (which costs a read of every Encoding object, some 100, on each command
 * that names an encoding), so even when those objects can't be read; any
 * other from the table. */
static const struct rbp_enc_entry *encoding(rbp_heap *h, int idx)
{
    if (idx >= 0 && idx < NBUILTIN) return &BUILTIN_ENCODINGS[idx];
    struct rbp_enc_entry *t = idx >= 0 && idx < MAX_ENCODINGS ? encodings(h) : NULL;
    return t && t[idx].known ? &t[idx] : NULL;
}

const char *rbp_encoding_name(rbp_heap *h, int encindex)
{
    const struct rbp_enc_entry *e = encoding(h, encindex);
    return e ? e->name : NULL;
}

bool rbp_encoding_ascii_compat(rbp_heap *h, int encindex)
{
    const struct rbp_enc_entry *e = encoding(h, encindex);
    return e ? e->ascii_compat : true; /* most are */
}

int rbp_enc_termlen(rbp_heap *h, int idx)
{
    const struct rbp_enc_entry *e = encoding(h, idx);
    return e ? e->termlen : 1;
}
