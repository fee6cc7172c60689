/*
 * String buffer and escaping (see strbuf.h).
 */
#include "base/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void rbp_sb_init(rbp_strbuf *b) { *b = (rbp_strbuf){0}; }

void rbp_sb_free(rbp_strbuf *b)
{
    free(b->buf);
    *b = (rbp_strbuf){0};
}

static bool reserve(rbp_strbuf *b, size_t extra)
{
    if (b->oom) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra + 1) cap *= 2;
    char *nb = realloc(b->buf, cap);
    if (!nb) {
        b->oom = true;
        return false;
    }
    b->buf = nb;
    b->cap = cap;
    return true;
}

void rbp_sb_putn(rbp_strbuf *b, const char *s, size_t n)
{
    if (!reserve(b, n)) return;
    memcpy(b->buf + b->len, s, n);
    b->len += n;
    b->buf[b->len] = '\0';
}

void rbp_sb_puts(rbp_strbuf *b, const char *s) { rbp_sb_putn(b, s, strlen(s)); }

void rbp_sb_printf(rbp_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || !reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->buf + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

size_t rbp_utf8_seq_len(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t n;
    unsigned min;
    unsigned cp;
    if (c < 0x80) return 1;
    if ((c & 0xe0) == 0xc0) { n = 2; cp = c & 0x1f; min = 0x80; }
    else if ((c & 0xf0) == 0xe0) { n = 3; cp = c & 0x0f; min = 0x800; }
    else if ((c & 0xf8) == 0xf0) { n = 4; cp = c & 0x07; min = 0x10000; }
    else return 0;
    if (n > avail) return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
    return n;
}

char *rbp_sb_take(rbp_strbuf *b)
{
    if (b->oom) {
        rbp_sb_free(b);
        return NULL;
    }
    if (!b->buf) reserve(b, 0);
    if (b->buf) b->buf[b->len] = '\0';
    char *r = b->buf;
    *b = (rbp_strbuf){0};
    return r;
}
