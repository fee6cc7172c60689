/*
 * Method#inspect and UnboundMethod#inspect, byte for byte: proc.c's
 * method_inspect of 2.7, 3.1, 3.3 and 3.4 (the releases whose struct METHOD
 * rbpeek knows, and whose method_inspect was read for this):
 *
 *   #<Method: Foo#bar(a, b=..., *c, d, e:, f: ..., **g, &h) /path/x.rb:12>
 *   #<Method: Foo.bar() ...>              a singleton method of its receiver
 *   #<Method: #<Foo:0x...>.bar() ...>     ... of an object
 *   #<Method: Foo(Mod)#baz() ...>         owner differs from the class
 *   #<Method: Foo#new_name(old_name)() ...>  an alias
 *   #<Method: String#count(*)>            C methods: the list from the arity
 *   #<UnboundMethod: Foo#bar() ...>
 *
 * The receiver part follows the release's rules (mklass from klass or
 * iclass, singleton classes, 3.3's UnboundMethod printing the owner); the
 * parameter list is rb_iseq_parameters over the iseq's param info and
 * local table, or rb_unnamed_parameters of the arity, then method_inspect's
 * per-release rendering of anonymous and forwarded parameters; the location
 * is the iseq's path and first line, or an attr method's recorded one.
 * What cannot be decoded exactly (refined methods, a
 * define_method from a C block, a release not read, an ID whose name cannot
 * be read) is refused with its reason: the caller prints the Kernel#to_s
 * form and flags it inexact.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "inspect/inspect_int.h"
#include "vm/rdata.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

/* enum rb_method_type_t, the same from 2.7 to 3.4 (method.h) */
enum { M_ISEQ, M_CFUNC, M_ATTRSET, M_IVAR, M_BMETHOD, M_ZSUPER, M_ALIAS, M_UNDEF, M_NOTIMPLEMENTED,
       M_OPTIMIZED, M_MISSING, M_REFINED };
enum { P_REQ, P_OPT, P_REST, P_KEYREQ, P_KEY, P_KEYREST, P_BLOCK, P_NOKEY };
enum { MAX_PARAMS = 256, MAX_ALIAS = 16, MAX_LOCALS = 1 << 16 };

typedef struct param {
    int kind;
    const char *name;   /* NULL: rb_id2str gave none */
} param;

typedef struct mctx {
    rbp_insp *in;
    const rbp_method_rules *R;  /* the release's method_inspect */
    param p[MAX_PARAMS];
    int n;
} mctx;

static const rbp_field_id METHOD_FIELDS[] = {
    RBP_L_method_recv, RBP_L_method_klass, RBP_L_method_iclass, RBP_L_method_me, RBP_L_me_def,
    RBP_L_me_owner, RBP_L_me_defined_class, RBP_L_me_called_id, RBP_L_mdef_type, RBP_L_mdef_original_id,
    RBP_L_mdef_iseqptr, RBP_L_mdef_alias_original_me, RBP_L_mdef_cfunc_argc, RBP_L_mdef_attr_location,
    RBP_L_mdef_bmethod_proc, RBP_L_body_local_table, RBP_L_body_local_table_size, RBP_L_param_flag_has_rest,
    RBP_L_param_flag_has_kw, RBP_L_param_flag_has_kwrest, RBP_L_param_flag_has_block, RBP_L_param_flag_no_kwarg,
    RBP_L_param_lead_num, RBP_L_param_opt_num, RBP_L_param_rest_start, RBP_L_param_post_start,
    RBP_L_param_post_num, RBP_L_param_block_start, RBP_L_param_keyword, RBP_L_kw_num, RBP_L_kw_required_num,
    RBP_L_kw_rest_start, RBP_L_kw_table, RBP_L_proc_block_code, RBP_L_proc_block_type,
};

static bool rd(rbp_insp *in, uint64_t base, rbp_field_id id, uint64_t *out)
{
    return base && rbp_read_field(in->s, base, id, out);
}

/* rb_id2str: 1 with its name, 0 when it certainly has none, -1 unreadable */
static int id_str(rbp_insp *in, uint64_t id, const char **name)
{
    *name = id ? rbp_id_name(in->s, id) : NULL;
    if (*name) return 1;
    return !id || rbp_id_unnamed(in->s, id) ? 0 : -1;
}

static bool push(mctx *m, int kind, const char *name)
{
    if (m->n >= MAX_PARAMS) return rbp_insp_why(m->in, "it has more than %d parameters", MAX_PARAMS);
    m->p[m->n++] = (param){kind, name};
    return true;
}

/* A local's name (PARAM_ID), pushed as kind, named or not */
static bool push_local(mctx *m, int kind, uint64_t table, uint64_t size, uint64_t i)
{
    uint64_t id = 0;
    const char *name = NULL;
    if (i >= size || !rbp_mem_u64(m->in->s->mem, table + i * 8, &id))
        return rbp_insp_why(m->in, "its iseq's local table has no entry %" PRIu64, i);
    if (id_str(m->in, id, &name) < 0) return rbp_insp_why(m->in, "the name of parameter ID %" PRIu64 " cannot be read", id);
    return push(m, kind, name);
}

/* iseq.c's rb_iseq_parameters(iseq, 0) */
static bool iseq_params(mctx *m, uint64_t iseq)
{
    rbp_insp *in = m->in;
    const rbp_iseq_info *info = rbp_iseq_get(in->s, iseq);
    if (!info || !info->body) return rbp_insp_why(in, "its method's iseq (0x%" PRIx64 ") cannot be read", iseq);
    uint64_t b = info->body, table = 0, size = 0, lead = 0, opt = 0, rest = 0, rest_start = 0, post_start = 0,
             post_num = 0, nokw = 0, kw = 0, kwrest = 0, r2k = 0, block = 0, block_start = 0, fwd = 0, kwp = 0;
    if (!rd(in, b, RBP_L_body_local_table, &table) || !rd(in, b, RBP_L_body_local_table_size, &size) ||
        !rd(in, b, RBP_L_param_lead_num, &lead) || !rd(in, b, RBP_L_param_opt_num, &opt) ||
        !rd(in, b, RBP_L_param_flag_has_rest, &rest) || !rd(in, b, RBP_L_param_rest_start, &rest_start) ||
        !rd(in, b, RBP_L_param_post_start, &post_start) || !rd(in, b, RBP_L_param_post_num, &post_num) ||
        !rd(in, b, RBP_L_param_flag_no_kwarg, &nokw) || !rd(in, b, RBP_L_param_flag_has_kw, &kw) ||
        !rd(in, b, RBP_L_param_flag_has_kwrest, &kwrest) || !rd(in, b, RBP_L_param_flag_has_block, &block) ||
        !rd(in, b, RBP_L_param_block_start, &block_start) || !rd(in, b, RBP_L_param_keyword, &kwp))
        return rbp_insp_why(in, "the parameters of its iseq's body (0x%" PRIx64 ") cannot be read", b);
    if (m->R->ruby2_keywords_flag && !rd(in, b, RBP_L_param_flag_ruby2_keywords, &r2k))
        return rbp_insp_why(in, "the ruby2_keywords flag of its iseq cannot be read");
    if (m->R->forwardable_flag && !rd(in, b, RBP_L_param_flag_forwardable, &fwd))
        return rbp_insp_why(in, "the forwardable flag of its iseq cannot be read");
    size &= 0xffffffff;
    /* the counts are C ints: a negative or huge one is garbage, not a method */
    if (size > MAX_LOCALS || (lead | opt | rest_start | post_start | post_num | block_start) > MAX_LOCALS)
        return rbp_insp_why(in, "its iseq's parameter counts are implausible");
    if (fwd && !(push(m, P_REST, "*") && push(m, P_KEYREST, "**") && push(m, P_BLOCK, "&"))) return false;
    uint64_t i = 0;
    for (; i < lead; i++)
        if (!push_local(m, P_REQ, table, size, i)) return false;
    for (; i < lead + opt; i++)
        if (!push_local(m, P_OPT, table, size, i)) return false;
    if (rest && !push_local(m, P_REST, table, size, rest_start)) return false;
    for (i = post_start; i < post_start + post_num; i++)
        if (!push_local(m, P_REQ, table, size, i)) return false;
    if (nokw && !push(m, P_NOKEY, NULL)) return false;
    uint64_t knum = 0, kreq = 0, krest = 0, ktable = 0;
    if ((kw || kwrest) && (!rd(in, kwp, RBP_L_kw_num, &knum) || !rd(in, kwp, RBP_L_kw_required_num, &kreq) ||
                           !rd(in, kwp, RBP_L_kw_rest_start, &krest) || !rd(in, kwp, RBP_L_kw_table, &ktable) ||
                           knum > MAX_PARAMS || kreq > knum))
        return rbp_insp_why(in, "its iseq's keyword parameters (0x%" PRIx64 ") cannot be read", kwp);
    for (i = 0; kw && i < knum; i++) {
        uint64_t id = 0;
        const char *name = NULL;
        if (!rbp_mem_u64(in->s->mem, ktable + i * 8, &id) || id_str(in, id, &name) < 0)
            return rbp_insp_why(in, "the name of keyword %" PRIu64 " cannot be read", i);
        if (!push(m, i < kreq ? P_KEYREQ : P_KEY, name)) return false;
    }
    if (kwrest || r2k) { /* 2.7 knows no ruby2_keywords here (r2k stays 0) */
        const char *name = NULL;
        uint64_t id = 0;
        int got = 0;
        if (kwrest) {
            if (krest >= size || !rbp_mem_u64(in->s->mem, table + krest * 8, &id) || (got = id_str(in, id, &name)) < 0)
                return rbp_insp_why(in, "the name of its **rest cannot be read");
        }
        if (!got && r2k) name = "**";
        if (!push(m, P_KEYREST, name)) return false;
    }
    if (block && !push_local(m, P_BLOCK, table, size, block_start)) return false;
    return true;
}

/* rb_unnamed_parameters */
static bool unnamed_params(mctx *m, int arity)
{
    int n = arity < 0 ? ~arity : arity;
    for (int i = 0; i < n; i++)
        if (!push(m, P_REQ, NULL)) return false;
    return arity >= 0 || push(m, P_REST, NULL);
}

/* The iseq a Proc's block runs (rb_proc_get_iseq for an iseq block); 0 for
 * any other block, which rbpeek does not follow. */
static uint64_t proc_iseq(rbp_insp *in, uint64_t procval)
{
    uint64_t t = 0, data = 0, type = 0, code = 0;
    if (rbp_obj_type(in->s, procval) != RBP_T_DATA || !rbp_typed_data(in->s, procval, &t, &data) || !data ||
        !rd(in, data, RBP_L_proc_block_type, &type) || type != 0 || !rd(in, data, RBP_L_proc_block_code, &code))
        return 0;
    return code;
}

/* method_def_parameters / rb_method_parameters of a definition, and the
 * iseq whose location is printed (method_def_iseq), through aliases */
static bool def_params(mctx *m, uint64_t def, uint64_t *loc_iseq)
{
    rbp_insp *in = m->in;
    for (int hops = 0; hops < MAX_ALIAS; hops++) {
        uint64_t type = 0, w = 0, me = 0;
        if (!rd(in, def, RBP_L_mdef_type, &type)) return rbp_insp_why(in, "its method definition cannot be read");
        switch ((int)type) {
        case M_ISEQ:
            if (!rd(in, def, RBP_L_mdef_iseqptr, &w)) return rbp_insp_why(in, "its method's iseq cannot be read");
            *loc_iseq = w;
            return iseq_params(m, w);
        case M_BMETHOD:
            if (!rd(in, def, RBP_L_mdef_bmethod_proc, &w) || !(w = proc_iseq(in, w)))
                return rbp_insp_why(in, "it is a define_method whose body is no Ruby block (not decoded)");
            *loc_iseq = w;
            return iseq_params(m, w);
        case M_ALIAS:
            if (!rd(in, def, RBP_L_mdef_alias_original_me, &me) || !rd(in, me, RBP_L_me_def, &def))
                return rbp_insp_why(in, "the original of its alias cannot be read");
            continue;
        case M_CFUNC: {
            if (!rd(in, def, RBP_L_mdef_cfunc_argc, &w)) return rbp_insp_why(in, "its C function's argc cannot be read");
            int argc = (int)(int32_t)w;
            if (argc < -2 || argc > 15) return rbp_insp_why(in, "its C function's argc (%d) is impossible", argc);
            return unnamed_params(m, argc < 0 ? -1 : argc);
        }
        case M_ATTRSET: return unnamed_params(m, 1);
        case M_IVAR: case M_NOTIMPLEMENTED: return unnamed_params(m, 0);
        case M_ZSUPER: case M_MISSING: return unnamed_params(m, -1);
        case M_OPTIMIZED: {
            /* send, call, block_call: any number; 3.1+'s Struct accessors:
             * aref none, aset one ("_", named so by method_def_parameters) */
            rbp_field_id f = rbp_has(&in->s->layout, RBP_L_mdef_optimized_type) ? RBP_L_mdef_optimized_type
                                                                                : RBP_L_mdef_optimize_type;
            if (!rd(in, def, f, &w)) return rbp_insp_why(in, "its optimized method's type cannot be read");
            if (w <= 2) return unnamed_params(m, -1);
            if (m->R->struct_accessors && w == 3) return unnamed_params(m, 0);
            if (m->R->struct_accessors && w == 4) return unnamed_params(m, 1);
            return rbp_insp_why(in, "it is an optimized method of type %" PRIu64 ", which this release does not make", w);
        }
        default:
            return rbp_insp_why(in, "it is a method of type %" PRIu64 " (refined, undefined...), not decoded", type);
        }
    }
    return rbp_insp_why(in, "its chain of aliases is longer than %d", MAX_ALIAS);
}

static bool named(const param *p, const char *name) { return p->name && !strcmp(p->name, name); }

/* 3.3+: (*, **, &) is shown as "(...)". */
static bool forwards_all(const mctx *m)
{
    return m->R->anonymous_rest && m->n == 3 && m->p[0].kind == P_REST && named(&m->p[0], "*") &&
           m->p[1].kind == P_KEYREST && named(&m->p[1], "**") && m->p[2].kind == P_BLOCK && named(&m->p[2], "&");
}

/* An anonymous *: before 3.3 shown as "..." (and the list forwards from
 * there), from 3.3 as "*" unless the list forwards all. */
static void anonymous_rest(const mctx *m, rbp_strbuf *out, bool *forwarding)
{
    if (!m->R->anonymous_rest) *forwarding = true;
    rbp_sb_puts(out, !m->R->anonymous_rest || *forwarding ? "..." : "*");
}

/* An anonymous ** (told from a named one from 3.1): after another
 * parameter it is dropped with its ", "; alone it is "**" from 3.3 and
 * nothing before. */
static void anonymous_keyrest(const mctx *m, rbp_strbuf *out, int i)
{
    if (i > 0 && out->len >= 2) out->len -= 2;
    else if (m->R->anonymous_rest) rbp_sb_puts(out, "**");
}

/* An anonymous &: part of the "..." already shown when forwarding (dropped
 * with its ", "), "..." itself otherwise. */
static void anonymous_block(rbp_strbuf *out, bool forwarding)
{
    if (forwarding && out->len >= 2) out->len -= 2;
    else if (!forwarding) rbp_sb_puts(out, "...");
}

/* method_inspect's parameter list, with each release's rules for the
 * anonymous and forwarded ones (the helpers above) */
static void render_params(mctx *m, rbp_strbuf *out)
{
    bool forwarding = forwards_all(m);
    rbp_sb_puts(out, "(");
    for (int i = 0; i < m->n; i++) {
        const param *p = &m->p[i];
        const char *name = p->name;
        if (!name)
            name = p->kind == P_REQ || p->kind == P_OPT ? "_" : p->kind == P_BLOCK ? "block" : p->kind == P_NOKEY ? "nil" : "";
        switch (p->kind) {
        case P_REQ: rbp_sb_puts(out, name); break;
        case P_OPT: rbp_sb_printf(out, "%s=...", name); break;
        case P_KEYREQ: rbp_sb_printf(out, "%s:", name); break;
        case P_KEY: rbp_sb_printf(out, "%s: ...", name); break;
        case P_REST:
            if (named(p, "*")) anonymous_rest(m, out, &forwarding);
            else rbp_sb_printf(out, "*%s", name);
            break;
        case P_KEYREST:
            if (m->R->anonymous_keyrest && named(p, "**")) anonymous_keyrest(m, out, i);
            else rbp_sb_printf(out, "**%s", name);
            break;
        case P_BLOCK:
            if (named(p, "&")) anonymous_block(out, forwarding);
            else rbp_sb_printf(out, "&%s", name);
            break;
        case P_NOKEY: rbp_sb_puts(out, "**nil"); break;
        }
        if (i < m->n - 1) rbp_sb_puts(out, ", ");
    }
    if (out->buf) out->buf[out->len] = '\0';
    rbp_sb_puts(out, ")");
}

/* RBASIC_CLASS of an iclass is the module it stands for */
static uint64_t unwrap_iclass(rbp_insp *in, uint64_t v)
{
    uint64_t k = 0;
    if (rbp_obj_type(in->s, v) == RBP_T_ICLASS && rbp_mem_u64(in->s->mem, v + 8, &k)) return k;
    return v;
}

static bool is_singleton(rbp_insp *in, uint64_t klass, rbp_obj *c, uint8_t *buf, size_t n)
{
    return rbp_obj_at(in->h, klass, buf, n, c) && c->type == RBP_T_CLASS && (c->flags & in->h->c->fl_singleton);
}

/* "a", or "a(b)" when b is another object: a singleton's receiver and the
 * object it is attached to, a class and the method's owner. */
static void value_then_other(rbp_insp *in, uint64_t a, uint64_t b)
{
    in->nested(in, a);
    if (b == a) return;
    rbp_sb_puts(in->out, "(");
    in->nested(in, b);
    rbp_sb_puts(in->out, ")");
}

/* The receiver part: "Foo", "Foo(Mod)", "#<Class:Foo>", "recv(attached)",
 * and the separator '#' or '.' */
static bool receiver(rbp_insp *in, const rbp_method_rules *R, uint64_t recv, uint64_t klass, uint64_t iclass, uint64_t defined_class,
                     const char **sharp)
{
    uint8_t buf[64];
    rbp_obj c;
    uint64_t mklass = !R->iclass_receiver || !iclass ? klass : iclass;
    mklass = unwrap_iclass(in, mklass);
    bool unbound = rbp_is_undef(&in->s->rel, recv);
    *sharp = "#";
    if (unbound && R->unbound_defined_class) {
        in->nested(in, defined_class);
        return true;
    }
    if (is_singleton(in, mklass, &c, buf, sizeof buf)) {
        uint64_t v = rbp_class_attached(in->h, &c);
        if (!v) return rbp_insp_why(in, "the object its singleton class is attached to cannot be read");
        if (unbound) {
            in->nested(in, mklass);
            return true;
        }
        *sharp = ".";
        value_then_other(in, recv, v);
        return true;
    }
    if (R->singleton_superclass) { /* a singleton class of a non-class object stands for its first real superclass */
        mklass = klass;
        if (is_singleton(in, mklass, &c, buf, sizeof buf)) {
            uint64_t v = rbp_class_attached(in->h, &c);
            int t = v ? rbp_obj_type(in->s, v) : -1;
            if (!v) return rbp_insp_why(in, "the object its singleton class is attached to cannot be read");
            /* method_inspect steps to the superclass, then past iclasses;
             * above a non-class object's singleton there is no other
             * singleton, so that is rbp_class_real (cached, and on the
             * command's chain budget) */
            if (t != RBP_T_CLASS && t != RBP_T_MODULE && !(mklass = rbp_class_real(in->h, mklass)))
                return rbp_insp_why(in, "the superclass chain of its class cannot be followed");
        }
    }
    value_then_other(in, mklass, defined_class);
    return true;
}

/* method_def_location: an attr method's recorded [path, line] */
static bool attr_location(rbp_insp *in, uint64_t def, rbp_strbuf *out)
{
    uint64_t loc = 0, path = 0, line = 0;
    int64_t lineno = 0;
    size_t len = 0;
    rbp_enc_kind enc;
    if (!rd(in, def, RBP_L_mdef_attr_location, &loc)) return rbp_insp_why(in, "its attr location cannot be read");
    if (!loc) return true;
    unsigned char *p = NULL;
    if (!rbp_array_at(in->s, loc, 0, &path) || !rbp_array_at(in->s, loc, 1, &line) || !rbp_fixnum_get(line, &lineno) ||
        !(p = rbp_insp_string_value(in, path, &len, &enc)))
        return rbp_insp_why(in, "its attr location (0x%" PRIx64 ") is no [path, line]", loc);
    rbp_sb_puts(out, " ");
    rbp_sb_putn(out, (const char *)p, len);
    rbp_sb_printf(out, ":%" PRId64, lineno);
    free(p);
    return true;
}

static bool method_body(rbp_insp *in, const rbp_obj *o, mctx *m)
{
    uint64_t t = 0, data = 0, recv = 0, klass = 0, iclass = 0, me = 0, def = 0, type = 0, called = 0, orig = 0;
    if (!rbp_typed_data(in->s, o->addr, &t, &data) || !data)
        return rbp_insp_why(in, "its typed-data header does not point at a struct METHOD");
    if (!rd(in, data, RBP_L_method_recv, &recv) || !rd(in, data, RBP_L_method_klass, &klass) ||
        !rd(in, data, RBP_L_method_iclass, &iclass) || !rd(in, data, RBP_L_method_me, &me) ||
        !rd(in, me, RBP_L_me_def, &def) || !rd(in, me, RBP_L_me_called_id, &called) ||
        !rd(in, def, RBP_L_mdef_type, &type) || !rd(in, def, RBP_L_mdef_original_id, &orig))
        return rbp_insp_why(in, "its struct METHOD at 0x%" PRIx64 " or method entry cannot be read", data);
    /* method_entry_defined_class, or an alias's original owner */
    uint64_t defined_class = 0, w = 0;
    if (type == M_ALIAS) {
        if (!rd(in, def, RBP_L_mdef_alias_original_me, &w) || !rd(in, w, RBP_L_me_owner, &defined_class))
            return rbp_insp_why(in, "the original of its alias cannot be read");
    } else if (!rd(in, me, RBP_L_me_defined_class, &defined_class) ||
               (!defined_class && !rd(in, me, RBP_L_me_owner, &defined_class))) {
        return rbp_insp_why(in, "its method entry's class cannot be read");
    }
    defined_class = unwrap_iclass(in, defined_class);
    const char *called_name = NULL, *orig_name = NULL;
    if (id_str(in, called, &called_name) <= 0 || id_str(in, orig, &orig_name) <= 0)
        return rbp_insp_why(in, "its method's name cannot be read");

    rbp_sb_printf(in->out, "#<%s: ", rbp_insp_class_name(in, o->klass));
    const char *sharp = "#";
    if (!receiver(in, m->R, recv, klass, iclass, defined_class, &sharp)) return false;
    rbp_sb_puts(in->out, sharp);
    rbp_sb_puts(in->out, called_name);
    if (called != orig) rbp_sb_printf(in->out, "(%s)", orig_name);
    if (type == M_NOTIMPLEMENTED) rbp_sb_puts(in->out, " (not-implemented)");
    uint64_t loc_iseq = 0;
    if (!def_params(m, def, &loc_iseq)) return false;
    render_params(m, in->out);
    if (type == M_ATTRSET || type == M_IVAR) {
        if (!attr_location(in, def, in->out)) return false;
    } else if (loc_iseq) {
        const rbp_iseq_info *info = rbp_iseq_get(in->s, loc_iseq);
        if (!info || !info->path || !info->path[0])
            return rbp_insp_why(in, "the path of its iseq (0x%" PRIx64 ") cannot be read", loc_iseq);
        rbp_sb_printf(in->out, " %s:%d", info->path, info->first_lineno);
    }
    rbp_sb_puts(in->out, ">");
    return true;
}

bool rbp_insp_method(rbp_insp *in, const rbp_obj *o)
{
    const rbp_layout *L = &in->s->layout;
    for (size_t i = 0; i < sizeof METHOD_FIELDS / sizeof METHOD_FIELDS[0]; i++)
        if (!rbp_has(L, METHOD_FIELDS[i]))
            return rbp_insp_why(in, "this layout has no struct METHOD members (private to proc.c; known for 2.7, 3.1, 3.3, 3.4)");
    const rbp_method_rules *R = &in->s->rel.inspect.method;
    if (!R->decoded)
        return rbp_insp_why(in, "method_inspect of Ruby %d.%d was not read for rbpeek", in->s->ver_major, in->s->ver_minor);
    /* a receiver is printed by the dispatcher, which may come back here
     * for a Method that is (garbage can make it) its own receiver's: the
     * dispatcher's recursion guard ends that */
    /* MAX_PARAMS entries: kept off the printer's recursion stack */
    mctx *mc = calloc(1, sizeof *mc);
    if (!mc) return rbp_insp_why(in, "out of memory");
    mc->in = in;
    mc->R = R;
    /* printed aside, so that a refusal half way leaves nothing behind */
    rbp_strbuf *saved = in->out, tmp;
    rbp_sb_init(&tmp);
    in->out = &tmp;
    bool ok = method_body(in, o, mc);
    in->out = saved;
    if (ok && tmp.buf) rbp_sb_putn(saved, tmp.buf, tmp.len);
    rbp_sb_free(&tmp);
    free(mc);
    return ok;
}
