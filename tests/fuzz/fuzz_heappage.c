/*
 * fuzz_heappage: `ruby page` (rbpeek_page_render), the census and the heap
 * dump on ONE damaged heap page of a replayed Ruby (target.h), rather than
 * on the whole heap (some 0.1 s and 0.6 s under the sanitizers): either a
 * real page of the recording, whose header is narrowed to a window of up
 * to 64 of its slots and whose header, bitmaps and window are patched; or
 * a page of objects built from the input (objbuild.h), with GC bits and a
 * free list from the input too. The census and the dump read only that
 * page's body (the heap window of image.h); every other object stays
 * readable by address, as classes and names need. Every JSON document,
 * and every line of the dump, must read strictly (jsoncheck.h).
 *
 * Input, a 5-byte header:
 *   byte 0  bits 0-1 the image, bit 2 a built page (else a real one),
 *           bit 3 `ruby page` text, bit 4 JSON, bit 5 the census and its
 *           renderings, bit 6 the dump, bit 7 (built page) GC bits and a
 *           free list from the byte stream
 *   byte 1  the page: a real one (mod their count) or a built one
 *   byte 2  real: the window's first slot (x 7, mod the page's slots);
 *           built: how many records (0: as many as the input holds)
 *   byte 3  real: the window's slot count - 1 (mod 64)
 *   byte 4  how many 12-byte patches end the input (image.c's format): on
 *           the page's header and its window's (or built objects') words
 * then (built) 16-byte records (objbuild.h), then the patches. The whole
 * input is the byte stream records and bits take bytes from.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsoncheck.h"
#include "objbuild.h"
#include "ops.h"
#include "target.h"

enum { MAX_REAL = 4096, WINDOW = 64 };

typedef struct real_pages {
    rbp_heap_page *p;
    size_t n;
} real_pages;

static ob_world g_world[TARGET_MAX];
static real_pages g_real[TARGET_MAX];
static size_t g_hdr_len[TARGET_MAX];

/* Where the heap window (image.h) must sit for the body at addr. */
static void window_on(image *img, uint64_t body, size_t n)
{
    for (size_t i = 0; i < img->nheap_bodies; i++)
        if (img->heap_bodies[i] == body) {
            img_set_heap_window(img, i, n);
            return;
        }
    img_set_heap_window(img, img->nheap_bodies, 1); /* not a listed body: none readable */
}

static void run_ops(fuzz_target *t, uint64_t addr, unsigned ops)
{
    rbpeek_session *s = t->s;
    char *out = NULL;
    rbpeek_status st;
    if (ops & 0x08) {
        st = rbpeek_page_render(s, addr, RBPEEK_FORMAT_TEXT, &out);
        if (st != RBPEEK_OK && rbpeek_session_error(s)[0] == '\0') abort();
        if (fuzz_verbose()) fprintf(stderr, "fuzz: page     %s\n", st == RBPEEK_OK ? out : rbpeek_session_error(s));
        if (st == RBPEEK_OK) rbpeek_free(out);
        out = NULL;
    }
    if ((ops & 0x10) && rbpeek_page_render(s, addr, RBPEEK_FORMAT_JSON, &out) == RBPEEK_OK) {
        json_check("ruby page --json", out);
        rbpeek_free(out);
    }
    out = NULL;
    if (ops & 0x20) {
        rbpeek_census *c = NULL;
        st = rbpeek_heap_census(s, &c);
        if (st != RBPEEK_OK && rbpeek_session_error(s)[0] == '\0') abort();
        if (st == RBPEEK_OK) {
            if (fuzz_verbose()) {
                rbpeek_census_summary sum;
                rbpeek_census_get_summary(c, &sum);
                fprintf(stderr, "fuzz: census   %llu live objects\n", (unsigned long long)sum.live);
            }
            if (rbpeek_census_render(c, RBPEEK_FORMAT_JSON, 0, 1, &out) == RBPEEK_OK) {
                json_check("ruby heap --json", out);
                rbpeek_free(out);
            }
            out = NULL;
            if (rbpeek_census_render(c, RBPEEK_FORMAT_TEXT, 5, 0, &out) == RBPEEK_OK) rbpeek_free(out);
            out = NULL;
        } else {
            fuzz_say(s, "census", st, "");
        }
        rbpeek_census_free(c);
    }
    if (ops & 0x40) {
        rbpeek_heap_dump_stats ds = {0};
        st = fuzz_heap_dump(s, &ds);
        if (st != RBPEEK_OK && rbpeek_session_error(s)[0] == '\0') abort();
        if (fuzz_verbose()) fprintf(stderr, "fuzz: dump     %llu objects\n", (unsigned long long)ds.objects);
    }
}

static void put_bit(ob_build *b, uint64_t header, rbp_field_id id, uint64_t n, unsigned per_word, unsigned bits,
                    uint64_t v)
{
    const rbp_field *f = &b->w->t->s->layout.f[id];
    if (f->offset < 0 || f->size <= 0 || (n / per_word) * 8 + 8 > (uint64_t)f->size) return;
    uint64_t at = header + (uint64_t)f->offset + (n / per_word) * 8, word = 0;
    size_t w;
    if (!img_word_of(&b->w->t->img, at, &w)) return;
    word = img_get_word(&b->w->t->img, w);
    unsigned shift = (unsigned)(n % per_word) * bits;
    word = (word & ~(((UINT64_C(1) << bits) - 1) << shift)) | (v << shift);
    img_set_word(&b->w->t->img, w, word);
    img_focus_add_range(&b->w->t->img, &b->written, at, 8);
}

/* The built page's GC bits and free list, from the stream. */
static void gc_bits(ob_build *b, const ob_page *pg)
{
    static const rbp_field_id BIT[6] = {RBP_L_page_mark_bits, RBP_L_page_uncollectible_bits,
                                        RBP_L_page_wb_unprotected_bits, RBP_L_page_marking_bits,
                                        RBP_L_page_pinned_bits, RBP_L_page_remembered_bits};
    uint64_t body = pg->body;
    size_t used = 0;
    for (size_t i = 0; i < b->nobj; i++) {
        if (b->obj[i] < pg->start || b->obj[i] >= pg->start + (uint64_t)pg->total * pg->slot_size) continue;
        used++;
        uint8_t sel = b->in[(i * 5 + 3) % b->in_size];
        uint64_t n = (b->obj[i] - body) / 40;
        for (int k = 0; k < 6; k++)
            if (sel & (1u << k)) put_bit(b, pg->header, BIT[k], n, 64, 1, 1);
        put_bit(b, pg->header, RBP_L_page_age_bits, n, 32, 2, sel >> 6);
    }
    /* the free list: the free slots after the used ones, linked through
     * their second word, as many as the stream says */
    size_t nfree = pg->total - used, listed = b->in[b->in_size - 1] % (nfree + 1);
    uint64_t first = 0, prev = 0;
    for (size_t k = 0; k < listed; k++) {
        uint64_t slot = pg->start + (uint64_t)(pg->total - 1 - k) * pg->slot_size;
        if (!prev) first = slot;
        else {
            size_t w;
            if (img_word_of(&b->w->t->img, prev + 8, &w)) img_set_word(&b->w->t->img, w, slot);
            img_focus_add_range(&b->w->t->img, &b->written, prev + 8, 8);
        }
        prev = slot;
    }
    ob_put_field(b, pg->header, RBP_L_page_freelist, first);
    ob_put_field(b, pg->header, RBP_L_page_free_slots, nfree);
}

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 5) return 0;
    size_t k = (data[0] & 3) % targets_count();
    fuzz_target *t = target_get(k);
    ob_world *w = &g_world[k];
    size_t npatch = data[4], body = size - 5;
    if (npatch * 12 > body) npatch = body / 12;
    const uint8_t *patches = data + size - npatch * 12;
    target_begin(t);
    uint64_t addr = 0;
    if (data[0] & 4) {
        /* a page of built objects */
        const ob_page *pg = &w->pages[data[1] % w->npages];
        size_t nrec = (body - npatch * 12) / OB_REC;
        if (data[2] && data[2] < nrec) nrec = data[2];
        ob_build b;
        ob_build_objects(&b, w, data + 5, nrec, data, size);
        if (data[0] & 0x80) gc_bits(&b, pg);
        img_focus_add_range(&t->img, &b.written, pg->header, g_hdr_len[k]);
        img_apply_patches_in(&t->img, patches, npatch * 12, &b.written);
        ob_build_end(&b);
        window_on(&t->img, w->pages[0].body, w->npages); /* the built bodies, in a row below the image */
        addr = pg->start;
    } else {
        /* a real page, narrowed to a window of its slots */
        const rbp_heap_page *pg = &g_real[k].p[data[1] % g_real[k].n];
        uint32_t first = (uint32_t)((data[2] * 7u) % pg->total_slots);
        uint32_t n = 1 + data[3] % WINDOW;
        if (n > pg->total_slots - first) n = pg->total_slots - first;
        uint64_t start = pg->start + (uint64_t)first * pg->slot_size;
        ob_build hb = {.w = w};
        img_focus_add_range(&t->img, &hb.written, pg->header, g_hdr_len[k]);
        img_focus_add_range(&t->img, &hb.written, start, (size_t)n * pg->slot_size);
        /* the window: the header's start and count (undone after) */
        ob_put_field(&hb, pg->header, RBP_L_page_start, start);
        ob_put_field(&hb, pg->header, RBP_L_page_total_slots, n);
        /* its free list: from the window's first free slot (the rest of
         * the real list may lead out of the window: a note, not a refusal) */
        uint64_t free_slot = 0;
        for (uint32_t i = 0; i < n && !free_slot; i++) {
            size_t fw;
            uint64_t at = start + (uint64_t)i * pg->slot_size;
            if (img_word_of(&t->img, at, &fw) && img_get_word(&t->img, fw) == 0) free_slot = at;
        }
        ob_put_field(&hb, pg->header, RBP_L_page_freelist, free_slot);
        img_apply_patches_in(&t->img, patches, npatch * 12, &hb.written);
        img_focus_free(&hb.written);
        window_on(&t->img, pg->start & ~(uint64_t)(w->page_align - 1), 1);
        addr = start;
    }
    run_ops(t, addr, data[0]);
    target_end(t);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    size_t n = targets_init();
    for (size_t i = 0; i < n; i++) {
        fuzz_target *t = target_get(i);
        /* the real pages first, as the recording has them */
        rbp_heap h;
        if (rbp_heap_open(t->s, &h) != RBPEEK_OK) abort();
        g_real[i].n = h.npages < MAX_REAL ? h.npages : MAX_REAL;
        g_real[i].p = malloc(g_real[i].n * sizeof *g_real[i].p);
        if (!g_real[i].p) abort();
        memcpy(g_real[i].p, h.pages, g_real[i].n * sizeof *g_real[i].p);
        rbp_heap_close(&h);
        if (!ob_world_init(&g_world[i], t)) abort();
        /* the header bytes a page's readers take, and the heap window's
         * bodies again, now with the built pages */
        size_t len = 64;
        static const rbp_field_id F[] = {RBP_L_page_mark_bits, RBP_L_page_uncollectible_bits,
                                         RBP_L_page_wb_unprotected_bits, RBP_L_page_marking_bits,
                                         RBP_L_page_pinned_bits, RBP_L_page_remembered_bits, RBP_L_page_age_bits,
                                         RBP_L_page_freelist, RBP_L_page_start, RBP_L_page_total_slots};
        for (size_t f = 0; f < sizeof F / sizeof F[0]; f++) {
            const rbp_field *fl = &t->s->layout.f[F[f]];
            if (fl->offset >= 0 && (size_t)fl->offset + (size_t)(fl->size > 0 ? fl->size : 8) > len)
                len = (size_t)fl->offset + (size_t)(fl->size > 0 ? fl->size : 8);
        }
        g_hdr_len[i] = len;
        fuzz_find_heap(t->s, &t->img);
        fuzz_end_run(t->s);
        rbpeek_session_invalidate(t->s);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target_timed(one_input, data, size); }
