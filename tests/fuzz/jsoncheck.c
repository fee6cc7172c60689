/*
 * The strict JSON reader of jsoncheck.h (what it refuses is said there).
 * Compiled without libFuzzer's coverage hooks, like the replay's plumbing:
 * it is the harnesses' oracle, not code under test, and reads every byte
 * of every document an input makes rbpeek write.
 */
#include "jsoncheck.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { JC_MAX_DEPTH = 4096 };

typedef struct jc {
    const unsigned char *p, *s, *e;
    const char *why;
} jc;

static int jc_fail(jc *c, const char *why)
{
    if (!c->why) c->why = why;
    return 0;
}

static inline void jc_ws(jc *c)
{
    while (c->p < c->e && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r')) c->p++;
}

static int jc_hex4(jc *c, unsigned *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++, c->p++) {
        if (c->p >= c->e) return jc_fail(c, "a \\u escape is cut");
        unsigned ch = *c->p, d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) >= 'a' && (ch | 0x20) <= 'f' ? (ch | 0x20) - 'a' + 10 : 16;
        if (d > 15) return jc_fail(c, "a \\u escape with a non-hex digit");
        *v = *v << 4 | d;
    }
    return 1;
}

/* One UTF-8 character at c->p (not ASCII): strictly. */
static int jc_utf8(jc *c)
{
    const unsigned char *p = c->p;
    unsigned b = p[0], n, cp;
    if (b >= 0xc2 && b <= 0xdf) n = 1, cp = b & 0x1f;
    else if (b >= 0xe0 && b <= 0xef) n = 2, cp = b & 0x0f;
    else if (b >= 0xf0 && b <= 0xf4) n = 3, cp = b & 0x07;
    else return jc_fail(c, "a byte that starts no UTF-8 character");
    if (c->e - p < (long)n + 1) return jc_fail(c, "a UTF-8 character cut at the end");
    for (unsigned i = 1; i <= n; i++) {
        if ((p[i] & 0xc0) != 0x80) return jc_fail(c, "a UTF-8 character cut short");
        cp = cp << 6 | (p[i] & 0x3f);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000)) return jc_fail(c, "an overlong UTF-8 character");
    if (cp >= 0xd800 && cp <= 0xdfff) return jc_fail(c, "a UTF-8-encoded surrogate");
    if (cp > 0x10ffff) return jc_fail(c, "a character past U+10FFFF");
    c->p += n + 1;
    return 1;
}

static int jc_string(jc *c)
{
    c->p++; /* the quote */
    while (c->p < c->e) {
        unsigned ch = *c->p;
        if (ch == '"') {
            c->p++;
            return 1;
        }
        if (ch < 0x20) return jc_fail(c, "a raw control character in a string");
        if (ch == '\\') {
            c->p++;
            if (c->p >= c->e) return jc_fail(c, "an escape cut at the end");
            ch = *c->p++;
            if (strchr("\"\\/bfnrt", (int)ch) && ch) continue;
            if (ch != 'u') return jc_fail(c, "an unknown escape");
            unsigned v, w;
            if (!jc_hex4(c, &v)) return 0;
            if (v >= 0xdc00 && v <= 0xdfff) return jc_fail(c, "a lone low surrogate escaped");
            if (v >= 0xd800 && v <= 0xdbff) {
                if (c->e - c->p < 6 || c->p[0] != '\\' || c->p[1] != 'u') return jc_fail(c, "a lone high surrogate escaped");
                c->p += 2;
                if (!jc_hex4(c, &w)) return 0;
                if (w < 0xdc00 || w > 0xdfff) return jc_fail(c, "a high surrogate not followed by a low one");
            }
            continue;
        }
        if (ch < 0x80) {
            c->p++;
            continue;
        }
        if (!jc_utf8(c)) return 0;
    }
    return jc_fail(c, "a string not closed");
}

static int jc_number(jc *c)
{
    if (c->p < c->e && *c->p == '-') c->p++;
    if (c->p >= c->e) return jc_fail(c, "a number cut");
    if (*c->p == '0') c->p++;
    else if (*c->p >= '1' && *c->p <= '9') while (c->p < c->e && *c->p >= '0' && *c->p <= '9') c->p++;
    else return jc_fail(c, "a number without digits");
    if (c->p < c->e && *c->p == '.') {
        c->p++;
        if (c->p >= c->e || *c->p < '0' || *c->p > '9') return jc_fail(c, "a fraction without digits");
        while (c->p < c->e && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    if (c->p < c->e && (*c->p == 'e' || *c->p == 'E')) {
        c->p++;
        if (c->p < c->e && (*c->p == '+' || *c->p == '-')) c->p++;
        if (c->p >= c->e || *c->p < '0' || *c->p > '9') return jc_fail(c, "an exponent without digits");
        while (c->p < c->e && *c->p >= '0' && *c->p <= '9') c->p++;
    }
    return 1;
}

static int jc_value(jc *c, int depth)
{
    jc_ws(c);
    if (c->p >= c->e) return jc_fail(c, "a value missing");
    if (depth > JC_MAX_DEPTH) return jc_fail(c, "nested deeper than the reader goes");
    unsigned ch = *c->p;
    if (ch == '"') return jc_string(c);
    if (ch == '{' || ch == '[') {
        unsigned close = ch == '{' ? '}' : ']';
        c->p++;
        jc_ws(c);
        if (c->p < c->e && *c->p == close) {
            c->p++;
            return 1;
        }
        for (;;) {
            if (ch == '{') {
                jc_ws(c);
                if (c->p >= c->e || *c->p != '"') return jc_fail(c, "an object key that is no string");
                if (!jc_string(c)) return 0;
                jc_ws(c);
                if (c->p >= c->e || *c->p != ':') return jc_fail(c, "a key without ':'");
                c->p++;
            }
            if (!jc_value(c, depth + 1)) return 0;
            jc_ws(c);
            if (c->p < c->e && *c->p == ',') {
                c->p++;
                continue;
            }
            if (c->p < c->e && *c->p == close) {
                c->p++;
                return 1;
            }
            return jc_fail(c, ch == '{' ? "an object not closed" : "an array not closed");
        }
    }
    static const char *const LIT[3] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t n = strlen(LIT[i]);
        if ((size_t)(c->e - c->p) >= n && memcmp(c->p, LIT[i], n) == 0) {
            c->p += n;
            return 1;
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return jc_number(c);
    return jc_fail(c, "a character that starts no value");
}

static void refuse(const char *what, const jc *c, const char *where)
{
    fprintf(stderr, "fuzz: %s wrote JSON that a strict reader refuses: %s at byte %ld of %ld%s\n", what, c->why,
            (long)(c->p - c->s), (long)(c->e - c->s), where);
    abort();
}

/* One value filling [p, e), blanks around it allowed. */
static int one_value(jc *c)
{
    int ok = jc_value(c, 0);
    jc_ws(c);
    if (ok && c->p != c->e) ok = jc_fail(c, "more after the value");
    return ok;
}

void json_check_n(const char *what, const char *doc, size_t len)
{
    if (!doc) return;
    jc c = {(const unsigned char *)doc, (const unsigned char *)doc, (const unsigned char *)doc + len, NULL};
    if (!one_value(&c)) refuse(what, &c, "");
}

void json_check(const char *what, const char *doc)
{
    if (doc) json_check_n(what, doc, strlen(doc));
}

void json_check_lines(const char *what, const char *buf, size_t len, int complete)
{
    const unsigned char *s = (const unsigned char *)buf, *e = s + len, *p = s;
    for (size_t line = 1; p < e; line++) {
        const unsigned char *nl = memchr(p, '\n', (size_t)(e - p));
        if (!nl && !complete) return; /* a line the writer did not finish */
        jc c = {p, s, nl ? nl : e, NULL};
        int ok = nl ? one_value(&c) : jc_fail(&c, "a last line without its newline");
        if (!ok) {
            char where[48];
            snprintf(where, sizeof where, " (line %zu)", line);
            refuse(what, &c, where);
        }
        p = nl + 1;
    }
}
