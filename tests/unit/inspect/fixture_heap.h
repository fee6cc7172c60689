/*
 * The synthetic heap of the value printer's unit tests (test_inspect.c,
 * test_inspect_limits.c): one page of Ruby 3.1's layout, 40-byte slots,
 * holding a class, Strings and Arrays, in a replayed image with no Ruby;
 * `ruby p` of a slot through the public API, checked to end with a bounded
 * line of valid UTF-8 or the one-line error; and what the tests expect of it.
 * Each test file includes it once.
 */
#ifndef RBP_TEST_FIXTURE_HEAP_H
#define RBP_TEST_FIXTURE_HEAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"

#include "base/strbuf.h"
#include "context/context.h"
#include "inspect/inspect_int.h"
#include "vm/robject.h"

enum {
    VM = 0x100000, OBJSPACE = 0x200000, TABLE = 0x300000, HDR = 0x400000, BODY = 0x1000000,
    SLOT = 40, NSLOTS = 400, HEAPBUF = 0x500000,
};


typedef struct heap_fixture {
    image im;
    uint8_t *body, *heapbuf;
    uint64_t start, cls;
    rbpeek_session *s;
} heap_fixture;

static inline uint64_t slot_addr(heap_fixture *f, int i) { return f->start + (uint64_t)i * SLOT; }
static inline uint8_t *slot_bytes(heap_fixture *f, int i) { return f->body + SLOT + (size_t)i * SLOT; }

static inline void build(heap_fixture *f)
{
    memset(f, 0, sizeof *f);
    uint8_t *vm = add_region(&f->im, VM, 64);
    uint8_t *os = add_region(&f->im, OBJSPACE, 64);
    uint8_t *tbl = add_region(&f->im, TABLE, 64);
    uint8_t *hdr = add_region(&f->im, HDR, 64);
    f->body = add_region(&f->im, BODY, 0x4000);
    f->heapbuf = add_region(&f->im, HEAPBUF, 0x1000);
    f->start = BODY + SLOT;
    put64(vm + 8, OBJSPACE);
    put64(os + 16, TABLE), put64(os + 24, 1);
    put64(tbl, HDR);
    put64(f->body, HDR);
    put16(hdr, SLOT), put16(hdr + 2, NSLOTS), put64(hdr + 8, f->start);
    f->s = image_session(&f->im, 3, 1, "3.1.2");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f->s);
    f->s->vm = VM;
    rbp_layout *l = &f->s->layout;
    set_field(l, RBP_L_vm_objspace, 8, 8);
    set_field(l, RBP_L_objspace_pages_sorted, 16, 8);
    set_field(l, RBP_L_objspace_pages_allocated, 24, 8);
    set_field(l, RBP_L_page_slot_size, 0, 2);
    set_field(l, RBP_L_page_total_slots, 2, 2);
    set_field(l, RBP_L_page_start, 8, 8);
    set_field(l, RBP_L_rstring_heap_len, 16, 8);
    set_field(l, RBP_L_rstring_heap_ptr, 24, 8);
    set_field(l, RBP_L_rstring_ary, 16, 24);
    set_field(l, RBP_L_rarray_heap_len, 16, 8);
    set_field(l, RBP_L_rarray_heap_ptr, 32, 8);
    set_field(l, RBP_L_rarray_embed_ary, 16, 24);
    set_field(l, RBP_L_rclass_super, 16, 8);
    set_field(l, RBP_L_rfloat_value, 16, 8);
    set_field(l, RBP_L_rhash_st, 16, 8);
    set_field(l, RBP_L_rstruct_heap_len, 16, 8);
    set_field(l, RBP_L_rstruct_heap_ptr, 24, 8);
    set_field(l, RBP_L_rstruct_ary, 16, 24);
    set_field(l, RBP_L_rbignum_heap_len, 16, 8);
    set_field(l, RBP_L_rbignum_heap_digits, 24, 8);
    set_field(l, RBP_L_rbignum_ary, 16, 24);
    set_field(l, RBP_L_rrational_num, 16, 8);
    set_field(l, RBP_L_rrational_den, 24, 8);
    set_field(l, RBP_L_rcomplex_real, 16, 8);
    set_field(l, RBP_L_rcomplex_imag, 24, 8);
    set_field(l, RBP_L_rsymbol_fstr, 32, 8);
    /* slot 0: a class (nameless); 1: "hi" (embedded, UTF-8); 2: [1, "hi", self];
     * 3: an Array of 1000 elements in unmapped memory; 4: a heap String whose
     * bytes are unmapped; 5..: free */
    f->cls = slot_addr(f, 0);
    put64(slot_bytes(f, 0), RBP_T_CLASS), put64(slot_bytes(f, 0) + 8, f->cls);
    put64(slot_bytes(f, 1), RBP_T_STRING | (UINT64_C(2) << (RBP_FL_USHIFT + 2)) | (UINT64_C(1) << (RBP_FL_USHIFT + 10)));
    put64(slot_bytes(f, 1) + 8, f->cls);
    memcpy(slot_bytes(f, 1) + 16, "hi", 2);
    put64(slot_bytes(f, 2), RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(3) << (RBP_FL_USHIFT + 3)));
    put64(slot_bytes(f, 2) + 8, f->cls);
    put64(slot_bytes(f, 2) + 16, 3), put64(slot_bytes(f, 2) + 24, slot_addr(f, 1)), put64(slot_bytes(f, 2) + 32, slot_addr(f, 2));
    put64(slot_bytes(f, 3), RBP_T_ARRAY), put64(slot_bytes(f, 3) + 8, f->cls);
    put64(slot_bytes(f, 3) + 16, 1000), put64(slot_bytes(f, 3) + 32, 0x7700000);
    put64(slot_bytes(f, 4), RBP_T_STRING | RBP_FL_USER(1)), put64(slot_bytes(f, 4) + 8, f->cls);
    put64(slot_bytes(f, 4) + 16, 50), put64(slot_bytes(f, 4) + 24, 0x7700000);
}

/* The longest output p() accepts: values of the fuzz part stay far below;
 * a million-byte Symbol, or a value cut by the budget of objects, not. */
static size_t max_out = 200000;

/* One `ruby p`: OK with a bounded, valid UTF-8 line, or the clear error. */
static inline rbpeek_status p(heap_fixture *f, uint64_t v, char **text)
{
    rbpeek_inspect_options opt = {8, 100, 1, 0};
    char *out = NULL;
    rbpeek_session_invalidate(f->s);
    rbpeek_status st = rbpeek_value_inspect(f->s, v, &opt, RBPEEK_FORMAT_TEXT, &out);
    if (st == RBPEEK_OK) {
        CU_ASSERT_PTR_NOT_NULL(out);
        if (out) {
            size_t n = strlen(out);
            CU_ASSERT(n < max_out);
            for (size_t i = 0; i < n;) {
                size_t k = rbp_utf8_seq_len((const unsigned char *)out + i, n - i);
                CU_ASSERT_FATAL(k > 0);
                i += k;
            }
        }
    } else {
        const char *e = rbpeek_session_error(f->s);
        CU_ASSERT(st == RBPEEK_ERR_ARG || st == RBPEEK_ERR_READ || st == RBPEEK_ERR_NO_LAYOUT);
        CU_ASSERT_PTR_NULL(strchr(e, '\n'));
        if (st == RBPEEK_ERR_ARG) CU_ASSERT_PTR_NOT_NULL(strstr(e, "not a Ruby object"));
    }
    if (text) *text = out;
    else rbpeek_free(out);
    return st;
}

static inline void expect(heap_fixture *f, uint64_t v, const char *want_prefix)
{
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(p(f, v, &out), RBPEEK_OK);
    CU_ASSERT(strncmp(out, want_prefix, strlen(want_prefix)) == 0);
    if (strncmp(out, want_prefix, strlen(want_prefix))) fprintf(stderr, "p 0x%llx: got %s\n", (unsigned long long)v, out);
    rbpeek_free(out);
}

static inline void expect_error(heap_fixture *f, uint64_t v, const char *what)
{
    CU_ASSERT_EQUAL(p(f, v, NULL), RBPEEK_ERR_ARG);
    CU_ASSERT_PTR_NOT_NULL(strstr(rbpeek_session_error(f->s), what));
    if (!strstr(rbpeek_session_error(f->s), what)) fprintf(stderr, "p 0x%llx: %s\n", (unsigned long long)v, rbpeek_session_error(f->s));
}

/* `ruby p --raw` of v: OK, its first line starting with want, and when why
 * is given, the value said to be inexact for that reason. */
static inline void expect_inexact(heap_fixture *f, uint64_t v, const char *want, const char *why)
{
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(p(f, v, &out), RBPEEK_OK);
    CU_ASSERT(strncmp(out, want, strlen(want)) == 0);
    CU_ASSERT(why ? strstr(out, why) != NULL : strstr(out, "not exact") == NULL);
    if (strncmp(out, want, strlen(want)) || (why ? !strstr(out, why) : !!strstr(out, "not exact")))
        fprintf(stderr, "p 0x%llx: got %s", (unsigned long long)v, out);
    rbpeek_free(out);
}

/* A two-part number (T_RATIONAL or T_COMPLEX) in slot i. */
static inline void put_pair(heap_fixture *f, int i, uint64_t type, uint64_t a, uint64_t b)
{
    put64(slot_bytes(f, i), type), put64(slot_bytes(f, i) + 8, f->cls);
    put64(slot_bytes(f, i) + 16, a), put64(slot_bytes(f, i) + 24, b);
}

/* `ruby p` of v: OK, and out holds each of the (NULL-ended) strings. */
static inline void expect_has(heap_fixture *f, uint64_t v, ...)
{
    char *out = NULL;
    CU_ASSERT_EQUAL_FATAL(p(f, v, &out), RBPEEK_OK);
    va_list ap;
    va_start(ap, v);
    for (const char *want; (want = va_arg(ap, const char *)) != NULL;) {
        CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
        if (!strstr(out, want)) fprintf(stderr, "p 0x%llx: no '%s' in: %s", (unsigned long long)v, want, out);
    }
    va_end(ap);
    rbpeek_free(out);
}

#endif
