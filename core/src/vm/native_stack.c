/*
 * A thread's native stack, as a snapshot gets it: its registers from the
 * session's source, the unwinder (native/), the merge with its Ruby frames
 * (native_merge.c), and the GC's frame on top when the GC runs on it.
 *
 * Registers need a thread that stays put while it is unwound:
 *  - a debugger's (rbpeek_session_use_registers): the debugger has every
 *    thread stopped while a command runs, live or core;
 *  - a core's NT_PRSTATUS notes (use_core), read on first use;
 *  - a live pid's: PTRACE_GETREGSET, which the kernel allows only for a
 *    thread in a ptrace stop of the calling thread: rbpeek_session_hold's,
 *    or the sampler's own tracer while it holds the thread.
 * A sampler's thread that has not run since its last unwind from a sleep
 * (the source's stamp says so) gets that unwind's frames again, from the
 * source's frame cache (native/frame_cache.c).
 */
#define _GNU_SOURCE
#include "vm/native_merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

rbpeek_status rbp_native_ready(rbpeek_session *s)
{
    char err[512];
    const rbp_regset *rs = rbp_regset_of(rbp_machine_of_target(s));
    if (s->native && rbp_native_regset(s->native) != rs) { /* made before the target's machine was known */
        rbp_native_free(s->native);
        s->native = NULL;
    }
    if (!s->native) {
        if (!(s->native = rbp_native_new(s->mem, rs, err, sizeof err)))
            return rbp_fail(s, RBPEEK_ERR_UNSUPPORTED, "%s", err);
        s->native_stale = true;
    }
    if (s->native_stale) {
        rbp_native_set_pid(s->native, s->pid);
        if (!rbp_native_set_regions(s->native, s->regions, s->nregions, err, sizeof err))
            return rbp_fail(s, RBPEEK_ERR_UNSUPPORTED, "native stacks: %s", err);
        s->native_stale = false;
        s->vm_exec_looked_up = false;
        rbp_native_jit_forget(s);
    }
    return RBPEEK_OK;
}

rbp_regmask rbp_native_thread_regs(rbpeek_session *s, int64_t tid, uint64_t regs[RBP_REGS_MAX], char *why,
                                   size_t whylen)
{
    why[0] = '\0';
    const rbp_regset *rs = rbp_native_regset(s->native);
    if (!rs) {
        snprintf(why, whylen, "rbpeek has no register set of the target's machine");
        return 0;
    }
    if (tid <= 0) {
        snprintf(why, whylen, "its kernel thread id is not known");
        return 0;
    }
    if (s->regs_fn) {
        rbp_regmask known = s->regs_fn(s->regs_ctx, tid, regs) & rbp_regset_all(rs);
        if (!known) snprintf(why, whylen, "the debugger gives no registers for thread %lld", (long long)tid);
        return known;
    }
    if (s->core_path) {
        if (!s->core_threads_read) {
            s->ncore_threads = rbp_source_core_threads(s->core_path, &s->core_threads);
            s->core_threads_read = true;
        }
        for (size_t i = 0; i < s->ncore_threads; i++)
            if (s->core_threads[i].tid == tid) {
                memcpy(regs, s->core_threads[i].regs, RBP_REGS_MAX * sizeof *regs);
                return s->core_threads[i].known & rbp_regset_all(rs);
            }
        snprintf(why, whylen, "the core records no registers for thread %lld", (long long)tid);
        return 0;
    }
    if (s->pid > 0) {
        if (s->hold && !rbp_hold_has(s->hold, (pid_t)tid)) {
            snprintf(why, whylen, "thread %lld did not stop in time", (long long)tid);
            return 0;
        }
        return rbp_native_regs_ptrace((pid_t)tid, rs, regs, why, whylen) ? rbp_regset_all(rs) : 0;
    }
    snprintf(why, whylen, "no registers: the session reads memory through a callback and was given no "
                          "register source");
    return 0;
}

/* Unwinds from regs into the session's scratch room (kept from walk to
 * walk: a sampler's unwinds allocate nothing). Returns the frames. */
static size_t unwind_scratch(rbpeek_session *s, const uint64_t *regs, rbp_regmask known, uint32_t flags,
                             rbpeek_native_frame **nf, rbp_native_extra **nx, char *why, size_t whylen)
{
    *nf = rbp_scratch_get(&s->native_frames, RBP_NATIVE_MAX_FRAMES * sizeof **nf);
    *nx = rbp_scratch_get(&s->native_extra, RBP_NATIVE_MAX_FRAMES * sizeof **nx);
    if (!*nf || !*nx) {
        snprintf(why, whylen, "out of memory");
        return 0;
    }
    return rbp_native_unwind(s->native, regs, known, RBP_NATIVE_MAX_FRAMES, flags & RBPEEK_NATIVE_LINES, *nf, *nx,
                             why, whylen);
}

static void scratch_done(rbpeek_session *s)
{
    rbp_scratch_done(&s->native_frames);
    rbp_scratch_done(&s->native_extra);
}

/* The frames unwound (nf, nx: n of them; none, with why, when known is 0)
 * into the arena, merged with t's frames into out, the GC's frame on top.
 * Strings are copied into the arena unless borrow (a sampler's snapshot,
 * freed before the unwinder's module list can change). */
static bool finish(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin, uint64_t ec,
                   const rbpeek_native_frame *nf, const rbp_native_extra *nx, size_t n, rbp_regmask known,
                   const char *why, bool borrow, rbpeek_native_stack *out)
{
    rbpeek_native_frame *frames = n ? rbp_arena_alloc(a, n * sizeof *frames) : NULL;
    rbp_native_extra *extra = n ? rbp_arena_alloc(a, n * sizeof *extra) : NULL;
    bool ok = !n || (frames && extra);
    for (size_t k = 0; ok && k < n; k++) {
        frames[k] = nf[k];
        extra[k] = nx[k];
        if (borrow) continue;
        /* one copy of each module's name per stack */
        if (k && nf[k].module == nf[k - 1].module) frames[k].module = frames[k - 1].module;
        else if (nf[k].module) {
            frames[k].module = NULL;
            for (size_t q = 0; q < k && !frames[k].module; q++)
                if (nf[q].module == nf[k].module) frames[k].module = frames[q].module;
            if (!frames[k].module) frames[k].module = rbp_arena_strdup(a, nf[k].module);
        }
        if (nf[k].symbol) frames[k].symbol = rbp_arena_strdup(a, nf[k].symbol);
        if (nf[k].file) frames[k].file = rbp_arena_strdup(a, nf[k].file);
        ok = (!nf[k].module || frames[k].module) && (!nf[k].symbol || frames[k].symbol) &&
             (!nf[k].file || frames[k].file);
    }
    if (!ok) return false;
    rbp_merge_input in = {.thread = t, .origin = origin, .ec = ec, .native = frames, .extra = extra, .nnative = n,
                          .cut = why};
    char cut[600];
    if (!known) {
        snprintf(cut, sizeof cut, "no machine frames: %s", why);
        in.cut = cut;
    }
    if (!rbp_native_merge(s, a, &in, out)) return false;
    if (t->gc != RBPEEK_GC_NONE) {
        /* The GC's frame on top: the merge left room for one. */
        rbpeek_stack_frame *f = (rbpeek_stack_frame *)out->frames;
        memmove(f + 1, f, out->nframes * sizeof *f);
        f[0] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_GC, .label = rbpeek_gc_phase_label(t->gc)};
        out->nframes++;
    }
    return true;
}

bool rbp_native_stack_build(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                            uint64_t ec, int64_t tid, uint32_t flags, rbpeek_native_stack *out)
{
    uint64_t regs[RBP_REGS_MAX] = {0};
    char why[512];
    rbpeek_native_frame *nf = NULL;
    rbp_native_extra *nx = NULL;
    size_t n = 0;
    rbp_regmask known = rbp_native_thread_regs(s, tid, regs, why, sizeof why);
    rbp_native_jit_find(s, ec);
    if (known) n = unwind_scratch(s, regs, known, flags, &nf, &nx, why, sizeof why);
    bool ok = finish(s, a, t, origin, ec, nf, nx, n, known, why, false, out);
    scratch_done(s);
    return ok;
}

/* A thread's frames from src's cache: when src stamps it and the stamp is
 * the one its frames were kept with (into *key, stamp: what a new unwind is
 * kept under). */
static bool cached(rbpeek_session *s, const rbp_native_source *src, const rbpeek_thread *t, bool held,
                   int64_t *key, uint64_t stamp[2], const rbpeek_native_frame **nf, const rbp_native_extra **nx,
                   size_t *n)
{
    *key = 0;
    if (held || !src->cache || !src->stamp || !src->stamp(src->ctx, t, key, stamp)) return false;
    return rbp_frame_cache_get(src->cache, rbp_native_generation(s->native), *key, stamp, nf, nx, n);
}

bool rbp_native_stack_sampled(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                              uint64_t ec, const rbp_native_source *src, bool held, rbpeek_native_stack *out)
{
    uint64_t regs[RBP_REGS_MAX], stamp[2];
    char why[512] = "";
    rbpeek_native_frame *nf = NULL;
    rbp_native_extra *nx = NULL;
    size_t n = 0;
    rbp_regmask known = 0;
    int64_t key;
    rbp_native_jit_find(s, ec); /* first: it may change the unwinder's generation */
    const rbpeek_native_frame *kf;
    const rbp_native_extra *kx;
    if (cached(s, src, t, held, &key, stamp, &kf, &kx, &n))
        return finish(s, a, t, origin, ec, kf, kx, n, rbp_regset_all(rbp_native_regset(s->native)), "", true, out);
    bool keep = false;
    for (int attempt = 0; attempt < 2; attempt++) {
        memset(regs, 0, sizeof regs);
        n = 0;
        known = src->begin(src->ctx, t, held, attempt, regs, why, sizeof why);
        bool peeked = known & RBP_NATIVE_PEEKED;
        known &= ~RBP_NATIVE_PEEKED;
        /* A sleeping thread's stack is read straight from the target: the
         * page cache may hold its pages as they were before it last ran
         * (prefetched when the sample began), and they would not match
         * the registers just read. */
        bool was = peeked && rbp_mem_set_direct(s->mem, true);
        if (known) n = unwind_scratch(s, regs, known, src->flags, &nf, &nx, why, sizeof why);
        if (peeked) rbp_mem_set_direct(s->mem, was);
        bool stood = src->end(src->ctx, t, held, attempt, known && why[0]);
        /* kept only when read from a sleep, whole, and the thread did not
         * run from its stamp to the unwind's end */
        keep = key && peeked && stood && known && !why[0];
        if (stood || !known) break;
        /* the thread ran while it was unwound: once more, stopped */
        snprintf(why, sizeof why, "the thread ran while its machine stack was read");
        known = 0;
        n = 0;
    }
    if (keep) rbp_frame_cache_put(src->cache, rbp_native_generation(s->native), key, stamp, nf, nx, n);
    bool ok = finish(s, a, t, origin, ec, nf, nx, n, known, why, true, out);
    scratch_done(s);
    return ok;
}

/* The most of a held thread's stack copied to be unwound after it runs
 * again. A Ruby thread's used machine stack is a few to some tens of KiB
 * (8 KiB for a Ruby loop on Debian's 3.1; a VM invocation's frames per
 * Ruby-to-C boundary). A deeper one is unwound while the thread is held, as
 * before: its copy would hold the thread for a good part of what the
 * unwind costs, and take that much memory at every sample. */
#define HELD_COPY_MAX ((size_t)512 << 10)
/* Below the stack pointer: the red zone a leaf function may use (x86-64
 * System V; aarch64 has none, and the few bytes more cost nothing), which
 * its CFI may read. */
#define RED_ZONE 128

/* The session's mapped region holding addr, or NULL. The regions come in
 * the order their source gave them (a debugger adds its own), so they are
 * scanned; a held sample does it once, for a few hundred regions. */
static const rbp_region *region_of(const rbpeek_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nregions; i++)
        if (s->regions[i].start <= addr && addr < s->regions[i].end) return &s->regions[i];
    return NULL;
}

/* Copies the used stack of a thread held stopped: from its stack pointer
 * (less the red zone) to its mapping's top. */
static bool copy_stack(rbpeek_session *s, rbp_native_held *h)
{
    const rbp_regset *rs = rbp_native_regset(s->native);
    if (!rs || !(h->known & ((rbp_regmask)1 << rs->sp))) return false;
    uint64_t sp = h->regs[rs->sp];
    const rbp_region *r = region_of(s, sp);
    if (!r) return false;
    uint64_t lo = sp - r->start >= RED_ZONE ? sp - RED_ZONE : r->start;
    if (r->end - lo > HELD_COPY_MAX) return false;
    uint8_t *copy = malloc((size_t)(r->end - lo));
    if (!copy) return false;
    /* straight from the target: a stack is read once, and would only push
     * the walk's pages out of the cache */
    bool was = rbp_mem_set_direct(s->mem, true);
    bool ok = rbp_mem_read(s->mem, lo, copy, (size_t)(r->end - lo));
    rbp_mem_set_direct(s->mem, was);
    if (!ok) {
        free(copy);
        return false;
    }
    h->stack = copy;
    h->lo = lo;
    h->len = (size_t)(r->end - lo);
    return true;
}

/* The machine frames from h's registers (none, with why, when it has
 * none), reading the stack from h's copy when it has one, merged with t's
 * frames into out. */
static bool unwind_held(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                        uint64_t ec, uint32_t flags, const rbp_native_held *h, char *why, size_t whylen,
                        rbpeek_native_stack *out)
{
    rbpeek_native_frame *nf = NULL;
    rbp_native_extra *nx = NULL;
    size_t n = 0;
    if (h->known) {
        /* The copy stands for the stack while it is unwound: the thread may
         * run again and change it. Reads outside it (a module's memory,
         * should CFI ask for any) still go to the target. */
        if (h->stack) rbp_mem_pin(s->mem, h->lo, h->stack, h->len);
        n = unwind_scratch(s, h->regs, h->known, flags, &nf, &nx, why, whylen);
        if (h->stack) rbp_mem_pin(s->mem, 0, NULL, 0);
    }
    bool ok = finish(s, a, t, origin, ec, nf, nx, n, h->known, why, true, out);
    scratch_done(s);
    return ok;
}

bool rbp_native_stack_hold(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                           uint64_t ec, const rbp_native_source *src, rbp_native_held *h,
                           rbpeek_native_stack *out)
{
    *h = (rbp_native_held){0};
    char why[512] = "";
    rbp_native_jit_find(s, ec);
    h->known = src->begin(src->ctx, t, true, 0, h->regs, why, sizeof why) & ~RBP_NATIVE_PEEKED;
    /* A held thread's unwind stands whatever it finds (it is stopped, and
     * stays so until the caller lets it go): the source is done with it
     * once its registers are read. */
    src->end(src->ctx, t, true, 0, false);
    if (h->known && copy_stack(s, h)) return true; /* unwound once it runs again */
    return unwind_held(s, a, t, origin, ec, src->flags, h, why, sizeof why, out);
}

bool rbp_native_stack_held(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                           uint64_t ec, uint32_t flags, rbp_native_held *h, rbpeek_native_stack *out)
{
    if (!h->stack) return true;
    char why[512] = "";
    bool ok = !out || unwind_held(s, a, t, origin, ec, flags, h, why, sizeof why, out);
    free(h->stack);
    h->stack = NULL;
    return ok;
}
