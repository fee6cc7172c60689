/*
 * A bump allocator for objects that die together (a snapshot's frames and
 * strings): one free releases everything, and copying strings into it keeps
 * a snapshot independent of the session's caches.
 */
#ifndef RBP_ARENA_H
#define RBP_ARENA_H

#include <stddef.h>

typedef struct rbp_arena_chunk rbp_arena_chunk;
typedef struct rbp_arena {
    rbp_arena_chunk *head;
} rbp_arena;

void *rbp_arena_alloc(rbp_arena *a, size_t size);  /* 8-byte aligned, zeroed */
char *rbp_arena_strdup(rbp_arena *a, const char *s);
void rbp_arena_free(rbp_arena *a);

#endif
