/*
 * The string table of strtab.h: the strings in an array by id, and an
 * open-addressing index of them by hash (profile/table.h's hash).
 */
#include "output/strtab.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "profile/table.h"

/* The slot that holds s[0..len), or the empty slot where it would go. */
static size_t find(const rbp_strtab *t, const char *s, size_t len, uint64_t h)
{
    size_t mask = t->nslots - 1, i = h & mask;
    for (uint32_t v; (v = t->slots[i]) != 0; i = (i + 1) & mask) {
        const char *e = t->strs[v - 1];
        if (strncmp(e, s, len) == 0 && e[len] == '\0') return i;
    }
    return i;
}

/* Room for one more string, in both the array and the index. */
static bool grow(rbp_strtab *t)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 64;
        char **ns = realloc(t->strs, cap * sizeof *ns);
        if (!ns) return false;
        t->strs = ns;
        t->cap = cap;
    }
    if ((t->n + 1) * 2 <= t->nslots) return true;
    size_t nslots = t->nslots ? t->nslots * 2 : 128;
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots) return false;
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    for (size_t id = 0; id < t->n; id++) {
        const char *e = t->strs[id];
        size_t len = strlen(e);
        t->slots[find(t, e, len, rbp_hash_bytes(e, len))] = (uint32_t)id + 1;
    }
    return true;
}

int64_t rbp_strtab_add(rbp_strtab *t, const char *s, size_t len)
{
    uint64_t h = rbp_hash_bytes(s, len);
    if (t->nslots) {
        size_t i = find(t, s, len, h);
        if (t->slots[i]) return (int64_t)t->slots[i] - 1;
    }
    if (t->n >= UINT32_MAX - 1 || !grow(t)) return -1;
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    t->strs[t->n] = copy;
    t->slots[find(t, s, len, h)] = (uint32_t)t->n + 1;
    return (int64_t)t->n++;
}

void rbp_strtab_free(rbp_strtab *t)
{
    for (size_t i = 0; i < t->n; i++) free(t->strs[i]);
    free(t->strs);
    free(t->slots);
    *t = (rbp_strtab){0};
}
