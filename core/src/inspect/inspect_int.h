/*
 * What the value printer's files share (inspect.c drives; inspect_str.c
 * writes Strings and Symbols; inspect_num.c Floats, Bignums): the printer's
 * state for one value, with its limits (depth, length) and its recursion
 * guard (base/walkguard.h): every object whose parts are printed is
 * entered in it, so nesting is bounded, an object met again inside itself
 * is seen at once (shown as Ruby shows it, "[...]", for the types whose
 * #inspect does, else as rbpeek's marker), and a budget of objects ends a
 * value, whatever its shape.
 */
#ifndef RBP_INSPECT_INT_H
#define RBP_INSPECT_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"
#include "base/walkguard.h"
#include "context/context.h"
#include "heap/heap.h"
#include "inspect/inspect.h"

#define RBP_ELLIPSIS "\xe2\x80\xa6" /* U+2026: where --depth or --max-length cut */

enum {
    RBP_INSP_MAX_NEST = 64,         /* hard cap on --depth */
    RBP_INSP_MAX_LEVELS = RBP_REC_MAX_LIMIT, /* objects nested, of any type: the printer recurses */
    RBP_INSP_SLOT = 640,            /* bytes of a slot copied per object (larger slots read the rest on demand) */
    RBP_INSP_BUDGET = 1 << 20,      /* objects printed per value, whatever the limits */
    RBP_INSP_MAX_STR = 1 << 20,     /* bytes of one String read */
    RBP_INSP_MAX_BIG_WORDS = 1 << 20, /* 32-bit digits of one Bignum printed: 32 Mbit, 10.1 million decimal digits */
    RBP_INSP_MAX_OUTPUT = 64 << 20, /* bytes of text one value prints, about (parts printed aside are checked alone) */
};

typedef enum rbp_enc_kind { RBP_ENC_UTF8, RBP_ENC_BINARY, RBP_ENC_ASCII, RBP_ENC_OTHER } rbp_enc_kind;

typedef struct rbp_insp {
    rbpeek_session *s;
    rbp_heap *h;
    rbp_strbuf *out;
    int max_depth;          /* containers nested deeper print as [...]… */
    uint64_t max_len;       /* elements (and String bytes) shown per object */
    bool raw;
    int depth;              /* containers entered, for --depth */
    rbp_recguard rec;       /* every object being printed, outermost first */
    size_t budget;          /* objects this value may still print (rec draws on it) */
    size_t *shared;         /* the command's budget (rbp_inspect_limits), or NULL */
    bool command_budget;    /* budget is what was left of the command's, less than a value's own */
    bool budget_said;       /* the budget's marker is out: later parts print as … */
    bool again;             /* the object being dispatched is being printed further up */
    bool output_full;       /* the budget was ended by max_output */
    rbp_strbuf *top_out;    /* the buffer the value prints into, from out_start on (parts printed aside
                               into buffers of their own are checked alone) */
    size_t out_start, max_output;
    size_t budget_unspent;  /* what was left of the budget when max_output ended the value */
    size_t *shared_text;    /* the command's text budget, or NULL */
    bool command_text;      /* max_output is what is left of the command's text budget */
    struct rbp_bigcache *bigs; /* Bignums' decimal text, by address (inspect_num.c) */
    bool cut;               /* something was elided */
    bool inexact;           /* not what Ruby prints: a type (top or nested) whose #inspect is not decoded, or a part unreadable */
    bool newer_0x85;        /* 3.2+: U+0085 is escaped (Ruby bug #16842) */
    bool hash_34;           /* 3.4+: {key: 1, "k" => 2} */
    char why[200];          /* the first reason it is inexact */
    uint64_t top_self;      /* main (rb_vm_t.top_self), or 0 when unknown */
    /* Prints a value inside the one being printed (rbp_insp_value, set by
     * it): a type printer whose parts may be any object (a Method's
     * receiver) calls back through it rather than into the dispatcher, which
     * would make the dispatcher and that printer depend on each other. */
    void (*nested)(struct rbp_insp *in, uint64_t v);
} rbp_insp;

void rbp_insp_value(rbp_insp *in, uint64_t v);
/* Whether the object whose decoder is running is the value itself, not a
 * part of it (the reason a value is not exact is the top value's). */
static inline bool rbp_insp_top(const rbp_insp *in) { return in->rec.depth <= 1; }
/* NULL when v is the start of a live, believable object slot (read into
 * buf as *o); else the reason, written into why. */
const char *rbp_insp_check(rbp_heap *h, uint64_t v, uint8_t *buf, size_t bufsize, rbp_obj *o, char *why, size_t n);

/* A String object's bytes (at most max) in a malloc'd buffer, its length,
 * whether it was cut and its encoding; NULL if unreadable. */
unsigned char *rbp_insp_read_str(rbp_insp *in, const rbp_obj *o, uint64_t max, size_t *len, bool *cut,
                                 rbp_enc_kind *enc);

/* The UTF-8 character at p (1-4 bytes) and its code point, or 0 when the
 * bytes are not one (rb_enc_precise_mbclen for UTF-8): Strings, Symbols and
 * Regexps decode alike. */
int rbp_insp_utf8_char(const unsigned char *p, const unsigned char *e, uint32_t *cp);
/* A Symbol, static (the tagged ID) or dynamic (an RSymbol object), as
 * Symbol#inspect prints it. */
void rbp_insp_symbol(rbp_insp *in, uint64_t v);
void rbp_insp_str_bytes(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc, bool truncated);
void rbp_insp_sym_name(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc);
void rbp_insp_sym_key(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc);

void rbp_insp_float(rbp_strbuf *b, double d);
/* A Bignum in decimal; false when its digits can't be read. */
bool rbp_insp_bignum(rbp_insp *in, const rbp_obj *o);
/* Frees what rbp_insp_bignum kept for the value (its cache of digits). */
void rbp_insp_bigcache_free(rbp_insp *in);

/* The class's name as #inspect shows it; whether klass or a superclass has
 * this permanent path. */
const char *rbp_insp_class_name(rbp_insp *in, uint64_t klass);
bool rbp_insp_inherits(rbp_insp *in, uint64_t klass, const char *path);
rbp_enc_kind rbp_insp_enc_kind(rbp_insp *in, int encindex);
/* A String VALUE's bytes (malloc'd) when it is a live String; NULL otherwise. */
unsigned char *rbp_insp_string_value(rbp_insp *in, uint64_t v, size_t *len, rbp_enc_kind *enc);
/* Records (for the top value) why its own #inspect could not be decoded;
 * returns false, so a decoder can `return rbp_insp_why(...)`. */
bool rbp_insp_why(rbp_insp *in, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints rbpeek's own marker (#<rbpeek: ...>) for a part it could not
 * read, which Ruby never prints: the value, top or nested, is flagged
 * inexact, with the first such marker as the reason. */
void rbp_insp_unreadable(rbp_insp *in, const char *marker);

/* Decoders of types whose #inspect needs the VM's private structs: true
 * when the value was printed exactly; false (nothing printed, the reason
 * given to rbp_insp_why) to fall back to the Kernel#to_s form. */
bool rbp_insp_is_data(rbp_insp *in, const rbp_obj *o, const char *struct_name, const char *class_path);
bool rbp_insp_proc(rbp_insp *in, const rbp_obj *o);
bool rbp_insp_method(rbp_insp *in, const rbp_obj *o);
bool rbp_insp_regexp(rbp_insp *in, const rbp_obj *o);
bool rbp_insp_time(rbp_insp *in, const rbp_obj *o);

#endif
