/*
 * Tests of the heap dump's writer (heap_dump.c) that need no Ruby:
 * dump_all's string escaping through the one JSON escaper, the dump's line
 * format for several target releases (their dump_all rules), streaming of a
 * large string value, and a damaged String (a 7-bit coderange over bytes
 * that are not UTF-8) that must not make the dump invalid UTF-8.
 */
#define _GNU_SOURCE /* open_memstream */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"
#include "rbpeek.h"

#include "base/json.h"
#include "base/strbuf.h"
#include "context/release.h"
#include "heap/heap_dump.h"
#include "vm/robject.h"

/* --- dump format ----------------------------------------------------------- */

/* The releases whose dump_all rules the records below follow. */
static rbp_release R207;
static rbp_release R301;
static rbp_release R303;
static rbp_release R304;

static void init_releases(void)
{
    rbp_release_init(&R207, 2, 7, 0);
    rbp_release_init(&R301, 3, 1, 0);
    rbp_release_init(&R303, 3, 3, 0);
    rbp_release_init(&R304, 3, 4, 0);
}

/* The one escaper escapes what dump_append_string_value escapes, as it does. */
static void test_dump_escape(void)
{
    static const char in[] = "q\"b\\s\n\t\r\b\f\x01\x1f\x7f \xc3\xa9\0z";
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json_escape(&b, in, sizeof in - 1);
    CU_ASSERT_STRING_EQUAL(b.buf, "q\\\"b\\\\s\\n\\t\\r\\b\\f\\u0001\\u001f\\u007f \xc3\xa9\\u0000z");
    rbp_sb_free(&b);
}

typedef struct mem_str {
    const char *s;
} mem_str;

static bool read_str(void *ctx, uint64_t off, void *buf, size_t n)
{
    memcpy(buf, ((mem_str *)ctx)->s + off, n);
    return true;
}

/* Formats records into one string (not inlined: GCC's dangling-pointer
 * analysis misreads open_memstream's out-parameter once it is). */
__attribute__((noinline)) static char *format(const rbp_dump_rec *recs, size_t n)
{
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    rbp_dump_writer w;
    rbp_dump_writer_init(&w, f);
    for (size_t i = 0; i < n; i++) rbp_dump_write(&w, &recs[i]);
    CU_ASSERT(rbp_dump_writer_flush(&w));
    rbp_dump_writer_free(&w);
    fclose(f);
    return out;
}

static void test_dump_lines(void)
{
    init_releases();
    mem_str v = {"hi\n"};
    uint64_t refs[] = {0x7f0000001000, 0x7f0000001028};
    rbp_dump_rec recs[] = {
        {.rel = &R304, .address = 0x7f0000000fd8, .type = RBP_T_STRING, .klass = 0x7f00000abc00, .frozen = true,
         .shape_id = 3, .slot_size = 40, .embedded = true, .fstring = true, .chilled = true, .bytesize = 3,
         .has_value = true, .read_value = read_str, .value_ctx = &v, .encoding = "UTF-8", .coderange = 1,
         .memsize = 40},
        {.rel = &R207, .address = 0x10, .type = RBP_T_STRING, .klass = 0x20, .embedded = true, .broken = true,
         .bytesize = 3, .has_capacity = true, .capacity = 24, .memsize = 40},
        {.rel = &R301, .address = 0x30, .type = RBP_T_ARRAY, .klass = 0x20, .length = 0, .embedded = true,
         .memsize = 40},
        {.rel = &R303, .address = 0x30, .type = RBP_T_ARRAY, .klass = 0x20, .shape_id = 0, .slot_size = 80,
         .length = 2, .embedded = true, .refs = refs, .nrefs = 2, .memsize = 80},
        {.rel = &R303, .address = 0x40, .type = RBP_T_HASH, .klass = 0x20, .slot_size = 160, .size = 1,
         .has_default = true, .default_value = 0x50, .refs = refs, .nrefs = 1, .memsize = 160},
        {.rel = &R301, .address = 0x60, .type = RBP_T_CLASS, .klass = 0x70, .superclass = 0x80,
         .real_class_name = "Foo", .singleton = true, .memsize = 0},
        {.rel = &R304, .address = 0x60, .type = RBP_T_CLASS, .klass = 0x70, .slot_size = 160, .superclass = 0x80,
         .has_variation_count = true, .variation_count = 0, .name = "Zoo::Cat", .memsize = 280},
        {.rel = &R207, .address = 0x60, .type = RBP_T_MODULE, .klass = 0x70, .superclass = 0x80, .name = "A::\"B\"",
         .memsize = 40},
        {.rel = &R303, .address = 0x90, .type = RBP_T_OBJECT, .klass = 0x20, .slot_size = 40, .shape_id = 12,
         .embedded = true, .ivars = 2, .memsize = 40},
        {.rel = &R207, .address = 0xa0, .type = RBP_T_IMEMO, .imemo_type = 11, .klass = 0x5, .memsize = 40},
        {.rel = &R301, .address = 0xb0, .type = RBP_T_ZOMBIE, .refs = refs, .nrefs = 2},
        {.rel = &R301, .address = 0xc0, .type = RBP_T_MOVED, .memsize = 40},
    };
    char *out = format(recs, sizeof recs / sizeof recs[0]);
    const char *want =
        "{\"address\":\"0x7f0000000fd8\", \"type\":\"STRING\", \"shape_id\":3, \"slot_size\":40, "
        "\"class\":\"0x7f00000abc00\", \"frozen\":true, \"embedded\":true, \"fstring\":true, \"chilled\":true, "
        "\"bytesize\":3, \"value\":\"hi\\n\", \"encoding\":\"UTF-8\", \"coderange\":\"7bit\", \"memsize\":40}\n"
        "{\"address\":\"0x10\", \"type\":\"STRING\", \"class\":\"0x20\", \"embedded\":true, \"broken\":true, "
        "\"bytesize\":3, \"capacity\":24, \"memsize\":40}\n"
        "{\"address\":\"0x30\", \"type\":\"ARRAY\", \"class\":\"0x20\", \"length\":0, \"memsize\":40}\n"
        "{\"address\":\"0x30\", \"type\":\"ARRAY\", \"shape_id\":0, \"slot_size\":80, \"class\":\"0x20\", "
        "\"length\":2, \"embedded\":true, \"references\":[\"0x7f0000001000\", \"0x7f0000001028\"], \"memsize\":80}\n"
        "{\"address\":\"0x40\", \"type\":\"HASH\", \"shape_id\":0, \"slot_size\":160, \"class\":\"0x20\", "
        "\"size\":1, \"default\":\"0x50\", \"references\":[\"0x7f0000001000\"], \"memsize\":160}\n"
        "{\"address\":\"0x60\", \"type\":\"CLASS\", \"class\":\"0x70\", \"superclass\":\"0x80\", "
        "\"real_class_name\":\"Foo\", \"singleton\":true}\n"
        "{\"address\":\"0x60\", \"type\":\"CLASS\", \"shape_id\":0, \"slot_size\":160, \"class\":\"0x70\", "
        "\"variation_count\":0, \"superclass\":\"0x80\", \"name\":\"Zoo::Cat\", \"memsize\":280}\n"
        "{\"address\":\"0x60\", \"type\":\"MODULE\", \"class\":\"0x70\", \"name\":\"A::\\\"B\\\"\", \"memsize\":40}\n"
        "{\"address\":\"0x90\", \"type\":\"OBJECT\", \"shape_id\":12, \"slot_size\":40, \"class\":\"0x20\", "
        "\"embedded\":true, \"ivars\":2, \"memsize\":40}\n"
        "{\"address\":\"0xa0\", \"type\":\"IMEMO\", \"class\":\"0x5\", \"imemo_type\":\"unknown\", \"memsize\":40}\n"
        "{\"address\":\"0xb0\", \"type\":\"ZOMBIE\"}\n"
        "{\"address\":\"0xc0\", \"type\":\"UNKNOWN\", \"memsize\":40}\n";
    CU_ASSERT_STRING_EQUAL(out, want);
    if (strcmp(out, want) != 0) fprintf(stderr, "\n--- got:\n%s--- want:\n%s", out, want);
    free(out);
    CU_ASSERT_STRING_EQUAL(rbp_dump_imemo_name(11, &R301), "callinfo");
    CU_ASSERT_STRING_EQUAL(rbp_dump_imemo_name(7, &R207), "iseq");
}

static void test_dump_big_value(void)
{
    init_releases();
    size_t n = 3 * 1024 * 1024 + 7;
    char *s = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    for (size_t i = 0; i < n; i++) s[i] = "ab\"c"[i % 4];
    s[n] = 0;
    mem_str v = {s};
    rbp_dump_rec r = {.rel = &R303, .address = 0x10, .type = RBP_T_STRING, .klass = 0x20, .bytesize = n,
                      .has_value = true, .read_value = read_str, .value_ctx = &v, .memsize = 40};
    char *out = format(&r, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    size_t quotes = n / 4 + (n % 4 > 2);
    const char *val = strstr(out, "\"value\":\"");
    CU_ASSERT_PTR_NOT_NULL_FATAL(val);
    CU_ASSERT_EQUAL(strlen(out), strlen("{\"address\":\"0x10\", \"type\":\"STRING\", \"shape_id\":0, \"slot_size\":0, "
                                        "\"class\":\"0x20\", \"bytesize\":3145735, \"value\":\"\", \"coderange\":\"unknown\", "
                                        "\"memsize\":40}\n") +
                                     n + quotes);
    CU_ASSERT_EQUAL(strncmp(val + 9, "ab\\\"cab\\\"c", 10), 0);
    free(out);
    free(s);
}

/* Issue 24: a String whose coderange flag says 7-bit but whose bytes are
 * not UTF-8 (a damaged heap) must not put those bytes into the dump, which
 * strict JSON tools then refuse whole: each invalid byte is \ufffd. A valid
 * UTF-8 character cut by the 64 KiB chunks the value is read in is kept. */
static bool valid_utf8(const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = rbp_utf8_seq_len((const unsigned char *)s + i, n - i);
        if (!k) return false;
        i += k;
    }
    return true;
}

static void test_dump_damaged_string(void)
{
    init_releases();
    mem_str v = {"not \xFF\xFE utf-8 \xE6\x97"};
    rbp_dump_rec r = {.rel = &R304, .address = 0x10, .type = RBP_T_STRING, .klass = 0x20, .slot_size = 40,
                      .embedded = true, .bytesize = strlen(v.s), .has_value = true, .read_value = read_str,
                      .value_ctx = &v, .encoding = "UTF-8", .coderange = 1, .memsize = 40};
    char *out = format(&r, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_TRUE(valid_utf8(out));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "\"value\":\"not \\ufffd\\ufffd utf-8 \\ufffd\\ufffd\""));
    free(out);

    /* 65,535 ASCII bytes, then U+65E5 (3 bytes) across the first chunk's end. */
    size_t n = 65535 + 3 + 2;
    char *s = malloc(n + 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    memset(s, 'a', 65535);
    memcpy(s + 65535, "\xE6\x97\xA5zz", 5);
    s[n] = 0;
    mem_str big = {s};
    r.bytesize = n;
    r.value_ctx = &big;
    r.embedded = false;
    out = format(&r, 1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(out);
    CU_ASSERT_TRUE(valid_utf8(out));
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "aaa\xE6\x97\xA5zz\""));
    CU_ASSERT_PTR_NULL(strstr(out, "fffd"));
    free(out);
    free(s);
}

static const rbp_cu_test TESTS[] = {
    {"dump: dump_all's string escaping", test_dump_escape},
    {"dump: line format across versions", test_dump_lines},
    {"dump: a 3 MiB value is streamed", test_dump_big_value},
    {"dump: a damaged String stays UTF-8", test_dump_damaged_string},
    {NULL, NULL},
};

RBP_CU_MAIN("heap_dump", TESTS)
