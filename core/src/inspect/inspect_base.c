/*
 * What every type printer of ruby p shares: the check that a VALUE is a live
 * object before it is read (rbp_insp_check), a class's name and ancestry,
 * the first reason a value is not printed exactly (rbp_insp_why), and a
 * String's bytes with their encoding, and a Symbol's name. They sit apart from the dispatcher
 * (inspect.c) so that the printers of Proc, Regexp and Time use them
 * without depending on it.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "heap/obj_values.h"
#include "inspect/inspect_int.h"
#include "vm/robject.h"

enum { MAX_SUPER = 64 };

/* --- checking a VALUE ---------------------------------------------------- */

const char *rbp_insp_check(rbp_heap *h, uint64_t v, uint8_t *buf, size_t bufsize, rbp_obj *o, char *why, size_t n)
{
    const rbp_heap_page *pg = rbp_heap_page_of(h, v);
    if (v & 7) {
        snprintf(why, n, "not a Ruby object: 0x%" PRIx64 " is neither an immediate nor 8-byte aligned", v);
        return why;
    }
    if (!pg) {
        snprintf(why, n, "not a Ruby object: 0x%" PRIx64 " is not in any heap page", v);
        return why;
    }
    if ((v - pg->start) % pg->slot_size) {
        snprintf(why, n, "not a Ruby object: 0x%" PRIx64 " is inside the slot at 0x%" PRIx64 " (page 0x%" PRIx64
                 ", %u-byte slots), not at its start", v, v - (v - pg->start) % pg->slot_size, pg->start, pg->slot_size);
        return why;
    }
    bool live = rbp_obj_at(h, v, buf, bufsize, o);
    if (!live && o->flags == 0 && o->addr == v) {
        snprintf(why, n, "not a Ruby object: 0x%" PRIx64 " is a free slot", v);
        return why;
    }
    if (!live) {
        snprintf(why, n, "not a Ruby object: the slot at 0x%" PRIx64 " cannot be read", v);
        return why;
    }
    int t = rbp_heap_classify(h, buf, o->slot_size);
    if (t < 0) {
        snprintf(why, n, "not a Ruby object: bad flags at 0x%" PRIx64 " (flags 0x%" PRIx64 ", class 0x%" PRIx64
                 ": an impossible type or a class pointer that is no class)", v, o->flags, o->klass);
        return why;
    }
    if (t == RBP_T_ZOMBIE || t == RBP_T_MOVED || t == RBP_T_IMEMO || t == RBP_T_ICLASS || t == RBP_T_NONE) {
        snprintf(why, n, "not a Ruby object: 0x%" PRIx64 " is an internal %s", v,
                 t == RBP_T_ZOMBIE ? "zombie (awaiting its finalizer)" : t == RBP_T_MOVED ? "T_MOVED slot (compaction)"
                 : t == RBP_T_IMEMO ? "T_IMEMO" : t == RBP_T_ICLASS ? "T_ICLASS (an included module's proxy)" : "slot");
        return why;
    }
    return NULL;
}

/* --- helpers ------------------------------------------------------------- */

const char *rbp_insp_class_name(rbp_insp *in, uint64_t klass)
{
    uint64_t real = rbp_class_real(in->h, klass);
    return real ? rbp_heap_class_name(in->h, real) : "?";
}

bool rbp_insp_inherits(rbp_insp *in, uint64_t klass, const char *path)
{
    uint8_t buf[64];
    uint64_t from = klass;
    rbp_walkguard g = rbp_heap_chain_guard(in->h, MAX_SUPER);
    while (klass && rbp_heap_chain_step(in->h, &g, klass, "the superclass chain", from)) {
        rbp_obj c;
        if (!rbp_obj_at(in->h, klass, buf, sizeof buf, &c)) return false;
        const char *p = c.type == RBP_T_CLASS ? rbp_heap_class_path(in->h, klass) : NULL;
        if (p && strcmp(p, path) == 0) return true;
        klass = rbp_class_super(in->h, &c);
    }
    return false;
}

bool rbp_insp_why(rbp_insp *in, const char *fmt, ...)
{
    if (rbp_insp_top(in) && !in->why[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(in->why, sizeof in->why, fmt, ap);
        va_end(ap);
    }
    return false;
}

void rbp_insp_unreadable(rbp_insp *in, const char *marker)
{
    rbp_sb_puts(in->out, marker);
    in->inexact = true;
    if (!in->why[0])
        snprintf(in->why, sizeof in->why, "a part of it could not be read (%s)", marker + (marker[0] == ',' ? 2 : 0));
}

rbp_enc_kind rbp_insp_enc_kind(rbp_insp *in, int idx)
{
    const char *name = rbp_encoding_name(in->h, idx);
    if (!name) return RBP_ENC_OTHER;
    if (!strcmp(name, "UTF-8")) return RBP_ENC_UTF8;
    if (!strcmp(name, "ASCII-8BIT") || !strcmp(name, "BINARY")) return RBP_ENC_BINARY;
    if (!strcmp(name, "US-ASCII")) return RBP_ENC_ASCII;
    return RBP_ENC_OTHER;
}

unsigned char *rbp_insp_read_str(rbp_insp *in, const rbp_obj *o, uint64_t max, size_t *len, bool *cut,
                                rbp_enc_kind *enc)
{
    rbp_str_info si;
    if (!rbp_str_info_of(in->h, o, &si)) return NULL;
    uint64_t n = si.len < max ? si.len : max;
    if (n > RBP_INSP_MAX_STR) n = RBP_INSP_MAX_STR;
    unsigned char *p = malloc(n + 1);
    if (!p || (n && !rbp_mem_read(in->s->mem, si.ptr, p, n))) {
        free(p);
        return NULL;
    }
    *len = (size_t)n;
    *cut = n < si.len;
    *enc = rbp_insp_enc_kind(in, si.encindex);
    return p;
}

unsigned char *rbp_insp_string_value(rbp_insp *in, uint64_t v, size_t *len, rbp_enc_kind *enc)
{
    uint8_t buf[RBP_INSP_SLOT];
    rbp_obj o;
    char why[200];
    bool cut;
    if (!v || (v & 7) || rbp_insp_check(in->h, v, buf, sizeof buf, &o, why, sizeof why) || o.type != RBP_T_STRING)
        return NULL;
    return rbp_insp_read_str(in, &o, RBP_INSP_MAX_STR, len, &cut, enc);
}

void rbp_insp_symbol(rbp_insp *in, uint64_t v)
{
    if (rbp_is_static_symbol(v)) { /* static: its ID above the tag */
        const char *name = rbp_id_name(in->s, rbp_static_symbol_id(v));
        if (name)
            rbp_insp_sym_name(in, (const unsigned char *)name, strlen(name), RBP_ENC_UTF8);
        else {
            char marker[64];
            snprintf(marker, sizeof marker, "#<rbpeek: Symbol of unknown ID %" PRIu64 ">", rbp_static_symbol_id(v));
            rbp_insp_unreadable(in, marker);
        }
        return;
    }
    uint64_t fstr = 0; /* dynamic: an RSymbol whose fstr is its name */
    size_t len;
    rbp_enc_kind enc;
    unsigned char *p = rbp_read_field(in->s, v, RBP_L_rsymbol_fstr, &fstr) ? rbp_insp_string_value(in, fstr, &len, &enc) : NULL;
    if (!p) {
        rbp_insp_unreadable(in, "#<rbpeek: Symbol with an unreadable name>");
        return;
    }
    rbp_insp_sym_name(in, p, len, enc);
    free(p);
}
