/*
 * Allocation sites from allocator samples (`ruby allocs --sites`,
 * docs/allocations.md). The sampler stops the GVL holder at random times
 * and unwinds its machine stack (--native's unwinder). A sample whose
 * machine frames between the leaf and the first Ruby frame include one of
 * the object allocator's functions was taken while that Ruby frame was
 * allocating: either in the allocator itself or in a GC step the allocator
 * started (lazy sweeping, incremental marking, a full GC when the heap ran
 * out), which the GC's frame on top says. Such a sample's Ruby stack goes
 * into the profile and its innermost Ruby frame is counted as the site; all
 * other samples are counted and dropped. The GC's own counters give the
 * exact number of allocations (alloc_count.c), which the caller divides by
 * the sites' shares.
 *
 * Only names are compared, so only functions that have one count: the
 * exported rb_*newobj_of family, rb_imemo_new and the T_DATA wrappers
 * (.dynsym: every release, Debian's stripped ruby3.1 included), and the
 * static newobj_* helpers where .symtab names them (our unstripped builds).
 * In a stripped libruby the static helpers are unnamed, but they run under
 * an exported entry point, whose frame is found further down. Suffixes the
 * compiler adds to clones (".cold", ".isra.0", ".constprop.0") are ignored.
 *
 * A stack whose Ruby frames could not be placed among its machine frames
 * (merged 0) is not judged: where its first Ruby frame stands is unknown,
 * and the allocator may be under another VM invocation's C code.
 *
 * A site's type is read where its frame says it: a C frame of Class#new
 * (Class#allocate, a Struct class's new) allocates an instance of its
 * receiver (vm/instantiates.c); the samples of each (site, class) are
 * counted. Other sites (a Ruby frame's bytecode, other C methods) have no
 * type read.
 *
 * On a loaded machine the target may not have run at all between two
 * samples (it waited for a CPU): the second sample would find it where the
 * first did, and one preemption would count as many samples. So a live
 * thread whose CPU time (/proc/PID/task/TID/schedstat, read as its sample
 * is added) has not moved since its previous sample is dropped and
 * counted (not_run): samples then fall on the thread's own running time.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rbpeek.h"
#include "base/json.h"
#include "base/strbuf.h"
#include "profile/alloc_sites.h"
#include "profile/schedstat.h"
#include "vm/snapshot.h"
#include "profile/profile.h"

#define RAN_SLOTS 64   /* threads whose CPU time is remembered (the GVL holders) */
#define SEQ_MAX (1u << 22) /* kept samples whose site is remembered in order (16 MiB); later ones are not */
#define BATCHES 20     /* the most batches the kept samples are cut into (their dispersion: the JSON) */
#define BATCH_MIN 10   /* ... each of at least this many samples */
#define TYPED_MAX 65536 /* (site, class) pairs counted; a sample beyond them keeps its site, not its class */

/* Allocator samples of one site whose class was read. */
typedef struct typed {
    uint64_t klass;     /* 0: an empty slot */
    uint32_t site;
    uint64_t samples;
} typed;

struct rbpeek_alloc_sites {
    rbpeek_alloc_sites_stats st;
    struct { int64_t tid; uint64_t run_ns; } ran[RAN_SLOTS];
    size_t nran;
    uint64_t *count;            /* [frame id of the profile]: allocator samples whose site it is */
    size_t cap;
    const rbpeek_profile *p;    /* the profile the ids are of */
    rbp_sample_scratch scratch;
    typed *typed;               /* open addressing on (site, class) */
    size_t tcap, tused;
    rbpeek_frame *frames;       /* a sample's frames with its saved line (with_saved_line) */
    size_t fcap;
    uint32_t *seq;              /* the site of each kept sample, in order (the first SEQ_MAX) */
    size_t nseq, seqcap;
};

static const char *const ALLOCATOR[] = {
    /* exported (.dynsym) */
    "rb_wb_protected_newobj_of", "rb_wb_unprotected_newobj_of", "rb_ec_wb_protected_newobj_of",
    "rb_newobj_of", "rb_newobj", "rb_imemo_new", "rb_data_object_wrap", "rb_data_typed_object_wrap",
    "rb_data_object_zalloc", "rb_data_typed_object_zalloc",
    /* static (.symtab): 2.7-3.4's gc.c, 3.4's gc/default.c */
    "newobj_of", "newobj_of0", "newobj_of_cr", "newobj_slowpath", "newobj_slowpath_wb_protected",
    "newobj_slowpath_wb_unprotected", "newobj_alloc", "newobj_cache_miss", "newobj_init", "newobj_fill",
    "rb_gc_impl_new_obj",
};

static bool named_in(const char *symbol, const char *const *names, size_t count)
{
    if (!symbol) return false;
    size_t n = strcspn(symbol, ".");   /* "newobj_alloc.cold" is newobj_alloc */
    for (size_t i = 0; i < count; i++)
        if (strlen(names[i]) == n && memcmp(names[i], symbol, n) == 0) return true;
    return false;
}

int rbpeek_alloc_sites_is_allocator(const char *symbol)
{
    return named_in(symbol, ALLOCATOR, sizeof ALLOCATOR / sizeof *ALLOCATOR);
}

rbpeek_alloc_sites *rbpeek_alloc_sites_new(void)
{
    return calloc(1, sizeof(rbpeek_alloc_sites));
}

void rbpeek_alloc_sites_free(rbpeek_alloc_sites *a)
{
    if (!a) return;
    free(a->count);
    free(a->typed);
    free(a->frames);
    free(a->seq);
    rbp_sample_scratch_free(&a->scratch);
    free(a);
}

void rbpeek_alloc_sites_get_stats(const rbpeek_alloc_sites *a, rbpeek_alloc_sites_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (a) *out = a->st;
}

/* What a thread's whole stack says: 1 in the allocator (*gc: the GC at
 * work above it), 0 not, -1 not judged (not merged).
 *
 * Also 1: the GC at work right under a C frame of Class#new (or another
 * that makes its receiver's instance: vm/instantiates.c), with no Ruby
 * frame between. Debian's stripped 3.1 makes a plain object there through
 * static functions and tail calls that leave no named allocator frame,
 * and nothing else in that frame starts a GC but the allocation (the
 * dispatch to `initialize` may make a call cache, an allocation too).
 * Without the GC at work such a sample is not judged in the allocator:
 * there the allocator's own fast path is missed. */
static int judge(const rbpeek_native_stack *ns, bool *gc)
{
    *gc = false;
    if (!ns->merged) return -1;
    for (size_t i = 0; i < ns->nframes; i++) {
        const rbpeek_stack_frame *f = &ns->frames[i];
        if (f->kind == RBPEEK_FRAME_GC) *gc = true;
        else if (f->kind == RBPEEK_FRAME_CFUNC && *gc && f->ruby && f->ruby->instantiates)
            return 1; /* a GC Class#new started: see below */
        else if (f->kind == RBPEEK_FRAME_RUBY || f->kind == RBPEEK_FRAME_CFUNC) return 0;
        else if (f->kind == RBPEEK_FRAME_NATIVE && f->native && rbpeek_alloc_sites_is_allocator(f->native->symbol))
            return 1;
    }
    return 0;
}

static bool count_site(rbpeek_alloc_sites *a, uint32_t id)
{
    if (id >= a->cap) {
        size_t cap = a->cap ? a->cap : 256;
        while (cap <= id) cap *= 2;
        uint64_t *n = realloc(a->count, cap * sizeof *n);
        if (!n) return false;
        memset(n + a->cap, 0, (cap - a->cap) * sizeof *n);
        a->count = n;
        a->cap = cap;
    }
    if (a->count[id]++ == 0) a->st.sites++;
    return true;
}

/* Appends a kept sample's site to the sequence (the batches of the JSON);
 * false only out of memory. Beyond SEQ_MAX samples the sequence stops. */
static bool remember(rbpeek_alloc_sites *a, uint32_t site)
{
    if (a->nseq >= SEQ_MAX) return true;
    if (a->nseq == a->seqcap) {
        size_t cap = a->seqcap ? a->seqcap * 2 : 1024;
        uint32_t *n = realloc(a->seq, cap * sizeof *n);
        if (!n) return false;
        a->seq = n;
        a->seqcap = cap;
    }
    a->seq[a->nseq++] = site;
    return true;
}

static size_t typed_slot(const typed *t, size_t cap, uint32_t site, uint64_t klass)
{
    size_t m = cap - 1, i = (size_t)((klass >> 3) * 0x9E3779B97F4A7C15ull ^ site) & m;
    while (t[i].klass && (t[i].klass != klass || t[i].site != site)) i = (i + 1) & m;
    return i;
}

/* One more sample of site allocating a klass; false only out of memory.
 * Beyond TYPED_MAX pairs a new pair is not kept (its site was counted);
 * those kept go on counting. */
static bool count_typed(rbpeek_alloc_sites *a, uint32_t site, uint64_t klass)
{
    typed *t = a->tcap ? &a->typed[typed_slot(a->typed, a->tcap, site, klass)] : NULL;
    if (t && t->klass) {
        t->samples++;
        a->st.typed++;
        return true;
    }
    if ((a->tused + 1) * 2 > a->tcap) {
        if (a->tused >= TYPED_MAX) return true;
        size_t cap = a->tcap ? a->tcap * 2 : 64;
        typed *n = calloc(cap, sizeof *n);
        if (!n) return false;
        for (size_t i = 0; i < a->tcap; i++)
            if (a->typed[i].klass) n[typed_slot(n, cap, a->typed[i].site, a->typed[i].klass)] = a->typed[i];
        free(a->typed);
        a->typed = n;
        a->tcap = cap;
        t = &a->typed[typed_slot(a->typed, a->tcap, site, klass)];
    }
    *t = (typed){klass, site, 1};
    a->tused++;
    a->st.typed++;
    return true;
}

/* The class the innermost Ruby frame of t (the site) allocates an instance
 * of, if its frame says: the walk reads it on that frame only. */
static uint64_t site_class(const rbpeek_thread *t)
{
    return t->nframes ? t->frames[0].instantiates : 0;
}

/* The innermost Ruby frame of the stack just added (ids root first). */
static uint32_t site_of(const rbpeek_profile *p, const uint32_t *ids, size_t n)
{
    for (size_t k = n; k-- > 0;) {
        int32_t kind = rbp_profile_pframe(p, ids[k])->d.kind;
        if (kind == RBP_PF_RUBY || kind == RBP_PF_CFUNC) return ids[k];
    }
    return UINT32_MAX;
}

/* Whether thread tid of pid has run since this was last asked for it
 * (true when it cannot be told: no pid, no TID, no schedstat). */
static bool ran_since(rbpeek_alloc_sites *a, int pid, int64_t tid)
{
    rbp_schedstat st;
    if (pid <= 0 || tid <= 0 || tid > INT32_MAX || !rbp_schedstat_read(&a->scratch.files, pid, (pid_t)tid, &st))
        return true;
    uint64_t run_ns = st.run_ns;
    size_t k = 0;
    while (k < a->nran && a->ran[k].tid != tid) k++;
    if (k == a->nran) {
        if (a->nran < RAN_SLOTS) a->nran++;
        else k = (size_t)(tid % RAN_SLOTS);   /* a slot reused: that thread's next sample is kept */
        a->ran[k].tid = tid;
        a->ran[k].run_ns = run_ns;
        return true;
    }
    bool ran = run_ns != a->ran[k].run_ns;
    a->ran[k].run_ns = run_ns;
    return ran;
}

/* t with its first frame at saved_line (rbp_snapshot_saved_line), in
 * *copy; false only out of memory. A frame YJIT's code runs has no known
 * line (vm/frames.c), but in the allocator its pc is exact: YJIT saves the
 * pc before every call that may allocate (jit_prepare_call_with_gc, 3.1's
 * jit_prepare_routine_call), as allocation tracing needs. */
static bool with_saved_line(rbpeek_alloc_sites *a, const rbpeek_thread *t, int32_t saved_line, rbpeek_thread *copy)
{
    if (t->nframes > a->fcap) {
        rbpeek_frame *f = realloc(a->frames, t->nframes * sizeof *f);
        if (!f) return false;
        a->frames = f;
        a->fcap = t->nframes;
    }
    memcpy(a->frames, t->frames, t->nframes * sizeof *a->frames);
    a->frames[0].lineno = saved_line;
    a->frames[0].lineno_unknown = 0;
    *copy = *t;
    copy->frames = a->frames;
    return true;
}

rbp_sample_fate rbp_alloc_sites_add_thread(rbpeek_alloc_sites *a, rbpeek_profile *p, const rbpeek_thread *t,
                                           const rbpeek_native_stack *ns, const rbpeek_sample_options *opt,
                                           int32_t saved_line, bool *tid_unknown)
{
    *tid_unknown = false;
    a->p = p;
    if (!ns || ns->nnative == 0) {
        a->st.no_native++;
        return RBP_SAMPLE_FILTERED;
    }
    if (!ran_since(a, opt ? opt->pid : 0, rbp_sample_thread_tid(t, opt))) {
        a->st.not_run++;
        return RBP_SAMPLE_FILTERED;
    }
    a->st.stacks++;
    bool gc;
    int in = judge(ns, &gc);
    if (in < 0) a->st.unmerged++;
    if (in <= 0) {
        if (gc) a->st.gc_elsewhere++;
        return RBP_SAMPLE_FILTERED;
    }
    rbpeek_thread copy;
    if (saved_line > 0 && t->nframes && t->frames[0].lineno_unknown) {
        if (!with_saved_line(a, t, saved_line, &copy)) return RBP_SAMPLE_NOMEM;
        t = &copy;
    }
    rbp_sample_fate fate = rbp_sample_add_thread(p, t, opt, &a->scratch, tid_unknown);
    if (fate != RBP_SAMPLE_ADDED) return fate;
    /* the stack's length: the thread's frames, and the thread frame */
    size_t len = t->nframes + (opt && opt->per_thread ? 1 : 0);
    uint32_t site = site_of(p, a->scratch.ids, len);
    if (site != UINT32_MAX && !count_site(a, site)) return RBP_SAMPLE_NOMEM;
    if (site != UINT32_MAX && !remember(a, site)) return RBP_SAMPLE_NOMEM;
    uint64_t klass = site != UINT32_MAX ? site_class(t) : 0;
    if (klass && !count_typed(a, site, klass)) return RBP_SAMPLE_NOMEM;
    a->st.allocator++;
    if (gc) a->st.allocator_gc++;
    return RBP_SAMPLE_ADDED;
}

rbpeek_status rbpeek_alloc_sites_add_snapshot(rbpeek_alloc_sites *a, rbpeek_profile *p, const rbpeek_snapshot *snap,
                                              const rbpeek_sample_options *opt, rbpeek_sample_result *result)
{
    rbpeek_sample_result r = {0};
    if (result) *result = r;
    if (!a || !p) return RBPEEK_ERR_ARG;
    if (!snap) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "alloc_sites: no snapshot");
    if (a->p && a->p != p) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "alloc_sites: another profile than before");
    a->p = p;
    rbpeek_status st = RBPEEK_OK;
    size_t n = rbpeek_snapshot_thread_count(snap);
    for (size_t i = 0; i < n && st == RBPEEK_OK; i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        if (!t) continue;
        bool unknown = false;
        switch (rbp_alloc_sites_add_thread(a, p, t, rbpeek_snapshot_native(snap, i), opt, rbp_snapshot_saved_line(snap, i),
                                           &unknown)) {
        case RBP_SAMPLE_ADDED: r.added++; break;
        case RBP_SAMPLE_FAILED: r.failed++; break;
        case RBP_SAMPLE_FILTERED: r.filtered++; break;
        case RBP_SAMPLE_EMPTY: r.empty++; break;
        case RBP_SAMPLE_NOMEM: st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "alloc_sites: out of memory"); break;
        }
        if (unknown) r.tid_unknown++;
    }
    if (result) *result = r;
    return st;
}

/* The batches the kept samples in order are cut into: as many as give each
 * at least BATCH_MIN samples, at most BATCHES; 0 with fewer than two. */
static size_t batch_count(const rbpeek_alloc_sites *a)
{
    size_t b = a->nseq / BATCH_MIN;
    if (b > BATCHES) b = BATCHES;
    return b < 2 ? 0 : b;
}

/* [samples in batch 0, 1, ...] of site id: batch k holds the kept samples
 * k*n/B .. (k+1)*n/B - 1 in the order they were taken. */
static void batches_json(const rbpeek_alloc_sites *a, rbp_json *j, uint32_t id, size_t nb)
{
    uint64_t per[BATCHES] = {0};
    for (size_t i = 0; i < a->nseq; i++)
        if (a->seq[i] == id) per[i * nb / a->nseq]++;
    rbp_json_array(j);
    for (size_t k = 0; k < nb; k++) rbp_json_u64(j, per[k]);
    rbp_json_array_end(j);
}

typedef struct site_ref {
    uint64_t samples;
    uint32_t id;
} site_ref;

static int cmp_sites(const void *x, const void *y)
{
    const site_ref *a = x, *b = y;
    if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* By site, then most samples first. */
static int cmp_typed(const void *x, const void *y)
{
    const typed *a = x, *b = y;
    if (a->site != b->site) return a->site < b->site ? -1 : 1;
    if (a->samples != b->samples) return a->samples > b->samples ? -1 : 1;
    return a->klass < b->klass ? -1 : a->klass > b->klass;
}

#define TYPES_PER_SITE 64   /* classes written for a site, its most sampled */

/* [{"class": address, "samples": n}] of a site, from the (site, class)
 * pairs sorted by cmp_typed: its run found by bisection. */
static void types_json(const typed *sorted, size_t n, rbp_json *j, uint32_t site)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid].site < site) lo = mid + 1;
        else hi = mid;
    }
    rbp_json_array(j);
    for (size_t k = lo; k < n && k - lo < TYPES_PER_SITE && sorted[k].site == site; k++) {
        rbp_json_object(j);
        rbp_json_key(j, "class");
        rbp_json_u64(j, sorted[k].klass);
        rbp_json_key(j, "samples");
        rbp_json_u64(j, sorted[k].samples);
        rbp_json_object_end(j);
    }
    rbp_json_array_end(j);
}

rbpeek_status rbpeek_alloc_sites_json(const rbpeek_alloc_sites *a, const rbpeek_profile *p, char **out)
{
    if (!a || !p || !out) return RBPEEK_ERR_ARG;
    *out = NULL;
    if (a->p && a->p != p) return RBPEEK_ERR_ARG;
    size_t n = 0;
    site_ref *ids = a->st.sites ? malloc(a->st.sites * sizeof *ids) : NULL;
    if (a->st.sites && !ids) return RBPEEK_ERR_NOMEM;
    for (size_t id = 0; id < a->cap && n < a->st.sites; id++)
        if (a->count[id] && id < p->nnames) ids[n++] = (site_ref){a->count[id], (uint32_t)id};
    if (n) qsort(ids, n, sizeof *ids, cmp_sites);
    typed *pairs = a->tused ? malloc(a->tused * sizeof *pairs) : NULL;
    if (a->tused && !pairs) {
        free(ids);
        return RBPEEK_ERR_NOMEM;
    }
    size_t npairs = 0;
    for (size_t i = 0; i < a->tcap; i++)
        if (a->typed[i].klass) pairs[npairs++] = a->typed[i];
    if (npairs) qsort(pairs, npairs, sizeof *pairs, cmp_typed);
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_TIGHT);
    size_t nb = batch_count(a);
    rbp_json_object(&j);
    rbp_json_key(&j, "batches");
    rbp_json_u64(&j, nb);
    rbp_json_key(&j, "batched");
    rbp_json_u64(&j, a->nseq);
    rbp_json_key(&j, "sites");
    rbp_json_array(&j);
    for (size_t k = 0; k < n; k++) {
        const rbp_pframe *f = rbp_profile_pframe(p, ids[k].id);
        rbp_json_object(&j);
        rbp_json_key(&j, "label");
        rbp_json_str(&j, rbp_pframe_label(f));
        rbp_json_key(&j, "path");
        if (*f->d.path) rbp_json_str(&j, f->d.path);
        else rbp_json_null(&j);
        rbp_json_key(&j, "lineno");
        if (f->d.kind == RBP_PF_RUBY && f->d.line == 0) rbp_json_null(&j);   /* not known: JIT code ran it */
        else rbp_json_i64(&j, f->d.line);
        rbp_json_key(&j, "kind");
        rbp_json_str(&j, f->d.kind == RBP_PF_CFUNC ? "cfunc" : "ruby");
        rbp_json_key(&j, "samples");
        rbp_json_u64(&j, ids[k].samples);
        rbp_json_key(&j, "types");
        types_json(pairs, npairs, &j, ids[k].id);
        rbp_json_key(&j, "batch_samples");
        batches_json(a, &j, ids[k].id, nb);
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    free(ids);
    free(pairs);
    if (b.oom) {
        rbp_sb_free(&b);
        return RBPEEK_ERR_NOMEM;
    }
    *out = rbp_sb_take(&b);
    return *out ? RBPEEK_OK : RBPEEK_ERR_NOMEM;
}

/* The largest total a profile is scaled to. No count of allocations comes
 * near; a total past it is a counter read backwards (2^64 - d through an
 * unsigned binding) or garbage, and is taken as this: the stacks then sum
 * to about 2^63, plus at most one per stack for the rounding, which no
 * node's total can wrap (it did: the root summed to 0 over rows of 4.6e18). */
#define SCALE_MAX (UINT64_MAX / 2)

static uint64_t add_saturating(uint64_t a, uint64_t b) { return a > UINT64_MAX - b ? UINT64_MAX : a + b; }

rbpeek_status rbpeek_profile_scale_to(rbpeek_profile *p, uint64_t total)
{
    if (!p) return RBPEEK_ERR_ARG;
    uint64_t have = p->nnodes ? p->nodes[0].total : 0;
    if (!have) return RBPEEK_OK;
    long double f = (long double)(total < SCALE_MAX ? total : SCALE_MAX) / (long double)have;
    for (uint32_t i = 0; i < p->nnodes; i++) {
        rbp_pnode *nd = &p->nodes[i];
        if (nd->self) {
            long double v = (long double)nd->self * f + 0.5L;
            nd->self = v < 1.0L ? 1 : v > (long double)SCALE_MAX ? SCALE_MAX : (uint64_t)v;
        }
        nd->total = nd->self;
    }
    /* a child is always added after its parent: sum the totals upwards */
    for (uint32_t i = p->nnodes; i-- > 1;) {
        rbp_pnode *up = &p->nodes[p->nodes[i].parent];
        up->total = add_saturating(up->total, p->nodes[i].total);
    }
    return RBPEEK_OK;
}
