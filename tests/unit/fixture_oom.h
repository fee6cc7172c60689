/*
 * Allocation-failure injection for the unit tests, with no hook in the
 * core: a test executable linked with
 *   -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=strdup,--wrap=free
 * sends every allocation the core makes through these wrappers (the linker
 * rewrites the library's references; libc's and libdwarf's own allocations
 * are untouched). The wrappers
 *
 *  - fail the Nth allocation from now on (oom_fail_at), so a test can make
 *    each allocation of an operation fail in turn and drive every early
 *    return on an out-of-memory path;
 *  - keep the set of blocks they handed out and that are still live, so a
 *    test sees a leak as "more live blocks after the operation than before",
 *    in-process, without valgrind (which the memcheck tests add on top).
 *
 * A free of a block the wrappers did not hand out (getline's buffer, say)
 * goes to libc unrecorded. Include this header in exactly one file.
 */
#ifndef RBP_FIXTURE_OOM_H
#define RBP_FIXTURE_OOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static struct {
    uintptr_t *slots; /* open addressing; 0 empty, 1 deleted */
    size_t cap, live, used;
    long countdown;   /* allocations left before the failing one; <0: none fails */
    size_t allocs;    /* allocations seen (for sizing a test's loop) */
    bool failed;      /* the injected failure happened */
} g_oom = {.countdown = -1};

static size_t oom_hash(uintptr_t p) { return (size_t)((p >> 4) * 0x9E3779B97F4A7C15ull); }

static void oom_insert(uintptr_t p);

static void oom_grow(void)
{
    size_t old = g_oom.cap;
    uintptr_t *os = g_oom.slots;
    g_oom.cap = old ? old * 2 : 1 << 16;
    g_oom.slots = __real_calloc(g_oom.cap, sizeof *g_oom.slots);
    if (!g_oom.slots) abort();
    g_oom.live = g_oom.used = 0;
    for (size_t i = 0; i < old; i++)
        if (os[i] > 1) oom_insert(os[i]);
    __real_free(os);
}

static void oom_insert(uintptr_t p)
{
    if ((g_oom.used + 1) * 2 > g_oom.cap) oom_grow();
    size_t m = g_oom.cap - 1, i = oom_hash(p) & m;
    while (g_oom.slots[i] > 1) i = (i + 1) & m;
    if (g_oom.slots[i] == 0) g_oom.used++;
    g_oom.slots[i] = p;
    g_oom.live++;
}

/* Forgets p; false when the wrappers never handed it out. */
static bool oom_remove(uintptr_t p)
{
    if (!g_oom.cap) return false;
    size_t m = g_oom.cap - 1, i = oom_hash(p) & m;
    for (; g_oom.slots[i]; i = (i + 1) & m)
        if (g_oom.slots[i] == p) {
            g_oom.slots[i] = 1;
            g_oom.live--;
            return true;
        }
    return false;
}

/* Whether this allocation is the one that fails. */
static bool oom_now(void)
{
    g_oom.allocs++;
    if (g_oom.countdown < 0) return false;
    if (g_oom.countdown-- > 0) return false;
    g_oom.failed = true;
    return true;
}

void *__wrap_malloc(size_t n)
{
    if (oom_now()) return NULL;
    void *p = __real_malloc(n);
    if (p) oom_insert((uintptr_t)p);
    return p;
}

void *__wrap_calloc(size_t n, size_t m)
{
    if (oom_now()) return NULL;
    void *p = __real_calloc(n, m);
    if (p) oom_insert((uintptr_t)p);
    return p;
}

void *__wrap_realloc(void *old, size_t n)
{
    if (oom_now()) return NULL; /* realloc failing leaves the old block as it was */
    bool ours = old && oom_remove((uintptr_t)old);
    void *p = __real_realloc(old, n);
    if (p) oom_insert((uintptr_t)p);
    else if (ours) oom_insert((uintptr_t)old);
    return p;
}

char *__wrap_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = __wrap_malloc(n);
    if (p) memcpy(p, s, n);
    return p;
}

void __wrap_free(void *p)
{
    if (p) oom_remove((uintptr_t)p);
    __real_free(p);
}

/* Makes the allocation k allocations from now fail (0: the next one);
 * k < 0 lets every allocation succeed. */
static inline void oom_fail_at(long k)
{
    g_oom.countdown = k;
    g_oom.failed = false;
}

static inline size_t oom_live(void) { return g_oom.live; }
static inline size_t oom_allocs(void) { return g_oom.allocs; }
static inline bool oom_failed(void) { return g_oom.failed; }

#endif
