/*
 * A recorded memory image of a real Ruby process, for the fuzz harnesses:
 * the pages one run of every reader touched (tests/fuzz/record_image.c
 * makes it from a gcore'd Ruby), the answers the symbol lookups got, and a
 * reader and a lookup that serve them back through rbpeek's public callback
 * API, as a debugger would. On top, the patches a fuzz input makes to the
 * image (words, pointers, lengths, missing pages), undone after each run so
 * one loaded image serves every execution.
 *
 * File format (gzip-compressed): "RBPIMG01", u32 nsyms, then per symbol u16
 * name length, name, u64 address (0: not found); u32 npages, then per page
 * u64 address (4 KiB aligned), u32 readable bytes from its start, the bytes.
 * Little-endian throughout.
 */
#ifndef RBP_FUZZ_IMAGE_H
#define RBP_FUZZ_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbpeek.h"

#define IMG_PAGE 4096u

typedef struct img_sym {
    char *name;
    uint64_t addr;
} img_sym;

typedef struct img_page {
    uint64_t addr;
    uint32_t valid;     /* readable bytes from addr (the recording's), 0..4096 */
    uint32_t live;      /* readable now: a patch may hide the page */
    uint8_t *data;      /* IMG_PAGE bytes, the tail past valid zeroed */
} img_page;

typedef struct img_undo {
    uint8_t *where;     /* a patched word, or NULL for a page's live count */
    uint32_t *live;
    uint64_t old;
    uint32_t old_live;
} img_undo;

typedef struct image image;

struct image {
    img_sym *syms;
    size_t nsyms;
    img_page *pages;    /* sorted by address */
    size_t npages;
    uint32_t *ptr_words;    /* global word indexes whose value points into the image */
    size_t nptr_words;
    img_undo *undo;
    size_t nundo, undo_cap;
    const char *hidden_sym;     /* a lookup the reader pretends to fail, or NULL */
    /* The heap window: the object heap's page bodies (sorted), and which
     * of them a whole-body read may get (win_n from win_first; win_n 0:
     * all). A heap walk reads each body in one call and decodes its slots;
     * a body outside the window reads as unreadable, as a debugger that
     * cannot read a page reports it, so a census or dump costs the window's
     * objects, while every object stays readable slot by slot (classes,
     * ruby p, locals). */
    uint64_t *heap_bodies;
    size_t nheap_bodies;
    uint32_t heap_body_len;
    size_t win_first, win_n;
    uint64_t refused_body;      /* the body the last read refused, or 0 */
    /* Read tracking (img_track_*): one bit per word of the image, set for
     * every word a read serves while it is on. */
    uint8_t *track;
    /* A hook the reader calls once, before the read that makes reads reach
     * hook_at (counted from img_count_reads): the harness of a running
     * target changes its memory there, between two reads of one walk. */
    uint64_t reads, hook_at;
    void (*hook)(struct image *img, void *ctx);
    void *hook_ctx;
};

/* A set of words a patch may land on (img_apply_patches_in): the words an
 * operation reads, and those of them that hold a pointer into the image.
 * words NULL: the whole image (and ptr_words). */
typedef struct img_focus {
    uint32_t *words;
    size_t nwords;
    uint32_t *ptrs;
    size_t nptrs;
} img_focus;

/* Loads path (gzip or plain); false with a message on stderr. */
bool img_load(image *img, const char *path);
void img_free(image *img);

/* Adds a page (recording). data may be NULL for an unreadable page. Pages
 * must be added in any order; img_finish sorts them and indexes pointers. */
bool img_add_page(image *img, uint64_t addr, const uint8_t *data, uint32_t valid);
bool img_add_sym(image *img, const char *name, uint64_t addr);
void img_finish(image *img);
bool img_save(const image *img, const char *path);

/* The callbacks: ctx is the image. */
long img_read(void *ctx, uint64_t addr, void *buf, size_t len);
/* The batch read a /proc source offers (rbp_source.read_many), one
 * img_read a range. */
void img_read_many(void *ctx, const uint64_t *addrs, uint8_t *const *bufs, size_t n, size_t len, long *got);
int img_lookup(void *ctx, const char *name, uint64_t *addr);

/* Finds the image word at addr (8-aligned); false if it is not recorded. */
bool img_word_of(const image *img, uint64_t addr, size_t *w);
/* Sets the heap window: n bodies from the first (mod the count); n 0 or
 * past the count: the whole heap. */
void img_set_heap_window(image *img, size_t first, size_t n);
/* Whether the window refuses a read of len bytes at addr (img_read then
 * fails it): a whole heap body outside the window, and the read of that
 * body's first page that the memory layer makes next to find how much of
 * it is readable. Any other read is served. */
bool img_window_refuses(image *img, uint64_t addr, size_t len);

/* Words: the image seen as one array of 8-byte words, page after page. */
size_t img_nwords(const image *img);
uint64_t img_word_addr(const image *img, size_t w);
/* Patches, each undoable: */
void img_set_word(image *img, size_t w, uint64_t v);
uint64_t img_get_word(const image *img, size_t w);
void img_set_byte(image *img, size_t w, unsigned byte, uint8_t v);
void img_hide_page(image *img, size_t page);
/* Writes len bytes at addr, undoably; false (nothing written) when a byte
 * of it is not in the image. */
bool img_write(image *img, uint64_t addr, const void *data, size_t len);
/* Applies the patch list of a fuzz input (12 bytes a patch, see image.c). */
void img_apply_patches(image *img, const uint8_t *data, size_t size);
/* The same with every patch's word (and the word a pointer patch aims at
 * or copies, when its top bit asks for a pointer) taken from focus. */
void img_apply_patches_in(image *img, const uint8_t *data, size_t size, const img_focus *focus);
void img_undo_all(image *img);
/* Keeps every patch made so far: the image as it is becomes the one
 * img_undo_all goes back to. */
void img_commit(image *img);

/* Adds npages zeroed, readable pages from addr (page-aligned, in no page
 * of the image yet): room the harnesses build objects in. Then call
 * img_finish, before the image is read or written again (it sorts the
 * pages in and indexes them again); no patch may be pending. */
bool img_add_zero_pages(image *img, uint64_t addr, size_t npages);

/* Read tracking: img_track_start clears the bitmap and turns it on;
 * img_track_stop turns it off and fills focus with the words read (and
 * those of them holding a pointer into the image). */
bool img_track_start(image *img);
bool img_track_stop(image *img, img_focus *focus);
void img_focus_free(img_focus *focus);
/* Adds the words of [addr, addr+len) that are in the image to focus. */
bool img_focus_add_range(const image *img, img_focus *focus, uint64_t addr, size_t len);

#endif
