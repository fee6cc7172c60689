/*
 * The release facts (release.h): each fact is a small named rule of the
 * release lines, decided here and nowhere else. Where a rule names a line,
 * it is the first release of that line that has it (from the release's
 * own sources, as the comments in release.h say).
 */
#include "context/release.h"

/* Whether the release is at least major.minor. */
static bool at_least(const rbp_release *r, int major, int minor)
{
    return r->major > major || (r->major == major && r->minor >= minor);
}

/* Whether the release is of the line major.minor. */
static bool line_is(const rbp_release *r, int major, int minor) { return r->major == major && r->minor == minor; }

static void object_rules(const rbp_release *r, rbp_object_rules *o)
{
    bool v30 = at_least(r, 3, 0), v32 = at_least(r, 3, 2), v33 = at_least(r, 3, 3), v34 = at_least(r, 3, 4),
         v40 = at_least(r, 4, 0);
    o->qfalse = 0x00;
    o->qtrue = 0x14;
    o->qnil = v32 ? 0x04 : 0x08;
    o->qundef = v32 ? 0x24 : 0x34;
    o->fl_singleton = v34 ? RBP_FL_USER(1) : RBP_FL_USER(0);
    o->elts_shared = v34 ? RBP_FL_USER(0) : RBP_FL_USER(2);
    o->str_chilled = v34 ? RBP_FL_USER(2) | RBP_FL_USER(3) : 0;
    o->iclass_is_origin = v32 ? RBP_FL_USER(0) : RBP_FL_USER(5);
    o->iclass_origin_shared_mtbl = v32 ? RBP_FL_USER(3) : v30 ? RBP_FL_USER(8) : 0;
    o->ary_embed_len_mask = v32 ? 0x7f : 0x3;
    o->struct_embed_len_mask = v32 ? 0x7f : 0x3;
    /* 4.0 inverted the flag: an object's fields are in its slot unless
     * ROBJECT_HEAP (on the 4.0.0 core: set exactly on the objects whose
     * first field word points to malloc'd memory) */
    o->robject_embed = v40 ? 0 : RBP_FL_USER(1);
    o->robject_heap = v40 ? RBP_FL_USER(4) : 0;
    o->shapes = v32;
    /* 3.2's shape types (root, ivar, frozen, capacity change, initial
     * capacity, T_OBJECT) have no "too complex": objects whose ivars live in
     * an st_table came in 3.3, as its type 4. */
    o->shape_too_complex = v33 ? 4 : UINT64_MAX;
    o->imemo_max = v30 ? 13 : 10;
    o->page_align = v32 ? 1u << 16 : 1u << 14;
    o->typed_flag_embedded = v33;
}

static void frame_rules(const rbp_release *r, rbp_frame_rules *f)
{
    bool v34 = at_least(r, 3, 4);
    f->quotes = v34 ? (rbp_label_quotes){"'", "'"} : (rbp_label_quotes){"`", "'"};
    f->cfunc_by_magic = !at_least(r, 3, 3);
    f->qualified_labels = v34;
    f->fold_rescue_frames = v34;
    f->c_trace_builtins = v34;
    f->internal_as_cfunc = at_least(r, 4, 0);
    /* 3.1's struct rb_control_frame_struct ends with __bp__ then
     * jit_return, 3.2 to 4.0's with jit_return (vm_core.h of each tag, read
     * 2026-11-28); before 3.1 there is none */
    f->cfp_jit_return = at_least(r, 3, 1);
}

static void inspect_rules(const rbp_release *r, rbp_inspect_rules *i)
{
    i->escapes_nel = at_least(r, 3, 2); /* 3.1.2 prints it raw, 3.3.8 escapes it */
    i->hash_34 = at_least(r, 3, 4);
    i->exception_message_inspected = at_least(r, 3, 2);
    /* 2.7 prints the offset with strftime's " %z", which drops its seconds;
     * 3.1 appends them when they are not zero. 3.0's time.c is not at hand. */
    i->time_offset_seconds = at_least(r, 3, 1);
    i->time_offset_seconds_unknown = line_is(r, 3, 0);
    rbp_method_rules *m = &i->method;
    bool l27 = line_is(r, 2, 7);
    m->decoded = l27 || line_is(r, 3, 1) || line_is(r, 3, 3) || line_is(r, 3, 4);
    m->ruby2_keywords_flag = !l27;
    m->forwardable_flag = at_least(r, 3, 4);
    m->struct_accessors = !l27;
    m->anonymous_rest = at_least(r, 3, 3);
    m->anonymous_keyrest = !l27;
    m->iclass_receiver = !l27;
    m->singleton_superclass = !l27;
    m->unbound_defined_class = at_least(r, 3, 3);
}

static void dump_rules(const rbp_release *r, rbp_dump_rules *d)
{
    bool v30 = at_least(r, 3, 0), v32 = at_least(r, 3, 2), v33 = at_least(r, 3, 3);
    d->shape_id = v32;
    d->coderange = v33;
    d->no_empty_value = v33;
    d->imemo_class_word = !v33;
    d->chilled = at_least(r, 3, 4);
    d->class_fields = v30;
    d->float_alt = v30;
    d->refs_includer = v33;
    d->refs_cvc_table = v32;
}

void rbp_release_init(rbp_release *r, int major, int minor, int patch)
{
    *r = (rbp_release){.major = major, .minor = minor, .patch = patch};
    object_rules(r, &r->obj);
    r->gc.pages_darray = at_least(r, 3, 4);
    r->gc.final_slots_in_objspace = !at_least(r, 3, 4);
    frame_rules(r, &r->frames);
    inspect_rules(r, &r->inspect);
    dump_rules(r, &r->dump);
}
