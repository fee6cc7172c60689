/*
 * Numbers as Ruby prints them. Float#to_s (numeric.c's flo_to_s): the
 * shortest digits that read back as the same double (what ruby_dtoa's mode
 * 0 gives), then fixed notation when the decimal exponent is in -3..16
 * ("100.0", "0.0001", "1.0e+16", "1.0e-05"), with Infinity, -Infinity and
 * NaN by name. Bignum#to_s: the magnitude's 32-bit digits (BDIGIT on
 * x86-64) divided down by 10^9.
 */
#include "inspect/inspect_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "vm/robject.h"

enum { MAX_BIG_WORDS = 1 << 16 }; /* 2 Mbit: 630,000 decimal digits */

/* The shortest decimal digits of d (> 0) that round-trip, and the decimal
 * point position as dtoa gives it (value = 0.DIGITS x 10^decpt). */
static int shortest(double d, char *digits, int *decpt)
{
    char buf[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, sizeof buf, "%.*e", prec - 1, d);
        if (prec == 17 || strtod(buf, NULL) == d) break;
    }
    /* buf is "D.DDDDe[+-]XX" */
    int n = 0;
    char *e = strchr(buf, 'e');
    for (char *p = buf; p < e; p++)
        if (*p != '.') digits[n++] = *p;
    while (n > 1 && digits[n - 1] == '0') n--;
    digits[n] = 0;
    *decpt = atoi(e + 1) + 1;
    return n;
}

void rbp_insp_float(rbp_strbuf *b, double d)
{
    if (isinf(d)) {
        rbp_sb_puts(b, d < 0 ? "-Infinity" : "Infinity");
        return;
    }
    if (isnan(d)) {
        rbp_sb_puts(b, "NaN");
        return;
    }
    if (signbit(d)) rbp_sb_puts(b, "-");
    d = fabs(d);
    if (d == 0) {
        rbp_sb_puts(b, "0.0");
        return;
    }
    char digs[40];
    int decpt, n = shortest(d, digs, &decpt);
    if (decpt > 0 && decpt < 16) { /* decpt < DBL_DIG + 1 */
        if (decpt >= n) {
            rbp_sb_puts(b, digs);
            for (int i = n; i < decpt; i++) rbp_sb_puts(b, "0");
            rbp_sb_puts(b, ".0");
        } else {
            rbp_sb_putn(b, digs, (size_t)decpt);
            rbp_sb_puts(b, ".");
            rbp_sb_puts(b, digs + decpt);
        }
    } else if (decpt <= 0 && decpt > -4) {
        rbp_sb_puts(b, "0.");
        for (int i = 0; i < -decpt; i++) rbp_sb_puts(b, "0");
        rbp_sb_puts(b, digs);
    } else {
        rbp_sb_putn(b, digs, 1);
        rbp_sb_puts(b, ".");
        rbp_sb_puts(b, n > 1 ? digs + 1 : "0");
        rbp_sb_printf(b, "e%+03d", decpt - 1);
    }
}

bool rbp_insp_bignum(rbp_insp *in, const rbp_obj *o)
{
    rbp_heap *h = in->h;
    const rbp_layout *l = &in->s->layout;
    bool embed = o->flags & RBP_FL_USER(2), positive = o->flags & RBP_FL_USER(1);
    uint64_t len = 0, ptr = 0;
    if (embed) {
        len = (o->flags >> (RBP_FL_USHIFT + 3)) & 7;
        if (!rbp_has(l, RBP_L_rbignum_ary)) return false;
        ptr = o->addr + (uint64_t)rbp_off(l, RBP_L_rbignum_ary);
    } else if (!rbp_read_field(h->s, o->addr, RBP_L_rbignum_heap_len, &len) ||
               !rbp_read_field(h->s, o->addr, RBP_L_rbignum_heap_digits, &ptr)) {
        return false;
    }
    if (len == 0 || len > MAX_BIG_WORDS) return false;
    uint32_t *w = malloc(len * 4);
    char *dec = malloc(len * 10 + 2);
    if (!w || !dec || !rbp_mem_read(h->s->mem, ptr, w, len * 4)) {
        free(w);
        free(dec);
        return false;
    }
    size_t top = len, nd = 0;
    while (top && !w[top - 1]) top--;
    while (top) { /* divide the magnitude by 10^9, collecting 9 digits a time */
        uint64_t rem = 0;
        for (size_t i = top; i-- > 0;) {
            uint64_t cur = (rem << 32) | w[i];
            w[i] = (uint32_t)(cur / 1000000000u);
            rem = cur % 1000000000u;
        }
        while (top && !w[top - 1]) top--;
        for (int k = 0; k < 9; k++) {
            dec[nd++] = (char)('0' + rem % 10);
            rem /= 10;
            if (!top && !rem) break;
        }
    }
    if (!nd) dec[nd++] = '0';
    if (!positive) rbp_sb_puts(in->out, "-");
    for (size_t i = nd; i-- > 0;) rbp_sb_putn(in->out, &dec[i], 1);
    free(w);
    free(dec);
    return true;
}
