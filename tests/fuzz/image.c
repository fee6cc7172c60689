/*
 * The recorded memory image (image.h): loading and saving it, serving it
 * through rbpeek's reader and lookup callbacks, and the undoable patches a
 * fuzz input makes to it. Patching in place and undoing, rather than copying
 * the image for each input, keeps an execution's cost to the readers it
 * runs.
 */
#include "image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static int cmp_page(const void *a, const void *b)
{
    uint64_t x = ((const img_page *)a)->addr, y = ((const img_page *)b)->addr;
    return x < y ? -1 : x > y;
}

bool img_add_page(image *img, uint64_t addr, const uint8_t *data, uint32_t valid)
{
    if (valid > IMG_PAGE) valid = IMG_PAGE;
    img_page *p = realloc(img->pages, (img->npages + 1) * sizeof *p);
    if (!p) return false;
    img->pages = p;
    uint8_t *d = calloc(1, IMG_PAGE);
    if (!d) return false;
    if (data && valid) memcpy(d, data, valid);
    p[img->npages++] = (img_page){.addr = addr & ~(uint64_t)(IMG_PAGE - 1), .valid = valid, .live = valid, .data = d};
    return true;
}

bool img_add_sym(image *img, const char *name, uint64_t addr)
{
    img_sym *s = realloc(img->syms, (img->nsyms + 1) * sizeof *s);
    if (!s) return false;
    img->syms = s;
    s[img->nsyms] = (img_sym){.name = strdup(name), .addr = addr};
    return s[img->nsyms++].name != NULL;
}

static const img_page *find_page(const image *img, uint64_t addr)
{
    uint64_t pa = addr & ~(uint64_t)(IMG_PAGE - 1);
    size_t lo = 0, hi = img->npages;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->pages[mid].addr < pa) lo = mid + 1;
        else hi = mid;
    }
    return lo < img->npages && img->pages[lo].addr == pa ? &img->pages[lo] : NULL;
}

void img_finish(image *img)
{
    qsort(img->pages, img->npages, sizeof *img->pages, cmp_page);
    /* Words that hold a pointer into the image: where a patch most likely
     * changes what a reader follows. */
    free(img->ptr_words);
    img->ptr_words = NULL;
    img->nptr_words = 0;
    size_t cap = 0;
    for (size_t i = 0; i < img->npages; i++) {
        for (uint32_t off = 0; off + 8 <= img->pages[i].valid; off += 8) {
            uint64_t v;
            memcpy(&v, img->pages[i].data + off, 8);
            if (v < 4096 || (v & 7) || !find_page(img, v)) continue;
            if (img->nptr_words == cap) {
                cap = cap ? 2 * cap : 4096;
                uint32_t *n = realloc(img->ptr_words, cap * sizeof *n);
                if (!n) return;
                img->ptr_words = n;
            }
            img->ptr_words[img->nptr_words++] = (uint32_t)(i * (IMG_PAGE / 8) + off / 8);
        }
    }
}

bool img_window_refuses(image *img, uint64_t addr, size_t len)
{
    /* rbp_mem_read_partial retries a refused big read page by page: the
     * body's first page, asked for next, is refused too, which ends it. */
    if (img->refused_body && addr == img->refused_body && len <= IMG_PAGE) {
        img->refused_body = 0;
        return true;
    }
    img->refused_body = 0;
    if (!img->win_n || len < img->heap_body_len) return false;
    size_t lo = 0, hi = img->nheap_bodies;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->heap_bodies[mid] < addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo == img->nheap_bodies || img->heap_bodies[lo] != addr) return false;
    size_t k = (lo + img->nheap_bodies - img->win_first) % img->nheap_bodies;
    if (k < img->win_n) return false;
    img->refused_body = addr;
    return true;
}

void img_set_heap_window(image *img, size_t first, size_t n)
{
    if (!img->nheap_bodies || n >= img->nheap_bodies) n = 0;
    img->win_first = img->nheap_bodies ? first % img->nheap_bodies : 0;
    img->win_n = n;
    img->refused_body = 0;
}

bool img_word_of(const image *img, uint64_t addr, size_t *w)
{
    const img_page *p = find_page(img, addr);
    if (!p || (addr & 7) || (addr & (IMG_PAGE - 1)) + 8 > p->valid) return false;
    *w = (size_t)(p - img->pages) * (IMG_PAGE / 8) + (addr & (IMG_PAGE - 1)) / 8;
    return true;
}

long img_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    image *img = ctx;
    if (img->hook && ++img->reads == img->hook_at) {
        void (*hook)(image *, void *) = img->hook;
        img->hook = NULL;
        hook(img, img->hook_ctx);
    }
    if (img_window_refuses(img, addr, len)) return -1;
    size_t done = 0;
    while (done < len) {
        uint64_t a = addr + done;
        if (a < addr) break; /* wrapped */
        const img_page *p = find_page(img, a);
        size_t in = (size_t)(a & (IMG_PAGE - 1));
        if (!p || p->live <= in) break;
        size_t n = p->live - in;
        if (n > len - done) n = len - done;
        memcpy((uint8_t *)buf + done, p->data + in, n);
        if (img->track) {
            size_t w0 = (size_t)(p - img->pages) * (IMG_PAGE / 8) + in / 8;
            size_t w1 = (size_t)(p - img->pages) * (IMG_PAGE / 8) + (in + n + 7) / 8;
            for (size_t w = w0; w < w1; w++) img->track[w / 8] |= (uint8_t)(1u << (w % 8));
        }
        done += n;
        if (p->live < IMG_PAGE) break;
    }
    return done ? (long)done : -1;
}

void img_read_many(void *ctx, const uint64_t *addrs, uint8_t *const *bufs, size_t n, size_t len, long *got)
{
    for (size_t i = 0; i < n; i++) got[i] = img_read(ctx, addrs[i], bufs[i], len);
}

int img_lookup(void *ctx, const char *name, uint64_t *addr)
{
    const image *img = ctx;
    if (img->hidden_sym && strcmp(name, img->hidden_sym) == 0) return 1;
    for (size_t i = 0; i < img->nsyms; i++) {
        if (strcmp(img->syms[i].name, name) == 0) {
            if (!img->syms[i].addr) return 1;
            *addr = img->syms[i].addr;
            return 0;
        }
    }
    return 1;
}

/* ---- files ---- */

static bool put(gzFile f, const void *p, size_t n) { return gzwrite(f, p, (unsigned)n) == (int)n; }
static bool get(gzFile f, void *p, size_t n) { return gzread(f, p, (unsigned)n) == (int)n; }

bool img_save(const image *img, const char *path)
{
    gzFile f = gzopen(path, "wb9");
    if (!f) return false;
    bool ok = put(f, "RBPIMG01", 8);
    uint32_t n = (uint32_t)img->nsyms;
    ok = ok && put(f, &n, 4);
    for (size_t i = 0; ok && i < img->nsyms; i++) {
        uint16_t l = (uint16_t)strlen(img->syms[i].name);
        ok = put(f, &l, 2) && put(f, img->syms[i].name, l) && put(f, &img->syms[i].addr, 8);
    }
    n = (uint32_t)img->npages;
    ok = ok && put(f, &n, 4);
    for (size_t i = 0; ok && i < img->npages; i++) {
        const img_page *p = &img->pages[i];
        ok = put(f, &p->addr, 8) && put(f, &p->valid, 4) && (!p->valid || put(f, p->data, p->valid));
    }
    return gzclose(f) == Z_OK && ok;
}

bool img_load(image *img, const char *path)
{
    memset(img, 0, sizeof *img);
    gzFile f = gzopen(path, "rb");
    if (!f) {
        fprintf(stderr, "image: cannot open %s\n", path);
        return false;
    }
    char magic[8];
    uint32_t n = 0;
    bool ok = get(f, magic, 8) && memcmp(magic, "RBPIMG01", 8) == 0 && get(f, &n, 4);
    for (uint32_t i = 0; ok && i < n; i++) {
        uint16_t l;
        char name[256];
        uint64_t a;
        ok = get(f, &l, 2) && l < sizeof name && get(f, name, l);
        name[ok ? l : 0] = '\0';
        ok = ok && get(f, &a, 8) && img_add_sym(img, name, a);
    }
    ok = ok && get(f, &n, 4);
    uint8_t *buf = malloc(IMG_PAGE);
    for (uint32_t i = 0; ok && buf && i < n; i++) {
        uint64_t a;
        uint32_t v;
        ok = get(f, &a, 8) && get(f, &v, 4) && v <= IMG_PAGE && (!v || get(f, buf, v)) && img_add_page(img, a, buf, v);
    }
    free(buf);
    gzclose(f);
    if (!ok) {
        fprintf(stderr, "image: %s is not a valid image\n", path);
        img_free(img);
        return false;
    }
    img_finish(img);
    return true;
}

void img_free(image *img)
{
    for (size_t i = 0; i < img->nsyms; i++) free(img->syms[i].name);
    for (size_t i = 0; i < img->npages; i++) free(img->pages[i].data);
    free(img->syms);
    free(img->pages);
    free(img->ptr_words);
    free(img->undo);
    free(img->heap_bodies);
    free(img->track);
    memset(img, 0, sizeof *img);
}

/* ---- patches ---- */

size_t img_nwords(const image *img) { return img->npages * (IMG_PAGE / 8); }

uint64_t img_word_addr(const image *img, size_t w)
{
    return img->pages[w / (IMG_PAGE / 8)].addr + (w % (IMG_PAGE / 8)) * 8;
}

static uint8_t *word_ptr(const image *img, size_t w)
{
    return img->pages[w / (IMG_PAGE / 8)].data + (w % (IMG_PAGE / 8)) * 8;
}

static void push_undo(image *img, img_undo u)
{
    if (img->nundo == img->undo_cap) {
        size_t cap = img->undo_cap ? 2 * img->undo_cap : 256;
        img_undo *n = realloc(img->undo, cap * sizeof *n);
        if (!n) abort();
        img->undo = n;
        img->undo_cap = cap;
    }
    img->undo[img->nundo++] = u;
}

uint64_t img_get_word(const image *img, size_t w)
{
    uint64_t v;
    memcpy(&v, word_ptr(img, w), 8);
    return v;
}

void img_set_word(image *img, size_t w, uint64_t v)
{
    uint8_t *p = word_ptr(img, w);
    img_undo u = {.where = p};
    memcpy(&u.old, p, 8);
    push_undo(img, u);
    memcpy(p, &v, 8);
}

void img_set_byte(image *img, size_t w, unsigned byte, uint8_t v)
{
    uint64_t old = img_get_word(img, w);
    uint64_t mask = (uint64_t)0xff << (8 * (byte & 7));
    img_set_word(img, w, (old & ~mask) | ((uint64_t)v << (8 * (byte & 7))));
}

void img_hide_page(image *img, size_t page)
{
    img_page *p = &img->pages[page];
    push_undo(img, (img_undo){.live = &p->live, .old_live = p->live});
    p->live = 0;
}

void img_undo_all(image *img)
{
    while (img->nundo) {
        img_undo *u = &img->undo[--img->nundo];
        if (u->where) memcpy(u->where, &u->old, 8);
        else *u->live = u->old_live;
    }
}

void img_commit(image *img) { img->nundo = 0; }

/*
 * A patch is 12 bytes: u32 where, u8 kind, u8 small, u16 arg, u32 value.
 * where's top bit picks a word that holds a pointer (most patches should
 * change what a reader follows), else any word. Kinds: set the word to a
 * value; point it at another word of the image; point it at itself or a
 * neighbour (cycles); add a small signed delta (lengths, counts, off-by-
 * ones); set its low 32 bits; set one byte; flip one bit; copy another
 * word (one list's node into another list); hide its page (unreadable).
 */
void img_apply_patches(image *img, const uint8_t *data, size_t size)
{
    img_apply_patches_in(img, data, size, NULL);
}

/* A word of the focus (or of the image): a pointer-holding one when the
 * selector's top bit is set and there are some. */
static size_t pick_word(const image *img, const img_focus *f, uint32_t sel)
{
    const uint32_t *words = f ? f->words : NULL, *ptrs = f ? f->ptrs : img->ptr_words;
    size_t nwords = f ? f->nwords : img_nwords(img), nptrs = f ? f->nptrs : img->nptr_words;
    if ((sel & 0x80000000u) && nptrs) return ptrs[(sel & 0x7fffffffu) % nptrs];
    if (!words) return (sel & 0x7fffffffu) % nwords;
    return words[(sel & 0x7fffffffu) % nwords];
}

void img_apply_patches_in(image *img, const uint8_t *data, size_t size, const img_focus *focus)
{
    size_t nw = img_nwords(img);
    if (!nw) return;
    if (focus && !focus->nwords) focus = NULL;
    for (size_t i = 0; i + 12 <= size; i += 12) {
        uint32_t where, value;
        uint16_t arg;
        memcpy(&where, data + i, 4);
        uint8_t kind = data[i + 4], small = data[i + 5];
        memcpy(&arg, data + i + 6, 2);
        memcpy(&value, data + i + 8, 4);
        size_t w = pick_word(img, focus, where);
        switch (kind % 10) {
        case 0: img_set_word(img, w, value | ((uint64_t)arg << 32)); break;
        case 1: img_set_word(img, w, img_word_addr(img, value % nw) + (small & 7)); break;
        case 2: img_set_word(img, w, img_word_addr(img, w) + (int64_t)(int8_t)small * 8); break;
        case 3: img_set_word(img, w, img_get_word(img, w) + (int64_t)(int16_t)arg); break;
        case 4: img_set_word(img, w, (img_get_word(img, w) & ~(uint64_t)0xffffffffu) | value); break;
        case 5: img_set_byte(img, w, small, (uint8_t)value); break;
        case 6: img_set_word(img, w, img_get_word(img, w) ^ ((uint64_t)1 << (small & 63))); break;
        case 7: img_set_word(img, w, img_get_word(img, pick_word(img, focus, value))); break;
        case 8: img_set_word(img, w, value ? ~(uint64_t)0 - value : 0); break;
        case 9: img_hide_page(img, w / (IMG_PAGE / 8)); break;
        }
    }
}

/* ---- writing, room to build in, read tracking ---- */

bool img_write(image *img, uint64_t addr, const void *data, size_t len)
{
    const uint8_t *d = data;
    size_t w;
    for (uint64_t a = addr & ~(uint64_t)7; a < addr + len; a += 8)
        if (!img_word_of(img, a, &w)) return false;
    for (uint64_t a = addr & ~(uint64_t)7; a < addr + len; a += 8) {
        img_word_of(img, a, &w);
        uint64_t v = img_get_word(img, w), old = v;
        for (unsigned b = 0; b < 8; b++) {
            uint64_t at = a + b;
            if (at < addr || at >= addr + len) continue;
            v = (v & ~((uint64_t)0xff << (8 * b))) | ((uint64_t)d[at - addr] << (8 * b));
        }
        if (v != old) img_set_word(img, w, v);
    }
    return true;
}

bool img_add_zero_pages(image *img, uint64_t addr, size_t npages)
{
    /* the caller's img_finish sorts them in (img_add_page appends) */
    for (size_t i = 0; i < npages; i++)
        if (!img_add_page(img, addr + i * IMG_PAGE, NULL, IMG_PAGE)) return false;
    return true;
}

bool img_track_start(image *img)
{
    free(img->track);
    img->track = calloc(img_nwords(img) / 8 + 1, 1);
    return img->track != NULL;
}

static bool focus_push(uint32_t **v, size_t *n, uint32_t w)
{
    if (*n == 0 || (*n >= 64 && !(*n & (*n - 1)))) { /* capacity: 64, then doubled */
        uint32_t *p = realloc(*v, (*n ? 2 * *n : 64) * sizeof *p);
        if (!p) return false;
        *v = p;
    }
    (*v)[(*n)++] = w;
    return true;
}

static bool is_ptr_word(const image *img, size_t w)
{
    size_t lo = 0, hi = img->nptr_words;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (img->ptr_words[mid] < w) lo = mid + 1;
        else hi = mid;
    }
    return lo < img->nptr_words && img->ptr_words[lo] == w;
}

bool img_track_stop(image *img, img_focus *focus)
{
    uint8_t *t = img->track;
    img->track = NULL;
    if (!t) return false;
    bool ok = true;
    for (size_t w = 0; ok && w < img_nwords(img); w++) {
        if (!(t[w / 8] & (1u << (w % 8)))) continue;
        ok = focus_push(&focus->words, &focus->nwords, (uint32_t)w);
        if (ok && is_ptr_word(img, w)) ok = focus_push(&focus->ptrs, &focus->nptrs, (uint32_t)w);
    }
    free(t);
    return ok;
}

bool img_focus_add_range(const image *img, img_focus *focus, uint64_t addr, size_t len)
{
    size_t w;
    for (uint64_t a = addr & ~(uint64_t)7; a < addr + len; a += 8) {
        if (!img_word_of(img, a, &w)) continue;
        if (!focus_push(&focus->words, &focus->nwords, (uint32_t)w)) return false;
        if (is_ptr_word(img, w) && !focus_push(&focus->ptrs, &focus->nptrs, (uint32_t)w)) return false;
    }
    return true;
}

void img_focus_free(img_focus *focus)
{
    free(focus->words);
    free(focus->ptrs);
    memset(focus, 0, sizeof *focus);
}
