/*
 * Bump allocator (see arena.h). Chunks grow geometrically so a deep stack
 * costs a handful of mallocs, not one per frame.
 */
#include "base/arena.h"

#include <stdlib.h>
#include <string.h>

struct rbp_arena_chunk {
    rbp_arena_chunk *next;
    size_t used, cap;
    unsigned char data[];
};

void *rbp_arena_alloc(rbp_arena *a, size_t size)
{
    size = (size + 7) & ~(size_t)7;
    rbp_arena_chunk *c = a->head;
    if (!c || c->cap - c->used < size) {
        size_t cap = c ? c->cap * 2 : 16384;
        if (cap > (size_t)1 << 24) cap = (size_t)1 << 24;
        if (cap < size) cap = size;
        rbp_arena_chunk *n = malloc(sizeof *n + cap);
        if (!n) return NULL;
        n->next = c;
        n->used = 0;
        n->cap = cap;
        a->head = c = n;
    }
    void *p = c->data + c->used;
    c->used += size;
    memset(p, 0, size);
    return p;
}

char *rbp_arena_strdup(rbp_arena *a, const char *s)
{
    if (!s) return NULL;
    size_t n = strlen(s) + 1;
    char *p = rbp_arena_alloc(a, n);
    if (p) memcpy(p, s, n);
    return p;
}

void rbp_arena_free(rbp_arena *a)
{
    rbp_arena_chunk *c = a->head;
    while (c) {
        rbp_arena_chunk *n = c->next;
        free(c);
        c = n;
    }
    a->head = NULL;
}
