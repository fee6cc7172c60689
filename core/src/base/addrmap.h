/*
 * A small open-addressing hash map from 64-bit keys (target addresses, IDs)
 * to pointers, used by the symbol and label caches. Keys are never 0.
 * Growth doubles; a bounded map (max_entries) is simply cleared when full,
 * which keeps a long sampling session's memory flat.
 */
#ifndef RBP_ADDRMAP_H
#define RBP_ADDRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct rbp_addrmap {
    uint64_t *keys;
    void **vals;
    size_t cap, len, max_entries;
    void (*free_val)(void *);
} rbp_addrmap;

void rbp_addrmap_init(rbp_addrmap *m, size_t max_entries, void (*free_val)(void *));
void rbp_addrmap_clear(rbp_addrmap *m);
void rbp_addrmap_destroy(rbp_addrmap *m);
void *rbp_addrmap_get(const rbp_addrmap *m, uint64_t key);
/* Stores val under key (replacing and freeing an old value). false on OOM,
 * in which case val is freed. */
bool rbp_addrmap_put(rbp_addrmap *m, uint64_t key, void *val);

#endif
