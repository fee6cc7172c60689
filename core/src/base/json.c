/*
 * The JSON writer and its escaper (see json.h for the rules).
 */
#include "base/json.h"

#include <string.h>

/* Bytes copied as they are without a second look: printable ASCII but
 * for '"' and '\\'. */
static const unsigned char PLAIN[256] = {
    [0x20 ... 0x21] = 1, [0x23 ... 0x5b] = 1, [0x5d ... 0x7e] = 1,   /* not '"' (0x22), '\\' (0x5c) */
};

/* Whether s[0..n) needs no escape at all (the common case: labels, paths,
 * keys), so that it is written in one piece with its quotes. */
static bool all_plain(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!PLAIN[(unsigned char)s[i]]) return false;
    return true;
}

enum { QUICK = 240 };   /* strings up to this long are quoted in a local buffer */

/* "s" and then tail (the key's colon), in one write when s needs no escape. */
static bool put_quoted_plain(rbp_strbuf *b, const char *s, size_t n, const char *tail)
{
    size_t t = strlen(tail);
    if (n > QUICK || !all_plain(s, n)) return false;
    char buf[QUICK + 16];
    buf[0] = '"';
    memcpy(buf + 1, s, n);
    buf[n + 1] = '"';
    memcpy(buf + n + 2, tail, t);
    rbp_sb_putn(b, buf, n + 2 + t);
    return true;
}

static const struct {
    const char *colon, *space;
    int indent;
} STYLES[] = {
    [RBP_JSON_SPACED] = {": ", " ", 0},
    [RBP_JSON_DUMP] = {":", " ", 0},
    [RBP_JSON_TIGHT] = {":", "", 0},
    [RBP_JSON_INDENT1] = {": ", "", 1},
};

void rbp_json_init(rbp_json *j, rbp_strbuf *b, rbp_json_style style)
{
    *j = (rbp_json){.b = b, .colon = STYLES[style].colon, .space = STYLES[style].space,
                    .indent = STYLES[style].indent};
}

static uint64_t level_bit(const rbp_json *j)
{
    int d = j->depth < 1 ? 1 : j->depth > RBP_JSON_MAX_DEPTH ? RBP_JSON_MAX_DEPTH : j->depth;
    return UINT64_C(1) << (d - 1);
}

static void newline_indent(rbp_json *j, int levels)
{
    static const char line[] = "\n                                                                ";
    size_t n = (size_t)(j->indent * levels) + 1;
    const size_t most = sizeof line - 1;
    rbp_sb_putn(j->b, line, n < most ? n : most);
    for (n = n < most ? 0 : n - most; n > 0;) { /* deeper than one line of spaces */
        size_t k = n < most - 1 ? n : most - 1;
        rbp_sb_putn(j->b, line + 1, k);
        n -= k;
    }
}

/* What goes before a value or a key: nothing for a key's value or at the
 * top; else the comma after the previous member and the whitespace. */
static void before_member(rbp_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth == 0) return;
    bool has = (j->has_member & level_bit(j)) != 0;
    if (has) rbp_sb_putn(j->b, ",", 1);
    if (j->ws) {
        rbp_sb_puts(j->b, j->ws);
        j->ws = NULL;
    } else if (j->indent) {
        newline_indent(j, j->depth);
    } else if (has) {
        rbp_sb_puts(j->b, j->space);
    }
    j->has_member |= level_bit(j);
}

static void open_container(rbp_json *j, char c)
{
    before_member(j);
    rbp_sb_putn(j->b, &c, 1);
    j->depth++;
    j->has_member &= ~level_bit(j);
}

static void close_container(rbp_json *j, char c)
{
    bool has = (j->has_member & level_bit(j)) != 0;
    j->has_member &= ~level_bit(j);
    if (j->ws) {
        rbp_sb_puts(j->b, j->ws);
        j->ws = NULL;
    } else if (j->indent && has) {
        newline_indent(j, j->depth - 1);
    }
    rbp_sb_putn(j->b, &c, 1);
    if (j->depth > 0) j->depth--;
}

void rbp_json_object(rbp_json *j) { open_container(j, '{'); }
void rbp_json_object_end(rbp_json *j) { close_container(j, '}'); }
void rbp_json_array(rbp_json *j) { open_container(j, '['); }
void rbp_json_array_end(rbp_json *j) { close_container(j, ']'); }
void rbp_json_ws(rbp_json *j, const char *ws) { j->ws = ws; }

void rbp_json_key(rbp_json *j, const char *key)
{
    before_member(j);
    size_t n = strlen(key);
    if (!put_quoted_plain(j->b, key, n, j->colon)) {
        rbp_sb_putn(j->b, "\"", 1);
        rbp_json_escape(j->b, key, n);
        rbp_sb_putn(j->b, "\"", 1);
        rbp_sb_puts(j->b, j->colon);
    }
    j->after_key = true;
}

void rbp_json_str_open(rbp_json *j)
{
    before_member(j);
    rbp_sb_putn(j->b, "\"", 1);
}

void rbp_json_str_close(rbp_json *j) { rbp_sb_putn(j->b, "\"", 1); }

void rbp_json_strn(rbp_json *j, const char *s, size_t n)
{
    before_member(j);
    if (put_quoted_plain(j->b, s, n, "")) return;
    rbp_sb_putn(j->b, "\"", 1);
    rbp_json_escape(j->b, s, n);
    rbp_sb_putn(j->b, "\"", 1);
}

void rbp_json_str(rbp_json *j, const char *s)
{
    if (!s) rbp_json_null(j);
    else rbp_json_strn(j, s, strlen(s));
}

void rbp_json_number_text(rbp_json *j, const char *text)
{
    before_member(j);
    rbp_sb_puts(j->b, text);
}

/* Digits of v, no printf: the writers put out millions of numbers. */
static size_t utoa(char *end, uint64_t v)
{
    char *p = end;
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    return (size_t)(end - p);
}

void rbp_json_u64(rbp_json *j, uint64_t v)
{
    char buf[24];
    size_t n = utoa(buf + sizeof buf, v);
    before_member(j);
    rbp_sb_putn(j->b, buf + sizeof buf - n, n);
}

void rbp_json_i64(rbp_json *j, int64_t v)
{
    char buf[24];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = utoa(buf + sizeof buf, u);
    if (v < 0) buf[sizeof buf - ++n] = '-';
    before_member(j);
    rbp_sb_putn(j->b, buf + sizeof buf - n, n);
}

void rbp_json_hex(rbp_json *j, uint64_t v)
{
    static const char hex[] = "0123456789abcdef";
    char buf[24], *p = buf + sizeof buf;
    *--p = '"';
    do {
        *--p = hex[v & 15];
        v >>= 4;
    } while (v);
    *--p = 'x';
    *--p = '0';
    *--p = '"';
    before_member(j);
    rbp_sb_putn(j->b, p, (size_t)(buf + sizeof buf - p));
}

void rbp_json_bool(rbp_json *j, bool v)
{
    before_member(j);
    rbp_sb_puts(j->b, v ? "true" : "false");
}

void rbp_json_null(rbp_json *j)
{
    before_member(j);
    rbp_sb_putn(j->b, "null", 4);
}

void rbp_json_kstr(rbp_json *j, const char *key, const char *s)
{
    rbp_json_key(j, key);
    rbp_json_str(j, s);
}

void rbp_json_ku64(rbp_json *j, const char *key, uint64_t v)
{
    rbp_json_key(j, key);
    rbp_json_u64(j, v);
}

void rbp_json_ki64(rbp_json *j, const char *key, int64_t v)
{
    rbp_json_key(j, key);
    rbp_json_i64(j, v);
}

void rbp_json_kbool(rbp_json *j, const char *key, bool v)
{
    rbp_json_key(j, key);
    rbp_json_bool(j, v);
}

void rbp_json_knull(rbp_json *j, const char *key)
{
    rbp_json_key(j, key);
    rbp_json_null(j);
}

void rbp_json_khex(rbp_json *j, const char *key, uint64_t v)
{
    rbp_json_key(j, key);
    rbp_json_hex(j, v);
}

/* --- the escaper ------------------------------------------------------------ */

/* The escape of a byte below 0x80 that is not copied as it is, or NULL. */
static const char *ascii_escape(unsigned char c, char u[7])
{
    static const char hex[] = "0123456789abcdef";
    switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case 0x7f: return "\\u007f";
    default:
        if (c >= 0x20) return NULL;
        memcpy(u, "\\u00", 4);
        u[4] = hex[c >> 4];
        u[5] = hex[c & 15];
        u[6] = '\0';
        return u;
    }
}

/* Whether s[0..avail) is a UTF-8 sequence cut short by the end of a chunk
 * (a lead byte and fewer continuation bytes than it announces). */
static bool cut_sequence(const unsigned char *s, size_t avail)
{
    unsigned char c = s[0];
    size_t want = (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3 : (c & 0xf8) == 0xf0 ? 4 : 0;
    if (!want || avail >= want) return false;
    for (size_t i = 1; i < avail; i++)
        if ((s[i] & 0xc0) != 0x80) return false;
    return true;
}

size_t rbp_json_escape_part(rbp_strbuf *b, const char *str, size_t n, bool last)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0, run = 0;   /* s[run..i) is copied as it is, in one call */
    while (i < n) {
        unsigned char c = s[i];
        if (PLAIN[c]) {
            i++;
            continue;
        }
        if (c >= 0x80) {
            size_t k = rbp_utf8_seq_len(s + i, n - i);
            if (k) {
                i += k;
                continue;
            }
            if (!last && cut_sequence(s + i, n - i)) break;
        }
        if (i > run) rbp_sb_putn(b, str + run, i - run);
        char u[7];
        const char *esc = c >= 0x80 ? "\\ufffd" : ascii_escape(c, u);
        rbp_sb_puts(b, esc);
        run = ++i;
    }
    if (i > run) rbp_sb_putn(b, str + run, i - run);
    return i;
}

void rbp_json_escape(rbp_strbuf *b, const char *s, size_t n) { rbp_json_escape_part(b, s, n, true); }
