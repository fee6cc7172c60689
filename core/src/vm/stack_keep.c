/*
 * Ruby stacks kept from one sample to the next. A sampler at 100 Hz finds
 * most threads of a program that shares the GVL asleep in the kernel,
 * waiting for it, where the last sample found them: a thread that has not
 * run has not changed its stack, and walking it again reads the same
 * frames at the cost of their pages, their direct re-read (snapshot.c)
 * and their decoding, sample after sample.
 *
 * The caller (the tracer: profile/trace_keep.c) proves that a thread has
 * not run with a stamp, its count of runs on a CPU and its time there
 * (/proc/.../schedstat), read before anything of the thread is. A stamp
 * proves nothing of a thread on a CPU (the kernel brings its time up to
 * date only at a tick or when it is switched out), so a stamp counts once
 * the thread has been seen asleep in the kernel after it was read: from
 * then on, until the stamp moves, the thread has not been on a CPU.
 *
 * A stack is kept from the walk of the second sample under one stamp, not
 * the first: the first sample's pages may have been fetched (the
 * sampler's prefetch, before the stamp) while the thread still ran, and
 * the direct re-read that checks a walk does not cover the innermost
 * frame's line. The second sample's pages were all fetched after the
 * first stamp, while the thread did not run. So a thread is walked twice
 * after it runs, and not again until it runs.
 *
 * Entries are keyed by the thread's rb_thread_t and kernel TID and hold
 * its execution context too (a fiber switch changes it, but only by
 * running). Bounded: at most RBP_STACK_KEEP_THREADS threads of at most
 * RBP_STACK_KEEP_FRAMES frames each (a deeper stack is walked every time);
 * a thread not looked up during a sample (it exited, or holds the GVL) is
 * dropped when the sample ends.
 */
#include "vm/stack_keep.h"

#include <stdlib.h>
#include <string.h>

typedef struct entry {
    uint64_t th;                /* 0: free */
    int64_t tid;
    uint64_t ec;
    uint64_t stamp[2];
    bool asleep;                /* seen asleep in the kernel after the stamp was read */
    bool touched;               /* looked up since the last sweep */
    bool kept;                  /* frames below hold a walk made under the stamp */
    rbp_arena arena;            /* the frames, their strings and origins */
    rbpeek_frame *frames;
    size_t nframes;
    uint32_t *origin;           /* NULL: none was asked for */
    int32_t saved_line;
    int32_t truncated;
} entry;

struct rbp_stack_keep {
    entry slots[RBP_STACK_KEEP_THREADS];
    size_t used;
    uint64_t hits;
};

rbp_stack_keep *rbp_stack_keep_new(void) { return calloc(1, sizeof(rbp_stack_keep)); }

static void forget_frames(entry *e)
{
    rbp_arena_free(&e->arena);
    e->frames = NULL;
    e->origin = NULL;
    e->nframes = 0;
    e->kept = false;
}

static void drop(rbp_stack_keep *k, entry *e)
{
    forget_frames(e);
    *e = (entry){0};
    k->used--;
}

void rbp_stack_keep_free(rbp_stack_keep *k)
{
    if (!k) return;
    for (size_t i = 0; i < RBP_STACK_KEEP_THREADS; i++)
        if (k->slots[i].th) drop(k, &k->slots[i]);
    free(k);
}

static entry *find(rbp_stack_keep *k, uint64_t th)
{
    for (size_t i = 0; th && i < RBP_STACK_KEEP_THREADS; i++)
        if (k->slots[i].th == th) return &k->slots[i];
    return NULL;
}

/* The frame f with its strings in a; false when memory ran out. */
static bool copy_frame(rbp_arena *a, rbpeek_frame *to, const rbpeek_frame *f)
{
    *to = *f;
    to->label = f->label ? rbp_arena_strdup(a, f->label) : NULL;
    to->path = f->path ? rbp_arena_strdup(a, f->path) : NULL;
    to->absolute_path = f->absolute_path ? rbp_arena_strdup(a, f->absolute_path) : NULL;
    return (!f->label || to->label) && (!f->path || to->path) && (!f->absolute_path || to->absolute_path);
}

/* n frames and their origins into a; false when memory ran out. */
static bool copy_stack(rbp_arena *a, const rbpeek_frame *from, const uint32_t *origin, size_t n,
                       rbpeek_frame **frames, uint32_t **origin_out)
{
    *frames = n ? rbp_arena_alloc(a, n * sizeof **frames) : NULL;
    if (n && !*frames) return false;
    for (size_t i = 0; i < n; i++)
        if (!copy_frame(a, &(*frames)[i], &from[i])) return false;
    if (!origin_out) return true;
    *origin_out = NULL;
    if (!origin || !n) return true;
    if (!(*origin_out = rbp_arena_alloc(a, n * sizeof **origin_out))) return false;
    memcpy(*origin_out, origin, n * sizeof **origin_out);
    return true;
}

rbp_keep_verdict rbp_stack_keep_get(rbp_stack_keep *k, uint64_t th, int64_t tid, uint64_t ec, const uint64_t st[2],
                                    rbp_arena *a, rbpeek_thread *out, uint32_t **origin, int32_t *saved_line)
{
    entry *e = k ? find(k, th) : NULL;
    if (!e) return RBP_KEEP_NEW;
    e->touched = true;
    if (e->tid != tid || e->ec != ec || e->stamp[0] != st[0] || e->stamp[1] != st[1] || !e->asleep) {
        forget_frames(e); /* it ran (or was not seen asleep): nothing stands until it is noted afresh */
        e->asleep = false;
        return RBP_KEEP_NEW;
    }
    if (!e->kept) return RBP_KEEP_WALK;
    /* The origins are asked for when the snapshot builds native stacks;
     * an entry kept without them cannot give them. */
    if (origin && e->nframes && !e->origin) return RBP_KEEP_WALK;
    rbpeek_frame *frames;
    uint32_t *orig = NULL;
    if (!copy_stack(a, e->frames, e->origin, e->nframes, &frames, origin ? &orig : NULL)) return RBP_KEEP_NEW;
    out->frames = frames;
    out->nframes = e->nframes;
    out->truncated = e->truncated;
    if (origin) *origin = orig;
    if (saved_line) *saved_line = e->saved_line;
    k->hits++;
    return RBP_KEEP_HIT;
}

void rbp_stack_keep_note(rbp_stack_keep *k, uint64_t th, int64_t tid, uint64_t ec, const uint64_t st[2],
                         bool asleep)
{
    if (!k || !th) return;
    entry *e = find(k, th);
    if (!e) {
        if (k->used == RBP_STACK_KEEP_THREADS) return; /* full: walked at every sample, as without */
        for (size_t i = 0; !e && i < RBP_STACK_KEEP_THREADS; i++)
            if (!k->slots[i].th) e = &k->slots[i];
        if (!e) return;
        k->used++;
    }
    forget_frames(e);
    *e = (entry){.th = th, .tid = tid, .ec = ec, .stamp = {st[0], st[1]}, .asleep = asleep, .touched = true};
}

void rbp_stack_keep_put(rbp_stack_keep *k, uint64_t th, const rbpeek_thread *t, const uint32_t *origin,
                        int32_t saved_line)
{
    entry *e = k ? find(k, th) : NULL;
    if (!e || !e->asleep) return;
    forget_frames(e);
    if (t->error || t->torn || t->nframes > RBP_STACK_KEEP_FRAMES) return;
    if (!copy_stack(&e->arena, t->frames, origin, t->nframes, &e->frames, &e->origin)) {
        forget_frames(e);
        return;
    }
    e->nframes = t->nframes;
    e->truncated = t->truncated;
    e->saved_line = saved_line;
    e->kept = true;
}

void rbp_stack_keep_sweep(rbp_stack_keep *k)
{
    for (size_t i = 0; k && i < RBP_STACK_KEEP_THREADS; i++) {
        entry *e = &k->slots[i];
        if (e->th && !e->touched) drop(k, e);
        else e->touched = false;
    }
}

uint64_t rbp_stack_keep_hits(const rbp_stack_keep *k) { return k ? k->hits : 0; }
