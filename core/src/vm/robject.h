/*
 * Reading Ruby objects out of target memory: object headers, Strings,
 * Arrays, Symbols/IDs and class names. These encodings shift between
 * versions (embedded-length bits, Qnil's value, where a class keeps its
 * path), and each reader decides by the release facts (context/release.h)
 * or by which layout members exist, so callers never do.
 */
#ifndef RBP_ROBJECT_H
#define RBP_ROBJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context/context.h"

/* Ruby's T_ types (flags & 0x1f); stable across the versions we support. */
enum {
    RBP_T_NONE = 0x00, RBP_T_OBJECT = 0x01, RBP_T_CLASS = 0x02, RBP_T_MODULE = 0x03,
    RBP_T_FLOAT = 0x04, RBP_T_STRING = 0x05, RBP_T_REGEXP = 0x06, RBP_T_ARRAY = 0x07,
    RBP_T_HASH = 0x08, RBP_T_STRUCT = 0x09, RBP_T_BIGNUM = 0x0a, RBP_T_FILE = 0x0b,
    RBP_T_DATA = 0x0c, RBP_T_MATCH = 0x0d, RBP_T_COMPLEX = 0x0e, RBP_T_RATIONAL = 0x0f,
    RBP_T_NIL = 0x11, RBP_T_TRUE = 0x12, RBP_T_FALSE = 0x13, RBP_T_SYMBOL = 0x14,
    RBP_T_FIXNUM = 0x15, RBP_T_UNDEF = 0x16, RBP_T_IMEMO = 0x1a, RBP_T_NODE = 0x1b,
    RBP_T_ICLASS = 0x1c, RBP_T_ZOMBIE = 0x1d, RBP_T_MOVED = 0x1e, RBP_T_MASK = 0x1f,
};
enum { RBP_IMEMO_CREF = 1, RBP_IMEMO_SVAR = 2, RBP_IMEMO_IFUNC = 4, RBP_IMEMO_MENT = 6, RBP_IMEMO_ISEQ = 7 };

/* True for a pointer to a heap object (not an immediate, nil or false). */
bool rbp_is_heap_ptr(const rbpeek_session *s, uint64_t v);
/* Reads one member (plain integer/pointer up to 8 bytes, or a bitfield) of
 * the struct at base. False if absent from the layout or unreadable. */
bool rbp_read_field(rbpeek_session *s, uint64_t base, rbp_field_id id, uint64_t *out);
/* Reads an object's flags; false for immediates or unreadable memory. */
bool rbp_obj_flags(rbpeek_session *s, uint64_t v, uint64_t *flags);
/* The T_ type of v, or -1 for immediates/unreadable. */
int rbp_obj_type(rbpeek_session *s, uint64_t v);
/* The imemo type of a T_IMEMO object, or -1. */
int rbp_imemo_type(rbpeek_session *s, uint64_t v);

/* Reads a String's bytes (at most max-1, NUL-terminated into buf). Returns
 * the length read, or -1 if v is not a readable String. *truncated is set
 * when the String was longer than the buffer. */
long rbp_string_read(rbpeek_session *s, uint64_t v, char *buf, size_t max, bool *truncated);
/* A String's length from its header alone (its bytes may be unreadable:
 * a static literal in an image's .rodata, which a core leaves out). */
bool rbp_string_length(rbpeek_session *s, uint64_t v, uint64_t *len);
/* A String's contents in a new malloc'd buffer (bounded to 1 MiB), or NULL. */
char *rbp_string_dup(rbpeek_session *s, uint64_t v);
/* The VM's progname ($0 as the program was started), malloc'd, or NULL:
 * what Location#to_s prints for a frame whose path is nil. */
char *rbp_vm_progname(rbpeek_session *s);

/* Array length and element access; false if v is not a readable Array. */
bool rbp_array_info(rbpeek_session *s, uint64_t v, long *len, uint64_t *elems_addr);
bool rbp_array_at(rbpeek_session *s, uint64_t v, long index, uint64_t *out);

/* The name of an ID, via ruby_global_symbols (cached). NULL if unknown. The
 * returned string lives as long as the session's caches. */
const char *rbp_id_name(rbpeek_session *s, uint64_t id);
/* True when the ID certainly has no name (rb_id2str gives NULL): its serial
 * is beyond the symbol table's last one, as the parser's internal IDs
 * (anonymous parameters) are. False when it may have one. */
bool rbp_id_unnamed(rbpeek_session *s, uint64_t id);

/* A class or module's permanent path ("Outer::Inner"), as Module#name gives
 * it, or NULL when it has none (anonymous, or only a temporary path) or the
 * version keeps it elsewhere (before 3.0: an ivar). Cached. *permanent is
 * true exactly when a path is returned. */
const char *rbp_class_path(rbpeek_session *s, uint64_t klass, bool *permanent);

/* Finds ruby_global_symbols when its symbol is not exported (Debian's
 * stripped libruby): scans the data near anchor (&ruby_current_vm_ptr, which
 * lives in the same image's data) for a table whose ID entries decode as
 * Ruby registers them. Returns its address or 0. */
uint64_t rbp_locate_global_symbols(rbpeek_session *s, uint64_t anchor);

/* Cache teardown (session.c calls it when the session closes or re-attaches). */
void rbp_idcache_free(rbp_idcache *c);

#endif
