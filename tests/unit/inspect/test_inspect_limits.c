/*
 * The value printer's bounds, on the synthetic heap of fixture_heap.h:
 * Bignums converted by GMP (2**2,000,000 whole, a length past the cap
 * refused, copies held in an Array each printed), a value's text cut at
 * max_output and at 64 MiB, a command's text budget shared by its values,
 * the public max_bytes, and elements claimed where their address wraps past
 * 2^64. Under valgrind (RBPEEK_MEMCHECK) the Bignum copies are fewer.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixture_heap.h"
#include "heap/heap.h"
#include "inspect/inspect.h"

enum { BIGDIGITS = 0x3000000, BIGARRAY = 0x3200000 };

/* A heap Bignum (the magnitude's 32-bit words at digits) in slot i. */
static void put_bignum(heap_fixture *f, int i, bool positive, uint64_t len, uint64_t digits)
{
    put64(slot_bytes(f, i), RBP_T_BIGNUM | (positive ? RBP_FL_USER(1) : 0)), put64(slot_bytes(f, i) + 8, f->cls);
    put64(slot_bytes(f, i) + 16, len), put64(slot_bytes(f, i) + 24, digits);
}

/* Bignums, converted by GMP (issue 24: the division by 10^9 it replaced
 * was quadratic, 8.9 s for 65,536 words): small ones embedded and on the
 * heap, negative, 2**2_000_000 (602,060 digits, checked at both ends
 * against Python's), one past the cap (a marker, nothing read), and an
 * Array holding one 2 Mbit Bignum 100 times (converted once) or 200 times
 * (cut when the text passes 64 MiB). */
static void test_p_bignum(void)
{
    heap_fixture f;
    build(&f);
    /* 2**64, embedded: three words */
    put64(slot_bytes(&f, 50), RBP_T_BIGNUM | RBP_FL_USER(1) | RBP_FL_USER(2) | (UINT64_C(3) << (RBP_FL_USHIFT + 3)));
    put64(slot_bytes(&f, 50) + 8, f.cls);
    put32(slot_bytes(&f, 50) + 16, 0), put32(slot_bytes(&f, 50) + 20, 0), put32(slot_bytes(&f, 50) + 24, 1);
    expect(&f, slot_addr(&f, 50), "18446744073709551616\n");
    /* -(2**96 - 1) on the heap */
    size_t words = 62501;
    uint8_t *d = add_region(&f.im, BIGDIGITS, words * 4);
    memset(d, 0xff, 12);
    put_bignum(&f, 51, false, 3, BIGDIGITS);
    expect(&f, slot_addr(&f, 51), "-79228162514264337593543950335\n");
    /* 2**2_000_000 */
    memset(d, 0, words * 4);
    put32(d + (words - 1) * 4, 1);
    put_bignum(&f, 52, true, words, BIGDIGITS);
    char *out = NULL;
    max_out = (size_t)80 << 20;
    CU_ASSERT_EQUAL_FATAL(p(&f, slot_addr(&f, 52), &out), RBPEEK_OK);
    CU_ASSERT_EQUAL(strcspn(out, "\n"), 602060);
    CU_ASSERT_EQUAL(strncmp(out, "98022993770695674158", 20), 0);
    CU_ASSERT_EQUAL(strncmp(out + 602060 - 20, "16554666243707109376", 20), 0);
    rbpeek_free(out);
    /* a length past the cap: a marker, no read of its 4 MiB of digits */
    put_bignum(&f, 53, true, (UINT64_C(1) << 20) + 1, 0x7700000);
    expect_has(&f, slot_addr(&f, 53), "#<rbpeek: an Integer of 1048577 32-bit digits (about 11 million decimal "
               "digits): longer than rbpeek prints", "not exact", NULL);
    /* [big] * 100: each copy printed whole. Under valgrind (memcheck.*,
     * RBPEEK_MEMCHECK) 3 copies, and not the 64 MiB cut below: more copies
     * run the same code for a minute longer, and p_max_output runs the cut. */
    bool memcheck = getenv("RBPEEK_MEMCHECK") != NULL;
    size_t want = memcheck ? 3 : 100;
    uint8_t *arr = add_region(&f.im, BIGARRAY, 200 * 8);
    for (int i = 0; i < 200; i++) put64(arr + 8 * i, slot_addr(&f, 52));
    put64(slot_bytes(&f, 54), RBP_T_ARRAY), put64(slot_bytes(&f, 54) + 8, f.cls);   /* heap elements */
    put64(slot_bytes(&f, 54) + 16, want), put64(slot_bytes(&f, 54) + 32, BIGARRAY);
    CU_ASSERT_EQUAL_FATAL(p(&f, slot_addr(&f, 54), &out), RBPEEK_OK);
    size_t copies = 0;
    for (const char *q = out; (q = strstr(q, "98022993770695674158")) != NULL; q++) copies++;
    CU_ASSERT_EQUAL(copies, want);
    CU_ASSERT_EQUAL(strcspn(out, "\n"), want * 602060 + (want - 1) * 2 + 2);
    CU_ASSERT_PTR_NULL(strstr(out, "rbpeek"));
    rbpeek_free(out);
    if (memcheck) {
        max_out = 200000;
        rbpeek_session_free(f.s);
        image_free(&f.im);
        return;
    }
    /* 200 copies, --max-length 1000: cut when the text passes 64 MiB */
    put64(slot_bytes(&f, 54) + 16, 200);
    rbpeek_inspect_options opt = {8, 1000, 0, 0};
    rbpeek_session_invalidate(f.s);
    CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, slot_addr(&f, 54), &opt, RBPEEK_FORMAT_TEXT, &out), RBPEEK_OK);
    copies = 0;
    for (const char *q = out; (q = strstr(q, "98022993770695674158")) != NULL; q++) copies++;
    CU_ASSERT(copies > 100 && copies < 120);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ", #<rbpeek: cut: the value's text passed 64 MiB>, \xe2\x80\xa6]"));
    rbpeek_free(out);
    max_out = 200000;
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

enum { WIDE_INNER = 0x3400000, WIDE_OUTER = 0x3500000 };

/* max_output: a printer that shows only a value's start (bt --locals in
 * text) stops the value at about that many bytes, with the marker, and
 * reads only what it printed. [["hi"] * 100] * 100 prints 60 KB whole. */
static void test_p_max_output(void)
{
    heap_fixture f;
    build(&f);
    uint8_t *inner = add_region(&f.im, WIDE_INNER, 100 * 8), *outer = add_region(&f.im, WIDE_OUTER, 100 * 8);
    for (int i = 0; i < 100; i++) put64(inner + 8 * i, slot_addr(&f, 1)), put64(outer + 8 * i, slot_addr(&f, 60));
    put64(slot_bytes(&f, 60), RBP_T_ARRAY), put64(slot_bytes(&f, 60) + 8, f.cls);
    put64(slot_bytes(&f, 60) + 16, 100), put64(slot_bytes(&f, 60) + 32, WIDE_INNER);
    put64(slot_bytes(&f, 61), RBP_T_ARRAY), put64(slot_bytes(&f, 61) + 8, f.cls);
    put64(slot_bytes(&f, 61) + 16, 100), put64(slot_bytes(&f, 61) + 32, WIDE_OUTER);
    rbp_heap h;
    CU_ASSERT_EQUAL_FATAL(rbp_heap_open(f.s, &h), RBPEEK_OK);
    size_t budget = RBP_INSP_COMMAND_BUDGET;
    rbp_inspect_limits whole = {8, 100, &budget, 0, NULL}, start = {8, 100, &budget, 4096, NULL};
    rbp_strbuf out;
    rbp_sb_init(&out);
    rbp_sb_puts(&out, "before: ");   /* a value is measured from where it starts */
    rbp_inspect_append(&h, slot_addr(&f, 61), &whole, &out, NULL);
    CU_ASSERT_EQUAL(out.len, 8 + 60200);   /* [ + 100 x [ + 100 x "hi" + 99 x ", " + ] + 99 x ", " + ] */
    CU_ASSERT_PTR_NULL(strstr(out.buf, "rbpeek"));
    size_t spent_whole = RBP_INSP_COMMAND_BUDGET - budget;
    CU_ASSERT_EQUAL(spent_whole, 1 + 100 * (1 + 100));
    out.len = 8;
    budget = RBP_INSP_COMMAND_BUDGET;
    rbp_inspect_append(&h, slot_addr(&f, 61), &start, &out, NULL);
    CU_ASSERT(out.len > 8 + 4096 && out.len < 8 + 4096 + 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.buf, "#<rbpeek: cut: the value's text passed 4096 bytes>"));
    CU_ASSERT(RBP_INSP_COMMAND_BUDGET - budget < 800);   /* about 700 objects, not 10,101 */
    /* A command's text budget: the first value is cut where it runs out,
     * with the command's marker, the next prints none of its parts. */
    size_t text = 10000;
    rbp_inspect_limits shared = {8, 100, &budget, 0, &text};
    out.len = 0;
    rbp_inspect_append(&h, slot_addr(&f, 61), &shared, &out, NULL);
    CU_ASSERT(out.len > 10000 && out.len < 10000 + 200);
    CU_ASSERT_EQUAL(text, 0);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.buf, "#<rbpeek: cut: this command's text passed 16 MiB>"));
    size_t first = out.len;
    rbp_inspect_append(&h, slot_addr(&f, 61), &shared, &out, NULL);
    CU_ASSERT(out.len - first < 100);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.buf + first, "#<rbpeek: cut: this command's text passed 16 MiB>"));
    rbp_sb_free(&out);
    rbp_heap_close(&h);
    /* The public API's max_bytes is that bound. */
    rbpeek_inspect_options opt = {8, 100, 0, 4096};
    char *printed = NULL;
    rbpeek_session_invalidate(f.s);
    CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, slot_addr(&f, 61), &opt, RBPEEK_FORMAT_TEXT, &printed), RBPEEK_OK);
    CU_ASSERT(strlen(printed) > 4096 && strlen(printed) < 4096 + 200);
    CU_ASSERT_PTR_NOT_NULL(strstr(printed, "#<rbpeek: cut: the value's text passed 4096 bytes>"));
    rbpeek_free(printed);
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

/* An Array whose elements are claimed at the top of the address space:
 * the check of whether they lie in the slot's copy must not wrap (found by
 * fuzz_objects: the copy was read from 2^64 - 8 bytes past it). */
static void test_p_wrapping_pointer(void)
{
    heap_fixture f;
    build(&f);
    put64(slot_bytes(&f, 62), RBP_T_ARRAY), put64(slot_bytes(&f, 62) + 8, f.cls);
    put64(slot_bytes(&f, 62) + 16, 2), put64(slot_bytes(&f, 62) + 32, UINT64_MAX - 7);
    expect_has(&f, slot_addr(&f, 62), "[#<rbpeek: unreadable elements>]", NULL);
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

static const rbp_cu_test TESTS[] = {
    {"p_bignum", test_p_bignum},
    {"p_max_output", test_p_max_output},
    {"p_wrapping_pointer", test_p_wrapping_pointer},
    {NULL, NULL},
};

RBP_CU_MAIN("inspect_limits", TESTS)
