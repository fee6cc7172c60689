/*
 * A synthetic target memory image for tests that need no process: a few
 * regions at chosen addresses, readable through a session's reader
 * callback, with everything between them unmapped. Lets a test put an
 * object right at the end of what is readable, or leave a page out.
 * Used by test_heap and test_robject.
 */
#ifndef RBP_FIXTURE_IMAGE_H
#define RBP_FIXTURE_IMAGE_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "layout/layout.h"
#include "rbpeek.h"
#include "context/context.h"

typedef struct image_region {
    uint64_t addr;
    uint8_t *bytes;
    size_t len;
} image_region;

typedef struct image {
    image_region r[16];
    int n;
} image;

/* The reader callback (rbpeek_session_use_reader): a short read at the end
 * of a region, -1 outside every region. */
static inline long image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    image *im = ctx;
    for (int i = 0; i < im->n; i++) {
        image_region *r = &im->r[i];
        if (addr >= r->addr && addr < r->addr + r->len) {
            size_t n = r->addr + r->len - addr < len ? (size_t)(r->addr + r->len - addr) : len;
            memcpy(buf, r->bytes + (addr - r->addr), n);
            return (long)n;
        }
    }
    return -1;
}

/* A zeroed region; its bytes are the caller's to fill. */
static inline uint8_t *add_region(image *im, uint64_t addr, size_t len)
{
    image_region *r = &im->r[im->n++];
    r->addr = addr;
    r->len = len;
    r->bytes = calloc(1, len);
    return r->bytes;
}

static inline void image_free(image *im)
{
    for (int i = 0; i < im->n; i++) free(im->r[i].bytes);
    im->n = 0;
}

static inline void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static inline void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

static inline void set_field(rbp_layout *l, rbp_field_id id, int off, int size)
{
    l->f[id].offset = off;
    l->f[id].size = size;
}

/* A session reading im as an attached Ruby of the given version ("3.4.5"),
 * with an empty layout for the test to fill in, or NULL. */
static inline rbpeek_session *image_session(image *im, int major, int minor, const char *version)
{
    rbpeek_session *s = rbpeek_session_new();
    if (!s) return NULL;
    if (rbpeek_session_use_reader(s, image_read, im) != RBPEEK_OK) {
        rbpeek_session_free(s);
        return NULL;
    }
    s->attached = true;
    s->ver_major = major, s->ver_minor = minor;
    rbp_release_init(&s->rel, major, minor, 0);
    snprintf(s->ruby_version, sizeof s->ruby_version, "%s", version);
    rbp_layout_clear(&s->layout);
    return s;
}

#endif
