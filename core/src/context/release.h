/*
 * What the target's Ruby release means for every reader: the facts that
 * change from one release line to the next (special constants, flag bits
 * and masks, how a backtrace quotes a label, which frames Ruby reports,
 * how #inspect and dump_all print), computed once at attach from the
 * version (rbp_release_init) and kept in the session (s->rel). Readers ask
 * these facts; none of them compares version numbers itself. The only
 * other place that knows versions is layout/ (which struct table fits
 * which release). docs/versions.md's "Adding a release" says how to go
 * through this list for a new release.
 */
#ifndef RBP_CONTEXT_RELEASE_H
#define RBP_CONTEXT_RELEASE_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

/* RBasic.flags: the bits past the type and the GC's own are FL_USER0.. */
#define RBP_FL_USHIFT 12
#define RBP_FL_USER(n) (UINT64_C(1) << (RBP_FL_USHIFT + (n)))

/* Immediates whose tags are the same in every release rbpeek reads
 * (special_consts.h with USE_FLONUM, 64-bit): a Fixnum has its low bit
 * set, a flonum the low bits 10, a static Symbol the low byte 0x0c with its
 * ID above it. Every tag test and decode of an immediate is one of these. */
static inline bool rbp_is_fixnum(uint64_t v) { return (v & 1) != 0; }
static inline bool rbp_is_flonum(uint64_t v) { return (v & 3) == 2; }
static inline bool rbp_is_static_symbol(uint64_t v) { return (v & 0xff) == 0x0c; }
/* FIX2LONG: the Fixnum's value (an arithmetic shift keeps its sign). */
static inline int64_t rbp_fixnum_value(uint64_t v) { return (int64_t)v >> 1; }
/* A Fixnum's value in *out, or false for anything else. */
static inline bool rbp_fixnum_get(uint64_t v, int64_t *out)
{
    if (!rbp_is_fixnum(v)) return false;
    *out = rbp_fixnum_value(v);
    return true;
}
/* RSHIFT(v, RUBY_SPECIAL_SHIFT): a static Symbol's ID. */
static inline uint64_t rbp_static_symbol_id(uint64_t v) { return v >> 8; }
/* rb_float_flonum_value: the double a flonum stands for (0.0 is its own
 * pattern; the others have their exponent's top bits rotated back in). */
static inline double rbp_flonum_value(uint64_t v)
{
    double d = 0.0;
    if (v != UINT64_C(0x8000000000000002)) {
        uint64_t t = (2 - (v >> 63)) | (v & ~UINT64_C(3));
        t = (t >> 3) | (t << 61);
        memcpy(&d, &t, sizeof d);
    }
    return d;
}

/* How a backtrace line quotes a method's label: `label' before 3.4,
 * 'label' from 3.4 (Feature #16495). */
typedef struct rbp_label_quotes {
    const char *open, *close;
} rbp_label_quotes;

/* Objects: special constants, flag bits and masks (special_consts.h and
 * the internal headers of each release). */
typedef struct rbp_object_rules {
    uint64_t qfalse, qtrue, qnil, qundef;   /* 3.2 renumbered nil and undef */
    uint64_t fl_singleton;          /* FL_USER0, FL_USER1 from 3.4 */
    uint64_t elts_shared;           /* STR_SHARED = ELTS_SHARED: FL_USER2, FL_USER0 from 3.4 */
    uint64_t str_chilled;           /* 3.4: FL_USER2|FL_USER3, else 0 */
    uint64_t iclass_is_origin, iclass_origin_shared_mtbl;
    uint64_t ary_embed_len_mask;    /* after shifting by FL_USHIFT+3: 2 bits, 7 from 3.2 */
    uint64_t struct_embed_len_mask; /* after shifting by FL_USHIFT+1: the same */
    uint64_t robject_embed;         /* ROBJECT_EMBED: FL_USER1 before 4.0, else 0 */
    uint64_t robject_heap;          /* 4.0: ROBJECT_HEAP, FL_USER4 (fields malloc'd), else 0 */
    bool shapes;                    /* 3.2+: ivars are counted by the object's shape (if the layout has shapes) */
    uint64_t shape_too_complex;     /* enum shape_type SHAPE_OBJ_TOO_COMPLEX: 4 from 3.3; 3.2 has none */
    unsigned imemo_max;             /* the last imemo type: 10 (parser_strterm) in 2.7, 13 after */
    uint32_t page_align;            /* heap page body alignment: 16 KiB, 64 KiB from 3.2 */
    bool typed_flag_embedded;       /* 3.3+: typed_flag 2 and 3 (embedded typed data) */
} rbp_object_rules;

/* What kind of immediate (special constant) a VALUE is, by the tags above
 * and the release's nil, true, false and undef; RBP_IMM_NONE for any other
 * VALUE, which can only be an object's address (or garbage). The one rule
 * every reader that tells an immediate from an object asks. */
typedef enum rbp_immediate {
    RBP_IMM_NONE = 0, RBP_IMM_FIXNUM, RBP_IMM_FLONUM, RBP_IMM_STATIC_SYMBOL,
    RBP_IMM_NIL, RBP_IMM_TRUE, RBP_IMM_FALSE, RBP_IMM_UNDEF,
} rbp_immediate;

static inline rbp_immediate rbp_immediate_of(const rbp_object_rules *o, uint64_t v)
{
    if (rbp_is_fixnum(v)) return RBP_IMM_FIXNUM;
    if (rbp_is_flonum(v)) return RBP_IMM_FLONUM;
    if (rbp_is_static_symbol(v)) return RBP_IMM_STATIC_SYMBOL;
    if (v == o->qnil) return RBP_IMM_NIL;
    if (v == o->qtrue) return RBP_IMM_TRUE;
    if (v == o->qfalse) return RBP_IMM_FALSE;
    if (v == o->qundef) return RBP_IMM_UNDEF;
    return RBP_IMM_NONE;
}

/* The GC's tables (gc.c, then gc/default.c). */
typedef struct rbp_gc_rules {
    bool pages_darray;              /* 3.4: heap_pages.sorted is an rb_darray that counts itself, and
                                     * holds the empty pages no heap owns */
    bool final_slots_in_objspace;   /* before 3.4: heap_pages.final_slots */
} rbp_gc_rules;

/* Which control frames Thread#backtrace_locations reports, and how
 * (vm_backtrace.c); the walker's rules (vm/frames.c). */
typedef struct rbp_frame_rules {
    rbp_label_quotes quotes;
    bool cfunc_by_magic;            /* before 3.3: a frame without an iseq is a C method's only if its
                                     * frame magic says so */
    bool qualified_labels;          /* 3.4: "Klass#meth" labels from the method entry's owner */
    bool fold_rescue_frames;        /* 3.4: a rescue/ensure frame stands for the method frame it runs in */
    bool c_trace_builtins;          /* 3.4: builtins marked c_trace are reported as C methods */
    bool internal_as_cfunc;         /* 4.0: <internal:...> frames are reported as C methods, at their caller */
    bool cfp_jit_return;            /* 3.1+: a control frame's last word is jit_return, where the JIT code
                                     * that runs its callee returns to (YJIT's code; vm_core.h) */
} rbp_frame_rules;

/* method_inspect (proc.c), read for 2.7, 3.1, 3.3 and 3.4. */
typedef struct rbp_method_rules {
    bool decoded;                   /* this line's method_inspect was read for rbpeek */
    bool ruby2_keywords_flag;       /* 3.0+: the iseq's ruby2_keywords flag (read: the layout must have it) */
    bool forwardable_flag;          /* 3.4: the iseq's forwardable flag */
    bool struct_accessors;          /* 3.1+: optimized Struct accessors (aref: none, aset: "_") */
    bool anonymous_rest;            /* 3.3+: an anonymous * or ** shows as such; (*, **, &) as "..." */
    bool anonymous_keyrest;         /* 3.1+: an anonymous ** is told from a named one (2.7 names it) */
    bool iclass_receiver;           /* 3.1+: the receiver's class is the method's iclass where it has one */
    bool singleton_superclass;      /* 3.1+: a non-class object's singleton class stands for its first
                                     * real superclass */
    bool unbound_defined_class;     /* 3.3+: an UnboundMethod shows its defined class */
} rbp_method_rules;

/* #inspect of the other types (inspect/). */
typedef struct rbp_inspect_rules {
    bool escapes_nel;               /* 3.2+: String#inspect escapes U+0085 */
    bool hash_34;                   /* 3.4: {"a" => 1, b: 2} */
    bool exception_message_inspected; /* 3.2+: a message with a newline is shown as String#inspect */
    bool time_offset_seconds;       /* 3.1+: Time#inspect shows an offset's seconds */
    bool time_offset_seconds_unknown; /* 3.0: how it shows them was not checked */
    rbp_method_rules method;
} rbp_inspect_rules;

/* ObjectSpace.dump_all (objspace_dump.c) and the references it lists. */
typedef struct rbp_dump_rules {
    bool shape_id;                  /* 3.2+: shape_id and slot_size */
    bool coderange;                 /* 3.3+: coderange (broken as a coderange), object and array
                                     * "embedded", class variation_count, too_complex_shape */
    bool no_empty_value;            /* 3.3+: an empty String has no value */
    bool imemo_class_word;          /* before 3.3: an imemo's second word is its class */
    bool chilled;                   /* 3.4 */
    bool class_fields;              /* 3.0+: superclass, real_class_name, singleton, rb_mod_name */
    bool float_alt;                 /* 3.0+: dump_append_g's "%#g", with NaN and Inf spelled */
    bool refs_includer;             /* 3.3+: an iclass refers to its includer */
    bool refs_cvc_table;            /* 3.2+: a class refers to its class variable cache's crefs */
} rbp_dump_rules;

typedef struct rbp_release {
    int major, minor, patch;
    rbp_object_rules obj;
    rbp_gc_rules gc;
    rbp_frame_rules frames;
    rbp_inspect_rules inspect;
    rbp_dump_rules dump;
} rbp_release;

/* The special constants that change by release (3.2 renumbered nil and
 * undef): every reader asks these, none reads r->obj.q* itself. */
static inline uint64_t rbp_qnil(const rbp_release *r) { return r->obj.qnil; }
static inline bool rbp_is_nil(const rbp_release *r, uint64_t v) { return v == r->obj.qnil; }
static inline bool rbp_is_true(const rbp_release *r, uint64_t v) { return v == r->obj.qtrue; }
static inline bool rbp_is_false(const rbp_release *r, uint64_t v) { return v == r->obj.qfalse; }
static inline bool rbp_is_undef(const rbp_release *r, uint64_t v) { return v == r->obj.qundef; }
/* RTEST: anything but false and nil. */
static inline bool rbp_rtest(const rbp_release *r, uint64_t v) { return !rbp_is_false(r, v) && !rbp_is_nil(r, v); }

/* Fills r for Ruby major.minor.patch. */
void rbp_release_init(rbp_release *r, int major, int minor, int patch);

#endif
