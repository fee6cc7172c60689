/*
 * Open-addressing (linear probing) map; see addrmap.h for its role.
 */
#include "base/addrmap.h"

#include <stdlib.h>
#include <string.h>

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)((key * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (cap - 1);
}

void rbp_addrmap_init(rbp_addrmap *m, size_t max_entries, void (*free_val)(void *))
{
    *m = (rbp_addrmap){.max_entries = max_entries ? max_entries : ((size_t)1 << 20), .free_val = free_val};
}

/* len counts the keys held (none is ever removed), so an empty map has
 * nothing to clear, and only values to free need a look at every slot: a
 * heap or an ID cache that is opened and closed for each command holds a
 * few keys in hundreds of slots. */
void rbp_addrmap_clear(rbp_addrmap *m)
{
    if (!m->len) return;
    if (m->free_val)
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) m->free_val(m->vals[i]);
    memset(m->keys, 0, m->cap * sizeof *m->keys);
    memset(m->vals, 0, m->cap * sizeof *m->vals);
    m->len = 0;
}

void rbp_addrmap_destroy(rbp_addrmap *m)
{
    if (m->keys && m->free_val) rbp_addrmap_clear(m);
    free(m->keys);
    free(m->vals);
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->len = 0;
}

void *rbp_addrmap_get(const rbp_addrmap *m, uint64_t key)
{
    if (!m->cap || !key) return NULL;
    for (size_t i = slot_of(key, m->cap);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key) return m->vals[i];
        if (!m->keys[i]) return NULL;
    }
}

static bool grow(rbp_addrmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 256;
    uint64_t *nk = calloc(ncap, sizeof *nk);
    void **nv = calloc(ncap, sizeof *nv);
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return false;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = slot_of(m->keys[i], ncap);
        while (nk[j]) j = (j + 1) & (ncap - 1);
        nk[j] = m->keys[i];
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    return true;
}

bool rbp_addrmap_put(rbp_addrmap *m, uint64_t key, void *val)
{
    if (!key) {
        if (m->free_val) m->free_val(val);
        return false;
    }
    if (m->len >= m->max_entries) rbp_addrmap_clear(m);
    if ((m->len + 1) * 2 > m->cap && !grow(m)) {
        if (m->free_val) m->free_val(val);
        return false;
    }
    size_t i = slot_of(key, m->cap);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & (m->cap - 1);
    if (m->keys[i]) {
        if (m->free_val && m->vals[i] != val) m->free_val(m->vals[i]);
    } else {
        m->len++;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    return true;
}
