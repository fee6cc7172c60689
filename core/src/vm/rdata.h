/*
 * Typed T_DATA objects (RTypedData): which rb_data_type_t an object has and
 * where its C struct is. The encoding changed twice: a `typed_flag` word
 * (1 = typed) until 3.2, the same word with bit 1 for "struct embedded in the
 * slot" in 3.3 and 3.4, and from 4.0 a flag bit in the object's flags
 * (RUBY_TYPED_FL_IS_TYPED_DATA) with the embedded bit folded into the
 * `type` word. Callers (the heap census, the locks analysis) ask here and
 * never look at the encoding themselves.
 */
#ifndef RBP_RDATA_H
#define RBP_RDATA_H

#include <stdbool.h>
#include <stdint.h>

#include "context/context.h"

/* For a typed T_DATA object v: its rb_data_type_t (*type) and the address
 * of its C struct (*data; 0 when the pointer is unset). False for anything
 * else: another type, an untyped RData, an unreadable or implausible
 * object. */
bool rbp_typed_data(rbpeek_session *s, uint64_t v, uint64_t *type, uint64_t *data);

/* The same from flags and words already read (a heap slot being walked):
 * word(id) must return the member id of the object. */
typedef bool (*rbp_word_fn)(void *ctx, rbp_field_id id, uint64_t *out);
bool rbp_typed_data_decode(const rbpeek_session *s, uint64_t v, uint64_t flags, rbp_word_fn word, void *ctx,
                           uint64_t *type, uint64_t *data);

#endif
