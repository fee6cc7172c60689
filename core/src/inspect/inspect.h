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

#include "base/strbuf.h"
#include "heap/heap.h"

/* Objects one command prints over all its values (bt --locals: a thread's
 * selves and locals), beside each value's own budget. */
#define RBP_INSP_COMMAND_BUDGET (1 << 24)

typedef struct rbp_inspect_limits {
    int depth;              /* containers nested deeper print as [...] (…) */
    uint64_t max_length;    /* elements per container, bytes per String */
    size_t *budget;         /* objects a whole command may print over all its values, drawn on by each
                               (start it at RBP_INSP_COMMAND_BUDGET); NULL: each value has its own only */
} rbp_inspect_limits;

typedef struct rbp_inspect_result {
    bool cut;               /* something was elided by the limits */
    bool inexact;           /* not byte for byte what Ruby prints: a type (the value or a part) whose #inspect is not decoded, or a part unreadable */
    char why[200];          /* when inexact: why (its type is not decoded, or what was unreadable) */
} rbp_inspect_result;

void rbp_inspect_append(rbp_heap *h, uint64_t v, const rbp_inspect_limits *lim, rbp_strbuf *out,
                        rbp_inspect_result *res);

#endif
