/*
 * String#inspect and Symbol#inspect, byte for byte, from a string's bytes
 * and its encoding: string.c's rb_str_inspect (escapes, "#{"/"#$"/"#@"
 * guarded, \u for unprintable characters of Unicode strings, \x for bytes
 * that are no character), and symbol.c's rb_enc_symname_type, which decides
 * whether a Symbol prints bare (:foo=) or quoted (:"foo bar"). The result
 * encoding is taken to be UTF-8 (Ruby's default external encoding under a
 * UTF-8 locale); docs/inspect.md says what that means for other locales.
 *
 * Encodings: UTF-8 (and its Unicode kin), ASCII-8BIT, US-ASCII and every
 * other ASCII-compatible encoding treated byte-wise (a multi-byte non-UTF-8
 * character is shown as \x escapes: not Ruby's output, documented).
 */
#include "inspect/inspect_int.h"

#include <stdio.h>
#include <string.h>

/* Length of the UTF-8 character at p (1-4) with its code point, or 0 when
 * the bytes are not one (rb_enc_precise_mbclen for UTF-8). */
int rbp_insp_utf8_char(const unsigned char *p, const unsigned char *e, uint32_t *cp)
{
    unsigned c = p[0];
    int n;
    uint32_t v, min;
    if (c < 0x80) {
        *cp = c;
        return 1;
    }
    if (c >= 0xc2 && c <= 0xdf) n = 2, v = c & 0x1f, min = 0x80;
    else if (c >= 0xe0 && c <= 0xef) n = 3, v = c & 0x0f, min = 0x800;
    else if (c >= 0xf0 && c <= 0xf4) n = 4, v = c & 0x07, min = 0x10000;
    else return 0;
    if (e - p < n) return 0;
    for (int i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (p[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return n;
}

/* rb_enc_isprint for Unicode, as Onigmo's Print class has it for the code
 * points that matter in practice (Onigmo counts U+0085 printable; Ruby
 * escapes it from 3.2, see the caller): controls, the line and paragraph
 * separators and noncharacters are not printable. (Onigmo also treats
 * unassigned code points as unprintable; without its tables they are
 * shown as they are.) */
static bool unicode_print(uint32_t c)
{
    if (c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0)) return false;
    if (c == 0x2028 || c == 0x2029) return false;
    if ((c >= 0xfdd0 && c <= 0xfdef) || (c & 0xfffe) == 0xfffe) return false;
    if (c >= 0xe0000 && c <= 0xe007f && c != 0xe0001 && !(c >= 0xe0020)) return false;
    return true;
}

static bool ascii_print(unsigned c) { return c >= 0x20 && c < 0x7f; }

void rbp_insp_str_bytes(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc, bool truncated)
{
    rbp_strbuf *b = in->out;
    const unsigned char *e = p + len;
    char esc[16];
    bool unicode = enc == RBP_ENC_UTF8;
    rbp_sb_putn(b, "\"", 1);
    while (p < e) {
        uint32_t c;
        int n = unicode ? rbp_insp_utf8_char(p, e, &c) : 1;
        if (!unicode) c = *p;
        if (n == 0 || (enc == RBP_ENC_ASCII && c >= 0x80)) {
            /* not a character of this encoding: each byte as \xHH */
            snprintf(esc, sizeof esc, "\\x%02X", *p);
            rbp_sb_puts(b, esc);
            p++;
            continue;
        }
        const unsigned char *next = p + n;
        if (c == '"' || c == '\\' ||
            (c == '#' && next < e && (*next == '$' || *next == '@' || *next == '{'))) {
            rbp_sb_putn(b, "\\", 1);
            rbp_sb_putn(b, (const char *)p, (size_t)n);
            p = next;
            continue;
        }
        const char *named = NULL;
        switch (c) {
        case '\n': named = "\\n"; break;
        case '\r': named = "\\r"; break;
        case '\t': named = "\\t"; break;
        case '\f': named = "\\f"; break;
        case 013: named = "\\v"; break;
        case 010: named = "\\b"; break;
        case 007: named = "\\a"; break;
        case 033: named = "\\e"; break;
        }
        if (named) {
            rbp_sb_puts(b, named);
        } else if ((unicode && (c == 0x85 ? !in->newer_0x85 : unicode_print(c))) || (c < 0x80 && ascii_print(c))) {
            rbp_sb_putn(b, (const char *)p, (size_t)n);
        } else if (unicode) {
            snprintf(esc, sizeof esc, c < 0x10000 ? "\\u%04X" : "\\u{%X}", c);
            rbp_sb_puts(b, esc);
        } else {
            snprintf(esc, sizeof esc, "\\x%02X", c);
            rbp_sb_puts(b, esc);
        }
        p = next;
    }
    rbp_sb_putn(b, "\"", 1);
    if (truncated) rbp_sb_puts(b, RBP_ELLIPSIS);
}

/* --- Symbol names (symbol.c's rb_enc_symname_type) ----------------------- */

enum { ID_LOCAL, ID_INSTANCE, ID_GLOBAL, ID_ATTRSET, ID_CONST, ID_CLASS, ID_JUNK };
#define ATTRSET_FOR_SYNTAX ((1u << ID_LOCAL) | (1u << ID_CONST))

static bool identchar(const unsigned char *p) { return *p == '_' || (*p >= '0' && *p <= '9') || ((*p | 0x20) >= 'a' && (*p | 0x20) <= 'z') || *p >= 0x80; }

static size_t char_len(const unsigned char *p, const unsigned char *e)
{
    uint32_t c;
    int n = rbp_insp_utf8_char(p, e, &c);
    return n ? (size_t)n : 1;
}

static bool global_punct(unsigned c) { return c && strchr("~*$?!@/\\;,.=:<>\"&`'+0", (int)c) != NULL; }

/* Ruby's function calls itself for a name ending in "=" (is "foo" of
 * "foo=" a local or constant name?), once per trailing "=" when each
 * level takes the same path: a million levels for a Symbol named "@" and
 * a million "=" read from a damaged heap, which overflowed the stack. The
 * outer call only accepts ID_LOCAL or ID_CONST from the inner one, and an
 * inner call that would recurse again can return nothing but ID_ATTRSET
 * or -1, so the inner call (nested) does not recurse: the answer is the
 * same, and the recursion is one level, whatever the name. */
static int symname_type_at(const unsigned char *name, size_t len, unsigned allowed, bool nested);

static int symname_type(const unsigned char *name, size_t len, unsigned allowed)
{
    return symname_type_at(name, len, allowed, false);
}

static int symname_type_at(const unsigned char *name, size_t len, unsigned allowed, bool nested)
{
    const unsigned char *m = name, *e = name + len;
    int type;
    bool more;
    if (len == 0 || !*m) return -1;
#define STOP(t, n) do { type = (t); m = name + (n); more = false; goto done; } while (0)
#define MORE(t, n) do { type = (t); m = name + (n); more = true; goto done; } while (0)
    switch (*m) {
    case '$': {
        const unsigned char *q = m + 1;
        if (q < e && global_punct(*q) && q + 1 == e) STOP(ID_GLOBAL, len);
        if (q < e && *q == '-' && q + 1 < e && identchar(q + 1) && q + 1 + char_len(q + 1, e) == e) STOP(ID_GLOBAL, len);
        if (q < e && *q >= '0' && *q <= '9') {
            while (q < e && *q >= '0' && *q <= '9') q++;
            if (q == e) STOP(ID_GLOBAL, len);
        }
        MORE(ID_GLOBAL, 1);
    }
    case '@': MORE(len > 1 && m[1] == '@' ? ID_CLASS : ID_INSTANCE, len > 1 && m[1] == '@' ? 2 : 1);
    case '<':
        if (len > 1 && m[1] == '<') STOP(ID_JUNK, 2);
        if (len > 1 && m[1] == '=') STOP(ID_JUNK, len > 2 && m[2] == '>' ? 3 : 2);
        STOP(ID_JUNK, 1);
    case '>': STOP(ID_JUNK, len > 1 && (m[1] == '>' || m[1] == '=') ? 2 : 1);
    case '=':
        if (len > 1 && m[1] == '~') STOP(ID_JUNK, 2);
        if (len > 1 && m[1] == '=') STOP(ID_JUNK, len > 2 && m[2] == '=' ? 3 : 2);
        return -1;
    case '*': STOP(ID_JUNK, len > 1 && m[1] == '*' ? 2 : 1);
    case '+': case '-': STOP(ID_JUNK, len > 1 && m[1] == '@' ? 2 : 1);
    case '|': case '^': case '&': case '/': case '%': case '~': case '`': STOP(ID_JUNK, 1);
    case '[':
        if (len > 1 && m[1] == ']') STOP(ID_JUNK, len > 2 && m[2] == '=' ? 3 : 2);
        MORE(ID_JUNK, 0);
    case '!':
        if (len > 1 && (m[1] == '=' || m[1] == '~')) STOP(ID_JUNK, 2);
        if (allowed & (1u << ID_JUNK)) MORE(ID_JUNK, 1);
        STOP(ID_JUNK, 1);
    default:
        MORE(*m >= 'A' && *m <= 'Z' ? ID_CONST : ID_LOCAL, 0);
    }
done:
#undef STOP
#undef MORE
    if (more) {
        if (m >= e || (*m != '_' && !((*m | 0x20) >= 'a' && (*m | 0x20) <= 'z') && *m < 0x80)) {
            if (len > 1 && e[-1] == '=' && !nested && !(allowed & (1u << ID_ATTRSET))) {
                int t = symname_type_at(name, len - 1, allowed, true);
                if (t >= 0 && (allowed & (1u << t))) return ID_ATTRSET;
            }
            return -1;
        }
        while (m < e && identchar(m)) m += char_len(m, e);
        if (m < e) {
            switch (*m) {
            case '!': case '?':
                if (type == ID_GLOBAL || type == ID_CLASS || type == ID_INSTANCE) return -1;
                type = ID_JUNK;
                ++m;
                if (m + 1 < e || m >= e || *m != '=') break;
                /* fall through */
            case '=':
                if (!(allowed & (1u << type))) return -1;
                type = ID_ATTRSET;
                ++m;
                break;
            }
        }
    }
    return m == e ? type : -1;
}

/* rb_str_symname_p: a symbol name that prints bare. */
static bool symname_p(const unsigned char *p, size_t len, rbp_enc_kind enc)
{
    if (memchr(p, 0, len) || symname_type(p, len, ATTRSET_FOR_SYNTAX) < 0) return false;
    for (size_t i = 0; i < len;) {
        uint32_t c;
        int n = enc == RBP_ENC_UTF8 ? rbp_insp_utf8_char(p + i, p + len, &c) : 1;
        if (enc != RBP_ENC_UTF8) c = p[i];
        if (!n || (enc != RBP_ENC_UTF8 && c >= 0x80)) return false; /* non-ASCII outside UTF-8: not the result encoding */
        if (!(c < 0x80 ? ascii_print(c) : unicode_print(c))) return false;
        i += (size_t)n;
    }
    return true;
}

void rbp_insp_sym_name(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc)
{
    rbp_sb_putn(in->out, ":", 1);
    if (symname_p(p, len, enc))
        rbp_sb_putn(in->out, (const char *)p, len);
    else
        rbp_insp_str_bytes(in, p, len, enc, false);
}

/* 3.4's Hash#inspect writes a Symbol key as `name: ` when it needs no
 * quotes (hash.c's symbol_key_needs_quote), else as `"name": `. */
void rbp_insp_sym_key(rbp_insp *in, const unsigned char *p, size_t len, rbp_enc_kind enc)
{
    bool quote = len == 0 || !symname_p(p, len, enc) || p[0] == '@' || p[0] == '$' || p[0] == '!' ||
                 strchr("+-*/`%^&|]<=>~@", p[len - 1]) != NULL;
    if (quote)
        rbp_insp_str_bytes(in, p, len, enc, false);
    else
        rbp_sb_putn(in->out, (const char *)p, len);
    rbp_sb_puts(in->out, ": ");
}
