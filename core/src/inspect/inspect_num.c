/*
 * Numbers as Ruby prints them. Float#to_s (numeric.c's flo_to_s): the
 * shortest digits that read back as the same double (what ruby_dtoa's mode
 * 0 gives), then fixed notation when the decimal exponent is in -3..16
 * ("100.0", "0.0001", "1.0e+16", "1.0e-05"), with Infinity, -Infinity and
 * NaN by name. Bignum#to_s: the magnitude's 32-bit digits (BDIGIT on
 * x86-64 and aarch64) converted by GMP, up to RBP_INSP_MAX_BIG_WORDS digits (a marker
 * beyond), each Bignum once per value however often it is printed.
 */
#include "inspect/inspect_int.h"

#include <gmp.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/obj.h"
#include "vm/robject.h"


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

/* --- Bignum ---------------------------------------------------------------- */

/* The decimal text of the Bignums met in one value, so that a Bignum that
 * is in a container many times (the same object: [big] * 1000) is
 * converted once: a conversion costs about 50 ms for 2 Mbit, a copy of its
 * text microseconds. A few entries, dropped oldest first, and at most
 * BIG_CACHE_BYTES of text in all. */
enum { BIG_CACHE_SLOTS = 8, BIG_CACHE_MIN_WORDS = 256, BIG_CACHE_BYTES = 32 << 20 };

struct rbp_bigcache {
    struct { uint64_t addr; char *text; size_t len; } e[BIG_CACHE_SLOTS];
    size_t next, bytes;
};

void rbp_insp_bigcache_free(rbp_insp *in)
{
    struct rbp_bigcache *c = in->bigs;
    if (!c) return;
    for (int i = 0; i < BIG_CACHE_SLOTS; i++) free(c->e[i].text);
    free(c);
    in->bigs = NULL;
}

static const char *cached(rbp_insp *in, uint64_t addr, size_t *len)
{
    struct rbp_bigcache *c = in->bigs;
    for (int i = 0; c && i < BIG_CACHE_SLOTS; i++)
        if (c->e[i].text && c->e[i].addr == addr) {
            *len = c->e[i].len;
            return c->e[i].text;
        }
    return NULL;
}

static void drop(struct rbp_bigcache *c, size_t i)
{
    c->bytes -= c->e[i].len;
    free(c->e[i].text);
    c->e[i].text = NULL;
    c->e[i].len = 0;
}

/* Keeps text (malloc'd) for addr, or frees it. Slots are used in turn, so
 * the one at next is the oldest: it goes, then the next oldest until the
 * text fits. */
static void keep(rbp_insp *in, uint64_t addr, char *text, size_t len)
{
    if (len > BIG_CACHE_BYTES || (!in->bigs && !(in->bigs = calloc(1, sizeof *in->bigs)))) {
        free(text);
        return;
    }
    struct rbp_bigcache *c = in->bigs;
    drop(c, c->next);
    for (size_t k = 1; k < BIG_CACHE_SLOTS && c->bytes + len > BIG_CACHE_BYTES; k++)
        drop(c, (c->next + k) % BIG_CACHE_SLOTS);
    c->e[c->next].addr = addr;
    c->e[c->next].text = text;
    c->e[c->next].len = len;
    c->bytes += len;
    c->next = (c->next + 1) % BIG_CACHE_SLOTS;
}

/* The magnitude's BDIGITs (32-bit on x86-64 and aarch64, least significant first) in
 * decimal, malloc'd, with its length; NULL when out of memory. GMP's
 * mpz_get_str converts by divide and conquer (subquadratic: 2 Mbit in
 * about 50 ms; the schoolbook division by 10^9 this replaced took 8.9 s
 * for 65,536 words), as Ruby's own big2str does when built with GMP. */
static char *to_decimal(const uint32_t *w, size_t len, size_t *n)
{
    mpz_t z;
    mpz_init(z);
    mpz_import(z, len, -1, sizeof *w, 0, 0, w);
    size_t cap = mpz_sizeinbase(z, 10) + 2; /* exact or one more, and the NUL */
    char *dec = malloc(cap);
    if (dec) {
        mpz_get_str(dec, 10, z);
        *n = strlen(dec);
    }
    mpz_clear(z);
    return dec;
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
    if (len == 0) return false;
    if (len > RBP_INSP_MAX_BIG_WORDS) { /* the cap: a garbage length, or more than anyone reads */
        char marker[200];
        snprintf(marker, sizeof marker, "#<rbpeek: an Integer of %" PRIu64 " 32-bit digits (about %" PRIu64
                 " million decimal digits): longer than rbpeek prints (%d digits, 10 million decimal)>",
                 len, (uint64_t)((double)len * 9.63295986125 / 1e6) + 1, RBP_INSP_MAX_BIG_WORDS);
        rbp_insp_unreadable(in, marker);
        return true;
    }
    size_t n = 0;
    const char *hit = cached(in, o->addr, &n);
    if (hit) {
        if (!positive) rbp_sb_puts(in->out, "-");
        rbp_sb_putn(in->out, hit, n);
        return true;
    }
    uint32_t *w = malloc(len * 4);
    if (!w || !rbp_mem_read(h->s->mem, ptr, w, len * 4)) {
        free(w);
        return false;
    }
    char *dec = to_decimal(w, (size_t)len, &n);
    free(w);
    if (!dec) return false;
    if (!positive) rbp_sb_puts(in->out, "-");
    rbp_sb_putn(in->out, dec, n);
    if (len >= BIG_CACHE_MIN_WORDS) keep(in, o->addr, dec, n);
    else free(dec);
    return true;
}
