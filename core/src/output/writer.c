/*
 * The writers' shared helpers (see writer.h): the output file, fixed-point
 * numbers, UTF-8 lengths.
 */
#include "output/writer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "base/strbuf.h"

FILE *rbp_profile_open_out(const rbpeek_profile *p, const char *path, rbpeek_status *st)
{
    if (!path || !*path) {
        *st = rbp_profile_fail(p, RBPEEK_ERR_ARG, "no output path given");
        return NULL;
    }
    if (strcmp(path, "-") == 0) return stdout;
    FILE *f = fopen(path, "w");
    if (!f) *st = rbp_profile_fail(p, RBPEEK_ERR_IO, "cannot write %s: %s", path, strerror(errno));
    return f;
}

rbpeek_status rbp_profile_close_out(const rbpeek_profile *p, FILE *f, const char *path,
                                    rbpeek_status st)
{
    bool bad = ferror(f) != 0;
    int saved = errno;
    if (f == stdout) {
        if (fflush(f) != 0) bad = true;
    } else if (fclose(f) != 0) {
        bad = true;
        saved = errno;
    }
    if (st != RBPEEK_OK) return st;
    if (bad)
        return rbp_profile_fail(p, RBPEEK_ERR_IO, "error writing %s: %s", path,
                                saved ? strerror(saved) : "write failed");
    return RBPEEK_OK;
}

void rbp_fmt_fixed(char *buf, size_t cap, double v, int decimals)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000, 10000, 100000, 1000000};
    if (decimals < 0) decimals = 0;
    if (decimals > 6) decimals = 6;
    const char *sign = "";
    if (v != v) v = 0;             /* NaN: never emit it into SVG/JSON */
    if (v < 0) {
        sign = "-";
        v = -v;
    }
    if (v > 1e12) v = 1e12;        /* far beyond any coordinate we emit */
    uint64_t scaled = (uint64_t)(v * (double)pow10[decimals] + 0.5);
    uint64_t ip = scaled / pow10[decimals], fp = scaled % pow10[decimals];
    if (scaled == 0) sign = "";
    if (decimals == 0)
        snprintf(buf, cap, "%s%llu", sign, (unsigned long long)ip);
    else
        snprintf(buf, cap, "%s%llu.%0*llu", sign, (unsigned long long)ip, decimals,
                 (unsigned long long)fp);
}

size_t rbp_utf8_length(const char *s)
{
    size_t n = 0, len = strlen(s);
    const unsigned char *u = (const unsigned char *)s;
    for (size_t i = 0; i < len; n++) {
        size_t k = rbp_utf8_seq_len(u + i, len - i);
        i += k ? k : 1;   /* an invalid byte becomes one U+FFFD */
    }
    return n;
}
