/*
 * The stack interner: each distinct frame name is stored once, in the
 * profile's arena, and known by a 32-bit id from then on, so the prefix tree
 * compares and hashes integers, not strings. Lookup is one probe sequence
 * in an open-addressing table (table.h) keyed by the name's hash.
 */
#include "profile/profile.h"

#include <string.h>

#include "base/arena.h"
#include "profile/table.h"

static uint64_t rbp_name_rehash(const rbpeek_profile *p, uint32_t id)
{
    return rbp_hash_bytes(p->names[id], p->name_lens[id]);
}

/* Returns the id of name, adding it if new; UINT32_MAX when out of memory. */
uint32_t rbp_intern(rbpeek_profile *p, const char *name)
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
