/*
 * The open-addressing tables of a profile (frame names in intern.c, a
 * node's children in tree.c): slots hold an id + 1 (0 = empty), the load
 * stays at or under a half, and growing reinserts every entry through a
 * rehash callback. Inline, as they were when both lived in one file: the
 * sampler adds every stack through them.
 */
#ifndef RBP_PROFILE_TABLE_H
#define RBP_PROFILE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "profile/profile.h"

static inline uint64_t rbp_hash_bytes(const char *s, size_t len)
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

static inline uint64_t rbp_hash_u64(uint64_t x)
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebULL;
    x ^= x >> 31;
    return x;
}

/* Grows an open-addressing table of uint32 slots (value + 1, 0 = empty) and
 * reinserts every entry using rehash(), which returns the hash of an entry. */
static inline bool rbp_table_grow(uint32_t **table, size_t *cap, size_t count,
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

#endif
