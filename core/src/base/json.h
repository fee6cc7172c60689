/*
 * The one JSON writer: every JSON document rbpeek writes is built through
 * it, into a string buffer, and every string in it goes through its one
 * escaper, so every output is valid UTF-8 JSON whatever bytes the target
 * held (target strings are arbitrary bytes).
 *
 * The escaper's rule (docs/usage.md, "JSON strings"): '"' and '\' are
 * escaped; \b \f \n \r \t have their short escapes and the other control
 * characters are \u00XX (lowercase hex), DEL is \u007f (as Ruby's
 * ObjectSpace.dump writes it); valid UTF-8 is copied as it is; every byte
 * that is not part of a valid UTF-8 sequence (a stray continuation byte, a
 * truncated sequence, an overlong form, an encoded surrogate, a code point
 * past U+10FFFF) becomes \ufffd, one per byte. No \u escape ever names a
 * surrogate, so a strict parser reads every document.
 *
 * Layout: a writer has a style, set at its start: the text between a key
 * and its value (": " or dump_all's ":"), between members on one line
 * (", " or ","), or an indent, which gives exactly the layout of Python's
 * json.dumps(doc, indent=N) (the command line's documents before the
 * printer moved into C). rbp_json_ws puts a document's own line breaks
 * where its format has them (the census' and the locks document's).
 */
#ifndef RBP_JSON_H
#define RBP_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/strbuf.h"

#define RBP_JSON_MAX_DEPTH 64   /* deeper containers are written, but lose their layout state */

typedef struct rbp_json {
    rbp_strbuf *b;
    const char *colon;          /* between a key and its value */
    const char *space;          /* after the comma between members on one line */
    int indent;                 /* > 0: members on their own lines, this many spaces a level */
    int depth;                  /* open containers */
    bool after_key;             /* a key was written: the next value is its value */
    const char *ws;             /* one-shot: the whitespace before the next member (rbp_json_ws) */
    uint64_t has_member;        /* bit d: the container at depth d + 1 has a member already */
} rbp_json;

typedef enum rbp_json_style {
    RBP_JSON_SPACED = 0,        /* {"a": 1, "b": [1, 2]} */
    RBP_JSON_DUMP,              /* {"a":1, "b":[1, 2]}: ObjectSpace.dump's */
    RBP_JSON_TIGHT,             /* {"a":1,"b":[1,2]} */
    RBP_JSON_INDENT1,           /* Python's json.dumps(doc, indent=1) */
} rbp_json_style;

void rbp_json_init(rbp_json *j, rbp_strbuf *b, rbp_json_style style);

void rbp_json_object(rbp_json *j);
void rbp_json_object_end(rbp_json *j);
void rbp_json_array(rbp_json *j);
void rbp_json_array_end(rbp_json *j);
/* A member's key; the next call writes its value. */
void rbp_json_key(rbp_json *j, const char *key);
/* The whitespace to write before the next member (after its comma), in
 * place of the style's: a format's own line breaks. */
void rbp_json_ws(rbp_json *j, const char *ws);

/* Values. rbp_json_str writes null for NULL. */
void rbp_json_str(rbp_json *j, const char *s);
void rbp_json_strn(rbp_json *j, const char *s, size_t n);
void rbp_json_u64(rbp_json *j, uint64_t v);
void rbp_json_i64(rbp_json *j, int64_t v);
void rbp_json_bool(rbp_json *j, bool v);
void rbp_json_null(rbp_json *j);
/* An address as a string, "0x7f..." (lowercase hex), as Ruby's dumps write them. */
void rbp_json_hex(rbp_json *j, uint64_t v);
/* A number already formatted (a float as its format prints it); the caller
 * vouches that it is a JSON number. */
void rbp_json_number_text(rbp_json *j, const char *text);
/* A string value written in parts: open, any number of rbp_json_escape
 * calls on the writer's buffer, close. */
void rbp_json_str_open(rbp_json *j);
void rbp_json_str_close(rbp_json *j);

/* Key and value in one call. */
void rbp_json_kstr(rbp_json *j, const char *key, const char *s);
void rbp_json_ku64(rbp_json *j, const char *key, uint64_t v);
void rbp_json_ki64(rbp_json *j, const char *key, int64_t v);
void rbp_json_kbool(rbp_json *j, const char *key, bool v);
void rbp_json_knull(rbp_json *j, const char *key);
void rbp_json_khex(rbp_json *j, const char *key, uint64_t v);

/* The escaper: s[0..n) as the inside of a JSON string (no quotes) onto b. */
void rbp_json_escape(rbp_strbuf *b, const char *s, size_t n);
/* The same for a string read in chunks: escapes what it can of s[0..n) and
 * returns the bytes consumed; unless last, a UTF-8 sequence cut by the end
 * of the chunk (at most 3 bytes) is left for the next call, prefixed to it. */
size_t rbp_json_escape_part(rbp_strbuf *b, const char *s, size_t n, bool last);

#endif
