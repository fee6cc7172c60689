/*
 * The top-N table of a profile: frames ranked by self or by total samples
 * (a recursive frame counted once per stack), as a text table with
 * percentages; and the same counts as rows (rbpeek_profile_frame_counts),
 * by frame or by method, for rbpeek top, which adds them up across periods.
 */
#include "output/writer.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/strbuf.h"
#include "profile/profile.h"

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

/* Self and total samples of each group of frames (group[id] < ngroups;
 * NULL: each frame its own group) into self_[], total[] (ngroups entries,
 * zeroed). A group's total is the sum of the inclusive counts of its
 * outermost occurrences on each path, so a recursive frame counts each stack
 * once. The trie is walked by its links, keeping per-group "how many times
 * on the current path" counters. */
static bool count(const rbpeek_profile *p, const uint32_t *group, uint32_t ngroups, uint64_t *self_,
                  uint64_t *total)
{
    uint32_t *onstack = calloc((size_t)ngroups + 1, sizeof *onstack);
    if (!onstack) return false;
#define G(frame) (group ? group[frame] : (frame))
    for (uint32_t i = 1; i < p->nnodes; i++) self_[G(p->nodes[i].frame)] += p->nodes[i].self;
    uint32_t cur = p->nodes[0].first_child;
    while (cur != RBP_NO_NODE) {
        const rbp_pnode *nd = &p->nodes[cur];
        if (onstack[G(nd->frame)]++ == 0) total[G(nd->frame)] += nd->total;
        if (nd->first_child != RBP_NO_NODE) {
            cur = nd->first_child;
            continue;
        }
        while (cur != RBP_NO_NODE) {
            onstack[G(p->nodes[cur].frame)]--;
            if (p->nodes[cur].next_sibling != RBP_NO_NODE) {
                cur = p->nodes[cur].next_sibling;
                break;
            }
            cur = p->nodes[cur].parent;
            if (cur == 0) cur = RBP_NO_NODE;
        }
    }
#undef G
    free(onstack);
    return true;
}

/* The table of the n first of items (sorted), as text; NULL when out of
 * memory. */
static char *top_text(const rbpeek_profile *p, const rbp_top_item *items, size_t n, int by_self)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    uint64_t all = p->nodes[0].total;
    rbp_sb_printf(&b, "Top %zu frame%s by %s samples (%llu sample%s in all)\n", n,
                  n == 1 ? "" : "s", by_self ? "self" : "total", (unsigned long long)all,
                  all == 1 ? "" : "s");
    rbp_sb_printf(&b, "%10s %8s  %s\n", "samples", "%", "frame");
    for (size_t i = 0; i < n; i++) {
        char pct[32];
        rbp_fmt_fixed(pct, sizeof pct, all ? 100.0 * (double)items[i].value / (double)all : 0, 2);
        rbp_sb_printf(&b, "%10llu %7s%%  ", (unsigned long long)items[i].value, pct);
        /* One row per frame, whatever the name holds: control characters
         * (a newline in a label) would break the table, so they show as '?'. */
        for (const char *c = items[i].name; *c; c++)
            rbp_sb_putn(&b, (unsigned char)*c < 0x20 ? "?" : c, 1);
        rbp_sb_putn(&b, "\n", 1);
    }
    return rbp_sb_take(&b);
}

rbpeek_status rbpeek_profile_top(const rbpeek_profile *p, int by_self, size_t n, char **out)
{
    if (!p || !out) return RBPEEK_ERR_ARG;
    *out = NULL;
    rbp_profile_clear_error(p);
    uint64_t *self_ = calloc((size_t)p->nnames + 1, sizeof *self_);
    uint64_t *total = calloc((size_t)p->nnames + 1, sizeof *total);
    rbp_top_item *items = malloc(((size_t)p->nnames + 1) * sizeof *items);
    if (self_ && total && items && count(p, NULL, p->nnames, self_, total)) {
        const uint64_t *val = by_self ? self_ : total;
        size_t m = 0;
        for (uint32_t i = 0; i < p->nnames; i++)
            if (val[i] > 0) items[m++] = (rbp_top_item){p->names[i], val[i]};
        qsort(items, m, sizeof *items, rbp_top_cmp);
        *out = top_text(p, items, n == 0 || n > m ? m : n, by_self);
    }
    free(self_);
    free(total);
    free(items);
    if (*out) return RBPEEK_OK;
    return rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "out of memory building the top-N table");
}

/* Frame ids in order of their names (by method or whole), for grouping. */
typedef struct named_id {
    const char *name;
    uint32_t id;
} named_id;

static int named_id_cmp(const void *a, const void *b)
{
    const named_id *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->id > y->id) - (x->id < y->id);
}

rbpeek_status rbpeek_profile_frame_counts(const rbpeek_profile *p, int by_method, rbpeek_frame_count **rows,
                                          size_t *n)
{
    if (!p || !rows || !n) return RBPEEK_ERR_ARG;
    *rows = NULL;
    *n = 0;
    rbp_profile_clear_error(p);
    size_t nf = p->nnames, names_size = 0;
    named_id *order = malloc((nf + 1) * sizeof *order);
    uint32_t *group = malloc((nf + 1) * sizeof *group);
    const char **gname = malloc((nf + 1) * sizeof *gname);
    size_t *at = malloc((nf + 1) * sizeof *at);
    char *names = NULL;
    uint64_t *self_ = NULL, *total = NULL;
    rbpeek_frame_count *out = NULL;
    rbpeek_status st = RBPEEK_ERR_NOMEM;
    if (!order || !group || !gname || !at) goto done;
    /* Each frame's name, made once into one buffer (by method, the lines of
     * a method make the same name), then sorted: equal names are a group. */
    for (uint32_t i = 0; i < nf; i++) {
        at[i] = names_size;
        names_size += (by_method ? rbp_pframe_method_name(p, i, NULL) : p->name_lens[i]) + 1;
    }
    names = malloc(names_size + 1);
    if (!names) goto done;
    for (uint32_t i = 0; i < nf; i++) {
        if (by_method)
            rbp_pframe_method_name(p, i, names + at[i]);
        else
            memcpy(names + at[i], p->names[i], (size_t)p->name_lens[i] + 1);
        order[i] = (named_id){names + at[i], i};
    }
    qsort(order, nf, sizeof *order, named_id_cmp);
    uint32_t ngroups = 0;
    for (size_t i = 0; i < nf; i++) {
        if (i == 0 || strcmp(order[i].name, order[i - 1].name) != 0) gname[ngroups++] = order[i].name;
        group[order[i].id] = ngroups - 1;
    }
    self_ = calloc((size_t)ngroups + 1, sizeof *self_);
    total = calloc((size_t)ngroups + 1, sizeof *total);
    if (!self_ || !total || !count(p, group, ngroups, self_, total)) goto done;
    /* One block: the rows, then their names. */
    size_t m = 0, text = 0;
    for (uint32_t g = 0; g < ngroups; g++)
        if (total[g] || self_[g]) {
            m++;
            text += strlen(gname[g]) + 1;
        }
    out = malloc(m * sizeof *out + text + 1);
    if (!out) goto done;
    char *w = (char *)(out + m);
    size_t k = 0;
    for (uint32_t g = 0; g < ngroups; g++) {
        if (!total[g] && !self_[g]) continue;
        size_t len = strlen(gname[g]);
        memcpy(w, gname[g], len + 1);
        out[k++] = (rbpeek_frame_count){w, self_[g], total[g]};
        w += len + 1;
    }
    *rows = out;
    *n = m;
    st = RBPEEK_OK;
done:
    free(order);
    free(group);
    free(gname);
    free(at);
    free(names);
    free(self_);
    free(total);
    return st == RBPEEK_OK ? st : rbp_profile_fail(p, st, "out of memory counting the frames");
}
