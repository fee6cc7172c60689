/*
 * Tests of the layout tables (layout.c): field metadata, the text format
 * (parse, format, and their round trip), the error messages for bad lines,
 * field extraction (plain and bitfield), and the built-in tables embedded
 * from layouts/VERSION.layout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cu_main.h"

#include <elf.h>
#include "layout/layout.h"

static void test_metadata(void)
{
    CU_ASSERT_STRING_EQUAL(rbp_field_name(RBP_L_cfp_pc), "cfp_pc");
    CU_ASSERT_STRING_EQUAL(rbp_field_type(RBP_L_cfp_pc), "rb_control_frame_struct");
    CU_ASSERT_STRING_EQUAL(rbp_field_member(RBP_L_rstring_heap_ptr), "as.heap.ptr");
    CU_ASSERT_PTR_NULL(rbp_field_member(RBP_L_cfp_size));
    CU_ASSERT_TRUE(rbp_field_is_size(RBP_L_cfp_size));
    CU_ASSERT_FALSE(rbp_field_is_size(RBP_L_cfp_pc));
    CU_ASSERT_EQUAL(rbp_field_by_name("th_status"), RBP_L_th_status);
    CU_ASSERT_EQUAL(rbp_field_by_name("no_such_field"), RBP_L_COUNT);
    /* Every id's name maps back to it: names are unique. */
    for (int i = 0; i < RBP_L_COUNT; i++) CU_ASSERT_EQUAL(rbp_field_by_name(rbp_field_name((rbp_field_id)i)), i);
}

static void test_parse(void)
{
    const char *text = "# a comment\n"
                       "ruby 3.4.5   # trailing comment\n"
                       "\n"
                       "   \t\n"
                       "cfp_size 0 56\n"
                       "cfp_pc 0 8\n"
                       "th_status 92 4 3 2\n"
                       "some_future_field 1 2\n"
                       "rstring_len 16 8"; /* no final newline */
    rbp_layout l;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, text, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(l.ruby_version, "3.4.5");
    CU_ASSERT_EQUAL(l.f[RBP_L_cfp_size].size, 56);
    CU_ASSERT_EQUAL(l.f[RBP_L_cfp_pc].offset, 0);
    CU_ASSERT_EQUAL(l.f[RBP_L_cfp_pc].size, 8);
    CU_ASSERT_EQUAL(l.f[RBP_L_th_status].offset, 92);
    CU_ASSERT_EQUAL(l.f[RBP_L_th_status].bit_offset, 3);
    CU_ASSERT_EQUAL(l.f[RBP_L_th_status].bit_size, 2);
    CU_ASSERT_EQUAL(l.f[RBP_L_rstring_len].offset, 16);
    CU_ASSERT_FALSE(rbp_has(&l, RBP_L_cfp_iseq));
    CU_ASSERT_FALSE(rbp_has(&l, RBP_L_rstring_heap_len));
}

static void expect_error(const char *text, const char *needle)
{
    rbp_layout l;
    char err[256] = "";
    CU_ASSERT_EQUAL(rbp_layout_parse(&l, text, err, sizeof err), -1);
    if (!strstr(err, needle)) {
        printf("\n  message '%s' lacks '%s'\n", err, needle);
        CU_FAIL("unexpected message");
    }
}

static void test_parse_errors(void)
{
    expect_error("cfp_pc 0 8\ncfp_iseq 16\n", "line 2: expected");
    expect_error("cfp_pc 0 8 1\n", "line 1: expected");
    expect_error("cfp_pc zero 8\n", "line 1: expected");
    expect_error("cfp_pc 0 8\nruby\n", "line 2: 'ruby' needs a version");
    expect_error("cfp_pc -8 8\n", "line 1: value out of range for 'cfp_pc'");
    expect_error("cfp_pc 0 8 64 1\n", "out of range");
    expect_error("cfp_pc 0 8 0 65\n", "out of range");
    expect_error("cfp_pc 99999999 8\n", "out of range");
    expect_error("", "no fields");
    expect_error("# only comments\nruby 3.4.5\n", "no fields");
    expect_error("unknown_a 1 2\nunknown_b 3 4\n", "no fields");
    char longline[400];
    memset(longline, 'x', sizeof longline - 1);
    longline[sizeof longline - 1] = '\0';
    expect_error(longline, "line 1: too long");
    /* Errors leave no half-filled layout behind to be used by mistake. */
    rbp_layout l;
    char err[256];
    CU_ASSERT_EQUAL(rbp_layout_parse(&l, "cfp_pc 0 8\ncfp_iseq x\n", err, sizeof err), -1);
    /* A NULL error buffer is allowed. */
    CU_ASSERT_EQUAL(rbp_layout_parse(&l, "bad", NULL, 0), -1);
}

static void fill(rbp_layout *l)
{
    rbp_layout_clear(l);
    strcpy(l->ruby_version, "3.3.8");
    /* Distinct values in every field, every third absent, some bitfields. */
    for (int i = 0; i < RBP_L_COUNT; i++) {
        if (i % 3 == 2) continue;
        l->f[i].offset = i * 8;
        l->f[i].size = 1 + i % 8;
        if (i % 5 == 0) {
            l->f[i].bit_offset = (int16_t)(i % 8);
            l->f[i].bit_size = (int16_t)(1 + i % 17);
        }
    }
}

static void test_round_trip(void)
{
    rbp_layout a, b;
    fill(&a);
    char *text = rbp_layout_format(&a, "made by test_layout");
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "# made by test_layout\n"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nruby 3.3.8\n"));
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&b, text, err, sizeof err), 0);
    CU_ASSERT_STRING_EQUAL(b.ruby_version, "3.3.8");
    for (int i = 0; i < RBP_L_COUNT; i++) {
        CU_ASSERT_EQUAL(a.f[i].offset, b.f[i].offset);
        if (a.f[i].offset < 0) continue;
        CU_ASSERT_EQUAL(a.f[i].size, b.f[i].size);
        CU_ASSERT_EQUAL(a.f[i].bit_offset, b.f[i].bit_offset);
        CU_ASSERT_EQUAL(a.f[i].bit_size, b.f[i].bit_size);
    }
    /* Formatting the parsed copy gives the same text. */
    char *again = rbp_layout_format(&b, "made by test_layout");
    CU_ASSERT_PTR_NOT_NULL_FATAL(again);
    CU_ASSERT_STRING_EQUAL(text, again);
    free(again);
    free(text);

    /* Without a comment or a version: no such lines. */
    rbp_layout_clear(&a);
    a.f[RBP_L_cfp_pc].offset = 0;
    a.f[RBP_L_cfp_pc].size = 8;
    text = rbp_layout_format(&a, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NULL(strstr(text, "\nruby"));
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\ncfp_pc 0 8\n"));
    free(text);
}

static void test_extract(void)
{
    rbp_layout l;
    rbp_layout_clear(&l);
    uint8_t buf[32];
    for (int i = 0; i < 32; i++) buf[i] = (uint8_t)(0xa0 + i);

    /* Plain fields: little-endian integers of their size. */
    l.f[RBP_L_cfp_pc] = (rbp_field){.offset = 2, .size = 2};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_cfp_pc, buf), 0xa3a2);
    l.f[RBP_L_cfp_pc] = (rbp_field){.offset = 4, .size = 4};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_cfp_pc, buf), 0xa7a6a5a4);
    l.f[RBP_L_cfp_pc] = (rbp_field){.offset = 8, .size = 8};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_cfp_pc, buf), UINT64_C(0xafaeadacabaaa9a8));
    /* Absent: 0. */
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_cfp_iseq, buf), 0);

    /* Bitfields: status:2 at bits 0-1 and to_kill:1 at bit 2 of byte 3, and
     * one that straddles a byte boundary. */
    memset(buf, 0, sizeof buf);
    buf[3] = 0x02 | 0x04 | 0xf8; /* status=2, to_kill=1, neighbours set */
    l.f[RBP_L_th_status] = (rbp_field){.offset = 3, .size = 4, .bit_offset = 0, .bit_size = 2};
    l.f[RBP_L_th_to_kill] = (rbp_field){.offset = 3, .size = 4, .bit_offset = 2, .bit_size = 1};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_status, buf), 2);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_to_kill, buf), 1);
    buf[3] = 0xfb; /* to_kill cleared, everything else set */
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_status, buf), 3);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_to_kill, buf), 0);

    memset(buf, 0, sizeof buf);
    buf[10] = 0xc0; /* bits 6,7 */
    buf[11] = 0x05; /* bits 8,10 */
    l.f[RBP_L_mdef_type] = (rbp_field){.offset = 10, .size = 4, .bit_offset = 6, .bit_size = 5};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_mdef_type, buf), 0x17); /* 1,1,1,0,1 */

    /* A bitfield in the very last byte reads only that byte: put it at the
     * end of an exactly sized heap block so valgrind would see overreads. */
    uint8_t *tail = malloc(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tail);
    tail[0] = 0x40;
    l.f[RBP_L_classext_permanent_classpath] = (rbp_field){.offset = 0, .size = 1, .bit_offset = 6, .bit_size = 1};
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_classext_permanent_classpath, tail), 1);
    free(tail);
}

/* Every embedded table parses, names its own version, has the core frame
 * fields, and is what the version lookup returns. */
static void test_builtin(void)
{
    size_t n = rbp_builtin_layout_count();
    printf("\n  %zu built-in table(s)", n);
    for (size_t i = 0; i < n; i++) {
        const char *ver = rbp_builtin_layout_version(i);
        rbp_layout l;
        char err[256] = "";
        int rc = rbp_layout_parse(&l, rbp_builtin_layout_text(i), err, sizeof err);
        if (rc != 0) printf("\n  %s: %s\n", ver, err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        CU_ASSERT_STRING_EQUAL(l.ruby_version, ver);
        CU_ASSERT_TRUE(rbp_has(&l, RBP_L_cfp_size) && l.f[RBP_L_cfp_size].size >= 40);
        CU_ASSERT_TRUE(rbp_has(&l, RBP_L_cfp_pc));
        CU_ASSERT_TRUE(rbp_has(&l, RBP_L_cfp_iseq));
        CU_ASSERT_TRUE(rbp_has(&l, RBP_L_ec_cfp));
        CU_ASSERT_TRUE(rbp_has(&l, RBP_L_th_status) && l.f[RBP_L_th_status].bit_size == 2);
        bool exact = false;
        uint16_t m = rbp_builtin_layout_machine(i);
        CU_ASSERT_EQUAL(l.machine, m);
        CU_ASSERT_EQUAL(rbp_builtin_layout_find(ver, m, &exact), (long)i);
        CU_ASSERT_TRUE(exact);
        /* Another patch release of the same minor falls back to this one
         * (unless another table of that minor is nearer). */
        int maj, min, pat;
        if (sscanf(ver, "%d.%d.%d", &maj, &min, &pat) == 3) {
            char other[32];
            snprintf(other, sizeof other, "%d.%d.%d", maj, min, pat + 1000);
            long j = rbp_builtin_layout_find(other, m, &exact);
            CU_ASSERT(j >= 0 && rbp_builtin_layout_machine((size_t)j) == m);
            CU_ASSERT_FALSE(exact);
            if (j >= 0) CU_ASSERT_STRING_NOT_EQUAL(rbp_builtin_layout_version((size_t)j), "");
        }
    }
    CU_ASSERT_PTR_NULL(rbp_builtin_layout_version(n));
    CU_ASSERT_PTR_NULL(rbp_builtin_layout_text(n));
    bool exact = true;
    CU_ASSERT_EQUAL(rbp_builtin_layout_find("1.8.7", RBP_MACHINE_DEFAULT, &exact), -1);
    CU_ASSERT_FALSE(exact);
    CU_ASSERT_EQUAL(rbp_builtin_layout_find("garbage", RBP_MACHINE_DEFAULT, &exact), -1);
    CU_ASSERT_EQUAL(rbp_builtin_layout_find(NULL, RBP_MACHINE_DEFAULT, &exact), -1);
}

/* Issue #12, defects 3 and 4, and their class: a layout whose members do
 * not lie where they can be read is refused by rbp_layout_check, the gate
 * every layout passes at attach (file, DWARF or built-in), with one line
 * naming the member. */
static void expect_refused(const char *text, const char *field)
{
    rbp_layout l;
    char err[256] = "", why[256] = "";
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, text, err, sizeof err), 0);
    CU_ASSERT_FALSE(rbp_layout_check(&l, why, sizeof why));
    CU_ASSERT_PTR_NOT_NULL(strstr(why, field));
    CU_ASSERT_PTR_NULL(strchr(why, '\n'));
}

static void test_bounds_check(void)
{
    /* a bitfield wider than its storage unit (robject.c read 16 bytes into 8) */
    expect_refused("ec_vm_stack 0 8 63 64\n", "ec_vm_stack");
    expect_refused("th_status 240 4 30 4\n", "th_status");
    expect_refused("th_status 240 3 0 2\n", "th_status"); /* no such storage unit */
    /* a control-frame member past the frame (frames.c read past its array) */
    expect_refused("cfp_size 0 64\ncfp_iseq 96 8\n", "cfp_iseq");
    expect_refused("cfp_size 0 56\ncfp_ep 52 8\n", "cfp_ep");
    /* members of other structs of known size, and alternative placements */
    expect_refused("shape_size 0 32\nshape_parent_id 32 4\n", "shape_parent_id");
    expect_refused("cfp_size 0 56\ncfp_pc 0 8\nalt cfp_pc 56 8\n", "cfp_pc");
    expect_refused("cfp_size 0 0\n", "cfp_size");

    /* what fits passes: members up to the struct's end, bitfields filling their unit */
    rbp_layout l;
    char err[256], why[256] = "";
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, "cfp_size 0 56\ncfp_ep 48 8\nth_status 8 8 0 64\nmdef_type 0 4 28 4\n",
                                           err, sizeof err), 0);
    CU_ASSERT(rbp_layout_check(&l, why, sizeof why));
    /* and so does every built-in table */
    for (size_t i = 0; i < rbp_builtin_layout_count(); i++) {
        CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, rbp_builtin_layout_text(i), err, sizeof err), 0);
        bool ok = rbp_layout_check(&l, why, sizeof why);
        if (!ok) fprintf(stderr, "built-in %s: %s\n", rbp_builtin_layout_version(i), why);
        CU_ASSERT(ok);
    }
}

/* A layout carries the machine it was made for: x86-64 without a
 * "machine" line (every table and file before it), the line's machine
 * otherwise, written back only when it is not x86-64; a machine this
 * rbpeek cannot name is an error, never read as x86-64; the built-in
 * tables are x86-64's, and aarch64's for the 3.1 line, each found only
 * for its machine. */
static void test_machine(void)
{
    rbp_layout l;
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, "ruby 3.1.2\ncfp_pc 0 8\n", err, sizeof err), 0);
    CU_ASSERT_EQUAL(l.machine, EM_X86_64);
    char *text = rbp_layout_format(&l, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NULL(strstr(text, "machine"));
    free(text);
    CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&l, "ruby 3.1.2\nmachine aarch64\ncfp_pc 0 8\n", err, sizeof err), 0);
    CU_ASSERT_EQUAL(l.machine, EM_AARCH64);
    text = rbp_layout_format(&l, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(text);
    CU_ASSERT_PTR_NOT_NULL(strstr(text, "\nruby 3.1.2\nmachine aarch64\n"));
    rbp_layout again;
    CU_ASSERT_EQUAL(rbp_layout_parse(&again, text, err, sizeof err), 0);
    CU_ASSERT_EQUAL(again.machine, EM_AARCH64);
    free(text);
    CU_ASSERT_EQUAL(rbp_layout_parse(&l, "machine vax\ncfp_pc 0 8\n", err, sizeof err), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "line 1: 'machine' needs a machine this rbpeek knows"));
    CU_ASSERT_EQUAL(rbp_layout_parse(&l, "machine\ncfp_pc 0 8\n", err, sizeof err), -1);
    bool exact;
    size_t arm = 0;
    for (size_t i = 0; i < rbp_builtin_layout_count(); i++) {
        uint16_t m = rbp_builtin_layout_machine(i);
        CU_ASSERT(m == EM_X86_64 || m == EM_AARCH64);
        arm += m == EM_AARCH64;
    }
    CU_ASSERT_EQUAL(arm, 8);   /* 3.1.0 to 3.1.7 */
    long x86 = rbp_builtin_layout_find("3.1.2", EM_X86_64, &exact);
    CU_ASSERT_TRUE(x86 >= 0 && exact);
    long a64 = rbp_builtin_layout_find("3.1.2", EM_AARCH64, &exact);
    CU_ASSERT_TRUE(a64 >= 0 && exact && a64 != x86);
    CU_ASSERT_EQUAL(rbp_builtin_layout_find("3.3.8", EM_AARCH64, &exact), -1);   /* no aarch64 table of 3.3 */
    CU_ASSERT_EQUAL(rbp_builtin_layout_find("3.1.2", EM_RISCV, &exact), -1);
}

static const rbp_cu_test tests[] = {
    {"bounds check: members where they can be read", test_bounds_check},
    {"field metadata", test_metadata},
    {"parse", test_parse},
    {"parse errors", test_parse_errors},
    {"format/parse round trip", test_round_trip},
    {"field extraction", test_extract},
    {"built-in tables", test_builtin},
    {"the machine a layout was made for", test_machine},
    {NULL, NULL},
};

RBP_CU_MAIN("layout", tests)
