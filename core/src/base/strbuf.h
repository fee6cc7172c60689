/*
 * A growable string buffer for the output writers, and the length of a UTF-8
 * sequence, which their escapers share (JSON: base/json.h, into a strbuf;
 * XML: output/writer.h).
 */
#ifndef RBP_STRBUF_H
#define RBP_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct rbp_strbuf {
    char *buf;
    size_t len, cap;
    bool oom;   /* sticky: set once an allocation failed */
} rbp_strbuf;

void rbp_sb_init(rbp_strbuf *b);
void rbp_sb_free(rbp_strbuf *b);
void rbp_sb_putn(rbp_strbuf *b, const char *s, size_t n);
void rbp_sb_puts(rbp_strbuf *b, const char *s);
void rbp_sb_printf(rbp_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the buffer to the caller (NUL-terminated, malloc'd); NULL on OOM. */
char *rbp_sb_take(rbp_strbuf *b);

/* Length of the valid UTF-8 sequence at s (1..4), or 0 if invalid. */
size_t rbp_utf8_seq_len(const unsigned char *s, size_t avail);

#endif
