/*
 * The profile aggregator: interns frame names, merges stacks into a prefix
 * tree (see profile.h for why a trie), and writes the text formats: folded
 * stacks, speedscope JSON and the top-N table. It also reads folded stacks
 * back, for rbpeek-flamegraph. The SVG writer is in flamegraph.c.
 *
 * Everything is bounded by the input's own size; no walk recurses on the C
 * stack, because one runaway recursion in the target gives a 5,000-deep
 * (or deeper) path.
 */
#define _GNU_SOURCE   /* getline */
#include "base/strbuf.h"
#include "profile/profile.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define RBP_PERR_CAP 512
#define RBP_MAX_READ_FRAMES 1000000   /* per folded line; deeper is garbage */

/* ---------------------------------------------------------------------------
 * Small helpers: arena, errors, hashing, number formatting, UTF-8.
 * ------------------------------------------------------------------------- */

rbpeek_status rbp_profile_fail(const rbpeek_profile *p, rbpeek_status status,
                               const char *fmt, ...)
{
    if (p && p->err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(p->err, RBP_PERR_CAP, fmt, ap);
        va_end(ap);
    }
    return status;
}

static void rbp_profile_clear_error(const rbpeek_profile *p)
{
    if (p && p->err) p->err[0] = '\0';
}

static uint64_t rbp_hash_bytes(const char *s, size_t len)
{
    /* FNV-1a, then a final mix so the low bits (the table index) are good. */
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    return h;
}

static uint64_t rbp_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
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

/* ---------------------------------------------------------------------------
 * Construction, interning, the trie.
 * ------------------------------------------------------------------------- */

rbpeek_profile *rbpeek_profile_new(void)
{
    rbpeek_profile *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->err = calloc(1, RBP_PERR_CAP);
    p->nodes_cap = 64;
    p->nodes = malloc(p->nodes_cap * sizeof *p->nodes);
    if (!p->err || !p->nodes) {
        rbpeek_profile_free(p);
        return NULL;
    }
    p->nodes[0] = (rbp_pnode){.parent = RBP_NO_NODE, .frame = RBP_ROOT_FRAME,
                              .first_child = RBP_NO_NODE, .next_sibling = RBP_NO_NODE};
    p->nnodes = 1;
    return p;
}

void rbpeek_profile_free(rbpeek_profile *p)
{
    if (!p) return;
    free(p->err);
    free(p->names);
    free(p->name_lens);
    free(p->name_table);
    rbp_arena_free(&p->arena);
    free(p->nodes);
    free(p->child_table);
    for (size_t i = 0; i < p->nmeta; i++) {
        free(p->meta[i].key);
        free(p->meta[i].value);
    }
    free(p->meta);
    free(p);
}

const char *rbpeek_profile_error(const rbpeek_profile *p)
{
    return p && p->err ? p->err : "";
}

uint64_t rbpeek_profile_total(const rbpeek_profile *p)
{
    return p ? p->nodes[0].total : 0;
}

uint64_t rbpeek_profile_stack_count(const rbpeek_profile *p)
{
    return p ? p->nstacks : 0;
}

uint64_t rbpeek_profile_skipped_lines(const rbpeek_profile *p)
{
    return p ? p->skipped_lines : 0;
}

const char *rbp_profile_node_name(const rbpeek_profile *p, uint32_t node)
{
    uint32_t f = p->nodes[node].frame;
    return f == RBP_ROOT_FRAME ? "all" : p->names[f];
}

/* Grows an open-addressing table of uint32 slots (value + 1, 0 = empty) and
 * reinserts every entry using rehash(), which returns the hash of an entry. */
static bool rbp_table_grow(uint32_t **table, size_t *cap, size_t count,
                           uint64_t (*rehash)(const rbpeek_profile *, uint32_t),
                           const rbpeek_profile *p)
{
    if (*cap && (count + 1) * 2 <= *cap) return true;   /* load <= 1/2 */
    size_t ncap = *cap ? *cap * 2 : 1024;
    uint32_t *nt = calloc(ncap, sizeof *nt);
    if (!nt) return false;
    for (size_t i = 0; i < *cap; i++) {
        uint32_t v = (*table)[i];
        if (!v) continue;
        size_t j = rehash(p, v - 1) & (ncap - 1);
        while (nt[j]) j = (j + 1) & (ncap - 1);
        nt[j] = v;
    }
    free(*table);
    *table = nt;
    *cap = ncap;
    return true;
}

static uint64_t rbp_name_rehash(const rbpeek_profile *p, uint32_t id)
{
    return rbp_hash_bytes(p->names[id], p->name_lens[id]);
}

static uint64_t rbp_child_key(uint32_t parent, uint32_t frame)
{
    return rbp_hash_u64(((uint64_t)parent << 32) | frame);
}

static uint64_t rbp_child_rehash(const rbpeek_profile *p, uint32_t node)
{
    return rbp_child_key(p->nodes[node].parent, p->nodes[node].frame);
}

/* Returns the id of name, adding it if new; UINT32_MAX when out of memory. */
static uint32_t rbp_intern(rbpeek_profile *p, const char *name)
{
    size_t len = strlen(name);
    if (len >= UINT32_MAX || p->nnames >= UINT32_MAX - 2) return UINT32_MAX;
    if (!rbp_table_grow(&p->name_table, &p->name_table_cap, p->nnames, rbp_name_rehash, p))
        return UINT32_MAX;
    uint64_t h = rbp_hash_bytes(name, len);
    size_t mask = p->name_table_cap - 1, j = h & mask;
    for (uint32_t v; (v = p->name_table[j]) != 0; j = (j + 1) & mask) {
        uint32_t id = v - 1;
        if (p->name_lens[id] == len && memcmp(p->names[id], name, len) == 0) return id;
    }
    if (p->nnames == p->names_cap) {
        uint32_t ncap = p->names_cap ? p->names_cap * 2 : 256;
        char **nn = realloc(p->names, ncap * sizeof *nn);
        if (!nn) return UINT32_MAX;
        p->names = nn;
        uint32_t *nl = realloc(p->name_lens, ncap * sizeof *nl);
        if (!nl) return UINT32_MAX;
        p->name_lens = nl;
        p->names_cap = ncap;
    }
    char *copy = rbp_arena_strdup(&p->arena, name);
    if (!copy) return UINT32_MAX;
    uint32_t id = p->nnames++;
    p->names[id] = copy;
    p->name_lens[id] = (uint32_t)len;
    p->name_table[j] = id + 1;
    return id;
}

/* Returns the child of parent for frame, adding it if new; RBP_NO_NODE when
 * out of memory. */
static uint32_t rbp_child(rbpeek_profile *p, uint32_t parent, uint32_t frame)
{
    if (!rbp_table_grow(&p->child_table, &p->child_table_cap, p->nnodes, rbp_child_rehash, p))
        return RBP_NO_NODE;
    size_t mask = p->child_table_cap - 1, j = rbp_child_key(parent, frame) & mask;
    for (uint32_t v; (v = p->child_table[j]) != 0; j = (j + 1) & mask) {
        const rbp_pnode *n = &p->nodes[v - 1];
        if (n->parent == parent && n->frame == frame) return v - 1;
    }
    if (p->nnodes >= UINT32_MAX - 2) return RBP_NO_NODE;
    if (p->nnodes == p->nodes_cap) {
        uint32_t ncap = p->nodes_cap > UINT32_MAX / 2 ? UINT32_MAX - 1 : p->nodes_cap * 2;
        rbp_pnode *nn = realloc(p->nodes, (size_t)ncap * sizeof *nn);
        if (!nn) return RBP_NO_NODE;
        p->nodes = nn;
        p->nodes_cap = ncap;
    }
    uint32_t id = p->nnodes++;
    rbp_pnode *par = &p->nodes[parent];
    p->nodes[id] = (rbp_pnode){.parent = parent, .frame = frame,
                               .first_child = RBP_NO_NODE, .next_sibling = par->first_child,
                               .depth = par->depth + 1};
    par->first_child = id;
    if (p->nodes[id].depth > p->max_depth) p->max_depth = p->nodes[id].depth;
    p->child_table[j] = id + 1;
    return id;
}

rbpeek_status rbpeek_profile_add_stack(rbpeek_profile *p, const char *const *frames,
                                       size_t nframes, uint64_t count)
{
    if (!p) return RBPEEK_ERR_ARG;
    if (!frames || nframes == 0)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: empty stack");
    if (nframes >= UINT32_MAX - 2)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: stack of %zu frames is too deep",
                                nframes);
    if (count == 0) return RBPEEK_OK;
    if (p->nodes[0].total + count < p->nodes[0].total)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: sample count overflows 64 bits");
    /* Find or build the path first; counts are only touched once it exists,
     * so a failure half-way leaves zero-count nodes, which writers skip. */
    uint32_t node = 0;
    for (size_t i = 0; i < nframes; i++) {
        if (!frames[i])
            return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_stack: frame %zu is NULL", i);
        uint32_t f = rbp_intern(p, frames[i]);
        if (f == UINT32_MAX)
            return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
        node = rbp_child(p, node, f);
        if (node == RBP_NO_NODE)
            return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_stack: out of memory");
    }
    if (p->nodes[node].self == 0) p->nstacks++;
    p->nodes[node].self += count;
    for (uint32_t n = node; n != RBP_NO_NODE; n = p->nodes[n].parent) p->nodes[n].total += count;
    return RBPEEK_OK;
}

/* ---------------------------------------------------------------------------
 * Meta.
 * ------------------------------------------------------------------------- */

rbpeek_status rbpeek_profile_set_meta(rbpeek_profile *p, const char *key, const char *value)
{
    if (!p) return RBPEEK_ERR_ARG;
    if (!key || !*key || !value)
        return rbp_profile_fail(p, RBPEEK_ERR_ARG, "set_meta: key and value are required");
    char *v = strdup(value);
    if (!v) return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "set_meta: out of memory");
    for (size_t i = 0; i < p->nmeta; i++) {
        if (strcmp(p->meta[i].key, key) == 0) {
            free(p->meta[i].value);
            p->meta[i].value = v;
            return RBPEEK_OK;
        }
    }
    char *k = strdup(key);
    rbp_meta *nm = k ? realloc(p->meta, (p->nmeta + 1) * sizeof *nm) : NULL;
    if (!nm) {
        free(k);
        free(v);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "set_meta: out of memory");
    }
    p->meta = nm;
    p->meta[p->nmeta++] = (rbp_meta){k, v};
    return RBPEEK_OK;
}

const char *rbpeek_profile_meta(const rbpeek_profile *p, const char *key)
{
    if (!p || !key) return NULL;
    for (size_t i = 0; i < p->nmeta; i++)
        if (strcmp(p->meta[i].key, key) == 0) return p->meta[i].value;
    return NULL;
}

/* ---------------------------------------------------------------------------
 * Sorted children and the generic walk.
 * ------------------------------------------------------------------------- */

typedef struct rbp_sort_item {
    const char *name;
    uint32_t id;
} rbp_sort_item;

static int rbp_sort_item_cmp(const void *a, const void *b)
{
    const rbp_sort_item *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    if (c) return c;
    return x->id < y->id ? -1 : x->id > y->id;
}

rbpeek_status rbp_children_build(const rbpeek_profile *p, rbp_children *out)
{
    out->off = calloc((size_t)p->nnodes + 1, sizeof *out->off);
    out->ids = malloc(((size_t)p->nnodes + 1) * sizeof *out->ids);
    uint32_t *fill = malloc(((size_t)p->nnodes + 1) * sizeof *fill);
    rbp_sort_item *tmp = NULL;
    if (!out->off || !out->ids || !fill) goto nomem;
    for (uint32_t n = 1; n < p->nnodes; n++) out->off[p->nodes[n].parent + 1]++;
    uint32_t widest = 0;
    for (uint32_t n = 0; n < p->nnodes; n++) {
        uint32_t c = out->off[n + 1];
        if (c > widest) widest = c;
        out->off[n + 1] += out->off[n];
    }
    memcpy(fill, out->off, (size_t)p->nnodes * sizeof *fill);
    for (uint32_t n = 1; n < p->nnodes; n++) out->ids[fill[p->nodes[n].parent]++] = n;
    free(fill);
    fill = NULL;
    tmp = malloc(((size_t)widest + 1) * sizeof *tmp);
    if (!tmp) goto nomem;
    for (uint32_t n = 0; n < p->nnodes; n++) {
        uint32_t a = out->off[n], b = out->off[n + 1];
        if (b - a < 2) continue;
        for (uint32_t i = a; i < b; i++)
            tmp[i - a] = (rbp_sort_item){p->names[p->nodes[out->ids[i]].frame], out->ids[i]};
        qsort(tmp, b - a, sizeof *tmp, rbp_sort_item_cmp);
        for (uint32_t i = a; i < b; i++) out->ids[i] = tmp[i - a].id;
    }
    free(tmp);
    return RBPEEK_OK;
nomem:
    free(fill);
    free(tmp);
    rbp_children_free(out);
    return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory sorting the profile");
}

void rbp_children_free(rbp_children *c)
{
    free(c->off);
    free(c->ids);
    c->off = c->ids = NULL;
}

rbpeek_status rbp_profile_walk(const rbpeek_profile *p, const rbp_children *ch,
                               rbp_visit_fn visit, void *ctx)
{
    /* One slot per level: the node and the index of its next child to
     * visit. Depth is bounded by max_depth, which the trie tracks. */
    size_t cap = (size_t)p->max_depth + 2;
    uint32_t *stk_node = malloc(cap * sizeof *stk_node);
    uint32_t *stk_next = malloc(cap * sizeof *stk_next);
    if (!stk_node || !stk_next) {
        free(stk_node);
        free(stk_next);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory walking the profile");
    }
    rbpeek_status st = RBPEEK_OK;
    size_t sp = 0;
    int r = visit(ctx, 0, true);
    if (r < 0) goto aborted;
    stk_node[0] = 0;
    stk_next[0] = r == 0 ? ch->off[0] : ch->off[1];
    sp = 1;
    while (sp > 0) {
        uint32_t n = stk_node[sp - 1];
        if (stk_next[sp - 1] >= ch->off[n + 1]) {
            if (visit(ctx, n, false) < 0) goto aborted;
            sp--;
            continue;
        }
        uint32_t c = ch->ids[stk_next[sp - 1]++];
        if (p->nodes[c].total == 0) continue;   /* left by a failed add */
        r = visit(ctx, c, true);
        if (r < 0) goto aborted;
        if (sp >= cap) {   /* cannot happen: depth <= max_depth */
            st = rbp_profile_fail(p, RBPEEK_ERR_CORRUPT, "profile deeper than recorded");
            goto out;
        }
        stk_node[sp] = c;
        stk_next[sp] = r == 0 ? ch->off[c] : ch->off[c + 1];
        sp++;
    }
    goto out;
aborted:
    st = RBPEEK_ERR_IO;   /* visitors abort only on write errors; they set the message */
out:
    free(stk_node);
    free(stk_next);
    return st;
}

/* ---------------------------------------------------------------------------
 * Output files.
 * ------------------------------------------------------------------------- */

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

/* ---------------------------------------------------------------------------
 * Folded stacks.
 * ------------------------------------------------------------------------- */

typedef struct rbp_folded_ctx {
    const rbpeek_profile *p;
    FILE *f;
    char *path;             /* the current stack, sanitised, ';'-joined */
    size_t cap;
    size_t *plen;           /* length of path at each depth */
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
        if (lineno == 1 && len >= 3 && memcmp(s, "\xEF\xBB\xBF", 3) == 0) {
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
            if (!sep) reason = "no sample count (expected \"frame;frame;... COUNT\")";
            else if (sep == s) reason = "empty stack";
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

/* ---------------------------------------------------------------------------
 * speedscope JSON.
 * ------------------------------------------------------------------------- */

/* Writes s[0..len) as a JSON string: quotes, backslashes and control
 * characters escaped (controls as \u00XX), invalid UTF-8 as U+FFFD. */
static void rbp_json_string(FILE *f, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    putc('"', f);
    for (size_t i = 0; i < len;) {
        unsigned char c = u[i];
        size_t n = 1;
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
        } else if (c < 0x20) {
            fprintf(f, "\\u%04x", c);
        } else if ((n = rbp_utf8_seq_len(u + i, len - i)) == 0) {
            fputs("\\ufffd", f);   /* JSON must stay valid UTF-8 */
            n = 1;
        } else {
            fwrite(u + i, 1, n, f);
        }
        i += n;
    }
    putc('"', f);
}

/* Splits "label (path:line)" into its parts. Returns false when name does
 * not have that shape. The label is the text before the last " (" that
 * precedes the ":line)" suffix, so labels like "block (2 levels) in foo"
 * keep their own parentheses. */
static bool rbp_split_frame(const char *name, size_t len, size_t *label_len, size_t *file_off,
                            size_t *file_len, long *line)
{
    if (len < 6 || name[len - 1] != ')') return false;
    size_t i = len - 1, digits_end = i;
    while (i > 0 && name[i - 1] >= '0' && name[i - 1] <= '9') i--;
    if (i == digits_end || digits_end - i > 9 || i == 0 || name[i - 1] != ':') return false;
    size_t colon = i - 1;
    long v = 0;
    for (size_t k = i; k < digits_end; k++) v = v * 10 + (name[k] - '0');
    for (size_t k = colon; k >= 2; k--) {
        if (name[k - 2] == ' ' && name[k - 1] == '(') {
            *label_len = k - 2;
            *file_off = k;
            *file_len = colon - k;
            *line = v;
            return *file_len > 0;
        }
    }
    return false;
}

typedef struct rbp_ss_ctx {
    const rbpeek_profile *p;
    FILE *f;
    uint32_t *path;         /* frame ids root-first, indexed by depth - 1 */
    bool first;
    int pass;               /* 0: samples, 1: weights */
} rbp_ss_ctx;

static int rbp_ss_visit(void *vctx, uint32_t node, bool entering)
{
    rbp_ss_ctx *c = vctx;
    if (!entering || node == 0) return 0;
    const rbp_pnode *n = &c->p->nodes[node];
    c->path[n->depth - 1] = n->frame;
    if (n->self == 0) return 0;
    if (!c->first) putc(',', c->f);
    c->first = false;
    if (c->pass == 1) {
        fprintf(c->f, "%llu", (unsigned long long)n->self);
        return 0;
    }
    putc('[', c->f);
    for (uint32_t d = 0; d < n->depth; d++) fprintf(c->f, d ? ",%u" : "%u", c->path[d]);
    if (putc(']', c->f) == EOF) {
        rbp_profile_fail(c->p, RBPEEK_ERR_IO, "error writing speedscope JSON: %s",
                         strerror(errno));
        return -1;
    }
    return 0;
}

rbpeek_status rbpeek_profile_write_speedscope(const rbpeek_profile *p, const char *path)
{
    if (!p) return RBPEEK_ERR_ARG;
    rbp_profile_clear_error(p);
    rbp_children ch;
    rbpeek_status st = rbp_children_build(p, &ch);
    if (st != RBPEEK_OK) return st;
    rbp_ss_ctx c = {.p = p, .first = true};
    c.path = malloc(((size_t)p->max_depth + 1) * sizeof *c.path);
    if (!c.path) {
        rbp_children_free(&ch);
        return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory writing speedscope JSON");
    }
    c.f = rbp_profile_open_out(p, path, &st);
    if (!c.f) goto out;
    FILE *f = c.f;
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n", f);
    fputs("\"shared\":{\"frames\":[\n", f);
    for (uint32_t i = 0; i < p->nnames; i++) {
        size_t label_len, file_off, file_len;
        long line;
        const char *name = p->names[i];
        size_t len = p->name_lens[i];
        fputs(i ? ",\n{\"name\":" : "{\"name\":", f);
        if (rbp_split_frame(name, len, &label_len, &file_off, &file_len, &line)) {
            rbp_json_string(f, name, label_len);
            fputs(",\"file\":", f);
            rbp_json_string(f, name + file_off, file_len);
            fprintf(f, ",\"line\":%ld}", line);
        } else {
            rbp_json_string(f, name, len);
            putc('}', f);
        }
    }
    fputs("]},\n\"profiles\":[{\"type\":\"sampled\",\"name\":", f);
    const char *title = rbpeek_profile_meta(p, "title");
    char fallback[128];
    if (!title) {
        const char *pid = rbpeek_profile_meta(p, "pid");
        snprintf(fallback, sizeof fallback, "rbpeek sample%s%.40s", pid ? " pid " : "",
                 pid ? pid : "");
        title = fallback;
    }
    rbp_json_string(f, title, strlen(title));
    fprintf(f, ",\"unit\":\"none\",\"startValue\":0,\"endValue\":%llu,\n\"samples\":[",
            (unsigned long long)p->nodes[0].total);
    st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
    if (st == RBPEEK_OK) {
        fputs("],\n\"weights\":[", f);
        c.pass = 1;
        c.first = true;
        st = rbp_profile_walk(p, &ch, rbp_ss_visit, &c);
    }
    if (st == RBPEEK_OK) {
        fputs("]}],\n\"name\":", f);
        rbp_json_string(f, title, strlen(title));
        fputs(",\"activeProfileIndex\":0,\"exporter\":\"rbpeek\"}\n", f);
    }
    st = rbp_profile_close_out(p, f, path, st);
out:
    free(c.path);
    rbp_children_free(&ch);
    return st;
}

/* ---------------------------------------------------------------------------
 * The top-N table.
 * ------------------------------------------------------------------------- */

typedef struct rbp_top_item {
    const char *name;
    uint64_t value;
} rbp_top_item;

static int rbp_top_cmp(const void *a, const void *b)
{
    const rbp_top_item *x = a, *y = b;
    if (x->value != y->value) return x->value > y->value ? -1 : 1;
    return strcmp(x->name, y->name);
}

rbpeek_status rbpeek_profile_top(const rbpeek_profile *p, int by_self, size_t n, char **out)
{
    if (!p || !out) return RBPEEK_ERR_ARG;
    *out = NULL;
    rbp_profile_clear_error(p);
    uint64_t *val = calloc((size_t)p->nnames + 1, sizeof *val);
    uint32_t *onstack = calloc((size_t)p->nnames + 1, sizeof *onstack);
    rbp_top_item *items = malloc(((size_t)p->nnames + 1) * sizeof *items);
    if (!val || !onstack || !items) goto nomem;

    if (by_self) {
        for (uint32_t i = 1; i < p->nnodes; i++) val[p->nodes[i].frame] += p->nodes[i].self;
    } else {
        /* A frame's total is the sum of the inclusive counts of its
         * outermost occurrences on each path, so a recursive frame counts
         * each stack once. Walk the trie by its links, keeping per-frame
         * "how many times on the current path" counters. */
        uint32_t cur = p->nodes[0].first_child;
        while (cur != RBP_NO_NODE) {
            const rbp_pnode *nd = &p->nodes[cur];
            if (onstack[nd->frame]++ == 0) val[nd->frame] += nd->total;
            if (nd->first_child != RBP_NO_NODE) {
                cur = nd->first_child;
                continue;
            }
            while (cur != RBP_NO_NODE) {
                onstack[p->nodes[cur].frame]--;
                if (p->nodes[cur].next_sibling != RBP_NO_NODE) {
                    cur = p->nodes[cur].next_sibling;
                    break;
                }
                cur = p->nodes[cur].parent;
                if (cur == 0) cur = RBP_NO_NODE;
            }
        }
    }
    size_t m = 0;
    for (uint32_t i = 0; i < p->nnames; i++)
        if (val[i] > 0) items[m++] = (rbp_top_item){p->names[i], val[i]};
    qsort(items, m, sizeof *items, rbp_top_cmp);
    if (n == 0 || n > m) n = m;

    rbp_strbuf b;
    rbp_sb_init(&b);
    uint64_t total = p->nodes[0].total;
    rbp_sb_printf(&b, "Top %zu frame%s by %s samples (%llu sample%s in all)\n", n,
                  n == 1 ? "" : "s", by_self ? "self" : "total", (unsigned long long)total,
                  total == 1 ? "" : "s");
    rbp_sb_printf(&b, "%10s %8s  %s\n", "samples", "%", "frame");
    for (size_t i = 0; i < n; i++) {
        char pct[32];
        rbp_fmt_fixed(pct, sizeof pct, total ? 100.0 * (double)items[i].value / (double)total : 0,
                      2);
        rbp_sb_printf(&b, "%10llu %7s%%  ", (unsigned long long)items[i].value, pct);
        /* One row per frame, whatever the name holds: control characters
         * (a newline in a label) would break the table, so they show as '?'. */
        for (const char *c = items[i].name; *c; c++)
            rbp_sb_putn(&b, (unsigned char)*c < 0x20 ? "?" : c, 1);
        rbp_sb_putn(&b, "\n", 1);
    }
    free(val);
    free(onstack);
    free(items);
    *out = rbp_sb_take(&b);
    if (*out) return RBPEEK_OK;
    return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory building the top-N table");
nomem:
    free(val);
    free(onstack);
    free(items);
    return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory building the top-N table");
}
