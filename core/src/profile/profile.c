/*
 * The profile object: creating and freeing it, its error message, its
 * totals and its meta data (key/value pairs such as the pid and the title
 * that writers show). Frames are kept in intern.c's table and stacks merged
 * into the prefix tree in tree.c; the writers and the folded reader are in
 * output/.
 */
#include "profile/profile.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#define RBP_PERR_CAP 512

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

void rbp_profile_clear_error(const rbpeek_profile *p)
{
    if (p && p->err) p->err[0] = '\0';
}

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
    /* The threads' tally (thread_state.c fills it) is the profile's memory */
    for (size_t i = 0; i < p->ntally; i++) free(p->tally[i].name);
    free(p->tally);
    free(p->err);
    free(p->frames);
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
