/*
 * Threads' unwound machine frames kept from one sample to the next. A
 * sampler at 100 Hz finds most threads of a program that shares the GVL
 * parked in the kernel, waiting for it, exactly where the last sample found
 * them: they did not run in between, so their registers and stack are what
 * was unwound then. The source of the registers (profile/trace_native.c)
 * proves it with a stamp: the thread's count of runs on a CPU and its time
 * there, which move whenever it is scheduled. An entry stands while the
 * stamp and the unwinder's generation (its module list and JIT regions,
 * which own the frames' strings) are those it was kept with; a stamp that
 * moved drops it. What the cache holds is bounded: at most
 * RBP_FRAME_CACHE_THREADS threads of at most RBP_FRAME_CACHE_FRAMES frames
 * each; a thread neither found nor kept during a sample (it exited, ran
 * holding the GVL, was stopped) is dropped when the sample ends.
 */
#include "native/native.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    int64_t key;                /* 0: free */
    uint64_t stamp[2];
    uint64_t gen;
    bool touched;               /* found or kept since the last sweep */
    size_t n;
    rbpeek_native_frame *frames;
    rbp_native_extra *extra;
} entry;

struct rbp_frame_cache {
    entry slots[RBP_FRAME_CACHE_THREADS];
    size_t used;
    uint64_t hits;
};

rbp_frame_cache *rbp_frame_cache_new(void) { return calloc(1, sizeof(rbp_frame_cache)); }

static void drop(rbp_frame_cache *c, entry *e)
{
    free(e->frames);
    free(e->extra);
    *e = (entry){0};
    c->used--;
}

void rbp_frame_cache_free(rbp_frame_cache *c)
{
    if (!c) return;
    for (size_t i = 0; i < RBP_FRAME_CACHE_THREADS; i++)
        if (c->slots[i].key) drop(c, &c->slots[i]);
    free(c);
}

static entry *find(rbp_frame_cache *c, int64_t key)
{
    for (size_t i = 0; key && i < RBP_FRAME_CACHE_THREADS; i++)
        if (c->slots[i].key == key) return &c->slots[i];
    return NULL;
}

bool rbp_frame_cache_get(rbp_frame_cache *c, uint64_t gen, int64_t key, const uint64_t stamp[2],
                         const rbpeek_native_frame **frames, const rbp_native_extra **extra, size_t *n)
{
    entry *e = c ? find(c, key) : NULL;
    if (!e) return false;
    if (e->gen != gen || e->stamp[0] != stamp[0] || e->stamp[1] != stamp[1]) {
        drop(c, e); /* it ran, or the frames' strings are gone */
        return false;
    }
    e->touched = true;
    c->hits++;
    *frames = e->frames;
    *extra = e->extra;
    *n = e->n;
    return true;
}

bool rbp_frame_cache_put(rbp_frame_cache *c, uint64_t gen, int64_t key, const uint64_t stamp[2],
                         const rbpeek_native_frame *frames, const rbp_native_extra *extra, size_t n)
{
    if (!c || !key) return false;
    entry *e = find(c, key);
    if (e) drop(c, e);
    if (!n || n > RBP_FRAME_CACHE_FRAMES) return false;
    if (c->used == RBP_FRAME_CACHE_THREADS) return false; /* full: unwound at every sample, as without */
    e = NULL;
    for (size_t i = 0; !e && i < RBP_FRAME_CACHE_THREADS; i++)
        if (!c->slots[i].key) e = &c->slots[i];
    rbpeek_native_frame *f = malloc(n * sizeof *f);
    rbp_native_extra *x = malloc(n * sizeof *x);
    if (!e || !f || !x) {
        free(f);
        free(x);
        return false;
    }
    memcpy(f, frames, n * sizeof *f);
    memcpy(x, extra, n * sizeof *x);
    *e = (entry){.key = key, .stamp = {stamp[0], stamp[1]}, .gen = gen, .touched = true, .n = n, .frames = f,
                 .extra = x};
    c->used++;
    return true;
}

void rbp_frame_cache_sweep(rbp_frame_cache *c)
{
    for (size_t i = 0; c && i < RBP_FRAME_CACHE_THREADS; i++) {
        entry *e = &c->slots[i];
        if (e->key && !e->touched) drop(c, e);
        else e->touched = false;
    }
}

uint64_t rbp_frame_cache_hits(const rbp_frame_cache *c) { return c ? c->hits : 0; }

size_t rbp_frame_cache_count(const rbp_frame_cache *c) { return c ? c->used : 0; }
