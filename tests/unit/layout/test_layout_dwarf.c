/*
 * Tests of the DWARF layout extractor (layout_dwarf.c). The fixture
 * libraries are built from fixtures/layout_fixture.h in three DWARF flavours;
 * this file includes the same header, so every expected offset, size and bit
 * position is the compiler's own offsetof()/sizeof() or is found by setting
 * a bitfield in a real object, never typed in. Also: files without DWARF,
 * missing and garbage files, and - when our Ruby builds exist - agreement of
 * the extractor with the committed layouts/<version>.layout tables.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixtures/layout_fixture.h"
#include "layout/layout.h"
#include "layout/layout_dwarf.h"

#define FSIZE(type, member) ((int32_t)sizeof(((type *)0)->member))

static const char *fixture(const char *name)
{
    static char path[4][1024];
    static int slot;
    char *p = path[slot++ % 4];
    snprintf(p, sizeof path[0], "%s/%s", RBP_FIXTURE_DIR, name);
    return p;
}

static void expect_plain(const rbp_layout *l, rbp_field_id id, long off, long size)
{
    const rbp_field *f = &l->f[id];
    if (f->offset != off || f->size != size || f->bit_size != 0)
        printf("\n  %s: got %d/%d/%d:%d, want %ld/%ld\n", rbp_field_name(id), f->offset, f->size, f->bit_offset,
               f->bit_size, off, size);
    CU_ASSERT_EQUAL(f->offset, off);
    CU_ASSERT_EQUAL(f->size, size);
    CU_ASSERT_EQUAL(f->bit_size, 0);
}
#define EXPECT(l, id, type, member) expect_plain(l, RBP_L_##id, (long)offsetof(type, member), FSIZE(type, member))

/* The first set bit and the number of set bits in an object. */
static long first_bit(const void *obj, size_t size, int *count)
{
    const unsigned char *p = obj;
    long first = -1;
    *count = 0;
    for (size_t i = 0; i < size * 8; i++)
        if (p[i / 8] >> (i % 8) & 1) {
            if (first < 0) first = (long)i;
            ++*count;
        }
    return first;
}

static void expect_bits(const rbp_layout *l, rbp_field_id id, long bit, int nbits, long size)
{
    const rbp_field *f = &l->f[id];
    if (f->offset != bit / 8 || f->bit_offset != bit % 8 || f->bit_size != nbits || f->size != size)
        printf("\n  %s: got %d/%d/%d:%d, want bit %ld:%d size %ld\n", rbp_field_name(id), f->offset, f->size,
               f->bit_offset, f->bit_size, bit, nbits, size);
    CU_ASSERT_EQUAL(f->offset, bit / 8);
    CU_ASSERT_EQUAL(f->bit_offset, bit % 8);
    CU_ASSERT_EQUAL(f->bit_size, nbits);
    CU_ASSERT_EQUAL(f->size, size);
}
/* Sets the bitfield to all ones in a zeroed object and sees where it lands;
 * size is sizeof the declared type of the bitfield. */
#define EXPECT_BITS(l, id, type, member, ones, decl_size)            \
    do {                                                             \
        type x_;                                                     \
        memset(&x_, 0, sizeof x_);                                   \
        x_.member = ones;                                            \
        int n_;                                                      \
        long b_ = first_bit(&x_, sizeof x_, &n_);                    \
        expect_bits(l, RBP_L_##id, b_, n_, (long)(decl_size));       \
    } while (0)

static void expect_absent(const rbp_layout *l, rbp_field_id id)
{
    if (rbp_has(l, id)) printf("\n  %s: unexpectedly present\n", rbp_field_name(id));
    CU_ASSERT_FALSE(rbp_has(l, id));
}

static void check_fixture(const char *lib)
{
    rbp_layout l;
    char err[512] = "";
    int rc = rbp_dwarf_layout(fixture(lib), &l, err, sizeof err);
    if (rc != 0) printf("\n  %s: %s\n", lib, err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    expect_plain(&l, RBP_L_cfp_size, 0, (long)sizeof(rb_control_frame_t));
    EXPECT(&l, cfp_pc, rb_control_frame_t, pc);
    EXPECT(&l, cfp_iseq, rb_control_frame_t, iseq);
    EXPECT(&l, cfp_self, rb_control_frame_t, self);
    EXPECT(&l, cfp_ep, rb_control_frame_t, ep);

    EXPECT(&l, vm_ractor_set, struct rb_vm_struct, ractor.set);
    EXPECT(&l, vm_ractor_main_thread, struct rb_vm_struct, ractor.main_thread);
    EXPECT(&l, vm_ractor_main_ractor, struct rb_vm_struct, ractor.main_ractor);
    EXPECT(&l, vm_ractor_cnt, struct rb_vm_struct, ractor.cnt);
    EXPECT(&l, vm_objspace, struct rb_vm_struct, objspace); /* in an unnamed union */
    EXPECT(&l, vm_progname, struct rb_vm_struct, progname);

    EXPECT(&l, th_lt_node, struct rb_thread_struct, lt_node);
    EXPECT(&l, th_self, struct rb_thread_struct, self);     /* in an unnamed struct */
    EXPECT(&l, th_ractor, struct rb_thread_struct, ractor);
    EXPECT(&l, th_ec, struct rb_thread_struct, ec);
    EXPECT(&l, th_tid, struct rb_thread_struct, tid);
    EXPECT(&l, th_name, struct rb_thread_struct, name);
    EXPECT_BITS(&l, th_status, struct rb_thread_struct, status, 3, sizeof(enum fx_thread_status));
    EXPECT_BITS(&l, th_to_kill, struct rb_thread_struct, to_kill, 1, sizeof(unsigned int));

    EXPECT(&l, ec_vm_stack, struct rb_execution_context_struct, vm_stack);
    EXPECT(&l, ec_vm_stack_size, struct rb_execution_context_struct, vm_stack_size);
    EXPECT(&l, ec_cfp, struct rb_execution_context_struct, cfp);

    EXPECT_BITS(&l, mdef_type, struct rb_method_definition_struct, type, 15, sizeof(unsigned int));
    EXPECT(&l, mdef_original_id, struct rb_method_definition_struct, original_id);
    EXPECT(&l, mdef_iseqptr, struct rb_method_definition_struct, body.iseq.iseqptr); /* via a typedef */

    EXPECT(&l, body_type, struct rb_iseq_constant_body, type);
    EXPECT(&l, body_iseq_size, struct rb_iseq_constant_body, iseq_size);
    EXPECT(&l, body_iseq_encoded, struct rb_iseq_constant_body, iseq_encoded);
    EXPECT(&l, body_pathobj, struct rb_iseq_constant_body, location.pathobj);
    EXPECT(&l, body_base_label, struct rb_iseq_constant_body, location.base_label);
    EXPECT(&l, body_label, struct rb_iseq_constant_body, location.label);
    EXPECT(&l, body_first_lineno, struct rb_iseq_constant_body, location.first_lineno);
    EXPECT(&l, body_insns_body, struct rb_iseq_constant_body, insns_info.body);
    EXPECT(&l, body_insns_positions, struct rb_iseq_constant_body, insns_info.positions);
    EXPECT(&l, body_insns_size, struct rb_iseq_constant_body, insns_info.size);
    EXPECT(&l, body_insns_succ, struct rb_iseq_constant_body, insns_info.succ_index_table);
    expect_plain(&l, RBP_L_insn_info_size, 0, (long)sizeof(struct iseq_insn_info_entry));
    EXPECT(&l, insn_info_line_no, struct iseq_insn_info_entry, line_no);

    EXPECT(&l, basic_flags, struct RBasic, flags);
    EXPECT(&l, basic_klass, struct RBasic, klass);
    EXPECT(&l, rstring_len, struct RString, len);
    EXPECT(&l, rstring_heap_ptr, struct RString, as.heap.ptr);
    EXPECT(&l, rstring_heap_aux_capa, struct RString, as.heap.aux.capa);
    EXPECT(&l, rstring_embed_len, struct RString, as.embed.len);
    /* A flexible array member has no size: sizeof of an incomplete type. */
    expect_plain(&l, RBP_L_rstring_embed_ary, (long)offsetof(struct RString, as.embed.ary), 0);
    EXPECT(&l, rarray_heap_len, struct RArray, as.heap.len);
    EXPECT(&l, rarray_heap_ptr, struct RArray, as.heap.ptr);
    EXPECT(&l, rarray_embed_ary, struct RArray, as.ary);   /* a fixed array: its whole size */

    expect_plain(&l, RBP_L_rclass_size, 0, (long)sizeof(struct RClass));
    EXPECT(&l, rclass_and_ext_classext, struct RClass_and_rb_classext_t, classext);
    EXPECT(&l, classext_classpath, struct rb_classext_struct, classpath);
    EXPECT(&l, classext_attached_object, struct rb_classext_struct, as.singleton_class.attached_object);
    EXPECT(&l, classext_iv_tbl, struct rb_classext_struct, iv_tbl);
    EXPECT(&l, classext_iv_ptr, struct rb_classext_struct, iv_ptr);
    EXPECT_BITS(&l, classext_permanent_classpath, struct rb_classext_struct, permanent_classpath, 1,
                sizeof(unsigned char));

    /* rb_symbols_t: a typedef of an untagged struct (the decoy typedef of
     * the same name to int, in the first unit, must have been skipped). */
    EXPECT(&l, symbols_last_id, rb_symbols_t, last_id);
    EXPECT(&l, symbols_ids, rb_symbols_t, ids);

    /* Members the fixture does not have, and a type it only declares. */
    expect_absent(&l, RBP_L_vm_main_thread);
    expect_absent(&l, RBP_L_vm_gc_objspace);
    expect_absent(&l, RBP_L_th_thread_id);
    expect_absent(&l, RBP_L_th_nt);
    expect_absent(&l, RBP_L_rstring_heap_len);
    expect_absent(&l, RBP_L_rclass_ptr);
    expect_absent(&l, RBP_L_ractor_threads_set);
    expect_absent(&l, RBP_L_me_def);
    expect_absent(&l, RBP_L_nt_tid);

    /* The fixture is no Ruby: no ruby_version string to find. */
    CU_ASSERT_STRING_EQUAL(l.ruby_version, "");
}

static void test_dwarf5(void) { check_fixture("liblayout_fixture_dwarf5.so"); }
static void test_dwarf4(void) { check_fixture("liblayout_fixture_dwarf4.so"); }
static void test_dwarf2(void) { check_fixture("liblayout_fixture_dwarf2.so"); }

/* Bitfields extracted with the layout from DWARF read back what C wrote. */
static void test_extract_bitfields(void)
{
    rbp_layout l;
    char err[512];
    CU_ASSERT_EQUAL_FATAL(rbp_dwarf_layout(fixture("liblayout_fixture_dwarf4.so"), &l, err, sizeof err), 0);

    struct rb_thread_struct th;
    memset(&th, 0xff, sizeof th); /* neighbours all ones: masks must hold */
    th.status = FX_STOPPED_FOREVER;
    th.to_kill = 0;
    th.tid = -2;
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_status, (const uint8_t *)&th), FX_STOPPED_FOREVER);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_to_kill, (const uint8_t *)&th), 0);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_tid, (const uint8_t *)&th), 0xfffe);
    th.to_kill = 1;
    th.status = FX_RUNNABLE;
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_status, (const uint8_t *)&th), FX_RUNNABLE);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_th_to_kill, (const uint8_t *)&th), 1);

    struct rb_method_definition_struct md;
    memset(&md, 0, sizeof md);
    md.type = 11;
    md.iseq_overload = 1;
    md.alias_count = -1;
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_mdef_type, (const uint8_t *)&md), 11);

    /* A one-bit field in the last byte of a struct: only that byte is read. */
    struct RClass_and_rb_classext_t cls;
    memset(&cls, 0, sizeof cls);
    cls.classext.permanent_classpath = 1;
    const uint8_t *ext = (const uint8_t *)&cls + rbp_off(&l, RBP_L_rclass_and_ext_classext);
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_classext_permanent_classpath, ext), 1);
    cls.classext.permanent_classpath = 0;
    cls.classext.cloned = 1;
    CU_ASSERT_EQUAL(rbp_field_extract(&l, RBP_L_classext_permanent_classpath, ext), 0);
}

static void expect_failure(const char *path, const char *needle)
{
    rbp_layout l;
    char err[512] = "";
    int rc = rbp_dwarf_layout(path, &l, err, sizeof err);
    CU_ASSERT_EQUAL(rc, -1);
    CU_ASSERT(err[0] != '\0');
    if (needle && !strstr(err, needle)) {
        printf("\n  %s: message '%s' lacks '%s'\n", path, err, needle);
        CU_FAIL("unexpected message");
    }
    CU_ASSERT_FALSE(rbp_has(&l, RBP_L_cfp_size));
}

static void test_no_dwarf(void)
{
    expect_failure(fixture("layout_fixture_stripped.so"), "no DWARF");
    if (access("/bin/true", R_OK) == 0) expect_failure("/bin/true", NULL);
}

/* A stripped file whose .gnu_debuglink names a debug file beside it: the
 * layout comes from the debug file, identical to the unstripped one. */
static void test_debuglink(void)
{
    rbp_layout split, whole;
    char err[512] = "";
    int rc = rbp_dwarf_layout(fixture("layout_fixture_split.so"), &split, err, sizeof err);
    if (rc != 0) printf("\n  %s\n", err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(rbp_dwarf_layout(fixture("liblayout_fixture_dwarf5.so"), &whole, err, sizeof err), 0);
    CU_ASSERT_EQUAL(memcmp(split.f, whole.f, sizeof split.f), 0);
    EXPECT(&split, symbols_ids, rb_symbols_t, ids);
}

static void test_missing_file(void)
{
    expect_failure(fixture("no-such-file.so"), "cannot open");
    expect_failure(NULL, NULL);
}

/* A libruby path a core names may be a FIFO (libdwarf's own open would
 * wait for a writer for ever) or a device: refused before any open, with
 * what it is (issue 24). */
static void test_not_regular(void)
{
    char fifo[512];
    snprintf(fifo, sizeof fifo, "%s/libruby-fifo-%d.so", RBP_FIXTURE_DIR, (int)getpid());
    unlink(fifo);
    CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
    unsigned prev = alarm(30);   /* a blocked open ends the test here */
    const char *paths[] = {fifo, "/dev/zero", "/dev/null", RBP_FIXTURE_DIR};
    const char *kinds[] = {"is a FIFO", "is a character device", "is a character device", "is a directory"};
    for (size_t i = 0; i < 4; i++) {
        rbp_layout l;
        char err[512] = "";
        CU_ASSERT_EQUAL(rbp_dwarf_layout(paths[i], &l, err, sizeof err), RBP_NOT_REGULAR);
        CU_ASSERT_PTR_NOT_NULL(strstr(err, kinds[i]));
        CU_ASSERT_PTR_NOT_NULL(strstr(err, "not a regular file"));
    }
    alarm(prev);
    unlink(fifo);
}

static void test_declarations_only(void)
{
    expect_failure(fixture("liblayout_fixture_decls.so"), "rb_control_frame_struct");
}

/* Writes n bytes to a scratch file and returns its path. */
static const char *scratch(const char *name, const void *bytes, size_t n)
{
    static char path[1024];
    const char *dir = getenv("RBPEEK_TEST_TMP");
    if (!dir || !*dir) dir = "/tmp";
    mkdir(dir, 0755);
    snprintf(path, sizeof path, "%s/%s.%ld", dir, name, (long)getpid());
    FILE *f = fopen(path, "wb");
    if (!f) return NULL;
    fwrite(bytes, 1, n, f);
    fclose(f);
    return path;
}

/* Not ELF, empty, and an ELF cut short in its section data: each is a clean
 * -1, never a crash. */
static void test_garbage_files(void)
{
    const char *p = scratch("empty", "", 0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    expect_failure(p, NULL);
    unlink(p);

    const char text[] = "struct rb_control_frame_struct { int pc; };\n";
    p = scratch("text", text, sizeof text - 1);
    expect_failure(p, NULL);
    unlink(p);

    FILE *f = fopen(fixture("liblayout_fixture_dwarf5.so"), "rb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    static unsigned char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    CU_ASSERT_FATAL(n > 4096);
    size_t cuts[] = {64, 1024, n / 2, n - 64};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        p = scratch("cut", buf, cuts[i]);
        rbp_layout l;
        char err[512];
        /* Truncation may leave the DWARF intact (it sits before the section
         * headers); then extraction may succeed, but must be the same. */
        if (rbp_dwarf_layout(p, &l, err, sizeof err) == 0) CU_ASSERT_EQUAL(rbp_off(&l, RBP_L_cfp_pc), 0);
        unlink(p);
    }
    /* Corrupted bytes in the middle of .debug_info and friends. */
    unsigned seed = 12345;
    for (int round = 0; round < 20; round++) {
        static unsigned char bad[1 << 20];
        memcpy(bad, buf, n);
        for (int k = 0; k < 64; k++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = 4096 + (seed >> 8) % (n - 4096);
            bad[at] ^= (unsigned char)(seed >> 3);
        }
        p = scratch("flip", bad, n);
        rbp_layout l;
        char err[512];
        (void)rbp_dwarf_layout(p, &l, err, sizeof err);
        unlink(p);
    }
}

/* The committed tables agree with what the extractor says about our own
 * Ruby builds, where those builds exist on this machine. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static void test_real_rubies(void)
{
    const char *rubies = getenv("RBPEEK_RUBIES");
    if (!rubies || !*rubies) rubies = "/var/cache/rbpeek/rubies";
    const char *src = getenv("RBPEEK_SOURCE_DIR");
    if (!src || !*src) src = RBP_SOURCE_DIR;
    static const char *versions[] = {"2.7.4", "3.1.2", "3.3.8", "3.4.5"};
    int compared = 0;
    for (size_t v = 0; v < sizeof versions / sizeof versions[0]; v++) {
        char marker[1024], lib[1024], table[1024];
        snprintf(marker, sizeof marker, "%s/%s/.rbpeek-complete", rubies, versions[v]);
        snprintf(lib, sizeof lib, "%s/%s/lib/libruby.so.%s", rubies, versions[v], versions[v]);
        /* The DWARF-made reference tables; the built-in ones are made from
         * public facts and are compared with these by test_builtin_tables. */
        snprintf(table, sizeof table, "%s/layouts/dwarf/%s.layout", src, versions[v]);
        if (access(marker, F_OK) != 0 || access(lib, R_OK) != 0 || access(table, R_OK) != 0) continue;

        rbp_layout want, got;
        char err[512];
        CU_ASSERT_EQUAL_FATAL(rbp_layout_parse(&want, slurp(table), err, sizeof err), 0);
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        int rc = rbp_dwarf_layout(lib, &got, err, sizeof err);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        if (rc != 0) printf("\n  %s: %s\n", lib, err);
        CU_ASSERT_EQUAL_FATAL(rc, 0);
        printf("\n  %s: extracted in %.0f ms", versions[v],
               (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
        CU_ASSERT_STRING_EQUAL(got.ruby_version, versions[v]);
        for (int i = 0; i < RBP_L_COUNT; i++) {
            const rbp_field *a = &want.f[i], *b = &got.f[i];
            bool same = a->offset == b->offset &&
                        (a->offset < 0 || (a->size == b->size && a->bit_offset == b->bit_offset &&
                                           a->bit_size == b->bit_size));
            if (!same)
                printf("\n  %s %s: table %d %d %d %d, DWARF %d %d %d %d", versions[v],
                       rbp_field_name((rbp_field_id)i), a->offset, a->size, a->bit_offset, a->bit_size, b->offset,
                       b->size, b->bit_offset, b->bit_size);
            CU_ASSERT(same);
        }
        compared++;
    }
    if (compared == 0) {
        printf("\n  skipped: no complete Ruby build with a committed layout under %s", rubies);
        CU_PASS("no Ruby builds here; nothing to compare");
    }
}

/* fuzz_dwarf's finds of 2026-11-25, each a file that hung the extractor:
 * - data/dwarf-sibling-cycle.elf: a top-level DW_AT_sibling pointing back
 *   made the top-level walk a cycle (2 minutes under ASan, 16 s without,
 *   until the DIE budget was spent);
 * - data/dwarf-nested-sibling-loop.elf: a DW_AT_sibling pointing at its own
 *   DIE, three levels down, looped forever inside one dwarf_siblingof_b
 *   call, where libdwarf skips a struct's children to find the next one.
 * Each must now end at once, whatever it concludes: it takes about 10 ms of
 * CPU, and a CPU-time alarm of 3 s (SIGPROF, which kills the test: a load
 * on the machine does not count) fails the loop, not a slow machine. */
static void test_sibling_cycle(void)
{
    static const char *const files[] = {"dwarf-sibling-cycle.elf", "dwarf-nested-sibling-loop.elf"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tests/unit/layout/data/%s", RBP_SOURCE_DIR, files[i]);
        rbp_layout l;
        char err[256] = "";
        struct itimerval limit = {.it_value = {.tv_sec = 3}}, off = {{0, 0}, {0, 0}};
        setitimer(ITIMER_PROF, &limit, NULL);
        int rc = rbp_dwarf_layout(path, &l, err, sizeof err);
        setitimer(ITIMER_PROF, &off, NULL);
        CU_ASSERT(rc == 0 || err[0] != '\0');   /* a refusal says why */
    }
}

static const rbp_cu_test tests[] = {
    {"DWARF 5 fixture (DW_AT_data_bit_offset)", test_dwarf5},
    {"DWARF 4 fixture (DW_AT_bit_offset)", test_dwarf4},
    {"DWARF 2 fixture (location expressions)", test_dwarf2},
    {"bitfield extraction", test_extract_bitfields},
    {"no DWARF", test_no_dwarf},
    {"stripped, with .gnu_debuglink", test_debuglink},
    {"missing file", test_missing_file},
    {"a FIFO, a device, a directory: refused unopened", test_not_regular},
    {"declarations only", test_declarations_only},
    {"garbage files", test_garbage_files},
    {"DIE sibling chains that point back", test_sibling_cycle},
    {"real Ruby builds match the committed DWARF tables", test_real_rubies},
    {NULL, NULL},
};

RBP_CU_MAIN("layout_dwarf", tests)
