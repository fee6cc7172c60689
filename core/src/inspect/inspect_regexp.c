/*
 * Regexp#inspect, byte for byte: re.c's rb_reg_desc and rb_reg_expr_str.
 * The source String is shown between slashes as it was written when every
 * character is printable and no '/' is unescaped; otherwise it is rewritten
 * character by character: an escape pair is kept, a bare '/' gains a
 * backslash, a non-ASCII character becomes \u (Unicode regexps) or \x (any
 * other), a byte that is no character and an unprintable ASCII one become
 * \xHH, and whitespace stays. Then the option letters m, i, x (from the
 * compiled pattern's options) and n for /n (the REG_ENCODING_NONE flag).
 *
 * Like Strings (inspect_str.c), the result encoding is taken to be UTF-8;
 * regexps in UTF-8, US-ASCII and ASCII-8BIT are decoded, any other
 * encoding falls back to the Kernel#to_s form with the reason.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "inspect/inspect_int.h"
#include "vm/robject.h"

#define REG_ENCODING_NONE RBP_FL_USER(6)  /* re.c: the regexp was written with /n */
#define ENCODING_SHIFT (RBP_FL_USHIFT + 10)
enum { ONIG_IGNORECASE = 1, ONIG_EXTEND = 2, ONIG_MULTILINE = 4 };

/* One character at p: its length (0: not a character) and code point. */
static int char_at(rbp_enc_kind enc, const unsigned char *p, const unsigned char *e, uint32_t *cp)
{
    if (enc == RBP_ENC_UTF8) return rbp_insp_utf8_char(p, e, cp);
    *cp = p[0];
    return enc == RBP_ENC_ASCII && p[0] >= 0x80 ? 0 : 1;
}

static bool ascii_print(unsigned c) { return c >= 0x20 && c < 0x7f; }
static bool ascii_space(unsigned c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

/* Whether rb_reg_expr_str copies the source as it is: the source is valid
 * in its encoding and each character is printable ASCII other than '/', or
 * a non-ASCII character of the result encoding (UTF-8). */
static bool verbatim(const unsigned char *s, size_t len, rbp_enc_kind enc)
{
    const unsigned char *p = s, *e = s + len;
    while (p < e) {
        uint32_t cp;
        int n = char_at(enc, p, e, &cp);
        if (n == 0) return false;            /* broken coderange */
        if (*p >= 0x80) {
            if (enc != RBP_ENC_UTF8) return false;
        } else if (*p == '/' || !ascii_print(*p)) {
            return false;
        }
        p += n;
    }
    return true;
}

static void escaped(rbp_strbuf *b, const unsigned char *s, size_t len, rbp_enc_kind enc)
{
    const unsigned char *p = s, *e = s + len;
    while (p < e) {
        uint32_t cp;
        int n;
        unsigned c = *p;
        if (c == '\\' && p + 1 < e) { /* an escape pair is kept whole */
            n = char_at(enc, p + 1, e, &cp);
            rbp_sb_putn(b, (const char *)p, 1 + (size_t)(n ? n : 1));
            p += 1 + (n ? n : 1);
            continue;
        }
        if (c >= 0x80) {
            n = char_at(enc, p, e, &cp);
            if (!n) {
                rbp_sb_printf(b, "\\x%02X", c);
                p++;
            } else {
                /* rb_str_buf_cat_escaped_char */
                if (enc == RBP_ENC_UTF8) rbp_sb_printf(b, cp < 0x10000 ? "\\u%04X" : "\\u{%X}", cp);
                else rbp_sb_printf(b, cp < 0x100 ? "\\x%02X" : "\\x{%X}", cp);
                p += n;
            }
            continue;
        }
        if (c == '/') rbp_sb_puts(b, "\\/");
        else if (ascii_print(c) || ascii_space(c)) rbp_sb_putn(b, (const char *)p, 1);
        else rbp_sb_printf(b, "\\x%02X", c);
        p++;
    }
}

bool rbp_insp_regexp(rbp_insp *in, const rbp_obj *o)
{
    const rbp_layout *L = &in->s->layout;
    if (!rbp_has(L, RBP_L_rregexp_ptr) || !rbp_has(L, RBP_L_rregexp_src) || !rbp_has(L, RBP_L_regex_options))
        return rbp_insp_why(in, "this layout has no RRegexp or re_pattern_buffer members");
    uint64_t ptr = 0, src = 0, options = 0;
    if (!rbp_read_field(in->s, o->addr, RBP_L_rregexp_ptr, &ptr) || !rbp_read_field(in->s, o->addr, RBP_L_rregexp_src, &src))
        return rbp_insp_why(in, "its RRegexp cannot be read");
    if (!ptr || !src) /* rb_reg_inspect: an uninitialized Regexp is rb_any_to_s */
        return rbp_insp_why(in, "it is an uninitialized Regexp (no pattern or no source)");
    if (!rbp_read_field(in->s, ptr, RBP_L_regex_options, &options))
        return rbp_insp_why(in, "its compiled pattern at 0x%" PRIx64 " cannot be read", ptr);
    rbp_enc_kind enc = rbp_insp_enc_kind(in, (int)((o->flags >> ENCODING_SHIFT) & 0x7f));
    if (enc == RBP_ENC_OTHER)
        return rbp_insp_why(in, "its encoding is neither UTF-8, US-ASCII nor ASCII-8BIT");
    size_t len = 0;
    rbp_enc_kind src_enc;
    unsigned char *s = rbp_insp_string_value(in, src, &len, &src_enc);
    if (!s) return rbp_insp_why(in, "its source (0x%" PRIx64 ") is not a readable String", src);
    rbp_strbuf *b = in->out;
    rbp_sb_puts(b, "/");
    if (verbatim(s, len, enc)) rbp_sb_putn(b, (const char *)s, len);
    else escaped(b, s, len, enc);
    free(s);
    rbp_sb_puts(b, "/");
    if (options & ONIG_MULTILINE) rbp_sb_puts(b, "m");
    if (options & ONIG_IGNORECASE) rbp_sb_puts(b, "i");
    if (options & ONIG_EXTEND) rbp_sb_puts(b, "x");
    if (o->flags & REG_ENCODING_NONE) rbp_sb_puts(b, "n");
    return true;
}
