/*
 * Tests of the value printer that need no Ruby: Float#to_s's rules, and
 * `ruby p` (rbpeek_value_inspect) on the synthetic heap page of
 * fixture_heap.h holding a class, Strings, Arrays and garbage. The fuzz
 * part: random addresses inside and around the page, then the page's
 * objects corrupted at random, thousands of times; every call must end with
 * either an inspect string (valid UTF-8, bounded) or the one-line
 * "not a Ruby object: ..." error, never a crash or a hang. The printer's
 * bounds (Bignums, a value's and a command's text, wrapping pointers) are
 * test_inspect_limits.c's. The exact-output side is the integration test
 * (tests/integration/test_inspect.py), against Ruby's own #inspect.
 */
#include <stdio.h>
#include <string.h>

#include "fixture_heap.h"

static char *fmt_float(double d)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_insp_float(&b, d);
    return rbp_sb_take(&b);
}

static void test_float_to_s(void)
{
    static const struct { double d; const char *want; } cases[] = {
        {1.0, "1.0"}, {0.1, "0.1"}, {-2.5, "-2.5"}, {1.0 / 3, "0.3333333333333333"}, {100.0, "100.0"},
        {1e15, "1.0e+15"}, {123456789012345.0, "123456789012345.0"}, {1e16, "1.0e+16"}, {1e20, "1.0e+20"},
        {1e-4, "0.0001"}, {1e-5, "1.0e-05"}, {2.5e-10, "2.5e-10"}, {1e300, "1.0e+300"}, {5e-324, "5.0e-324"},
        {-0.0, "-0.0"}, {0.0, "0.0"}, {123456789.123, "123456789.123"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = fmt_float(cases[i].d);
        CU_ASSERT_STRING_EQUAL(got, cases[i].want);
        if (strcmp(got, cases[i].want)) fprintf(stderr, "float %.17g: got %s, want %s\n", cases[i].d, got, cases[i].want);
        free(got);
    }
}

static void test_p_synthetic(void)
{
    heap_fixture f;
    build(&f);
    expect(&f, 0x55, "42");              /* fixnum */
    expect(&f, 0x8, "nil");              /* 3.1's Qnil */
    expect(&f, 0x14, "true");
    expect(&f, slot_addr(&f, 1), "\"hi\"");
    expect(&f, slot_addr(&f, 2), "[1, \"hi\", [...]]");
    expect(&f, slot_addr(&f, 3), "[#<rbpeek: unreadable elements>]");
    expect(&f, slot_addr(&f, 4), "#<rbpeek: String with unreadable bytes>");
    expect_error(&f, slot_addr(&f, 7), "free slot");
    expect_error(&f, slot_addr(&f, 2) + 8, "inside the slot");
    expect_error(&f, 0x7777000, "not in any heap page");
    expect_error(&f, slot_addr(&f, 1) + 4, "8-byte aligned"); /* (an odd VALUE is a Fixnum) */
    put64(slot_bytes(&f, 5), 0x15), put64(slot_bytes(&f, 5) + 8, f.cls); /* T_FIXNUM on the heap */
    expect_error(&f, slot_addr(&f, 5), "bad flags");
    put64(slot_bytes(&f, 5), RBP_T_STRING), put64(slot_bytes(&f, 5) + 8, 0xdead0); /* class nowhere */
    expect_error(&f, slot_addr(&f, 5), "bad flags");
    /* a chain of 100 nested Arrays ends at --depth */
    for (int i = 10; i < 110; i++) {
        put64(slot_bytes(&f, i), RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(1) << (RBP_FL_USHIFT + 3)));
        put64(slot_bytes(&f, i) + 8, f.cls), put64(slot_bytes(&f, i) + 16, slot_addr(&f, i + 1));
    }
    put64(slot_bytes(&f, 110), RBP_T_ARRAY | RBP_FL_USER(1)), put64(slot_bytes(&f, 110) + 8, f.cls);
    expect(&f, slot_addr(&f, 10), "[[[[[[[[[\xe2\x80\xa6]]]]]]]]]");
    /* Exact or not, for the whole value: a part printed in Kernel#to_s's
     * form (slot 6, a T_DATA, inside the Array of slot 8) or as rbpeek's
     * own marker makes the value inexact, and says which part. */
    put64(slot_bytes(&f, 6), RBP_T_DATA), put64(slot_bytes(&f, 6) + 8, f.cls);
    put64(slot_bytes(&f, 8), RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(2) << (RBP_FL_USHIFT + 3)));
    put64(slot_bytes(&f, 8) + 8, f.cls), put64(slot_bytes(&f, 8) + 16, 0x55), put64(slot_bytes(&f, 8) + 24, slot_addr(&f, 6));
    expect_inexact(&f, slot_addr(&f, 2), "[1, \"hi\", [...]]", NULL);
    expect_inexact(&f, slot_addr(&f, 8), "[42, #<", "has an #inspect rbpeek does not decode");
    expect_inexact(&f, slot_addr(&f, 3), "[#<rbpeek: unreadable elements>]", "could not be read (#<rbpeek: unreadable elements>)");
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

/* `ruby p` of an immediate says what it is beside its text, in text and
 * JSON: 0xdeadbeef, an address mistyped with an odd last digit, printed only
 * "1867964279" (issue 37). An object's address says nothing of the kind. */
static void test_p_immediates(void)
{
    heap_fixture f;
    build(&f);
    static const struct { uint64_t v; const char *text, *line, *kind; } cases[] = {
        {0xdeadbeef, "1867964279", "0xdeadbeef is an immediate, not an object's address: Fixnum 1867964279", "Fixnum"},
        {0x20000000000002, "2.5", "0x20000000000002 is an immediate, not an object's address: Flonum 2.5", "Flonum"},
        {0x4d20c, "#<rbpeek: Symbol of unknown ID 1234>", "0x4d20c is an immediate, not an object's address: "
         "Symbol (static) of ID 1234", "Symbol (static)"},
        {0x8, "nil", "0x8 is an immediate, not an object's address: nil\n", "nil"},   /* 3.1's Qnil */
        {0x14, "true", "0x14 is an immediate, not an object's address: true\n", "true"},
        {0x0, "false", "0x0 is an immediate, not an object's address: false\n", "false"},
        {0x34, "#<rbpeek: Qundef (no value)>", "0x34 is an immediate, not an object's address: undef\n", "undef"},
    };
    rbpeek_inspect_options opt = {8, 100, 0, 0};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *text = NULL, *json = NULL, kind[64];
        snprintf(kind, sizeof kind, "\"immediate\": \"%s\"", cases[i].kind);
        CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, cases[i].v, &opt, RBPEEK_FORMAT_TEXT, &text), RBPEEK_OK);
        CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, cases[i].v, &opt, RBPEEK_FORMAT_JSON, &json), RBPEEK_OK);
        CU_ASSERT(strncmp(text, cases[i].text, strlen(cases[i].text)) == 0 && text[strlen(cases[i].text)] == '\n');
        CU_ASSERT_PTR_NOT_NULL(strstr(text, cases[i].line));
        CU_ASSERT_PTR_NOT_NULL(strstr(json, kind));
        if (!strstr(text, cases[i].line) || !strstr(json, kind)) fprintf(stderr, "p 0x%llx: %s%s", (unsigned long long)cases[i].v, text, json);
        rbpeek_free(text), rbpeek_free(json);
    }
    char *text = NULL, *json = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, slot_addr(&f, 1), &opt, RBPEEK_FORMAT_TEXT, &text), RBPEEK_OK);
    CU_ASSERT_EQUAL_FATAL(rbpeek_value_inspect(f.s, slot_addr(&f, 1), &opt, RBPEEK_FORMAT_JSON, &json), RBPEEK_OK);
    CU_ASSERT_STRING_EQUAL(text, "\"hi\"\n");
    CU_ASSERT_PTR_NULL(strstr(json, "immediate"));
    rbpeek_free(text), rbpeek_free(json);
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

enum { DATA = 0x600000 }; /* the Procs' rb_data_type_t, name and rb_proc_t structs */

/* Proc (a typed T_DATA of type "proc") and Regexp objects made wrong in the
 * ways a corrupt heap could: each prints Kernel#to_s's #<Class:0x...> form,
 * flagged inexact with the reason, never a guess. */
static void test_p_corrupt_proc_regexp(void)
{
    heap_fixture f;
    build(&f);
    uint8_t *d = add_region(&f.im, DATA, 0x1000);
    rbp_layout *l = &f.s->layout;
    set_field(l, RBP_L_typeddata_type, 16, 8);
    set_field(l, RBP_L_typeddata_typed_flag, 24, 8);
    set_field(l, RBP_L_typeddata_data, 32, 8);
    set_field(l, RBP_L_data_type_name, 0, 8);
    set_field(l, RBP_L_proc_block_code, 16, 8);
    set_field(l, RBP_L_proc_block_symbol, 0, 8);
    set_field(l, RBP_L_proc_block_proc, 0, 8);
    set_field(l, RBP_L_proc_block_type, 24, 4);
    set_field(l, RBP_L_proc_is_lambda, 32, 4);
    l->f[RBP_L_proc_is_lambda].bit_offset = 1, l->f[RBP_L_proc_is_lambda].bit_size = 1;
    set_field(l, RBP_L_rregexp_ptr, 16, 8);
    set_field(l, RBP_L_rregexp_src, 24, 8);
    set_field(l, RBP_L_regex_options, 56, 4);
    put64(d, DATA + 0x100), memcpy(d + 0x100, "proc", 5); /* rb_data_type_t {wrap_struct_name = "proc"} */
    /* slots 20..24: Procs whose rb_proc_t is at DATA + 0x200 + 0x40 * k */
    for (int k = 0; k < 5; k++) {
        uint8_t *b = slot_bytes(&f, 20 + k);
        put64(b, RBP_T_DATA), put64(b + 8, f.cls);
        put64(b + 16, DATA), put64(b + 24, 1), put64(b + 32, DATA + 0x200 + 0x40 * (uint64_t)k);
    }
    uint8_t *pr = d + 0x200;
    /* 20: a C block (vm_ifunc at 0xabc0), a lambda: exact */
    put64(pr + 16, 0xabc0), put32(pr + 24, 1), put32(pr + 32, 2);
    char want[96];
    snprintf(want, sizeof want, "#<#<Class:0x%016llx>:0x000000000000abc0 (lambda)>\n", (unsigned long long)f.cls);
    expect_inexact(&f, slot_addr(&f, 20), want, NULL);
    /* 21: a block type Ruby never makes */
    put32(pr + 0x40 + 24, 7);
    expect_inexact(&f, slot_addr(&f, 21), "#<#<Class:", "its block has type 7");
    /* 22: an iseq block whose code is no iseq */
    put64(pr + 0x80 + 16, slot_addr(&f, 1)), put32(pr + 0x80 + 24, 0);
    expect_inexact(&f, slot_addr(&f, 22), "#<#<Class:", "is not a readable iseq");
    /* 23: a proc block standing for itself: the walkguard sees the loop
     * (issue #12) and says so, at the second step */
    put64(pr + 0xc0, slot_addr(&f, 23)), put32(pr + 0xc0 + 24, 3);
    expect_inexact(&f, slot_addr(&f, 23), "#<#<Class:", "chain of Procs that was cut: it loops");
    /* 24: a Symbol block whose Symbol is a String */
    put64(pr + 0x100, slot_addr(&f, 1)), put32(pr + 0x100 + 24, 2);
    expect_inexact(&f, slot_addr(&f, 24), "#<#<Class:", "is no Symbol");
    /* 25: a Regexp /a\/b/mix; 26: one whose source is no String; 27: one with no pattern */
    uint8_t *re = d + 0x400;
    put32(re + 56, 7);
    for (int k = 25; k < 28; k++) {
        uint8_t *b = slot_bytes(&f, k);
        put64(b, RBP_T_REGEXP), put64(b + 8, f.cls), put64(b + 16, k == 27 ? 0 : DATA + 0x400);
        put64(b + 24, k == 26 ? slot_addr(&f, 2) : slot_addr(&f, 28));
    }
    uint8_t *src = slot_bytes(&f, 28);
    put64(src, RBP_T_STRING | (UINT64_C(3) << (RBP_FL_USHIFT + 2)) | (UINT64_C(1) << (RBP_FL_USHIFT + 10)));
    put64(src + 8, f.cls), memcpy(src + 16, "a/b", 3);
    expect_inexact(&f, slot_addr(&f, 25), "/a\\/b/mix\n", NULL);
    expect_inexact(&f, slot_addr(&f, 26), "#<#<Class:", "is not a readable String");
    expect_inexact(&f, slot_addr(&f, 27), "#<#<Class:", "uninitialized Regexp");
    /* 29: a Time (rb_data_type_t "time" at DATA + 0x80) at 2026-11-25 17:00:00.5 UTC with
     * its vtm filled in (3.1's packed struct time_object); then without it, then in month 13 */
    set_field(l, RBP_L_time_timew, 0, 8);
    set_field(l, RBP_L_time_vtm_year, 8, 8);
    set_field(l, RBP_L_time_vtm_utc_offset, 24, 8);
    static const struct { rbp_field_id id; int off, bit, bits; } BITS[] = {
        {RBP_L_time_vtm_mon, 41, 1, 4}, {RBP_L_time_vtm_mday, 41, 5, 5}, {RBP_L_time_vtm_hour, 42, 2, 5},
        {RBP_L_time_vtm_min, 42, 7, 6}, {RBP_L_time_vtm_sec, 43, 5, 6}, {RBP_L_time_tzmode, 45, 0, 3},
        {RBP_L_time_tm_got, 45, 3, 1},
    };
    for (size_t i = 0; i < sizeof BITS / sizeof BITS[0]; i++) {
        set_field(l, BITS[i].id, BITS[i].off, 4);
        l->f[BITS[i].id].bit_offset = BITS[i].bit, l->f[BITS[i].id].bit_size = BITS[i].bits;
    }
    put64(d + 0x80, DATA + 0x90), memcpy(d + 0x90, "time", 5);
    uint8_t *tb = slot_bytes(&f, 29), *tm = d + 0x600;
    put64(tb, RBP_T_DATA), put64(tb + 8, f.cls), put64(tb + 16, DATA + 0x80), put64(tb + 24, 1);
    put64(tb + 32, DATA + 0x600);
    put64(tm, ((UINT64_C(1795626000) * 1000000000 + 500000000) << 1) | 1);
    put64(tm + 8, (2026 << 1) | 1), put64(tm + 24, 1);
    uint64_t bits = (UINT64_C(11) << 9) | (UINT64_C(25) << 13) | (UINT64_C(17) << 18); /* from byte 40 */
    for (int k = 0; k < 5; k++) tm[40 + k] = (uint8_t)(bits >> (8 * k));
    tm[45] = 1 | 8; /* UTC, tm_got */
    expect_inexact(&f, slot_addr(&f, 29), "2026-11-25 17:00:00.5 UTC\n", NULL);
    tm[45] = 1;
    expect_inexact(&f, slot_addr(&f, 29), "#<#<Class:", "no broken-down time");
    tm[45] = 1 | 8, tm[41] |= 0x1e; /* month 15 */
    expect_inexact(&f, slot_addr(&f, 29), "#<#<Class:", "out of range");
    /* without the members (a layout that lacks them), the Kernel#to_s form */
    l->f[RBP_L_proc_block_type].offset = -1;
    expect_inexact(&f, slot_addr(&f, 20), "#<#<Class:", "no rb_proc_t members");
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

/* Damage a crashed process's heap can hold (issue 24): a Rational whose
 * numerator is itself, a Complex whose real part is itself, and the same
 * through each other and through an Array. Each used to recurse without
 * end and kill gdb and lldb with SIGSEGV; now each prints rbpeek's marker
 * saying why, and the value is flagged inexact. */
static void test_p_self_containing(void)
{
    heap_fixture f;
    build(&f);
    uint64_t r = slot_addr(&f, 30), c = slot_addr(&f, 31), a = slot_addr(&f, 32), b = slot_addr(&f, 33);
    put_pair(&f, 30, RBP_T_RATIONAL, r, 0x7);   /* (self/3) */
    put_pair(&f, 31, RBP_T_COMPLEX, c, c);      /* (self+selfi) */
    expect_has(&f, r, "(#<rbpeek: a Rational that contains itself", "/3)", "not exact", "contains itself", NULL);
    expect_has(&f, c, "(#<rbpeek: a Complex that contains itself", "+#<rbpeek: a Complex that contains itself",
               "i)", NULL);
    /* a Rational and a Complex that are each other's part */
    put_pair(&f, 32, RBP_T_RATIONAL, b, 0x3);
    put_pair(&f, 33, RBP_T_COMPLEX, 0x5, a);
    expect_has(&f, a, "((2+#<rbpeek: a Rational that contains itself", "i)/1)", NULL);
    /* through an Array: Ruby's own mark for the Array, [...] */
    put64(slot_bytes(&f, 34), RBP_T_ARRAY | RBP_FL_USER(1) | (UINT64_C(1) << (RBP_FL_USHIFT + 3)));
    put64(slot_bytes(&f, 34) + 8, f.cls), put64(slot_bytes(&f, 34) + 16, slot_addr(&f, 35));
    put_pair(&f, 35, RBP_T_RATIONAL, slot_addr(&f, 34), 0x3);
    expect_has(&f, slot_addr(&f, 34), "[([...]/1)]", NULL);
    /* a chain of 300 Rationals, each the numerator of the one before:
     * deeper than the printer goes */
    for (int i = 40; i < 340; i++) put_pair(&f, i, RBP_T_RATIONAL, i + 1 < 340 ? slot_addr(&f, i + 1) : 0x3, 0x3);
    expect_has(&f, slot_addr(&f, 40), "((((((((", "#<rbpeek: a Rational that nests too deep", NULL);
    /* a Complex whose parts are a Complex whose parts are... each twice:
     * 2^100 paths, ended by the budget of objects per value */
    for (int i = 40; i < 140; i++) {
        uint64_t next = i + 1 < 140 ? slot_addr(&f, i + 1) : 0x3;
        put_pair(&f, i, RBP_T_COMPLEX, next, next);
    }
    max_out = (size_t)64 << 20;
    expect_has(&f, slot_addr(&f, 40), "#<rbpeek: cut: the budget of 1048576 objects per value is spent>", NULL);
    max_out = 200000;
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

enum { SYMNAME = 0x2000000 };

/* A dynamic Symbol whose name is "@" and a million "=": the check of
 * whether it prints bare (symbol.c's rb_enc_symname_type) recursed once
 * per "=" and overflowed the stack. */
static void test_p_long_symbol_name(void)
{
    heap_fixture f;
    build(&f);
    size_t n = (size_t)1 << 20;
    uint8_t *name = add_region(&f.im, SYMNAME, n);
    name[0] = '@';
    memset(name + 1, '=', n - 1);
    put64(slot_bytes(&f, 30), RBP_T_STRING | RBP_FL_USER(1)), put64(slot_bytes(&f, 30) + 8, f.cls);
    put64(slot_bytes(&f, 30) + 16, n), put64(slot_bytes(&f, 30) + 24, SYMNAME);
    put64(slot_bytes(&f, 31), RBP_T_SYMBOL), put64(slot_bytes(&f, 31) + 8, f.cls);
    put64(slot_bytes(&f, 31) + 32, slot_addr(&f, 30));
    max_out = (size_t)8 << 20;
    expect_has(&f, slot_addr(&f, 31), ":\"@===", NULL);
    max_out = 200000;
    /* and names that do print bare still do */
    memcpy(name, "foo=", 5);
    put64(slot_bytes(&f, 30) + 16, 4);
    expect(&f, slot_addr(&f, 31), ":foo=");
    memcpy(name, "@a==", 5);
    expect(&f, slot_addr(&f, 31), ":\"@a==\"");
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

static uint64_t rng(uint64_t *x)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    return *x;
}

static void test_p_fuzz(void)
{
    heap_fixture f;
    build(&f);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    int ok = 0, refused = 0;
    /* random addresses around and inside the page */
    for (int i = 0; i < 3000; i++) {
        uint64_t v = rng(&seed) % 3 == 0 ? rng(&seed) : BODY + rng(&seed) % 0x5000;
        if (p(&f, v, NULL) == RBPEEK_OK) ok++; else refused++;
    }
    /* the page's objects corrupted at random: flags, classes, bodies */
    static const uint64_t types[] = {RBP_T_STRING, RBP_T_ARRAY, RBP_T_HASH,   RBP_T_OBJECT,   RBP_T_STRUCT, RBP_T_FLOAT,
                                     RBP_T_BIGNUM, RBP_T_SYMBOL, RBP_T_CLASS, RBP_T_DATA, RBP_T_RATIONAL, RBP_T_COMPLEX};
    for (int round = 0; round < 300; round++) {
        for (int i = 1; i < 60; i++) {
            uint8_t *b = slot_bytes(&f, i);
            uint64_t r = rng(&seed);
            put64(b, (types[r % 12] | (rng(&seed) & ~UINT64_C(0x1f) & 0xffffffffull)) & ~RBP_FL_USER(0));
            put64(b + 8, r & 0x100 ? f.cls : slot_addr(&f, (int)(rng(&seed) % 60)));
            for (int w = 2; w < SLOT / 8; w++) {
                uint64_t k = rng(&seed);
                put64(b + 8 * w, k % 3 == 0 ? slot_addr(&f, (int)(k % 60)) : k % 3 == 1 ? (k & 0xffff) : k);
            }
        }
        for (int i = 0; i < 60; i++) { if (p(&f, slot_addr(&f, i), NULL) == RBPEEK_OK) ok++; else refused++; }
    }
    CU_ASSERT(ok > 0);
    CU_ASSERT(refused > 0);
    rbpeek_session_free(f.s);
    image_free(&f.im);
}

static const rbp_cu_test TESTS[] = {
    {"float_to_s", test_float_to_s},
    {"p_synthetic", test_p_synthetic},
    {"p_immediates", test_p_immediates},
    {"p_corrupt_proc_regexp", test_p_corrupt_proc_regexp},
    {"p_self_containing", test_p_self_containing},
    {"p_long_symbol_name", test_p_long_symbol_name},
    {"p_fuzz", test_p_fuzz},
    {NULL, NULL},
};

RBP_CU_MAIN("inspect", TESTS)
