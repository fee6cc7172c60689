/*
 * `ruby p` in the public API (rbpeek_value_inspect): opens the heap, checks
 * that the VALUE is an immediate or a live object (else fails with the one
 * line saying what it is instead), and renders it as text (the inspect
 * string, with --raw the object's header and parts) or as JSON
 * {"address", "type", "class", "inspect", ...}. rbp_inspect_append is the
 * same printer for other commands (locals of frames).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "heap/obj.h"
#include "heap/obj_values.h"
#include "inspect/inspect.h"
#include "inspect/inspect_int.h"
#include "vm/robject.h"

static const char *const TYPE_NAMES[32] = {
    [RBP_T_NONE] = "T_NONE", [RBP_T_OBJECT] = "T_OBJECT", [RBP_T_CLASS] = "T_CLASS", [RBP_T_MODULE] = "T_MODULE",
    [RBP_T_FLOAT] = "T_FLOAT", [RBP_T_STRING] = "T_STRING", [RBP_T_REGEXP] = "T_REGEXP", [RBP_T_ARRAY] = "T_ARRAY",
    [RBP_T_HASH] = "T_HASH", [RBP_T_STRUCT] = "T_STRUCT", [RBP_T_BIGNUM] = "T_BIGNUM", [RBP_T_FILE] = "T_FILE",
    [RBP_T_DATA] = "T_DATA", [RBP_T_MATCH] = "T_MATCH", [RBP_T_COMPLEX] = "T_COMPLEX",
    [RBP_T_RATIONAL] = "T_RATIONAL", [RBP_T_NIL] = "T_NIL", [RBP_T_TRUE] = "T_TRUE", [RBP_T_FALSE] = "T_FALSE",
    [RBP_T_SYMBOL] = "T_SYMBOL", [RBP_T_FIXNUM] = "T_FIXNUM", [RBP_T_UNDEF] = "T_UNDEF", [RBP_T_IMEMO] = "T_IMEMO",
    [RBP_T_NODE] = "T_NODE", [RBP_T_ICLASS] = "T_ICLASS", [RBP_T_ZOMBIE] = "T_ZOMBIE", [RBP_T_MOVED] = "T_MOVED",
};

static void insp_init(rbp_insp *in, rbp_heap *h, const rbp_inspect_limits *lim, rbp_strbuf *out)
{
    memset(in, 0, sizeof *in);
    in->s = h->s;
    in->h = h;
    in->out = in->top_out = out;
    in->out_start = out->len;
    in->max_output = lim->max_output && lim->max_output < RBP_INSP_MAX_OUTPUT ? lim->max_output : RBP_INSP_MAX_OUTPUT;
    in->shared_text = lim->text_budget;
    if (in->shared_text && *in->shared_text < in->max_output) {
        in->max_output = *in->shared_text;
        in->command_text = true;
    }
    in->max_depth = lim->depth < 0 ? 0 : lim->depth > RBP_INSP_MAX_NEST ? RBP_INSP_MAX_NEST : lim->depth;
    in->max_len = lim->max_length ? lim->max_length : 1;
    /* A value prints at most RBP_INSP_BUDGET objects, and no more than
     * what is left of its command's budget, if it shares one. */
    in->budget = RBP_INSP_BUDGET;
    in->shared = lim->budget;
    if (in->shared && *in->shared < in->budget) {
        in->budget = *in->shared;
        in->command_budget = true;
    }
    rbp_recguard_init(&in->rec, RBP_INSP_MAX_LEVELS, &in->budget);
    in->newer_0x85 = h->s->rel.inspect.escapes_nel;
    in->hash_34 = h->s->rel.inspect.hash_34;
    /* main answers "main" from a singleton to_s that rbpeek cannot run; it is
     * known by address, rb_vm_t.top_self. A layout without the member, or an
     * unreadable word, leaves 0, which matches no object. */
    const rbp_layout *L = &h->s->layout;
    if (rbp_has(L, RBP_L_vm_top_self) &&
        !rbp_mem_u64(h->s->mem, h->s->vm + (uint64_t)rbp_off(L, RBP_L_vm_top_self), &in->top_self))
        in->top_self = 0;
}

void rbp_inspect_append(rbp_heap *h, uint64_t v, const rbp_inspect_limits *lim, rbp_strbuf *out,
                        rbp_inspect_result *res)
{
    rbp_insp in;
    insp_init(&in, h, lim, out);
    size_t before = in.budget;
    rbp_insp_value(&in, v);
    rbp_insp_bigcache_free(&in);
    if (in.shared) *in.shared -= before - (in.output_full ? in.budget_unspent : in.budget);
    if (in.shared_text) {
        size_t wrote = out->len - in.out_start;
        *in.shared_text -= wrote < *in.shared_text ? wrote : *in.shared_text;
    }
    if (res) {
        res->cut = in.cut;
        res->inexact = in.inexact;
        snprintf(res->why, sizeof res->why, "%s", in.inexact ? in.why : "");
    }
}

/* Each immediate's T_ type, class, and what `ruby p` calls its kind: the
 * word that tells a mistyped address (an odd one reads as a Fixnum) from a
 * value, in the text and in JSON's "immediate". */
static const struct { int type; const char *cls, *kind; } IMMEDIATES[] = {
    [RBP_IMM_FIXNUM] = {RBP_T_FIXNUM, "Integer", "Fixnum"},
    [RBP_IMM_FLONUM] = {RBP_T_FLOAT, "Float", "Flonum"},
    [RBP_IMM_STATIC_SYMBOL] = {RBP_T_SYMBOL, "Symbol", "Symbol (static)"},
    [RBP_IMM_NIL] = {RBP_T_NIL, "NilClass", "nil"},
    [RBP_IMM_TRUE] = {RBP_T_TRUE, "TrueClass", "true"},
    [RBP_IMM_FALSE] = {RBP_T_FALSE, "FalseClass", "false"},
    [RBP_IMM_UNDEF] = {RBP_T_UNDEF, "(undef)", "undef"},
};

/* The line under an immediate's text: what it is, so that an address
 * mistyped into a Fixnum (0xdeadbeef prints 1867964279) reads as one. A
 * number repeats its text (a few bytes); a Symbol gives its ID instead of
 * its name, which can be a megabyte. */
static void immediate_line(rbp_strbuf *b, uint64_t v, rbp_immediate kind, const char *text)
{
    rbp_sb_printf(b, "  0x%" PRIx64 " is an immediate, not an object's address: %s", v, IMMEDIATES[kind].kind);
    if (kind == RBP_IMM_FIXNUM || kind == RBP_IMM_FLONUM) rbp_sb_printf(b, " %s", text ? text : "");
    else if (kind == RBP_IMM_STATIC_SYMBOL) rbp_sb_printf(b, " of ID %" PRIu64, rbp_static_symbol_id(v));
    rbp_sb_puts(b, "\n");
}

/* --raw: the object's header, and where its parts are, as one line. */
static void raw_line(rbp_heap *h, const rbp_obj *o, char line[512])
{
    const size_t cap = 512;
    int n = snprintf(line, cap, "flags=0x%" PRIx64 " klass=0x%" PRIx64 " slot_size=%u", o->flags, o->klass,
                     rbp_heap_page_of(h, o->addr) ? rbp_heap_page_of(h, o->addr)->slot_size : 0);
    if (h->shapes) n += snprintf(line + n, cap - (size_t)n, " shape_id=%" PRIu64, o->flags >> 32);
    uint64_t ptr = 0, len = 0, capa = 0, table = 0;
    bool st = false;
    rbp_str_info si;
    switch (o->type) {
    case RBP_T_STRING:
        if (rbp_str_info_of(h, o, &si))
            n += snprintf(line + n, cap - (size_t)n, " %s%s bytes=0x%" PRIx64 " len=%" PRIu64 " encoding=%s",
                          si.embedded ? "embedded" : "heap", si.shared ? " shared" : "", si.ptr, si.len,
                          rbp_encoding_name(h, si.encindex) ? rbp_encoding_name(h, si.encindex) : "?");
        break;
    case RBP_T_ARRAY:
        if (rbp_array_values(h, o, &ptr, &len))
            n += snprintf(line + n, cap - (size_t)n, " %s elements=0x%" PRIx64 " len=%" PRIu64,
                          ptr >= o->addr && ptr < o->addr + o->slot_size ? "embedded" : "heap", ptr, len);
        break;
    case RBP_T_HASH:
        if (rbp_hash_storage(h, o, &table, &st) && rbp_hash_count(h, o, &len))
            n += snprintf(line + n, cap - (size_t)n, " %s=0x%" PRIx64 " size=%" PRIu64,
                          st ? "st_table" : "ar_table", table, len);
        break;
    case RBP_T_STRUCT:
        if (rbp_struct_values(h, o, &ptr, &len))
            n += snprintf(line + n, cap - (size_t)n, " %s members=0x%" PRIx64 " len=%" PRIu64,
                          ptr >= o->addr && ptr < o->addr + o->slot_size ? "embedded" : "heap", ptr, len);
        break;
    case RBP_T_OBJECT:
        if (rbp_obj_ivar_storage(h, o, &ptr, &len, &capa, &table))
            n += table ? snprintf(line + n, cap - (size_t)n, " too_complex ivar_table=0x%" PRIx64, table)
                       : snprintf(line + n, cap - (size_t)n, " %s ivars=0x%" PRIx64 " count=%" PRIu64
                                  " capacity=%" PRIu64, ptr >= o->addr && ptr < o->addr + o->slot_size ? "embedded"
                                  : "heap", ptr, len, capa);
        break;
    }
}

rbpeek_status rbpeek_value_inspect(rbpeek_session *s, uint64_t value, const rbpeek_inspect_options *opt,
                                   rbpeek_format format, char **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "p: no session or no output");
    *out = NULL;
    rbp_heap h;
    rbpeek_status st = rbp_heap_open(s, &h);
    if (st != RBPEEK_OK) return st;
    rbp_inspect_limits lim = {opt ? opt->depth : 8, opt ? opt->max_length : 100, NULL, opt ? opt->max_bytes : 0, NULL};
    bool raw = opt && opt->raw;
    int type = -1;
    const char *cls = NULL;
    uint8_t buf[RBP_INSP_SLOT];
    rbp_obj o = {0};
    rbp_immediate kind = rbp_immediate_of(h.c, value);
    bool imm = kind != RBP_IMM_NONE;
    if (imm) {
        type = IMMEDIATES[kind].type;
        cls = IMMEDIATES[kind].cls;
    } else {
        char why[240];
        if (rbp_insp_check(&h, value, buf, sizeof buf, &o, why, sizeof why)) {
            st = rbp_fail(s, RBPEEK_ERR_ARG, "%s", why);
            rbp_heap_close(&h);
            return st;
        }
        type = o.type;
        uint64_t real = rbp_class_real(&h, o.klass);
        cls = type == RBP_T_CLASS || type == RBP_T_MODULE ? (type == RBP_T_CLASS ? "Class" : "Module")
              : real ? rbp_heap_class_name(&h, real) : "?";
    }
    rbp_strbuf text;
    rbp_sb_init(&text);
    rbp_inspect_result res;
    rbp_inspect_append(&h, value, &lim, &text, &res);
    rbp_strbuf b;
    rbp_sb_init(&b);
    char line[512];
    if (format == RBPEEK_FORMAT_JSON) {
        rbp_json j;
        rbp_json_init(&j, &b, RBP_JSON_SPACED);
        rbp_json_object(&j);
        rbp_json_khex(&j, "address", value);
        rbp_json_kstr(&j, "type", TYPE_NAMES[type & 31]);
        rbp_json_kstr(&j, "class", cls);
        if (imm) rbp_json_kstr(&j, "immediate", IMMEDIATES[kind].kind);
        rbp_json_kstr(&j, "inspect", text.buf ? text.buf : "");
        rbp_json_kbool(&j, "elided", res.cut);
        rbp_json_kbool(&j, "exact", !res.inexact);
        if (res.inexact) rbp_json_kstr(&j, "not_exact_because", res.why[0] ? res.why : "its class's own #inspect is not decoded");
        if (raw && !imm) {
            raw_line(&h, &o, line);
            rbp_json_kstr(&j, "raw", line);
        }
        rbp_json_object_end(&j);
        rbp_sb_putn(&b, "\n", 1);
    } else {
        rbp_sb_puts(&b, text.buf ? text.buf : "");
        rbp_sb_puts(&b, "\n");
        if (imm) immediate_line(&b, value, kind, text.buf);
        if (raw) {
            rbp_sb_printf(&b, "  0x%" PRIx64 ": %s, class %s\n", value, TYPE_NAMES[type & 31], cls);
            if (res.inexact)
                rbp_sb_printf(&b, "  not exact (Kernel#to_s form shown): %s\n",
                              res.why[0] ? res.why : "its class's own #inspect is not decoded");
            if (!imm) {
                raw_line(&h, &o, line);
                rbp_sb_printf(&b, "  %s\n", line);
            }
        }
    }
    rbp_sb_free(&text);
    rbp_heap_close(&h);
    if (!(*out = rbp_sb_take(&b))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "p: out of memory");
    return RBPEEK_OK;
}
