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

/* RBasic.flags: the bits past the type and the GC's own are FL_USER0.. */
#define RBP_FL_USHIFT 12
#define RBP_FL_USER(n) (UINT64_C(1) << (RBP_FL_USHIFT + (n)))

/* Immediates whose tags are the same in every release rbpeek reads
 * (special_consts.h with USE_FLONUM, 64-bit): a Fixnum has its low bit
 * set, a flonum the low bits 10, a static Symbol the low byte 0x0c with its
 * ID above it. */
static inline bool rbp_is_fixnum(uint64_t v) { return (v & 1) != 0; }
static inline bool rbp_is_flonum(uint64_t v) { return (v & 3) == 2; }
static inline bool rbp_is_static_symbol(uint64_t v) { return (v & 0xff) == 0x0c; }

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

/* Fills r for Ruby major.minor.patch. */
void rbp_release_init(rbp_release *r, int major, int minor, int patch);

#endif
