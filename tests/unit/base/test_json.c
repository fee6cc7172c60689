/*
 * Tests of the JSON writer and its escaper (base/json.c): each rule of the
 * escaper (short escapes, other controls, DEL, valid UTF-8 of every length,
 * each kind of invalid byte), the chunked escaper against the whole one at
 * every cut, every style's layout, and the INDENT1 layout against Python's
 * own json.dumps(indent=1) of the same document. Random byte strings are
 * escaped and the document read back by a strict parser (Python: UTF-8
 * decoded strictly, no lone surrogate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "cu_main.h"
#include "fixture_files.h"

static char *escaped(const char *s, size_t n)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json_escape(&b, s, n);
    return rbp_sb_take(&b);
}

#define CHECK_ESC(in, want)                                      \
    do {                                                         \
        char *got_ = escaped((in), sizeof(in) - 1);              \
        CU_ASSERT_STRING_EQUAL(got_, (want));                    \
        if (strcmp(got_, (want))) fprintf(stderr, "escaped %s\n", got_); \
        free(got_);                                              \
    } while (0)

static void test_escape_rules(void)
{
    CHECK_ESC("plain ascii ~", "plain ascii ~");
    CHECK_ESC("q\"b\\s", "q\\\"b\\\\s");
    CHECK_ESC("\b\f\n\r\t", "\\b\\f\\n\\r\\t");
    CHECK_ESC("\x01\x1f\x0b", "\\u0001\\u001f\\u000b");
    CHECK_ESC("a\0b", "a\\u0000b");
    CHECK_ESC("\x7f", "\\u007f");
    /* Valid UTF-8 of 2, 3 and 4 bytes is kept as it is. */
    CHECK_ESC("caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80", "caf\xC3\xA9 \xE6\x97\xA5 \xF0\x9F\x98\x80");
    /* Invalid: a stray continuation, a truncated sequence, an overlong
     * form, an encoded surrogate, past U+10FFFF, bytes never valid. */
    CHECK_ESC("\x80", "\\ufffd");
    CHECK_ESC("\xE6\x97", "\\ufffd\\ufffd");
    CHECK_ESC("\xE6\x97x", "\\ufffd\\ufffdx");
    CHECK_ESC("\xC0\xAF", "\\ufffd\\ufffd");
    CHECK_ESC("\xED\xA0\x80", "\\ufffd\\ufffd\\ufffd");
    CHECK_ESC("\xF4\x90\x80\x80", "\\ufffd\\ufffd\\ufffd\\ufffd");
    CHECK_ESC("\xFF\xFE", "\\ufffd\\ufffd");
}

/* Escaping in chunks cut anywhere gives the same text as in one piece. */
static void test_escape_parts(void)
{
    const char s[] = "ab\xE6\x97\xA5\xF0\x9F\x98\x80\"\x01\xE6\x97x\xC3\xA9\xFF end\xE6\x97";
    size_t n = sizeof s - 1;
    char *whole = escaped(s, n);
    for (size_t chunk = 1; chunk <= n; chunk++) {
        rbp_strbuf b;
        rbp_sb_init(&b);
        char pending[8];
        size_t npending = 0, off = 0;
        while (off < n || npending) {
            char buf[64];
            size_t take = off + chunk <= n ? chunk : n - off;
            memcpy(buf, pending, npending);
            memcpy(buf + npending, s + off, take);
            off += take;
            size_t len = npending + take;
            size_t used = rbp_json_escape_part(&b, buf, len, off == n);
            CU_ASSERT_TRUE_FATAL(len - used <= 3);
            npending = len - used;
            memcpy(pending, buf + used, npending);
            if (off == n) CU_ASSERT_EQUAL(npending, 0);
            if (off == n) break;
        }
        char *got = rbp_sb_take(&b);
        CU_ASSERT_STRING_EQUAL(got, whole);
        free(got);
    }
    free(whole);
}

static char *sample_doc(rbp_json_style style)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, style);
    rbp_json_object(&j);
    rbp_json_kstr(&j, "name", "x\ny");
    rbp_json_knull(&j, "nothing");
    rbp_json_key(&j, "list");
    rbp_json_array(&j);
    rbp_json_i64(&j, -5);
    rbp_json_u64(&j, UINT64_MAX);
    rbp_json_array(&j);
    rbp_json_array_end(&j);
    rbp_json_object(&j);
    rbp_json_object_end(&j);
    rbp_json_object(&j);
    rbp_json_kbool(&j, "t", true);
    rbp_json_khex(&j, "addr", 0x7f00ab);
    rbp_json_object_end(&j);
    rbp_json_array_end(&j);
    rbp_json_ki64(&j, "min", INT64_MIN);
    rbp_json_object_end(&j);
    return rbp_sb_take(&b);
}

static void test_styles(void)
{
    char *s = sample_doc(RBP_JSON_SPACED);
    CU_ASSERT_STRING_EQUAL(s, "{\"name\": \"x\\ny\", \"nothing\": null, \"list\": [-5, 18446744073709551615, [], {}, "
                              "{\"t\": true, \"addr\": \"0x7f00ab\"}], \"min\": -9223372036854775808}");
    free(s);
    s = sample_doc(RBP_JSON_DUMP);
    CU_ASSERT_STRING_EQUAL(s, "{\"name\":\"x\\ny\", \"nothing\":null, \"list\":[-5, 18446744073709551615, [], {}, "
                              "{\"t\":true, \"addr\":\"0x7f00ab\"}], \"min\":-9223372036854775808}");
    free(s);
    s = sample_doc(RBP_JSON_TIGHT);
    CU_ASSERT_STRING_EQUAL(s, "{\"name\":\"x\\ny\",\"nothing\":null,\"list\":[-5,18446744073709551615,[],{},"
                              "{\"t\":true,\"addr\":\"0x7f00ab\"}],\"min\":-9223372036854775808}");
    free(s);

    /* A format's own line breaks. */
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_SPACED);
    rbp_json_object(&j);
    rbp_json_ku64(&j, "a", 1);
    rbp_json_ws(&j, "\n ");
    rbp_json_key(&j, "b");
    rbp_json_array(&j);
    rbp_json_ws(&j, "\n  ");
    rbp_json_u64(&j, 2);
    rbp_json_ws(&j, "\n  ");
    rbp_json_u64(&j, 3);
    rbp_json_ws(&j, "\n ");
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    s = rbp_sb_take(&b);
    CU_ASSERT_STRING_EQUAL(s, "{\"a\": 1,\n \"b\": [\n  2,\n  3\n ]}");
    free(s);
}

/* Runs python3 on a script with a file argument; its exit status. */
static int python(const char *script, const char *arg)
{
    char sp[512], cmd[1400];
    tmp_path(sp, sizeof sp, "json", "check.py");
    spit(sp, script);
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s'", sp, arg);
    int rc = system(cmd);
    remove(sp);
    return rc;
}

/* The INDENT1 layout is Python's json.dumps(doc, ensure_ascii=False,
 * indent=1), byte for byte, for a document with every kind of value. */
static void test_indent_is_pythons(void)
{
    char *s = sample_doc(RBP_JSON_INDENT1);
    char path[512];
    tmp_path(path, sizeof path, "json", "indent.json");
    spit(path, s);
    CU_ASSERT_EQUAL(python("import json, sys\n"
                           "raw = open(sys.argv[1], 'rb').read().decode('utf-8')\n"
                           "again = json.dumps(json.loads(raw), ensure_ascii=False, indent=1)\n"
                           "sys.exit(0 if again == raw else print(repr(raw), repr(again)) or 1)\n",
                           path),
                    0);
    remove(path);
    free(s);
}

/* Random bytes as strings: always a document a strict parser reads, with
 * each valid UTF-8 character intact. */
static void test_random_bytes_strict(void)
{
    rbp_strbuf b;
    rbp_sb_init(&b);
    rbp_json j;
    rbp_json_init(&j, &b, RBP_JSON_SPACED);
    rbp_json_array(&j);
    unsigned x = 12345;
    for (int k = 0; k < 2000; k++) {
        char s[40];
        size_t n = 1 + k % 39;
        for (size_t i = 0; i < n; i++) {
            x = x * 1103515245 + 12345;
            s[i] = (char)(x >> 16);
        }
        rbp_json_strn(&j, s, n);
    }
    rbp_json_array_end(&j);
    char *doc = rbp_sb_take(&b);
    char path[512];
    tmp_path(path, sizeof path, "json", "random.json");
    spit(path, doc);
    CU_ASSERT_EQUAL(python("import json, sys\n"
                           "doc = json.loads(open(sys.argv[1], 'rb').read().decode('utf-8'))\n"
                           "assert len(doc) == 2000\n"
                           "for s in doc: s.encode('utf-8')\n",
                           path),
                    0);
    remove(path);
    free(doc);
}

static const rbp_cu_test tests[] = {
    {"escaper rules", test_escape_rules},
    {"escaping in chunks", test_escape_parts},
    {"styles and line breaks", test_styles},
    {"INDENT1 is Python's indent=1", test_indent_is_pythons},
    {"random bytes read strictly", test_random_bytes_strict},
    {NULL, NULL},
};

RBP_CU_MAIN("json", tests)
