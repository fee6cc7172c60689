/*
 * Reusable temporary buffers (see scratch.h).
 */
#include "base/scratch.h"

#include <stdlib.h>

#define SCRATCH_MIN 4096
#define SCRATCH_KEEP ((size_t)1 << 20)   /* a 10,000-frame stack's control frames fit */

void *rbp_scratch_get(rbp_scratch *sc, size_t size)
{
    if (size <= sc->cap) return sc->p;
    size_t cap = sc->cap ? sc->cap : SCRATCH_MIN;
    while (cap < size && cap <= ((size_t)-1) / 2) cap *= 2;
    if (cap < size) cap = size;
    /* The contents need not survive: no realloc's copy. */
    free(sc->p);
    sc->p = malloc(cap);
    sc->cap = sc->p ? cap : 0;
    return sc->p;
}

void *rbp_scratch_grow(rbp_scratch *sc, size_t size)
{
    if (size <= sc->cap) return sc->p;
    size_t cap = sc->cap ? sc->cap : SCRATCH_MIN;
    while (cap < size && cap <= ((size_t)-1) / 2) cap *= 2;
    if (cap < size) cap = size;
    void *p = realloc(sc->p, cap);
    if (!p) return NULL;
    sc->p = p;
    sc->cap = cap;
    return p;
}

void rbp_scratch_done(rbp_scratch *sc)
{
    if (sc->cap > SCRATCH_KEEP) rbp_scratch_free(sc);
}

void rbp_scratch_free(rbp_scratch *sc)
{
    free(sc->p);
    sc->p = NULL;
    sc->cap = 0;
}
