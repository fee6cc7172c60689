/*
 * Folded stacks ("frame;frame;frame COUNT" per line, as flamegraph.pl and
 * most profilers read them), both ways: writing a profile, and reading
 * folded files back into one (rbpeek-flamegraph), where each line's stack
 * merges into the profile's tree and malformed lines are counted and
 * reported, not fatal.
 */
#define _GNU_SOURCE   /* getline */
#include "output/writer.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profile/profile.h"

#define RBP_MAX_READ_FRAMES 1000000   /* per folded line; deeper is garbage */
#define RBP_UTF8_BOM "\xEF\xBB\xBF"  /* U+FEFF */

typedef struct rbp_folded_ctx {
    const rbpeek_profile *p;
    FILE *f;
    char *path;             /* the current stack, sanitised, ';'-joined */
    size_t cap;
    size_t *plen;           /* length of path at each depth */
    bool wrote;             /* a line is out */
} rbp_folded_ctx;

static int rbp_folded_visit(void *vctx, uint32_t node, bool entering)
{
    rbp_folded_ctx *c = vctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &c->p->nodes[node];
    const char *name = c->p->names[n->frame];
    size_t nlen = c->p->name_lens[n->frame];
    size_t start = n->depth > 1 ? c->plen[n->depth - 1] + 1 : 0;
    if (start + nlen + 1 > c->cap) {
        size_t ncap = (start + nlen + 1) * 2;
        char *np = realloc(c->path, ncap);
        if (!np) {
            rbp_profile_fail(c->p, RBPEEK_ERR_NOMEM, "out of memory writing folded stacks");
            return -1;
        }
        c->path = np;
        c->cap = ncap;
    }
    if (n->depth > 1) c->path[start - 1] = ';';
    for (size_t i = 0; i < nlen; i++) {
        char ch = name[i];
        /* The format has no escapes: ';' separates frames and a line
         * break ends the record, so both are replaced. */
        if (ch == ';') ch = ':';
        else if (ch == '\n' || ch == '\r') ch = ' ';
        c->path[start + i] = ch;
    }
    c->plen[n->depth] = start + nlen;
    if (n->self > 0) {
        /* A reader takes a U+FEFF that opens the file for a byte order
         * mark and drops it; when the first frame of the first line begins
         * with one, a mark goes before it, so that only the mark is
         * dropped. */
        if (!c->wrote && start + nlen >= 3 && memcmp(c->path, RBP_UTF8_BOM, 3) == 0)
            fwrite(RBP_UTF8_BOM, 1, 3, c->f);
        c->wrote = true;
        fwrite(c->path, 1, start + nlen, c->f);
        if (fprintf(c->f, " %llu\n", (unsigned long long)n->self) < 0) {
            rbp_profile_fail(c->p, RBPEEK_ERR_IO, "error writing folded stacks: %s",
                             strerror(errno));
            return -1;
        }
    }
    return 0;
}

rbpeek_status rbpeek_profile_write_folded(const rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    rbp_children ch;
    rbpeek_status st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) return st;
    rbp_folded_ctx c = {.p = p};
    c.plen = calloc((size_t)p->max_depth + 1, sizeof *c.plen);
    if (!c.plen) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing folded stacks");
    }
    c.f = rbp_profile_open_out(p, path, &st);
    if (c.f) {
        st = rbp_profile_walk(p, &ch, rbp_folded_visit, &c);
        st = rbp_profile_close_out(p, c.f, path, st);
    }
    free(c.plen);
    free(c.path);
    rbp_children_free(&ch);
    return st;
}

/* Parses a decimal count; false unless s is all digits and fits 64 bits. */
static bool rbp_parse_count(const char *s, uint64_t *out)
{
    if (!*s) return false;
    uint64_t v = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        uint64_t d = (uint64_t)(*s - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

rbpeek_status rbpeek_profile_read_folded(rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    if (!path || !*path) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "no input path given");
    bool is_stdin = strcmp(path, "-") == 0;
    const char *shown = is_stdin ? "<stdin>" : path;
    FILE *f = is_stdin ? stdin : fopen(path, "r");
    if (!f) return rbp_profile_fail(p, RBPEEK_ERR_IO, "cannot read %s: %s", path, strerror(errno));

    char *line = NULL;
    size_t line_cap = 0;
    const char **frames = NULL;
    size_t frames_cap = 0;
    uint64_t lineno = 0, valid = 0, bad = 0, first_bad = 0;
    const char *first_reason = NULL;
    rbpeek_status st = RBPEEK_OK;
    ssize_t got;

    while ((got = getline(&line, &line_cap, f)) >= 0) {
        lineno++;
        size_t len = (size_t)got;
        const char *reason = NULL;
        char *s = line;
        if (lineno == 1 && len >= 3 && memcmp(s, RBP_UTF8_BOM, 3) == 0) {
            s += 3;   /* a UTF-8 byte order mark some editors add */
            len -= 3;
        }
        while (len > 0 && (s[len - 1] == '\n' || s[len - 1] == '\r' || s[len - 1] == ' ' ||
                           s[len - 1] == '\t'))
            len--;
        s[len] = '\0';
        if (len == 0) continue;   /* blank lines are not errors */
        char *sep = NULL;
        uint64_t count = 0;
        if (strlen(s) != len) {
            reason = "contains a NUL byte";
        } else {
            for (char *q = s + len; q > s; q--)
                if (q[-1] == ' ' || q[-1] == '\t') {
                    sep = q - 1;
                    break;
                }
            /* Nothing before the count is one frame with an empty name, as
             * the writer writes it (";" is two): every stack the writer
             * writes reads back. */
            if (!sep) reason = "no sample count (expected \"frame;frame;... COUNT\")";
            else if (!rbp_parse_count(sep + 1, &count)) reason = "sample count is not a whole number";
        }
        if (!reason) {
            *sep = '\0';
            size_t n = 0;
            for (char *q = s;; n++) {
                if (n >= RBP_MAX_READ_FRAMES) {
                    reason = "too many frames";
                    break;
                }
                if (n == frames_cap) {
                    size_t ncap = frames_cap ? frames_cap * 2 : 256;
                    const char **nf = realloc(frames, ncap * sizeof *nf);
                    if (!nf) {
                        st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory reading %s",
                                              shown);
                        goto done;
                    }
                    frames = nf;
                    frames_cap = ncap;
                }
                frames[n] = q;
                char *semi = strchr(q, ';');
                if (!semi) {
                    n++;
                    break;
                }
                *semi = '\0';
                q = semi + 1;
            }
            if (!reason) {
                st = rbpeek_profile_add_stack(p, frames, n, count);
                if (st == RBPEEK_ERR_NOMEM) goto done;
                if (st != RBPEEK_OK) {
                    reason = "sample count overflows";
                    st = RBPEEK_OK;
                }
            }
        }
        if (reason) {
            if (bad++ == 0) {
                first_bad = lineno;
                first_reason = reason;
            }
        } else {
            valid++;
        }
    }
    if (ferror(f)) {
        st = rbp_profile_fail(p, RBPEEK_ERR_IO, "error reading %s: %s", shown, strerror(errno));
        goto done;
    }
    p->skipped_lines += bad;
    if (bad > 0 && valid == 0) {
        st = rbp_profile_fail(p, RBPEEK_ERR_CORRUPT,
                              "%s is not in folded-stack format: line %llu: %s", shown,
                              (unsigned long long)first_bad, first_reason);
    } else if (bad > 0) {
        /* Success, but the caller should be able to tell the user. */
        rbp_profile_fail(p, RBPEEK_OK, "skipped %llu malformed line%s in %s (first: line %llu: %s)",
                         (unsigned long long)bad, bad == 1 ? "" : "s", shown,
                         (unsigned long long)first_bad, first_reason);
    }
done:
    free(line);
    free(frames);
    if (!is_stdin) fclose(f);
    return st;
}
