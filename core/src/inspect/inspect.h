/*
 * The value printer's interface for the layers above and for the public
 * API (inspect_api.c): one VALUE as Ruby's #inspect prints it, within
 * limits, appended to a string buffer. The heap must be open (heap.h): it
 * is what tells a live object from anything else.
 */
#ifndef RBP_INSPECT_H
#define RBP_INSPECT_H

#include <stdbool.h>
#include <stdint.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "heap/heap.h"

/* Objects one command prints over all its values (bt --locals: a thread's
 * selves and locals), beside each value's own budget. */
#define RBP_INSP_COMMAND_BUDGET (1 << 24)
/* Bytes of text one command prints over all its values, beside each
 * value's own max_output: a frame of 29 locals of 2 MB each is 60 MB of
 * JSON nobody reads, and seconds of work (found by fuzz_objects). */
#define RBP_INSP_COMMAND_TEXT ((size_t)16 << 20)

typedef struct rbp_inspect_limits {
    int depth;              /* containers nested deeper print as [...] (…) */
    uint64_t max_length;    /* elements per container, bytes per String */
    size_t *budget;         /* objects a whole command may print over all its values, drawn on by each
                               (start it at RBP_INSP_COMMAND_BUDGET); NULL: each value has its own only */
    size_t max_output;      /* bytes of text a value prints, about (it ends with a marker); 0: 64 MiB.
                               A printer that shows only the start of a value sets it, so that its work
                               is bounded by what it shows, not by the value */
    size_t *text_budget;    /* bytes of text a whole command may print over all its values, drawn on by
                               each (start it at RBP_INSP_COMMAND_TEXT); NULL: each value has its own only */
} rbp_inspect_limits;

typedef struct rbp_inspect_result {
    bool cut;               /* something was elided by the limits */
    bool inexact;           /* not byte for byte what Ruby prints: a type (the value or a part) whose #inspect is not decoded, or a part unreadable */
    char why[200];          /* when inexact: why (its type is not decoded, or what was unreadable) */
} rbp_inspect_result;

void rbp_inspect_append(rbp_heap *h, uint64_t v, const rbp_inspect_limits *lim, rbp_strbuf *out,
                        rbp_inspect_result *res);

/* A Ruby frame's locals, as `ruby bt --locals`, `ruby frame` and
 * rbpeek_frame_locals show them (inspect_frame.c): its self, its method
 * entry's owner, and each named local with its value, every value printed
 * by rbp_inspect_append. */
typedef enum rbp_locals_state {
    RBP_LOCALS_NONE = 0,    /* a C frame (or a Ruby frame without iseq or environment): nothing to show */
    RBP_LOCALS_ERROR,       /* only error: its local table is unreadable */
    RBP_LOCALS_READ,        /* self, owner and locals; error, if set, says the locals are missing */
} rbp_locals_state;

typedef struct rbp_frame_locals {
    rbp_locals_state state;
    const char *error;          /* static text, or NULL */
    rbp_strbuf text;            /* every string below, NUL-terminated, at its offset */
    size_t self_off;
    bool has_owner;             /* false: no method entry, or its owner has no name */
    size_t owner_off;
    size_t n;                   /* named locals, in local-table order, each name once */
    size_t *name_off, *value_off;
} rbp_frame_locals;

/* Opens h for reading locals: fails (with the session's error) when the
 * layout lacks the iseq's local table. */
rbpeek_status rbp_locals_open(rbpeek_session *s, rbp_heap *h);
void rbp_frame_locals_read(rbpeek_session *s, rbp_heap *h, const rbpeek_frame *frame, const rbp_inspect_limits *lim,
                           rbp_frame_locals *out);
void rbp_frame_locals_free(rbp_frame_locals *l);
static inline const char *rbp_locals_str(const rbp_frame_locals *l, size_t off) { return l->text.buf + off; }
/* l's JSON members, into the object j has open: "self", "owner" and
 * "locals" when they were read, then l->error (if any) under error_key
 * (rbpeek_frame_locals' object says "error"; a backtrace's frame, whose
 * other members are the frame's, "locals_error"). Nothing for a frame
 * without locals (RBP_LOCALS_NONE). */
void rbp_frame_locals_json(const rbp_frame_locals *l, const char *error_key, rbp_json *j);

#endif
