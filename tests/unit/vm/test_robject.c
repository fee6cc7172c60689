/*
 * Tests of the Ruby object readers (robject.c) on a synthetic memory image,
 * at the edge that real heaps produce now and then: an object in the last
 * slot of a heap page, with nothing mapped after the page. Arrays (heap
 * and embedded), Strings and the ID table behind rbp_id_name must read
 * there exactly as anywhere else; a layout that puts a header field past
 * the smallest slot is refused instead of read.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/robject.h"

enum {
    PAGE = 0x100000, PAGE_SIZE = 0x10000, /* a heap page; nothing mapped after it */
    ELEMS = 0x300000,                     /* a heap Array's elements */
    CHUNK_ELEMS = 0x400000,               /* the ID table chunk's entries */
    GS = 0x500000,                        /* ruby_global_symbols */
    LAST = PAGE + PAGE_SIZE - 40,         /* the page's last 40-byte slot */
};

/* Ruby 3.4's layouts of RArray, RString and rb_symbols_t. */
static rbpeek_session *session_on(image *im)
{
    rbpeek_session *s = image_session(im, 3, 4, "3.4.5");
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    set_field(&s->layout, RBP_L_rarray_heap_len, 16, 8);
    set_field(&s->layout, RBP_L_rarray_heap_ptr, 32, 8);
    set_field(&s->layout, RBP_L_rarray_embed_ary, 16, 8);
    set_field(&s->layout, RBP_L_rstring_len, 16, 8);
    set_field(&s->layout, RBP_L_rstring_heap_ptr, 24, 8);
    set_field(&s->layout, RBP_L_rstring_embed_ary, 24, 1);
    set_field(&s->layout, RBP_L_symbols_last_id, 0, 4);
    set_field(&s->layout, RBP_L_symbols_ids, 8, 8);
    return s;
}

static void put_heap_array(uint8_t *slot, uint64_t len, uint64_t elems)
{
    put64(slot, RBP_T_ARRAY);
    put64(slot + 16, len);
    put64(slot + 32, elems);
}

static void put_embedded_string(uint8_t *slot, const char *text)
{
    put64(slot, RBP_T_STRING);
    put64(slot + 16, strlen(text));
    memcpy(slot + 24, text, strlen(text) + 1);
}

static void test_array_in_last_slot(void)
{
    image im = {0};
    uint8_t *page = add_region(&im, PAGE, PAGE_SIZE);
    uint8_t *elems = add_region(&im, ELEMS, 3 * 8);
    put_heap_array(page + PAGE_SIZE - 40, 3, ELEMS);
    for (int i = 0; i < 3; i++) put64(elems + 8 * i, 0x1001 + 2 * i);
    /* an embedded Array of two in the slot before */
    uint8_t *emb = page + PAGE_SIZE - 80;
    put64(emb, RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(2) << (RBP_FL_USHIFT + 3)));
    put64(emb + 16, 0x11), put64(emb + 24, 0x13);

    rbpeek_session *s = session_on(&im);
    long len = 0;
    uint64_t at = 0, addr = 0;
    CU_ASSERT_TRUE(rbp_array_info(s, LAST, &len, &addr));
    CU_ASSERT_EQUAL(len, 3);
    CU_ASSERT_EQUAL(addr, ELEMS);
    CU_ASSERT_TRUE(rbp_array_at(s, LAST, 2, &at));
    CU_ASSERT_EQUAL(at, 0x1005);
    CU_ASSERT_FALSE(rbp_array_at(s, LAST, 3, &at));
    CU_ASSERT_TRUE(rbp_array_at(s, LAST - 40, 1, &at));
    CU_ASSERT_EQUAL(at, 0x13);

    /* a layout whose heap pointer lies past the smallest slot is refused
     * rather than read from the next slot (or past the page) */
    set_field(&s->layout, RBP_L_rarray_heap_ptr, 40, 8);
    rbpeek_session_invalidate(s);
    CU_ASSERT_FALSE(rbp_array_info(s, LAST, &len, &addr));
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_string_in_last_slot(void)
{
    image im = {0};
    uint8_t *page = add_region(&im, PAGE, PAGE_SIZE);
    uint8_t *bytes = add_region(&im, ELEMS, 64);
    put_embedded_string(page + PAGE_SIZE - 40, "synchronize");
    /* a heap String in the slot before */
    uint8_t *str = page + PAGE_SIZE - 80;
    put64(str, RBP_T_STRING | RBP_FL_USER(1));
    put64(str + 16, 20);
    put64(str + 24, ELEMS);
    memcpy(bytes, "a heap string, 20 ch", 20);

    rbpeek_session *s = session_on(&im);
    char buf[64];
    bool truncated = true;
    CU_ASSERT_EQUAL(rbp_string_read(s, LAST, buf, sizeof buf, &truncated), 11);
    CU_ASSERT_STRING_EQUAL(buf, "synchronize");
    CU_ASSERT_FALSE(truncated);
    char *dup = rbp_string_dup(s, LAST - 40);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dup);
    CU_ASSERT_STRING_EQUAL(dup, "a heap string, 20 ch");
    free(dup);
    rbpeek_session_free(s);
    image_free(&im);
}

/* The ID table: ids is an Array of chunks, each 512 (string, symbol) pairs.
 * Ruby allocates ids early, so it often sits in the last slot of a page. */
static void test_id_name_with_table_in_last_slot(void)
{
    image im = {0};
    uint8_t *page = add_region(&im, PAGE, PAGE_SIZE);
    uint8_t *chunk_elems = add_region(&im, CHUNK_ELEMS, 1024 * 8);
    uint8_t *ids_elems = add_region(&im, ELEMS, 8);
    uint8_t *gs = add_region(&im, GS, 64);
    uint64_t chunk = PAGE + 40, name = PAGE + 80;
    put_heap_array(page + PAGE_SIZE - 40, 1, ELEMS);
    put64(ids_elems, chunk);
    put_heap_array(page + 40, 1024, CHUNK_ELEMS);
    put_embedded_string(page + 80, "sleep");
    uint64_t serial = 300;
    put64(chunk_elems + serial * 2 * 8, name);
    put32(gs, 1000); /* last_id */
    put64(gs + 8, LAST);

    rbpeek_session *s = session_on(&im);
    s->global_symbols = GS;
    const char *got = rbp_id_name(s, serial << 4 | 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(got);
    CU_ASSERT_STRING_EQUAL(got, "sleep");
    CU_ASSERT_PTR_NULL(rbp_id_name(s, (uint64_t)301 << 4 | 1)); /* an empty entry */
    CU_ASSERT_PTR_NULL(rbp_id_name(s, (uint64_t)2000 << 4 | 1)); /* past last_id */
    rbpeek_session_free(s);
    image_free(&im);
}

/* Issue #12, defect 3: a bitfield whose bits span more than a word (a
 * layout line `ec_vm_stack 0 8 63 64`) made rbp_read_field copy up to 16
 * bytes into an 8-byte buffer on the stack. Attach refuses such a layout
 * (rbp_layout_check); the reader refuses the read on its own as well. */
static void test_bitfield_wider_than_a_word(void)
{
    image im = {0};
    uint8_t *p = add_region(&im, PAGE, 64);
    memset(p, 0xff, 64);
    rbpeek_session *s = session_on(&im);
    rbp_field *f = &s->layout.f[RBP_L_ec_vm_stack];
    *f = (rbp_field){.offset = 0, .size = 8, .bit_offset = 63, .bit_size = 64};
    uint64_t v = 0;
    CU_ASSERT_FALSE(rbp_read_field(s, PAGE, RBP_L_ec_vm_stack, &v));
    /* the widest that fits a word still reads, all 64 bits of it */
    *f = (rbp_field){.offset = 8, .size = 8, .bit_offset = 0, .bit_size = 64};
    CU_ASSERT(rbp_read_field(s, PAGE, RBP_L_ec_vm_stack, &v));
    CU_ASSERT_EQUAL(v, UINT64_MAX);
    *f = (rbp_field){.offset = 8, .size = 4, .bit_offset = 3, .bit_size = 2};
    CU_ASSERT(rbp_read_field(s, PAGE, RBP_L_ec_vm_stack, &v));
    CU_ASSERT_EQUAL(v, 3);
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test TESTS[] = {
    {"a bitfield wider than a word is refused, not read past its buffer", test_bitfield_wider_than_a_word},
    {"an Array in a page's last slot", test_array_in_last_slot},
    {"a String in a page's last slot", test_string_in_last_slot},
    {"ID names with the ID table in a page's last slot", test_id_name_with_table_in_last_slot},
    {NULL, NULL},
};

RBP_CU_MAIN("robject", TESTS)
