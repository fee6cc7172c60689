/*
 * `ruby page` (rbpeek_page_render) on a synthetic memory image, no Ruby
 * needed: a 3.3-style page of 40-byte slots with a class, objects, free
 * slots on a free list, and mark, uncollectible and age bits. The page
 * renders with each slot's bits; an address in no page, and thousands of
 * random addresses, end in one line or a page, never a crash; bitmaps
 * that mark free slots, a free list that starts at a live slot, and a
 * layout without the bitmaps are refused; a free list that loops is cut
 * where it repeats and said so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"

#include "context/context.h"
#include "vm/robject.h"

enum {
    VM = 0x1000, OBJSPACE = 0x2000, TABLE = 0x3000, HDR = 0x4000,
    BODY = 0x100000, SLOT = 40, NSLOTS = 20, NLIVE = 10,
    BITS = 208, /* 26 words: a 64 KiB page of 40-byte units */
};

static const uint64_t START = BODY + 40; /* slot k is unit k + 1 */

typedef struct fixture {
    image im;
    uint8_t *hdr, *body;
    rbpeek_session *s;
} fixture;

static void set_bit(uint8_t *hdr, int off, unsigned n)
{
    uint64_t w;
    memcpy(&w, hdr + off + (n / 64) * 8, 8);
    w |= UINT64_C(1) << (n % 64);
    memcpy(hdr + off + (n / 64) * 8, &w, 8);
}

static void fixture_init(fixture *f)
{
    memset(f, 0, sizeof *f);
    uint8_t *vm = add_region(&f->im, VM, 64);
    uint8_t *os = add_region(&f->im, OBJSPACE, 64);
    uint8_t *tbl = add_region(&f->im, TABLE, 64);
    f->hdr = add_region(&f->im, HDR, 0x800);
    f->body = add_region(&f->im, BODY, 0x10000);
    put64(vm + 8, OBJSPACE);
    put64(os + 16, TABLE), put64(os + 24, 1);
    put64(tbl, HDR);
    put64(f->body, HDR); /* the body's heap_page_header points back */
    put16(f->hdr + 0, SLOT), put16(f->hdr + 2, NSLOTS), put16(f->hdr + 4, NSLOTS - NLIVE);
    put64(f->hdr + 8, START);
    uint64_t cls = START;
    for (int k = 0; k < NLIVE; k++) {
        uint8_t *p = f->body + 40 + k * SLOT;
        put64(p, k == 0 ? RBP_T_CLASS : RBP_T_OBJECT), put64(p + 8, cls);
    }
    /* free list: slots NLIVE .. NSLOTS-1 in order */
    put64(f->hdr + 16, START + NLIVE * SLOT);
    for (int k = NLIVE; k < NSLOTS; k++)
        put64(f->body + 40 + k * SLOT + 8, k + 1 < NSLOTS ? START + (uint64_t)(k + 1) * SLOT : 0);
    for (unsigned k = 0; k < 5; k++) set_bit(f->hdr, 64, k + 1);       /* marked: slots 0-4 */
    for (unsigned k = 0; k < 2; k++) set_bit(f->hdr, 272, k + 1);      /* uncollectible: 0-1 */
    for (unsigned k = 0; k < 2; k++) {                                 /* age 3: slots 0-1 */
        unsigned n = k + 1;
        uint64_t w;
        memcpy(&w, f->hdr + 896 + (n / 32) * 8, 8);
        w |= UINT64_C(3) << ((n % 32) * 2);
        memcpy(f->hdr + 896 + (n / 32) * 8, &w, 8);
    }
    rbpeek_session *s = image_session(&f->im, 3, 3, "3.3.8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    s->vm = VM;
    set_field(&s->layout, RBP_L_vm_objspace, 8, 8);
    set_field(&s->layout, RBP_L_objspace_pages_sorted, 16, 8);
    set_field(&s->layout, RBP_L_objspace_pages_allocated, 24, 8);
    set_field(&s->layout, RBP_L_page_slot_size, 0, 2);
    set_field(&s->layout, RBP_L_page_total_slots, 2, 2);
    set_field(&s->layout, RBP_L_page_free_slots, 4, 2);
    set_field(&s->layout, RBP_L_page_start, 8, 8);
    set_field(&s->layout, RBP_L_page_freelist, 16, 8);
    set_field(&s->layout, RBP_L_page_mark_bits, 64, BITS);
    set_field(&s->layout, RBP_L_page_uncollectible_bits, 272, BITS);
    set_field(&s->layout, RBP_L_page_marking_bits, 480, BITS);
    set_field(&s->layout, RBP_L_page_wb_unprotected_bits, 688, BITS);
    set_field(&s->layout, RBP_L_page_age_bits, 896, 2 * BITS);
    f->s = s;
}

static void fixture_free(fixture *f)
{
    rbpeek_session_free(f->s);
    image_free(&f->im);
}

static rbpeek_status render(fixture *f, uint64_t addr, rbpeek_format fmt, char **out)
{
    rbpeek_session_invalidate(f->s); /* the image may have changed under the read cache */
    return rbpeek_page_render(f->s, addr, fmt, out);
}

static void test_page_renders(void)
{
    fixture f;
    fixture_init(&f);
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(render(&f, START + 3 * SLOT + 8, RBPEEK_FORMAT_JSON, &out), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"slot_size\": 40, \"total_slots\": 20, \"free_slots\": 10"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"freelist_length\": 10, \"freelist_note\": null"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"index\": 0, \"address\": \"0x100028\", \"type\": \"T_CLASS\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"marked\": true, \"uncollectible\": true, \"marking\": false, "
                                       "\"wb_unprotected\": false, \"age\": 3, \"old\": true"));
    /* slot 4: marked, young; slot 5: unmarked */
    char want[160];
    snprintf(want, sizeof want, "\"index\": 4, \"address\": \"0x%x\", \"type\": \"T_OBJECT\"", (unsigned)(START + 4 * SLOT));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"type\": \"free\", \"on_freelist\": true"));
    rbpeek_free(out);
    CU_ASSERT_EQUAL_FATAL(render(&f, START + 3 * SLOT + 8, RBPEEK_FORMAT_TEXT, &out), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "slot size 40, 20 slots"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ">    3 0x1000a0 M..... age 0 T_OBJECT"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "    0 0x100028 MU.... age 3 T_CLASS    Class"));
    rbpeek_free(out);
    /* the header's bytes before the first slot belong to the page too */
    CU_ASSERT_EQUAL(render(&f, BODY + 8, RBPEEK_FORMAT_TEXT, &out), RBPEEK_OK);
    rbpeek_free(out);
    fixture_free(&f);
}

static void test_page_bad_addresses(void)
{
    fixture f;
    fixture_init(&f);
    char *out = (char *)1;
    CU_ASSERT_EQUAL(render(&f, 0x10, RBPEEK_FORMAT_TEXT, &out), RBPEEK_ERR_ARG);
    CU_ASSERT_PTR_NULL(out);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f.s), "0x10 is not in any of the 1 heap pages"));
    CU_ASSERT_PTR_NULL(strchr(rbpeek_session_error(f.s), '\n'));
    /* random addresses, half of them near the page: a page or one line */
    uint64_t x = 0x9e3779b97f4a7c15;
    int ok = 0, refused = 0;
    for (int i = 0; i < 3000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint64_t a = i & 1 ? x : BODY - 0x8000 + (x % 0x20000);
        rbpeek_status st = rbpeek_page_render(f.s, a, RBPEEK_FORMAT_JSON, &out);
        CU_ASSERT(st == RBPEEK_OK || st == RBPEEK_ERR_ARG);
        if (st == RBPEEK_OK) {
            ok++;
            rbpeek_free(out);
        } else {
            refused++;
            CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f.s), "is not in any of the"));
        }
    }
    CU_ASSERT(ok > 0 && refused > 0);
    fixture_free(&f);
}

static void test_page_refusals(void)
{
    fixture f;
    fixture_init(&f);
    char *out = NULL;
    /* mark bits on three free slots: the bitmaps are not where the layout says */
    for (unsigned k = NLIVE; k < NLIVE + 3; k++) set_bit(f.hdr, 64, k + 1);
    CU_ASSERT_EQUAL(render(&f, START, RBPEEK_FORMAT_TEXT, &out), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f.s), "mark 3 free slots"));
    fixture_free(&f);

    fixture_init(&f);
    put64(f.hdr + 16, START + 2 * SLOT); /* the free list starts at a live object */
    CU_ASSERT_EQUAL(render(&f, START, RBPEEK_FORMAT_TEXT, &out), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f.s), "not a free slot of its page"));
    /* a free list that loops back is cut where it repeats */
    put64(f.hdr + 16, START + NLIVE * SLOT);
    put64(f.body + 40 + (NSLOTS - 1) * SLOT + 8, START + NLIVE * SLOT);
    CU_ASSERT_EQUAL_FATAL(render(&f, START, RBPEEK_FORMAT_TEXT, &out), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "free list: 10 slots, then entry 10"));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "is listed twice"));
    rbpeek_free(out);
    /* a layout without the bitmaps says what is missing */
    f.s->layout.f[RBP_L_page_mark_bits].offset = -1;
    CU_ASSERT_EQUAL(render(&f, START, RBPEEK_FORMAT_TEXT, &out), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f.s), "lacks heap_page's bitmaps"));
    fixture_free(&f);
}

static const rbp_cu_test TESTS[] = {
    {"page: a page renders with each slot's bits and the free list", test_page_renders},
    {"page: an address in no page, and random ones, end in one line", test_page_bad_addresses},
    {"page: bitmaps or a free list that contradict the slots are refused", test_page_refusals},
    {NULL, NULL},
};

RBP_CU_MAIN("page", TESTS)
