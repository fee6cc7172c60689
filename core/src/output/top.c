/*
 * The top-N table of a profile: frames ranked by self or by total samples
 * (a recursive frame counted once per stack), as a text table with
 * percentages.
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
