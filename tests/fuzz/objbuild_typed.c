/*
 * The object builder's typed data and Regexps (objbuild.h; build_one in
 * objbuild.c hands these kinds on): Procs, Methods and UnboundMethods with
 * method entries of their own, Times, and T_DATA of any type, each a typed
 * T_DATA with the target's own rb_data_type_t and its struct in the slot
 * or the arena as the version puts it; and Regexps, their regex_t in the
 * arena. As for every kind, the variant bits choose the form and a
 * record's references and payload fill it, truthfully or not.
 */
#include "objbuild_int.h"

#include "vm/robject.h"

#define REG_ENCODING_NONE RBP_FL_USER(6)

static uint64_t pick_iseq(const ob_world *w, uint8_t sel) { return w->niseqs ? w->iseqs[sel % w->niseqs] : 0; }

/* A typed T_DATA of the given type, its struct (size bytes) in the slot
 * (3.3+, when it fits and the variant asks) or in the arena: returns the
 * struct's address. */
static uint64_t typed_data(ob_build *b, uint64_t o, uint32_t slot, uint64_t klass, uint64_t type, size_t size,
                           bool embed)
{
    const ob_world *w = b->w;
    bool has_flag = has(w, RBP_L_typeddata_typed_flag);
    bool v33 = w->t->s->rel.obj.typed_flag_embedded; /* 3.3+ */
    embed = embed && (v33 || !has_flag) && ofs(w, RBP_L_typeddata_data) + size <= slot;
    uint64_t flags = RBP_T_DATA, data = embed ? o + ofs(w, RBP_L_typeddata_data) : arena(b, size);
    if (!has_flag) flags |= UINT64_C(1) << 6; /* 4.0: RUBY_TYPED_FL_IS_TYPED_DATA */
    header(b, o, flags, klass);
    wrf(b, o, RBP_L_typeddata_type, has_flag ? type : type | (embed ? 1 : 0));
    if (has_flag) wrf(b, o, RBP_L_typeddata_typed_flag, embed ? 3 : 1);
    if (!embed) wrf(b, o, RBP_L_typeddata_data, data);
    return data;
}

void ob_build_proc(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    uint64_t d = typed_data(b, o, slot, klass_or(b, C_PROC, r->ref[5], r->v & 0x80),
                            (r->v & 0x40) ? w->type_other : w->type_proc, 48, r->v & 1);
    uint64_t btype = (r->v & 8) ? r->n : (r->v >> 1) & 3;
    wrf(b, d, RBP_L_proc_block_type, btype);
    switch (btype) {
    case 0: wrf(b, d, RBP_L_proc_block_code, (r->v & 0x10) ? ob_ref(b, r->ref[1]) : pick_iseq(w, r->pay[0])); break;
    case 1: wrf(b, d, RBP_L_proc_block_code, w->arena + 8 * r->pay[0]); break; /* a vm_ifunc's address */
    case 2: wrf(b, d, RBP_L_proc_block_symbol, ob_ref(b, r->ref[2])); break;
    default: wrf(b, d, RBP_L_proc_block_proc, ob_ref(b, r->ref[0])); break;
    }
    wrf(b, d, RBP_L_proc_is_lambda, (r->v >> 5) & 1);
}

/* An rb_method_entry_t of its own, in the arena (an imemo), with a
 * definition of the record's type. */
static uint64_t method_entry(ob_build *b, const ob_rec *r, int depth)
{
    const ob_world *w = b->w;
    uint64_t me = arena(b, 64), def = arena(b, 64);
    uint64_t type = r->pay[1] % 16, id = sym_id(ob_ref(b, r->ref[3]), r->pay[2]);
    wr64(b, me, RBP_T_IMEMO | (UINT64_C(6) << RBP_FL_USHIFT)); /* imemo_ment */
    wrf(b, me, RBP_L_me_def, def);
    wrf(b, me, RBP_L_me_owner, ob_ref(b, r->ref[4]));
    wrf(b, me, RBP_L_me_defined_class, ob_ref(b, r->ref[4]));
    wrf(b, me, RBP_L_me_called_id, id);
    wrf(b, def, RBP_L_mdef_type, type);
    wrf(b, def, RBP_L_mdef_original_id, (r->v & 0x40) ? r->pay[3] : id);
    switch (type) {
    case 0: wrf(b, def, RBP_L_mdef_iseqptr, pick_iseq(w, r->pay[0])); break;
    case 1: wrf(b, def, RBP_L_mdef_cfunc_argc, (uint64_t)(int64_t)((int8_t)r->pay[0] % 4 - 2)); break;
    case 2: case 3: wrf(b, def, RBP_L_mdef_attr_location, (r->v & 0x10) ? ob_ref(b, r->ref[1]) : 0); break;
    case 4: wrf(b, def, RBP_L_mdef_bmethod_proc, ob_ref(b, r->ref[1])); break;
    case 6:
        wrf(b, def, RBP_L_mdef_alias_original_me,
            depth < 2 && (r->v & 0x20) ? method_entry(b, r, depth + 1) : w->nmes ? w->mes[r->pay[0] % w->nmes] : 0);
        break;
    case 9: wrf(b, def, RBP_L_mdef_optimized_type, r->pay[0] % 5); break;
    default: break;
    }
    return me;
}

void ob_build_method(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    bool unbound = r->v & 1;
    uint64_t d = typed_data(b, o, slot, klass_or(b, unbound ? C_UNBOUND : C_METHOD, r->ref[5], r->v & 0x80),
                            w->type_method, 48, false);
    wrf(b, d, RBP_L_method_recv, unbound ? w->c.qundef : ob_ref(b, r->ref[0]));
    wrf(b, d, RBP_L_method_klass, ob_ref(b, r->ref[1]));
    wrf(b, d, RBP_L_method_iclass, (r->v & 4) ? ob_ref(b, r->ref[2]) : ob_ref(b, r->ref[1]));
    wrf(b, d, RBP_L_method_me, (r->v & 2) || !w->nmes ? method_entry(b, r, 0) : w->mes[r->pay[0] % w->nmes]);
}

void ob_build_time(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    uint64_t d = typed_data(b, o, slot, klass_or(b, C_TIME, r->ref[5], r->v & 0x80), w->type_time, 128, r->v & 0x40);
    int64_t ns = (int64_t)(pay16(r, 0) | pay16(r, 2) << 16) * 1000003 - (int64_t)r->pay[4] * 1000000000;
    wrf(b, d, RBP_L_time_timew, (r->v & 1) ? ob_ref(b, r->ref[0]) : fix(ns));
    wrf(b, d, RBP_L_time_vtm_year, (r->v & 2) ? ob_ref(b, r->ref[1]) : fix((int64_t)(int16_t)pay16(r, 0)));
    wrf(b, d, RBP_L_time_vtm_utc_offset, (r->v & 0x20) ? ob_ref(b, r->ref[2]) : fix((int64_t)(int8_t)r->pay[2] * 900 + r->pay[3] % 60));
    bool raw = r->v & 4;
    wrf(b, d, RBP_L_time_vtm_mon, raw ? r->pay[4] : 1 + r->pay[4] % 12);
    wrf(b, d, RBP_L_time_vtm_mday, raw ? r->pay[5] : 1 + r->pay[5] % 31);
    wrf(b, d, RBP_L_time_vtm_hour, raw ? r->n & 0x1f : (r->n & 0x1f) % 24);
    wrf(b, d, RBP_L_time_vtm_min, raw ? (r->n >> 5) & 0x3f : ((r->n >> 5) & 0x3f) % 60);
    wrf(b, d, RBP_L_time_vtm_sec, raw ? (r->n >> 11) & 0x3f : ((r->n >> 11) & 0x3f) % 61);
    uint64_t mode = (r->v >> 3) & 3, got = !(r->v & 0x10);
    rbp_field_id mode_id = has(w, RBP_L_time_vtm_tzmode) ? RBP_L_time_vtm_tzmode
                           : has(w, RBP_L_time_tzmode) ? RBP_L_time_tzmode : RBP_L_time_gmt;
    wrf(b, d, mode_id, mode);
    wrf(b, d, has(w, RBP_L_time_vtm_tm_got) ? RBP_L_time_vtm_tm_got : RBP_L_time_tm_got, got);
}

void ob_build_regexp(ob_build *b, uint64_t o, const ob_rec *r)
{
    uint64_t flags = RBP_T_REGEXP | (uint64_t)enc_of(r->v >> 1, r->pay[2]) << (RBP_FL_USHIFT + 10) |
                     ((r->v & 8) ? REG_ENCODING_NONE : 0);
    header(b, o, flags, klass_or(b, C_REGEXP, r->ref[5], r->v & 0x80));
    uint64_t pat = (r->v & 0x10) ? 0 : arena(b, 64);
    if (pat) wrf(b, pat, RBP_L_regex_options, (r->v & 0x20) ? r->pay[0] : r->pay[0] & 7);
    wrf(b, o, RBP_L_rregexp_ptr, pat);
    wrf(b, o, RBP_L_rregexp_src, ob_ref(b, r->ref[0]));
}

void ob_build_data(ob_build *b, uint64_t o, uint32_t slot, const ob_rec *r)
{
    const ob_world *w = b->w;
    uint64_t types[4] = {w->type_other, w->type_proc, w->type_method, w->type_time};
    uint64_t d = typed_data(b, o, slot, ob_ref(b, r->ref[5]), types[r->v & 3], 64, r->v & 4);
    uint8_t junk[64];
    for (size_t i = 0; i < sizeof junk; i++) junk[i] = stream(b, pay16(r, 0), i);
    wr(b, d, junk, sizeof junk);
}
