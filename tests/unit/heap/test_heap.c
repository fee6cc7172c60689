/*
 * Tests of the heap census and dump that need no Ruby: the census
 * aggregator (class rows merged through a singleton's real class, internal
 * and hidden objects grouped by type, orderings, summary, both writers),
 * and the heap walker on a
 * synthetic memory image: a page table listing a page twice, a garbage
 * header and a page inside another's body; a page whose body is unmapped;
 * a page table the layout misplaces (found by its pages) and pages whose
 * bodies do not point back to them (refused); and slots
 * with impossible types or class pointers that lead nowhere, all of which
 * must be counted (skipped pages, unreadable slots) without stopping the walk.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heap/census.h"
#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"

#include "base/strbuf.h"
#include "context/context.h"
#include "heap/heap.h"
#include "heap/obj.h"
#include "vm/robject.h"

/* --- census aggregator --------------------------------------------------- */

enum { CLS_A = 0x1000, CLS_B = 0x2000, SING_A = 0x3000 };

static uint64_t fake_real(void *ctx, uint64_t klass) { return klass == SING_A ? CLS_A : klass; }
static const char *fake_name(void *ctx, uint64_t cls)
{
    return cls == CLS_A ? "Outer::A" : cls == CLS_B ? "B" : "?";
}

static rbpeek_census *sample_census(void)
{
    rbpeek_census *c = rbp_census_new("3.3.8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(c);
    for (int i = 0; i < 3; i++) CU_ASSERT(rbp_census_add(c, RBP_T_OBJECT, CLS_A, 40, false));
    CU_ASSERT(rbp_census_add(c, RBP_T_OBJECT, SING_A, 40, false)); /* has a singleton class */
    for (int i = 0; i < 2; i++) CU_ASSERT(rbp_census_add(c, RBP_T_STRING, CLS_B, 1000, false));
    for (int i = 0; i < 2; i++) CU_ASSERT(rbp_census_add(c, RBP_T_STRING, 0, 50, true)); /* hidden */
    for (int i = 0; i < 4; i++) CU_ASSERT(rbp_census_add(c, RBP_T_IMEMO, 0x7777, 40, true));
    CU_ASSERT(rbp_census_add(c, RBP_T_ICLASS, CLS_B, 80, true));
    CU_ASSERT(rbp_census_add_page(c, 0xa000, 0x10028, 40, 100, 13, 85, 2));
    CU_ASSERT(rbp_census_add_page(c, 0xb000, 0x20050, 80, 50, 0, 50, 0));
    rbp_census_set_rejected_pages(c, 1);
    CU_ASSERT_FATAL(rbp_census_finish(c, fake_real, fake_name, NULL));
    return c;
}

static void test_census_rows(void)
{
    rbpeek_census *c = sample_census();
    rbpeek_census_summary s;
    rbpeek_census_get_summary(c, &s);
    CU_ASSERT_EQUAL(s.live, 13);
    CU_ASSERT_EQUAL(s.slots, 150);
    CU_ASSERT_EQUAL(s.free_slots, 135);
    CU_ASSERT_EQUAL(s.unreadable, 2);
    CU_ASSERT_EQUAL(s.pages, 2);
    CU_ASSERT_EQUAL(s.rejected_pages, 1);
    CU_ASSERT_EQUAL(s.bytes, 4 * 40 + 2 * 1000 + 2 * 50 + 4 * 40 + 80);
    CU_ASSERT_EQUAL(s.bytes_visible, 4 * 40 + 2 * 1000);
    CU_ASSERT_EQUAL(s.nclasses, 5);
    uint64_t bytes;
    CU_ASSERT_EQUAL(rbpeek_census_type(c, RBP_T_STRING, &bytes), 4);
    CU_ASSERT_EQUAL(bytes, 2100);
    CU_ASSERT_EQUAL(rbpeek_census_type(c, RBP_T_HASH, &bytes), 0);
    /* rows by count: A (3 + 1 through its singleton), imemo 4, then B/hidden 2 each, iclass 1 */
    const rbpeek_census_class *r0 = rbpeek_census_class_at(c, 0), *r1 = rbpeek_census_class_at(c, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
    CU_ASSERT_TRUE(strcmp(r0->name, "Outer::A") == 0 || strcmp(r0->name, "(internal: imemo)") == 0);
    CU_ASSERT_EQUAL(r0->count, 4);
    CU_ASSERT_EQUAL(r1->count, 4);
    size_t seen = 0;
    for (size_t i = 0; i < s.nclasses; i++) {
        const rbpeek_census_class *r = rbpeek_census_class_at(c, i);
        if (!strcmp(r->name, "Outer::A")) {
            CU_ASSERT_EQUAL(r->count, 4);
            CU_ASSERT_EQUAL(r->address, CLS_A);
            CU_ASSERT_FALSE(r->internal);
            seen++;
        } else if (!strcmp(r->name, "B")) {
            CU_ASSERT_EQUAL(r->count, 2);
            CU_ASSERT_EQUAL(r->bytes, 2000);
            seen++;
        } else if (!strcmp(r->name, "(hidden T_STRING)")) {
            CU_ASSERT_EQUAL(r->count, 2);
            CU_ASSERT_TRUE(r->internal);
            seen++;
        } else if (!strcmp(r->name, "(internal: iclass)")) {
            CU_ASSERT_EQUAL(r->count, 1);
            seen++;
        } else if (!strcmp(r->name, "(internal: imemo)")) {
            CU_ASSERT_EQUAL(r->count, 4);
            seen++;
        }
    }
    CU_ASSERT_EQUAL(seen, 5);
    CU_ASSERT_PTR_NULL(rbpeek_census_class_at(c, s.nclasses));
    rbpeek_census_free(c);
}

static void test_census_render(void)
{
    rbpeek_census *c = sample_census();
    char *text = NULL, *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_census_render(c, RBPEEK_FORMAT_TEXT, 2, 1, &text), RBPEEK_OK);
    /* by bytes, B (2000) leads; only 2 rows */
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "Top 2 classes by bytes (of 5)"));
    char *b = strstr(text, "  B\n"), *a = strstr(text, "  Outer::A\n");
    CU_ASSERT_PTR_NOT_NULL(b);
    CU_ASSERT_PTR_NULL(a);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "T_STRING"));
    CU_ASSERT_EQUAL_FATAL(rbpeek_census_render(c, RBPEEK_FORMAT_JSON, 0, 0, &json), RBPEEK_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"count_objects\": {\"TOTAL\": 150, \"FREE\": 135, \"T_OBJECT\": 4, "
                                        "\"T_STRING\": 4, \"T_IMEMO\": 4, \"T_ICLASS\": 1}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"ruby_version\": \"3.3.8\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"slot_size\": 40, \"pages\": 1, \"slots\": 100, \"live\": 13, \"free\": 85}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"header\": \"0xa000\", \"start\": \"0x10028\""));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"rejected_pages\": 1"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"memsize_of_all_comparable\": 2160"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "{\"name\": \"Outer::A\", \"address\": \"0x1000\", \"count\": 4, \"bytes\": 160, "
                                        "\"internal\": false}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"classes_total\": 5"));
    rbpeek_free(text);
    rbpeek_free(json);
    rbpeek_census_free(c);
}

/* --- the heap walker on a synthetic memory image ------------------------------ */

enum {
    VM = 0x1000, OBJSPACE = 0x2000, TABLE = 0x3000, TABLE2 = 0x6000, HDRS = 0x4000,
    BODY1 = 0x100000, BODY2 = 0x200000, BODY3 = 0x300000, /* 64 KiB aligned */
    SLOT = 40, NSLOTS = 50,
};

typedef struct tally {
    uint64_t live, by_type[32], pages, page_live, page_free, page_unreadable;
} tally;

static bool count_obj(void *ctx, const rbp_obj *o)
{
    tally *t = ctx;
    t->live++;
    t->by_type[o->type & 31]++;
    return true;
}

static void count_page(void *ctx, const rbp_heap_page *pg, const rbp_walk_page_stats *st)
{
    tally *t = ctx;
    t->pages++;
    t->page_live += st->live;
    t->page_free += st->free;
    t->page_unreadable += st->unreadable;
}

static void test_walk_synthetic(void)
{
    image im = {0};
    uint8_t *vm = add_region(&im, VM, 64);
    uint8_t *os = add_region(&im, OBJSPACE, 64);
    uint8_t *tbl = add_region(&im, TABLE, 64);
    uint8_t *tbl2 = add_region(&im, TABLE2, 64);
    uint8_t *hdr = add_region(&im, HDRS, 0x400);
    uint8_t *b1 = add_region(&im, BODY1, 0x10000);
    uint8_t *b2 = add_region(&im, BODY2, 0x10000);
    /* BODY3 is not mapped: its page's slots are unreadable */

    put64(vm + 8, OBJSPACE);
    put64(os + 16, TABLE);
    uint64_t h1 = HDRS, h2 = HDRS + 0x100, h3 = HDRS + 0x200, hbad = HDRS + 0x300, hover = HDRS + 0x80;
    uint64_t pages[] = {h2, h1, h1 /* listed twice */, hbad, hover, h3, 0 /* NULL */};
    size_t npages = sizeof pages / sizeof pages[0];
    for (size_t i = 0; i < npages; i++) put64(tbl + 8 * i, pages[i]);
    put64(os + 24, npages);
    /* heap_page headers: slot_size@0 (u16), total_slots@2 (u16), start@8 */
    uint64_t s1 = BODY1 + 40, s2 = BODY2 + 40;
    put64(b1, h1), put64(b2, h2); /* each body's heap_page_header points back to its page */
    put16(hdr + 0x000, SLOT), put16(hdr + 0x002, NSLOTS), put64(hdr + 0x008, s1);
    put16(hdr + 0x100, SLOT), put16(hdr + 0x102, NSLOTS), put64(hdr + 0x108, s2);
    put16(hdr + 0x200, SLOT), put16(hdr + 0x202, NSLOTS), put64(hdr + 0x208, BODY3 + 40);
    put16(hdr + 0x300, 12345), put16(hdr + 0x302, 7), put64(hdr + 0x308, 0x1234567); /* garbage */
    put16(hdr + 0x080, SLOT), put16(hdr + 0x082, 10), put64(hdr + 0x088, s1 + 5 * SLOT); /* in page 1's body */

    /* page 1: a class, objects of it, free slots, garbage */
    uint8_t *p1 = b1 + 40;
    uint64_t cls = s1;
    put64(p1 + 0 * SLOT, RBP_T_CLASS), put64(p1 + 0 * SLOT + 8, cls);
    for (int i = 1; i <= 10; i++) put64(p1 + i * SLOT, RBP_T_OBJECT), put64(p1 + i * SLOT + 8, cls);
    put64(p1 + 11 * SLOT, 0x15), put64(p1 + 11 * SLOT + 8, cls);                 /* T_FIXNUM: impossible */
    put64(p1 + 12 * SLOT, RBP_T_STRING), put64(p1 + 12 * SLOT + 8, 0xdeadbeef0); /* class outside the heap */
    put64(p1 + 13 * SLOT, RBP_T_STRING), put64(p1 + 13 * SLOT + 8, s1 + 1 * SLOT); /* class is an object */
    put64(p1 + 14 * SLOT, RBP_T_STRING), put64(p1 + 14 * SLOT + 8, 0);         /* hidden: fine */
    put64(p1 + 15 * SLOT, RBP_T_NODE);                                         /* never on the heap */
    put64(p1 + 16 * SLOT, RBP_T_ZOMBIE);                                       /* a zombie */
    put64(p1 + 17 * SLOT, RBP_T_ZOMBIE | (UINT64_C(1) << 40));                 /* not a zombie */
    put64(p1 + 18 * SLOT, RBP_T_IMEMO | (UINT64_C(15) << 12));                 /* no such imemo */
    put64(p1 + 19 * SLOT, RBP_T_IMEMO | (UINT64_C(7) << 12));                  /* an iseq */
    put64(p1 + 20 * SLOT, RBP_T_STRING), put64(p1 + 20 * SLOT + 8, s1 + 3);    /* misaligned class */
    /* page 2: objects whose class is on page 1 */
    for (int i = 0; i < 5; i++) put64(b2 + 40 + i * SLOT, RBP_T_ARRAY), put64(b2 + 40 + i * SLOT + 8, cls);

    rbpeek_session *s = image_session(&im, 3, 3, "3.3.8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    s->vm = VM;
    set_field(&s->layout, RBP_L_vm_objspace, 8, 8);
    set_field(&s->layout, RBP_L_objspace_pages_sorted, 16, 8);
    set_field(&s->layout, RBP_L_objspace_pages_allocated, 24, 8);
    set_field(&s->layout, RBP_L_page_slot_size, 0, 2);
    set_field(&s->layout, RBP_L_page_total_slots, 2, 2);
    set_field(&s->layout, RBP_L_page_start, 8, 8);

    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(h.listed, npages);
    CU_ASSERT_EQUAL(h.npages, 3);   /* pages 1, 2 and the unmapped one */
    CU_ASSERT_EQUAL(h.rejected, 4); /* the duplicate, the garbage header, the one in page 1's body, NULL */
    CU_ASSERT_TRUE(rbp_heap_is_slot(&h, s1 + 3 * SLOT));
    CU_ASSERT_FALSE(rbp_heap_is_slot(&h, s1 + 3 * SLOT + 8));
    CU_ASSERT_PTR_NULL(rbp_heap_page_of(&h, 0x500000));

    tally t = {0};
    CU_ASSERT_EQUAL(rbp_heap_walk(&h, count_obj, count_page, &t), RBPEEK_OK);
    CU_ASSERT_EQUAL(t.pages, 3);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_CLASS], 1);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_OBJECT], 10);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_STRING], 1);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_ZOMBIE], 1);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_IMEMO], 1);
    CU_ASSERT_EQUAL(t.by_type[RBP_T_ARRAY], 5);
    CU_ASSERT_EQUAL(t.live, 19);
    CU_ASSERT_EQUAL(t.page_live, 19);
    /* garbage on page 1: 11, 12, 13, 15, 17, 18, 20; all of the unmapped page */
    CU_ASSERT_EQUAL(t.page_unreadable, 7 + NSLOTS);
    CU_ASSERT_EQUAL(t.page_free, (NSLOTS - 21) + (NSLOTS - 5));

    /* obj.class through singleton classes: one that leads to cls, and a
     * cycle of singletons (each the other's superclass) that must end */
    set_field(&s->layout, RBP_L_rclass_super, 16, 8);
    uint64_t sing = s1 + 21 * SLOT, loop_a = s1 + 22 * SLOT, loop_b = s1 + 23 * SLOT;
    put64(p1 + 21 * SLOT, RBP_T_CLASS | RBP_FL_USER(0)), put64(p1 + 21 * SLOT + 8, cls);
    put64(p1 + 21 * SLOT + 16, cls);
    put64(p1 + 22 * SLOT, RBP_T_CLASS | RBP_FL_USER(0)), put64(p1 + 22 * SLOT + 16, loop_b);
    put64(p1 + 23 * SLOT, RBP_T_CLASS | RBP_FL_USER(0)), put64(p1 + 23 * SLOT + 16, loop_a);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbp_class_real(&h, sing), cls);
    CU_ASSERT_EQUAL(rbp_class_real(&h, cls), cls);
    CU_ASSERT_EQUAL(rbp_class_real(&h, loop_a), 0);
    CU_ASSERT_EQUAL(rbp_class_real(&h, 0xdead0000), 0); /* not a slot */
    /* a nameless class is named as inspect names it */
    char want[64];
    snprintf(want, sizeof want, "#<Class:0x%016llx>", (unsigned long long)cls);
    CU_ASSERT_STRING_EQUAL(rbp_heap_class_name(&h, cls), want);
    rbp_heap_close(&h);

    /* a page table not where the layout says is found by its pages: the
     * layout's place holds a pointer to no pages */
    put64(tbl2, h1), put64(tbl2 + 8, h2), put64(tbl2 + 16, h3);
    put64(os + 40, TABLE2), put64(os + 48, 3);
    put64(os + 16, HDRS + 0x300), put64(os + 24, 7);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(h.npages, 3);
    CU_ASSERT_PTR_NOT_NULL(strstr(s->layout_checks, "heap page table found at objspace+40 (the layout said +16)"));
    rbp_heap_close(&h);
    put64(os + 40, 0), put64(os + 48, 0);
    /* pages whose bodies point elsewhere are not pages: their members are
     * misplaced, and the layout is refused */
    put64(os + 16, TABLE), put64(os + 24, npages);
    put64(b1, h2), put64(b2, h1);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbp_heap_open(s, &h), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "break the GC's page invariants"));
    put64(b1, h1), put64(b2, h2);

    /* a page table that can't be read at all is a one-line error, not a crash */
    put64(os + 16, 0x9999000);
    rbpeek_session_invalidate(s); /* the image changed under the read cache */
    CU_ASSERT_EQUAL(rbp_heap_open(s, &h), RBPEEK_ERR_READ);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "heap page"));
    /* nor is an absurd page count, which says the layout's GC members are
     * misplaced: the layout is refused */
    put64(os + 16, TABLE);
    put64(os + 24, UINT64_C(1) << 40);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbp_heap_open(s, &h), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "does not fit"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "implausible heap page count"));
    rbpeek_session_free(s);
    image_free(&im);
}

/* 3.4+ (the modular GC's default): each page names its rb_heap_t, one of
 * the objspace's heaps[], whose slot size is the page's. A page whose heap
 * is elsewhere or of another slot size breaks that invariant. */
static void test_walk_heaps(void)
{
    enum { HEAPS = 64, HEAP_SIZE = 32, DARRAY = 0x5000 };
    image im = {0};
    uint8_t *vm = add_region(&im, VM, 64);
    uint8_t *os = add_region(&im, OBJSPACE, 256);
    uint8_t *da = add_region(&im, DARRAY, 64);
    uint8_t *hdr = add_region(&im, HDRS, 0x400);
    uint8_t *b1 = add_region(&im, BODY1, 0x10000);
    uint8_t *b2 = add_region(&im, BODY2, 0x10000);
    uint64_t heap40 = OBJSPACE + HEAPS, heap80 = OBJSPACE + HEAPS + HEAP_SIZE;
    uint64_t h1 = HDRS, h2 = HDRS + 0x100;
    put64(vm + 8, OBJSPACE);
    put64(os + 16, DARRAY);
    put16(os + HEAPS, 40), put16(os + HEAPS + HEAP_SIZE, 80); /* rb_heap_t.slot_size */
    put64(da, 2), put64(da + 8, 2), put64(da + 16, h1), put64(da + 24, h2); /* rb_darray {size, capa, ...} */
    /* heap_page: slot_size@0, total_slots@2, heap@16, start@40; bodies point back */
    put16(hdr + 0x000, 40), put16(hdr + 0x002, 100), put64(hdr + 0x010, heap40), put64(hdr + 0x028, BODY1 + 16);
    put16(hdr + 0x100, 80), put16(hdr + 0x102, 100), put64(hdr + 0x110, heap80), put64(hdr + 0x128, BODY2 + 16);
    put64(b1, h1), put64(b2, h2);

    rbpeek_session *s = image_session(&im, 4, 0, "4.0.0");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    s->vm = VM;
    set_field(&s->layout, RBP_L_vm_gc_objspace, 8, 8);
    set_field(&s->layout, RBP_L_objspace_pages_sorted, 16, 8);
    set_field(&s->layout, RBP_L_objspace_heaps, HEAPS, 2 * HEAP_SIZE);
    set_field(&s->layout, RBP_L_gc_heap_slot_size, 0, 2);
    set_field(&s->layout, RBP_L_page_slot_size, 0, 2);
    set_field(&s->layout, RBP_L_page_total_slots, 2, 2);
    set_field(&s->layout, RBP_L_page_heap, 16, 8);
    set_field(&s->layout, RBP_L_page_start, 40, 8);

    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(h.npages, 2);
    CU_ASSERT_EQUAL(h.rejected, 0);
    rbp_heap_close(&h);
    /* the 40-byte page naming the 80-byte heap is no page of this heap */
    put64(hdr + 0x010, heap80);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(s, &h), RBPEEK_OK);
    CU_ASSERT_EQUAL(h.npages, 1);
    CU_ASSERT_EQUAL(h.rejected, 1);
    rbp_heap_close(&h);
    /* heaps[] where the layout does not put them: no page fits, the layout is refused */
    put64(hdr + 0x010, heap40);
    set_field(&s->layout, RBP_L_objspace_heaps, HEAPS + 2 * HEAP_SIZE, 2 * HEAP_SIZE);
    rbpeek_session_invalidate(s);
    CU_ASSERT_EQUAL(rbp_heap_open(s, &h), RBPEEK_ERR_NO_LAYOUT);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(s), "break the GC's page invariants"));
    rbpeek_session_free(s);
    image_free(&im);
}

/* objects x references is a pairwise walk: one heap walk reads at most
 * h->ref_budget references over all its objects; an object that would
 * overrun it gets none and counts as incomplete (the dump says how many). */
static void count_ref(void *ctx, uint64_t v)
{
    (void)v;
    ++*(size_t *)ctx;
}

static void test_reference_budget(void)
{
    enum { ELEMS = 0x700000 };
    image im = {0};
    uint8_t *elems = add_region(&im, ELEMS, 64);
    for (int i = 0; i < 8; i++) put64(elems + 8 * i, 0x800000 + 0x40 * (uint64_t)i);
    rbpeek_session *s = image_session(&im, 3, 3, "3.3.8");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    set_field(&s->layout, RBP_L_rarray_heap_len, 16, 8);
    set_field(&s->layout, RBP_L_rarray_heap_ptr, 32, 8);
    rbp_heap h;
    memset(&h, 0, sizeof h);
    h.s = s;
    h.c = &s->rel.obj;   /* 3.3: elts_shared is FL_USER2 */
    CU_ASSERT_EQUAL(RBP_HEAP_REF_BUDGET, UINT64_C(256) << 20);
    h.ref_budget = 10;
    uint8_t slot[40] = {0};
    put64(slot, RBP_T_ARRAY);
    put64(slot + 16, 8);     /* a heap Array of 8 elements */
    put64(slot + 32, ELEMS);
    rbp_obj o = {.addr = 0x900000, .slot = slot, .slot_size = 40, .type = RBP_T_ARRAY, .flags = RBP_T_ARRAY};
    size_t n = 0;
    CU_ASSERT(rbp_obj_refs(&h, &o, count_ref, &n));
    CU_ASSERT_EQUAL(n, 8);
    CU_ASSERT_EQUAL(h.ref_budget, 2);
    n = 0;
    CU_ASSERT_FALSE(rbp_obj_refs(&h, &o, count_ref, &n)); /* 8 more would overrun the 2 left */
    CU_ASSERT_EQUAL(n, 0);
    CU_ASSERT_EQUAL(h.ref_budget, 2);
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test TESTS[] = {
    {"a walk's budget of references: an object that would overrun it is incomplete", test_reference_budget},
    {"census rows: merged by real class, internal grouped", test_census_rows},
    {"census render: text and JSON", test_census_render},
    {"walk: garbage pages and slots are counted, not followed", test_walk_synthetic},
    {"walk: 3.4+ pages belong to one of the objspace's heaps[]", test_walk_heaps},
    {NULL, NULL},
};

RBP_CU_MAIN("heap", TESTS)
