/*
 * The value printer: a VALUE as Ruby's own #inspect prints it, byte for
 * byte, for the core types (immediates, String, Symbol, Integer, Float,
 * Rational, Complex, Array, Hash, Range, Struct, Data, plain objects and
 * exceptions with their ivars, classes and modules), following each type's
 * inspect in the target version's sources. Anything else prints as Ruby's
 * default Kernel#to_s form, #<Class:0x...>, and is flagged inexact.
 *
 * Every VALUE is checked before it is read as an object: it must be an
 * immediate or the start of a live slot of a heap page whose header is
 * believable (rbp_heap_classify); otherwise the top-level value gets one
 * clear line ("not a Ruby object: ...") and a nested one prints as
 * #<rbpeek: ...>. Nesting, elements per object and objects per value are
 * bounded (--depth, --max-length), and every object whose parts are
 * printed goes through one recursion guard (base/walkguard.h: a depth of
 * RBP_INSP_MAX_LEVELS objects of any type, a loop check, a budget of
 * objects per value and per command), so a corrupt or cyclic structure
 * ends: Ruby's own recursion marks ([...], {...}, #<struct X:...>, "(... ..
 * ...)", #<X:0x... ...>) where Ruby has one, and rbpeek's marker saying
 * why elsewhere (a Rational whose numerator is itself).
 */
#include "inspect/inspect.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "heap/obj_values.h"
#include "inspect/inspect_int.h"
#include "vm/robject.h"

enum { RAW_ELEMS = 64 };

/* --- helpers ------------------------------------------------------------- */

static void puts_(rbp_insp *in, const char *s) { rbp_sb_puts(in->out, s); }

/* --- immediates ------------------------------------------------------------ */

static bool immediate(rbp_insp *in, uint64_t v)
{
    switch (rbp_immediate_of(&in->s->rel.obj, v)) {
    case RBP_IMM_FIXNUM: rbp_sb_printf(in->out, "%" PRId64, rbp_fixnum_value(v)); break;
    case RBP_IMM_FLONUM: rbp_insp_float(in->out, rbp_flonum_value(v)); break;
    case RBP_IMM_STATIC_SYMBOL: rbp_insp_symbol(in, v); break;
    case RBP_IMM_NIL: puts_(in, "nil"); break;
    case RBP_IMM_TRUE: puts_(in, "true"); break;
    case RBP_IMM_FALSE: puts_(in, "false"); break;
    case RBP_IMM_UNDEF: rbp_insp_unreadable(in, "#<rbpeek: Qundef (no value)>"); break;
    case RBP_IMM_NONE: return false;
    }
    return true;
}

/* --- containers ------------------------------------------------------------ */

/* Whether the object a container printer was called for is being printed
 * further up: it then prints Ruby's mark for the recursion. */
static bool again(const rbp_insp *in) { return in->again; }

/* Entering a container's elements: false (and the elided form printed)
 * when --depth is reached. The container itself is on the recursion
 * guard's path already (rbp_insp_value). */
static bool enter(rbp_insp *in, const char *elided)
{
    if (in->depth >= in->max_depth || in->depth >= RBP_INSP_MAX_NEST) {
        puts_(in, elided);
        in->cut = true;
        return false;
    }
    in->depth++;
    return true;
}

static bool more_allowed(rbp_insp *in, uint64_t i)
{
    if (i < in->max_len && in->budget) return true;
    puts_(in, i ? ", " RBP_ELLIPSIS : RBP_ELLIPSIS);
    in->cut = true;
    return false;
}

static void values_list(rbp_insp *in, const rbp_obj *o, uint64_t ptr, uint64_t len)
{
    uint64_t chunk[128];
    for (uint64_t i = 0; i < len; i++) {
        if (!more_allowed(in, i)) return;
        if (i % 128 == 0) {
            uint64_t k = len - i < 128 ? len - i : 128, at = ptr + i * 8;
            if (rbp_obj_slot_holds(o, at, k * 8)) {
                memcpy(chunk, o->slot + (at - o->addr), k * 8);
            } else if (!rbp_mem_read(in->s->mem, at, chunk, k * 8)) {
                rbp_insp_unreadable(in, i ? ", #<rbpeek: unreadable elements>" : "#<rbpeek: unreadable elements>");
                return;
            }
        }
        if (i) puts_(in, ", ");
        rbp_insp_value(in, chunk[i % 128]);
    }
}

static void array(rbp_insp *in, const rbp_obj *o)
{
    uint64_t ptr, len;
    if (!rbp_array_values(in->h, o, &ptr, &len)) {
        rbp_insp_unreadable(in, "#<rbpeek: Array with an unreadable body>");
        return;
    }
    if (len == 0) {
        puts_(in, "[]");
        return;
    }
    if (again(in)) {
        puts_(in, "[...]");
        return;
    }
    if (!enter(in, "[" RBP_ELLIPSIS "]")) return;
    puts_(in, "[");
    values_list(in, o, ptr, len);
    puts_(in, "]");
    in->depth--;
}

typedef struct pairs {
    rbp_insp *in;
    uint64_t i;
    bool stop;
} pairs;

static bool pair_cb(void *ctx, uint64_t key, uint64_t val)
{
    pairs *p = ctx;
    rbp_insp *in = p->in;
    if (!more_allowed(in, p->i)) return false;
    if (p->i++) puts_(in, ", ");
    bool sym = rbp_is_static_symbol(key) || rbp_obj_type(in->s, key) == RBP_T_SYMBOL;
    if (in->hash_34 && sym) {
        const char *name = NULL;
        unsigned char *bytes = NULL;
        size_t len = 0;
        rbp_enc_kind enc = RBP_ENC_UTF8;
        uint64_t fstr = 0;
        if (rbp_is_static_symbol(key)) name = rbp_id_name(in->s, rbp_static_symbol_id(key));
        else if (rbp_read_field(in->s, key, RBP_L_rsymbol_fstr, &fstr)) bytes = rbp_insp_string_value(in, fstr, &len, &enc);
        if (name) rbp_insp_sym_key(in, (const unsigned char *)name, strlen(name), RBP_ENC_UTF8);
        else if (bytes) rbp_insp_sym_key(in, bytes, len, enc);
        else {
            rbp_insp_value(in, key);
            puts_(in, " => ");
        }
        free(bytes);
    } else {
        rbp_insp_value(in, key);
        puts_(in, in->hash_34 ? " => " : "=>");
    }
    rbp_insp_value(in, val);
    return true;
}

static void hash(rbp_insp *in, const rbp_obj *o)
{
    uint64_t n = 0;
    if (!rbp_hash_count(in->h, o, &n)) {
        rbp_insp_unreadable(in, "#<rbpeek: Hash with an unreadable table>");
        return;
    }
    if (n == 0) {
        puts_(in, "{}");
        return;
    }
    if (again(in)) {
        puts_(in, "{...}");
        return;
    }
    if (!enter(in, "{" RBP_ELLIPSIS "}")) return;
    puts_(in, "{");
    pairs p = {in, 0, false};
    if (!rbp_hash_each(in->h, o, pair_cb, &p)) rbp_insp_unreadable(in, p.i ? ", #<rbpeek: unreadable entries>" : "#<rbpeek: unreadable entries>");
    puts_(in, "}");
    in->depth--;
}

static void range(rbp_insp *in, uint64_t ptr, uint64_t len)
{
    uint64_t v[3];
    if (len != 3 || !rbp_mem_read(in->s->mem, ptr, v, sizeof v)) {
        rbp_insp_unreadable(in, "#<rbpeek: Range with an unreadable body>");
        return;
    }
    const rbp_release *r = &in->s->rel;
    bool excl = rbp_rtest(r, v[2]);
    if (again(in)) { /* range.c's inspect_range, recur */
        puts_(in, excl ? "(... ... ...)" : "(... .. ...)");
        return;
    }
    if (!enter(in, "(" RBP_ELLIPSIS ")")) return;
    if (!rbp_is_nil(r, v[0]) || rbp_is_nil(r, v[1])) rbp_insp_value(in, v[0]);
    puts_(in, excl ? "..." : "..");
    if (rbp_is_nil(r, v[0]) || !rbp_is_nil(r, v[1])) rbp_insp_value(in, v[1]);
    in->depth--;
}

static void structure(rbp_insp *in, const rbp_obj *o)
{
    uint64_t ptr, len;
    if (!rbp_struct_values(in->h, o, &ptr, &len)) {
        rbp_insp_unreadable(in, "#<rbpeek: Struct with an unreadable body>");
        return;
    }
    uint64_t real = rbp_class_real(in->h, o->klass);
    const char *path = real ? rbp_heap_class_path(in->h, real) : NULL;
    if (path && !strcmp(path, "Range")) {
        range(in, ptr, len);
        return;
    }
    bool data = !rbp_insp_inherits(in, real, "Struct") && rbp_insp_inherits(in, real, "Data");
    const char *cname = real ? rbp_heap_class_name(in->h, real) : "?";
    bool named = cname[0] != '#';
    puts_(in, data ? "#<data " : "#<struct ");
    if (again(in)) {
        rbp_sb_printf(in->out, "%s:...>", cname);
        return;
    }
    if (named) puts_(in, cname);
    if (!enter(in, named ? " " RBP_ELLIPSIS ">" : RBP_ELLIPSIS ">")) return;
    uint64_t members = rbp_struct_members(in->h, real);
    long mlen = 0;
    uint64_t vals[64], melems = 0;
    for (uint64_t i = 0; i < len; i++) {
        if (!more_allowed(in, i)) break;
        puts_(in, i ? ", " : named ? " " : "");
        uint64_t sym = 0;
        const char *mname = NULL;
        if (members && rbp_array_info(in->s, members, &mlen, &melems) && (long)i < mlen &&
            rbp_array_at(in->s, members, (long)i, &sym) && rbp_is_static_symbol(sym))
            mname = rbp_id_name(in->s, rbp_static_symbol_id(sym));
        if (mname && (mname[0] == '_' || ((mname[0] | 0x20) >= 'a' && (mname[0] | 0x20) <= 'z') || (unsigned char)mname[0] >= 0x80))
            puts_(in, mname);
        else if (sym)
            rbp_insp_value(in, sym);
        else {
            char marker[48];
            snprintf(marker, sizeof marker, "#<rbpeek: member %" PRIu64 ">", i);
            rbp_insp_unreadable(in, marker);
        }
        puts_(in, "=");
        if (i % 64 == 0 && !rbp_mem_read(in->s->mem, ptr + i * 8, vals, (len - i < 64 ? len - i : 64) * 8)) {
            rbp_insp_unreadable(in, "#<rbpeek: unreadable>");
            break;
        }
        rbp_insp_value(in, vals[i % 64]);
    }
    puts_(in, ">");
    in->depth--;
}

/* --- objects and exceptions -------------------------------------------------- */

typedef struct ivars {
    rbp_insp *in;
    uint64_t i;
    uint64_t mesg;
    bool want_mesg;
} ivars;

static bool ivar_cb(void *ctx, uint64_t id, uint64_t value)
{
    ivars *w = ctx;
    rbp_insp *in = w->in;
    const char *name = rbp_id_name(in->s, id);
    if (w->want_mesg) {
        if (name && !strcmp(name, "mesg")) {
            w->mesg = value;
            return false;
        }
        return true;
    }
    if (!name || name[0] != '@' || name[1] == '@') return true; /* rb_is_instance_id */
    if (!more_allowed(in, w->i)) return false;
    puts_(in, w->i++ ? ", " : " ");
    puts_(in, name);
    puts_(in, "=");
    rbp_insp_value(in, value);
    return true;
}

static void exception(rbp_insp *in, const rbp_obj *o, const char *cname)
{
    ivars w = {in, 0, rbp_qnil(&in->s->rel), true};
    rbp_obj_ivars_each(in->h, o, ivar_cb, &w);
    size_t len = 0;
    rbp_enc_kind enc;
    unsigned char *msg = NULL;
    if (rbp_is_nil(&in->s->rel, w.mesg)) { /* exc_to_s: the class name */
        msg = (unsigned char *)strdup(cname);
        len = strlen(cname);
        enc = RBP_ENC_UTF8;
    } else if (!(msg = rbp_insp_string_value(in, w.mesg, &len, &enc))) {
        rbp_sb_printf(in->out, "#<%s: #<rbpeek: a message that is no String (0x%" PRIx64 ")>>", cname, w.mesg);
        return;
    }
    if (len == 0) {
        puts_(in, cname);
    } else {
        rbp_sb_printf(in->out, "#<%s: ", cname);
        if (in->s->rel.inspect.exception_message_inspected && memchr(msg, '\n', len))
            rbp_insp_str_bytes(in, msg, len, enc, false);
        else
            rbp_sb_putn(in->out, (const char *)msg, len);
        puts_(in, ">");
    }
    free(msg);
}

static void object(rbp_insp *in, const rbp_obj *o)
{
    if (o->addr == in->top_self) { /* vm.c's main_to_s */
        puts_(in, "main");
        return;
    }
    const char *cname = rbp_insp_class_name(in, o->klass);
    if (rbp_insp_inherits(in, rbp_class_real(in->h, o->klass), "Exception")) {
        exception(in, o, cname);
        return;
    }
    rbp_sb_printf(in->out, "#<%s:0x%016" PRIx64, cname, o->addr);
    if (again(in)) {
        puts_(in, " ...>");
        return;
    }
    if (!enter(in, " " RBP_ELLIPSIS ">")) return;
    ivars w = {in, 0, 0, false};
    int st = rbp_obj_ivars_each(in->h, o, ivar_cb, &w);
    if (st == RBP_VALUES_NO_LAYOUT) puts_(in, " #<rbpeek: ivar names unknown for this layout>");
    else if (st != RBP_VALUES_OK) puts_(in, " #<rbpeek: unreadable ivars>");
    puts_(in, ">");
    in->depth--;
}

/* Rational "(1/3)" and Complex "(1+2i)" (rational.c, complex.c's f_format). */
static void numeric_pair(rbp_insp *in, const rbp_obj *o)
{
    uint64_t a = 0, b = 0;
    bool rat = o->type == RBP_T_RATIONAL;
    if (!rbp_read_field(in->s, o->addr, rat ? RBP_L_rrational_num : RBP_L_rcomplex_real, &a) ||
        !rbp_read_field(in->s, o->addr, rat ? RBP_L_rrational_den : RBP_L_rcomplex_imag, &b)) {
        rbp_insp_unreadable(in, "#<rbpeek: unreadable number>");
        return;
    }
    puts_(in, "(");
    rbp_insp_value(in, a);
    if (rat) {
        puts_(in, "/");
        rbp_insp_value(in, b);
    } else {
        /* the imaginary part's sign, then its magnitude: print it and move a leading '-' */
        rbp_strbuf *saved = in->out, tmp;
        rbp_sb_init(&tmp);
        in->out = &tmp;
        rbp_insp_value(in, b);
        in->out = saved;
        const char *s = tmp.buf ? tmp.buf : "";
        bool neg = s[0] == '-';
        puts_(in, neg ? "-" : "+");
        puts_(in, neg ? s + 1 : s);
        if (strstr(s, "Infinity") || strstr(s, "NaN")) puts_(in, "*");
        puts_(in, "i");
        rbp_sb_free(&tmp);
    }
    puts_(in, ")");
}

/* --- dispatch ---------------------------------------------------------------- */

/* Types whose #inspect shows recursion its own way ([...], {...},
 * #<struct X:...>, "(... .. ...)" for a Range, which is a T_STRUCT, and
 * #<X:0x... ...>): their printers ask again(). */
static bool marks_recursion(int type)
{
    return type == RBP_T_ARRAY || type == RBP_T_HASH || type == RBP_T_STRUCT || type == RBP_T_OBJECT;
}

/* The marker for an object the recursion guard refused: what it is and
 * why, once for the budget (later parts print as …). */
static void refused(rbp_insp *in, const rbp_obj *o, rbp_walk_verdict why)
{
    in->cut = true;
    if (why == RBP_WALK_BUDGET) {
        if (in->budget_said) {
            puts_(in, RBP_ELLIPSIS);
            return;
        }
        in->budget_said = true;
        char marker[160];
        if (in->output_full && in->command_text)
            snprintf(marker, sizeof marker, "#<rbpeek: cut: this command's text passed %zu MiB>",
                     RBP_INSP_COMMAND_TEXT >> 20);
        else if (in->output_full && in->max_output >= (1u << 20))
            snprintf(marker, sizeof marker, "#<rbpeek: cut: the value's text passed %zu MiB>", in->max_output >> 20);
        else if (in->output_full)
            snprintf(marker, sizeof marker, "#<rbpeek: cut: the value's text passed %zu bytes>", in->max_output);
        else if (in->command_budget)
            snprintf(marker, sizeof marker, "#<rbpeek: cut: this command's budget of %d objects is spent>",
                     RBP_INSP_COMMAND_BUDGET);
        else
            snprintf(marker, sizeof marker, "#<rbpeek: cut: the budget of %d objects per value is spent>",
                     RBP_INSP_BUDGET);
        rbp_insp_unreadable(in, marker);
        return;
    }
    if (in->budget) in->budget--; /* the object was read: it counts, so refusals end too */
    const char *cls = o->type == RBP_T_RATIONAL ? "Rational" : o->type == RBP_T_COMPLEX ? "Complex"
                      : rbp_insp_class_name(in, o->klass);
    char marker[320];
    if (why == RBP_WALK_CYCLE)
        snprintf(marker, sizeof marker, "#<rbpeek: a %s that contains itself (0x%" PRIx64 ")>", cls, o->addr);
    else
        snprintf(marker, sizeof marker, "#<rbpeek: a %s that nests too deep (over %d objects, at 0x%" PRIx64 ")>", cls,
                 RBP_INSP_MAX_LEVELS, o->addr);
    rbp_insp_unreadable(in, marker);
}

static void print_object(rbp_insp *in, uint64_t v, rbp_obj *o);

void rbp_insp_value(rbp_insp *in, uint64_t v)
{
    in->nested = rbp_insp_value;
    if (immediate(in, v)) return;
    size_t used = in->out == in->top_out ? in->out->len - in->out_start : in->out->len;
    if (used >= in->max_output && in->budget) { /* the text is long enough: an end like the budget's */
        in->budget_unspent = in->budget;   /* not read: the command's budget keeps it */
        in->budget = 0;
        in->output_full = true;
    }
    if (!in->budget) { /* spent: say so without reading more */
        rbp_obj none = {.addr = v};
        refused(in, &none, RBP_WALK_BUDGET);
        return;
    }
    uint8_t buf[RBP_INSP_SLOT];
    rbp_obj o;
    char why[240];
    if (rbp_insp_check(in->h, v, buf, sizeof buf, &o, why, sizeof why)) {
        char marker[sizeof why + 16];
        snprintf(marker, sizeof marker, "#<rbpeek: %s>", why);
        rbp_insp_unreadable(in, marker);
        return;
    }
    /* Every object goes through the guard, leaves too (a String costs its
     * place in the budget); one met again inside itself is refused, but
     * for the types that print Ruby's own mark for it. */
    bool mark = marks_recursion(o.type) && rbp_rec_on_path(&in->rec, v);
    if (!mark) {
        rbp_walk_verdict vd = rbp_rec_enter(&in->rec, v);
        if (vd != RBP_WALK_OK) {
            refused(in, &o, vd);
            return;
        }
    }
    in->again = mark;   /* read by the container printers before they print any part */
    print_object(in, v, &o);
    in->again = false;
    if (!mark) rbp_rec_leave(&in->rec);
}

static void print_object(rbp_insp *in, uint64_t v, rbp_obj *o_)
{
    rbp_obj o = *o_;
    switch (o.type) {
    case RBP_T_STRING: {
        size_t len;
        bool cut;
        rbp_enc_kind enc;
        unsigned char *p = rbp_insp_read_str(in, &o, in->max_len, &len, &cut, &enc);
        if (!p) {
            rbp_insp_unreadable(in, "#<rbpeek: String with unreadable bytes>");
            return;
        }
        rbp_insp_str_bytes(in, p, len, enc, cut);
        in->cut |= cut;
        free(p);
        return;
    }
    case RBP_T_SYMBOL:
        rbp_insp_symbol(in, v);
        return;
    case RBP_T_FLOAT: {
        double d;
        if (rbp_float_value(in->h, &o, &d)) rbp_insp_float(in->out, d);
        else rbp_insp_unreadable(in, "#<rbpeek: unreadable Float>");
        return;
    }
    case RBP_T_BIGNUM:
        if (!rbp_insp_bignum(in, &o)) rbp_insp_unreadable(in, "#<rbpeek: unreadable Bignum>");
        return;
    case RBP_T_RATIONAL: case RBP_T_COMPLEX: numeric_pair(in, &o); return;
    case RBP_T_ARRAY: array(in, &o); return;
    case RBP_T_HASH: hash(in, &o); return;
    case RBP_T_STRUCT: structure(in, &o); return;
    case RBP_T_OBJECT: object(in, &o); return;
    case RBP_T_CLASS: case RBP_T_MODULE: puts_(in, rbp_heap_class_name(in->h, v)); return;
    case RBP_T_DATA:
        if (rbp_insp_is_data(in, &o, "proc", "Proc")) {
            if (rbp_insp_proc(in, &o)) return;
        } else if (rbp_insp_is_data(in, &o, "time", "Time")) {
            if (rbp_insp_time(in, &o)) return;
        } else if (rbp_insp_is_data(in, &o, "method", "Method") || rbp_insp_is_data(in, &o, "method", "UnboundMethod")) {
            if (rbp_insp_method(in, &o)) return;
        } else if (rbp_insp_top(in)) {
            rbp_insp_why(in, "its class's own #inspect is not decoded");
        }
        break;
    case RBP_T_REGEXP:
        if (rbp_insp_regexp(in, &o)) return;
        break;
    default:
        if (rbp_insp_top(in)) rbp_insp_why(in, "its class's own #inspect is not decoded");
        break;
    }
    /* rb_any_to_s: what Kernel#to_s gives, and what Kernel#inspect gives an
     * object of such a type unless its class defines #inspect, which rbpeek
     * cannot tell; so the value is flagged, whether this is it or a part. */
    const char *cls = rbp_insp_class_name(in, o.klass);
    rbp_sb_printf(in->out, "#<%s:0x%016" PRIx64 ">", cls, v);
    in->inexact = true;
    if (!in->why[0]) snprintf(in->why, sizeof in->why, "a part of class %s has an #inspect rbpeek does not decode", cls);
}
