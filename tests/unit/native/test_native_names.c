/*
 * The unwinder's names for pcs it has not met before (native/unwind.c): a
 * pc inside a function it has met is named from that function's range,
 * without asking the backend. Over the fixture's functions
 * (fixtures/native_target.c), whole and stripped (where level2, a static
 * function, has no symbol and is known by its FDE), every pc so named must
 * match what the backend itself says of it: symbol, offset in the symbol,
 * function, module and offset in the module.
 */
#define _GNU_SOURCE
#include "fixture_proc.h"

#include "cu_main.h"
#include "fixture_native.h"
#include "memory/mem.h"
#include "native/native.h"
#include "fixture_emulator.h"

#ifndef RBP_NATIVE_TARGET
#error "RBP_NATIVE_TARGET must be defined by the build"
#endif

/* The first bytes of each fixture function: all inside it (each is a call
 * and a return at least). */
#define OFFSETS 8

static void same_frame(const rbpeek_native_frame *a, const rbpeek_native_frame *b)
{
    CU_ASSERT_STRING_EQUAL(a->symbol ? a->symbol : "(none)", b->symbol ? b->symbol : "(none)");
    CU_ASSERT_EQUAL(a->symbol_offset, b->symbol_offset);
    CU_ASSERT_EQUAL(a->function, b->function);
    CU_ASSERT_STRING_EQUAL(a->module ? a->module : "(none)", b->module ? b->module : "(none)");
    CU_ASSERT_EQUAL(a->module_offset, b->module_offset);
}

/* For each function: its first pc asked of the backend (the range is
 * kept), then each next pc named from the range, then the same pc asked
 * again with source lines, which always goes to the backend. */
static void check_exe(const char *tag, const char *exe, bool stripped)
{
    fixture_proc p;
    CU_ASSERT_FATAL(fixture_start_exe(&p, tag, exe));
    char err[512];
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_proc(p.pid, &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    rbp_region *r = NULL;
    size_t nr = rbp_source_proc_regions(p.pid, &r);
    rbp_native *n = rbp_native_new(m, fixture_native_self_regset(), err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    CU_ASSERT_FATAL(rbp_native_set_regions(n, r, nr, err, sizeof err));
    /* level1, level2 (static), level3, main: as the fixture printed them */
    const uint64_t fns[] = {p.buf, p.hole, p.marker, p.string};
    for (size_t f = 0; f < sizeof fns / sizeof fns[0]; f++) {
        rbpeek_native_frame first, ranged, asked;
        rbp_native_extra x;
        rbp_native_describe(n, fns[f], true, false, &first, &x);
        CU_ASSERT_EQUAL(first.function, fns[f]);
        if (f == 1) CU_ASSERT(stripped ? first.symbol == NULL : first.symbol && !strcmp(first.symbol, "level2"));
        for (uint64_t off = 1; off < OFFSETS; off++) {
            rbp_native_describe(n, fns[f] + off, true, false, &ranged, NULL);
            rbp_native_describe(n, fns[f] + off, true, true, &asked, NULL);
            same_frame(&ranged, &asked);
            CU_ASSERT_EQUAL(ranged.function, fns[f]);
            if (first.symbol) CU_ASSERT_EQUAL(ranged.symbol_offset, off);
        }
    }
    rbp_native_free(n);
    rbp_mem_free(m);
    for (size_t i = 0; i < nr; i++) free(r[i].path);
    free(r);
    fixture_remove(&p);
}

static void test_named(void)
{
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    if (fixture_native_backend_ok()) check_exe("names_whole", RBP_NATIVE_TARGET, false);
}

static void test_stripped(void)
{
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    if (!fixture_native_backend_ok()) return;
    char stripped[PATH_MAX], cmd[3 * PATH_MAX];
    snprintf(stripped, sizeof stripped, "%s/native_target_names_stripped", fixture_tmpdir());
    snprintf(cmd, sizeof cmd, "%s --strip-all %s %s", RBP_OBJCOPY, RBP_NATIVE_TARGET, stripped);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    check_exe("names_stripped", stripped, true);
    unlink(stripped);
}

static const rbp_cu_test TESTS[] = {
    {"a new pc in a function met before: named as the backend names it", test_named},
    {"the same, stripped: a static function known by its FDE alone", test_stripped},
    {NULL, NULL},
};

RBP_CU_MAIN("native_names", TESTS)
