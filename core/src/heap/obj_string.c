/*
 * Decoding Strings (length, where the bytes are, embedded, shared, frozen
 * literal, chilled, encoding and code range, as string.c keeps them per
 * version) and naming their encodings, from the Encoding objects that
 * Encoding's constants hold.
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

int rbp_enc_termlen(rbp_heap *h, int idx)
{
    struct rbp_enc_entry *t = encodings(h);
    return t && idx >= 0 && idx < MAX_ENCODINGS && t[idx].known ? t[idx].termlen : 1;
}
