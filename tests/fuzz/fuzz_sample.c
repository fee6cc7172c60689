/*
 * fuzz_sample: the snapshot `ruby sample` takes of a target that RUNS
 * while it is read. The tracer (profile/tracer.c) reads who holds the GVL
 * with direct reads, drops and refills the page cache, stops the holders
 * only once the thread list is read (a fence, then strict reads of their
 * stacks), resumes them, and walks the other threads checked against
 * direct reads of their stacks' markers (rbp_snapshot_take_split); or, in
 * --nonblocking mode, stops nothing (rbpeek_snapshot_take_running). Here
 * the replayed Ruby (target.h) changes while it is read: a second list of
 * patches is applied by the image's reader just before its Nth read, or
 * when the harness "resumes" the held threads, as a running target's
 * memory changes between two reads of one walk. Then the stacks go into a
 * profile as the sampler adds them (rbp_sample_add_snapshot). The session
 * reads through a source with a batch read, as /proc/PID/mem's, so the
 * prefetch and the fence fetch pages as they do in a live sample (what the
 * second sample of an input prefetches is what the first one read).
 *
 * Input, a 6-byte header then 12-byte patches on the words the sample
 * reads on the pristine image (image.c's format):
 *   byte 0  bits 0-1 the image, bits 2-3 the frame limit (none, 1, 7,
 *           64), bit 4 --nonblocking (take_running) instead of the split
 *           walk, bit 5 per_thread frames, bit 6 on_cpu, bit 7 the stop
 *           callback reports every thread stopped (RBP_SPLIT_ALL)
 *   byte 1  the held threads: bit k holds the pristine snapshot's thread
 *           k (mod 8); 0: the GVL holders the target names (none: every
 *           thread stopped); 0xff: none held, none stopped (the tracer's
 *           --nonblocking walk)
 *   bytes 2-3  u16 N: the second list is applied before read N (0: when
 *           the held threads are resumed)
 *   byte 4  how many patches come first, applied before the sample (the
 *           rest are the second list)
 *   byte 5  bit 0: a second sample follows, as the tracer's next one
 *           (invalidate, prefetch, the same walk) with the profile kept;
 *           bit 1: then the profile is scaled as `allocs --sites` scales
 *           it, to 2^64 - 1 - (bits 2-7) (what a count of
 *           allocations read backwards becomes through ctypes), and every
 *           node's total must still be its self plus its children's, with
 *           the root's in `top`'s header (issue 35: they wrapped to 0)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/mem.h"
#include "ops.h"
#include "profile/profile.h"
#include "profile/sampler.h"
#include "target.h"
#include "vm/snapshot.h"
#include "vm/threads.h"

enum { MAX_HELD = 64 };

static img_focus g_focus[TARGET_MAX];

typedef struct sample_run {
    fuzz_target *t;
    const img_focus *focus;
    const uint8_t *later;       /* the second list of patches */
    size_t nlater;
    bool applied;
    bool all;                   /* the stop callback's answer */
    uint64_t held[MAX_HELD];
    size_t nheld;
    bool none;                  /* held is given, empty: nothing stopped */
} sample_run;

/* The target "runs": its memory changes (once). */
static void run_target(sample_run *r)
{
    if (r->applied) return;
    r->applied = true;
    r->t->img.hook = NULL;
    img_apply_patches_in(&r->t->img, r->later, r->nlater, r->focus);
}

static void on_read(image *img, void *ctx)
{
    (void)img;
    run_target(ctx);
}

static int stop_cb(void *ctx)
{
    sample_run *r = ctx;
    rbp_mem_fence(r->t->s->mem);
    return r->all ? RBP_SPLIT_ALL : RBP_SPLIT_HELD;
}

static void release_cb(void *ctx)
{
    sample_run *r = ctx;
    if (!r->t->img.hook_at) run_target(r); /* resumed: the threads run again */
}

static void one_sample(sample_run *r, unsigned b0, rbpeek_profile *p, rbp_sample_scratch *scratch)
{
    static const size_t limits[4] = {0, 1, 7, 64};
    size_t max_frames = limits[(b0 >> 2) & 3];
    rbpeek_session *s = r->t->s;
    rbp_mem *mem = s->mem;
    rbpeek_snapshot *snap = NULL;
    rbpeek_status st;
    rbp_mem_invalidate(mem);
    rbp_mem_prefetch(mem);
    if (b0 & 0x10) {
        st = rbpeek_snapshot_take_running(s, max_frames, &snap);
    } else {
        const uint64_t *held = r->held;
        rbp_snapshot_split how = {.held = r->nheld || r->none ? held : NULL, .nheld = &r->nheld,
                                  .stop = r->none ? NULL : stop_cb, .release = release_cb, .ctx = r};
        st = rbp_snapshot_take_split(s, max_frames, &how, &snap);
    }
    if (st != RBPEEK_OK) {
        if (rbpeek_session_error(s)[0] == '\0') abort();
        fuzz_say(s, "sample", st, "");
        return;
    }
    fuzz_touch_snapshot(snap);
    rbpeek_sample_options opt = {.per_thread = (b0 >> 5) & 1, .on_cpu = (b0 >> 6) & 1};
    rbpeek_sample_result res = {0};
    st = rbp_sample_add_snapshot(p, snap, &opt, &res, scratch);
    if (fuzz_verbose()) {
        size_t torn = 0, retried = 0;
        for (size_t i = 0; i < rbpeek_snapshot_thread_count(snap); i++) {
            torn += rbpeek_snapshot_thread(snap, i)->torn != 0;
            retried += rbpeek_snapshot_thread(snap, i)->retried != 0;
        }
        char what[128];
        snprintf(what, sizeof what, "%u added, %u failed, %zu torn, %zu retried, %zu held", res.added, res.failed,
                 torn, retried, r->nheld);
        fuzz_say(s, "sample", st, what);
    }
    rbpeek_snapshot_free(snap);
}

/* The profile scaled to a huge total: no sum may wrap (an abort is the
 * finding). */
static void scale_huge(rbpeek_profile *p, unsigned b5)
{
    uint64_t to = UINT64_MAX - (uint64_t)(b5 >> 2); /* within the rounding of the stacks: the sums wrapped */
    if (rbpeek_profile_scale_to(p, to) != RBPEEK_OK) abort();
    for (uint32_t i = 0; i < p->nnodes; i++) {
        unsigned __int128 sum = p->nodes[i].self;
        for (uint32_t c = p->nodes[i].first_child; c != RBP_NO_NODE; c = p->nodes[c].next_sibling)
            sum += p->nodes[c].total;
        if (sum != p->nodes[i].total || p->nodes[i].total > p->nodes[0].total) {
            fprintf(stderr, "fuzz_sample: scaled to %llu, node %u's total %llu is not its self and children's\n",
                    (unsigned long long)to, i, (unsigned long long)p->nodes[i].total);
            abort();
        }
    }
    char *top = NULL;
    if (rbpeek_profile_top(p, 0, 5, &top) != RBPEEK_OK) return;
    if (p->nnodes > 1 && strstr(top, "(0 samples in all)")) abort();
    rbpeek_free(top);
}

static void run(fuzz_target *t, const uint8_t *hdr, const uint8_t *later, size_t nlater, const img_focus *focus)
{
    sample_run r = {.t = t, .focus = focus, .later = later, .nlater = nlater, .all = (hdr[0] >> 7) & 1};
    uint16_t at;
    memcpy(&at, hdr + 2, 2);
    /* who is held: the GVL holders, read as the tracer reads them (direct
     * reads, which neither fill the cache nor count for the prefetch) */
    if (hdr[1] == 0) {
        rbp_gvl_holder h[8];
        size_t n = 0;
        bool was = rbp_mem_set_direct(t->s->mem, true);
        if (rbp_gvl_holders(t->s, h, 8, &n))
            for (size_t i = 0; i < n && r.nheld < MAX_HELD; i++)
                if (h[i].th) r.held[r.nheld++] = h[i].th;
        rbp_mem_set_direct(t->s->mem, was);
    } else if (hdr[1] == 0xff) {
        r.none = true;
    } else {
        size_t nt = rbpeek_snapshot_thread_count(t->snap);
        for (size_t i = 0; i < nt && r.nheld < MAX_HELD; i++)
            if (hdr[1] & (1u << (i % 8))) r.held[r.nheld++] = rbpeek_snapshot_thread(t->snap, i)->thread_addr;
    }
    if (at) {
        t->img.reads = 0;
        t->img.hook_at = at;
        t->img.hook = on_read;
        t->img.hook_ctx = &r;
    }
    rbpeek_profile *p = rbpeek_profile_new();
    rbp_sample_scratch scratch = {0};
    if (!p) abort();
    one_sample(&r, hdr[0], p, &scratch);
    if (hdr[5] & 1) one_sample(&r, hdr[0], p, &scratch);
    if (hdr[5] & 2) scale_huge(p, hdr[5]);
    rbp_sample_scratch_free(&scratch);
    rbpeek_profile_free(p);
    t->img.hook = NULL;
}

static void track_op(fuzz_target *t, void *ctx)
{
    (void)ctx;
    static const uint8_t hdr[6] = {0x60, 0, 0, 0, 0, 1};
    run(t, hdr, NULL, 0, NULL);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    size_t n = targets_init();
    for (size_t i = 0; i < n; i++) {
        fuzz_target *t = target_get(i);
        rbp_mem *batch = rbp_mem_new((rbp_source){.read = img_read, .read_many = img_read_many, .ctx = &t->img,
                                                  .kind = "callback"});
        if (!batch) abort();
        rbp_mem_free(t->s->mem);
        t->s->mem = batch;
        target_track(target_get(i), track_op, NULL, &g_focus[i]);
        if (fuzz_verbose())
            fprintf(stderr, "fuzz: focus    %s: %zu words read (%zu pointers)\n", target_get(i)->name,
                    g_focus[i].nwords, g_focus[i].nptrs);
    }
    return 0;
}

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 6) return 0;
    size_t k = (data[0] & 3) % targets_count();
    fuzz_target *t = target_get(k);
    size_t first = (size_t)data[4] * 12, rest = size - 6;
    if (first > rest) first = rest;
    target_begin(t);
    img_apply_patches_in(&t->img, data + 6, first, &g_focus[k]);
    run(t, data, data + 6 + first, rest - first, &g_focus[k]);
    target_end(t);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target_timed(one_input, data, size); }
