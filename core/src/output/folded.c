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

/* A folded file being read: where the frames of a line go, and the
 * tally of lines read and refused. */
typedef struct fold_reader {
    rbpeek_profile *p;
    const char *shown;      /* the input's name in messages */
    const char **frames;    /* the current line's frames */
    size_t frames_cap;
    uint64_t lineno, valid, bad, first_bad;
    const char *first_reason;
} fold_reader;

/* The line without a first line's byte order mark and trailing white
 * space, NUL-terminated; *len its length. */
static char *fold_trim(const fold_reader *r, char *line, size_t got, size_t *len)
{
    char *s = line;
    if (r->lineno == 1 && got >= 3 && memcmp(s, RBP_UTF8_BOM, 3) == 0) {
        s += 3;   /* a UTF-8 byte order mark some editors add */
        got -= 3;
    }
    while (got > 0 && (s[got - 1] == '\n' || s[got - 1] == '\r' || s[got - 1] == ' ' || s[got - 1] == '\t'))
        got--;
    s[got] = '\0';
    *len = got;
    return s;
}

/* The line's count, after its last blank (*sep); NULL, or why the line is
 * refused. */
static const char *fold_count(char *s, size_t len, char **sep, uint64_t *count)
{
    if (strlen(s) != len) return "contains a NUL byte";
    *sep = NULL;
    for (char *q = s + len; q > s; q--)
        if (q[-1] == ' ' || q[-1] == '\t') {
            *sep = q - 1;
            break;
        }
    /* Nothing before the count is one frame with an empty name, as the
     * writer writes it (";" is two): every stack the writer writes reads
     * back. */
    if (!*sep) return "no sample count (expected \"frame;frame;... COUNT\")";
    if (!rbp_parse_count(*sep + 1, count)) return "sample count is not a whole number";
    return NULL;
}

/* The frames of s, split at ';' in place into r->frames (*n of them).
 * NULL, or why the line is refused; *st RBPEEK_ERR_NOMEM (the profile's
 * error set) when out of memory. */
static const char *fold_split(fold_reader *r, char *s, size_t *n, rbpeek_status *st)
{
    *n = 0;
    for (char *q = s;; (*n)++) {
        if (*n >= RBP_MAX_READ_FRAMES) return "too many frames";
        if (*n == r->frames_cap) {
            size_t ncap = r->frames_cap ? r->frames_cap * 2 : 256;
            const char **nf = realloc(r->frames, ncap * sizeof *nf);
            if (!nf) {
                *st = rbp_profile_fail(r->p, RBPEEK_ERR_NOMEM, "out of memory reading %s", r->shown);
                return NULL;
            }
            r->frames = nf;
            r->frames_cap = ncap;
        }
        r->frames[*n] = q;
        char *semi = strchr(q, ';');
        if (!semi) {
            (*n)++;
            return NULL;
        }
        *semi = '\0';
        q = semi + 1;
    }
}

/* One line: its stack added to the profile, or counted as refused with
 * the reason. RBPEEK_ERR_NOMEM ends the read. */
static rbpeek_status fold_line(fold_reader *r, char *line, size_t got)
{
    size_t len;
    char *s = fold_trim(r, line, got, &len);
    if (len == 0) return RBPEEK_OK;   /* blank lines are not errors */
    char *sep = NULL;
    uint64_t count = 0;
    rbpeek_status st = RBPEEK_OK;
    const char *reason = fold_count(s, len, &sep, &count);
    if (!reason) {
        *sep = '\0';
        size_t n = 0;
        reason = fold_split(r, s, &n, &st);
        if (st != RBPEEK_OK) return st;
        if (!reason) {
            st = rbpeek_profile_add_stack(r->p, r->frames, n, count);
            if (st == RBPEEK_ERR_NOMEM) return st;
            if (st != RBPEEK_OK) reason = "sample count overflows";
        }
    }
    if (reason) {
        if (r->bad++ == 0) {
            r->first_bad = r->lineno;
            r->first_reason = reason;
        }
    } else {
        r->valid++;
    }
    return RBPEEK_OK;
}

/* After the last line: the refused lines counted, and said (an error when
 * no line was good, else a message beside success). */
static rbpeek_status fold_finish(fold_reader *r)
{
    rbpeek_profile *p = r->p;
    p->skipped_lines += r->bad;
    if (r->bad > 0 && r->valid == 0)
        return rbp_profile_fail(p, RBPEEK_ERR_CORRUPT, "%s is not in folded-stack format: line %llu: %s", r->shown,
                                (unsigned long long)r->first_bad, r->first_reason);
    if (r->bad > 0) {
        /* Success, but the caller should be able to tell the user. */
        rbp_profile_fail(p, RBPEEK_OK, "skipped %llu malformed line%s in %s (first: line %llu: %s)",
                         (unsigned long long)r->bad, r->bad == 1 ? "" : "s", r->shown,
                         (unsigned long long)r->first_bad, r->first_reason);
    }
    return RBPEEK_OK;
}

rbpeek_status rbpeek_profile_read_folded(rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    if (!path || !*path) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "no input path given");
    bool is_stdin = strcmp(path, "-") == 0;
    fold_reader r = {.p = p, .shown = is_stdin ? "<stdin>" : path};
    FILE *f = is_stdin ? stdin : fopen(path, "r");
    if (!f) return rbp_profile_fail(p, RBPEEK_ERR_IO, "cannot read %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t line_cap = 0;
    rbpeek_status st = RBPEEK_OK;
    ssize_t got;
    while (st == RBPEEK_OK && (got = getline(&line, &line_cap, f)) >= 0) {
        r.lineno++;
        st = fold_line(&r, line, (size_t)got);
    }
    if (st == RBPEEK_OK && ferror(f))
        st = rbp_profile_fail(p, RBPEEK_ERR_IO, "error reading %s: %s", r.shown, strerror(errno));
    else if (st == RBPEEK_OK)
        st = fold_finish(&r);
    free(line);
    free(r.frames);
    if (!is_stdin) fclose(f);
    return st;
}
