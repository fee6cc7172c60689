/*
 * Tests of the live-process memory source (mem_proc.c): a forked child
 * running the core_target fixture is read through /proc/PID/mem and its
 * /proc/PID/maps is parsed; the results are checked against the addresses
 * and contents the child reported. (Reading our own child is allowed to
 * its parent; the fixture also opts in to any tracer.)
 */
#include "fixture_proc.h"
#include "cu_main.h"

#include "memory/mem.h"
#include "fixture_emulator.h"

#include <sys/mman.h>
#include <unistd.h>

static fixture_proc fx;
static int fx_state; /* 0 not tried, 1 running, -1 unavailable */

static bool have_child(void)
{
    if (fx_state == 0) {
        fx_state = fixture_start(&fx, "memproc") ? 1 : -1;
        if (fx_state < 0) fprintf(stderr, "\n  [skip] could not start the core_target fixture\n");
    }
    return fx_state > 0;
}

static bool open_proc(rbp_source *src)
{
    char err[256] = "";
    bool ok = rbp_source_proc((int)fx.pid, src, err, sizeof err);
    if (!ok) fprintf(stderr, "\n  rbp_source_proc(%d): %s\n", (int)fx.pid, err);
    return ok;
}

static void test_reads(void)
{
    if (!have_child()) return;
    rbp_source src;
    CU_ASSERT_FATAL(open_proc(&src));
    CU_ASSERT_STRING_EQUAL(src.kind, "proc");

    size_t len = 2 * fx.page;
    unsigned char *b = malloc(len);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.buf, b, len), (long)len);
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) bad += b[i] != fixture_pattern(i);
    CU_ASSERT_EQUAL(bad, 0);
    free(b);

    uint64_t marker = 0;
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.marker, &marker, 8), 8);
    CU_ASSERT_EQUAL(marker, 0x52425045454b2121ULL);

    /* .rodata through the page cache, as a C string. */
    rbp_mem *m = rbp_mem_new(src);
    CU_ASSERT_FATAL(m != NULL);
    char s[128];
    CU_ASSERT(rbp_mem_cstr(m, fx.string, s, sizeof s));
    CU_ASSERT_STRING_EQUAL(s, "rbpeek fixture: read-only data served from the mapped file");
    rbp_mem_free(m);
}

static void test_unreadable(void)
{
    if (!have_child()) return;
    rbp_source src;
    CU_ASSERT_FATAL(open_proc(&src));
    unsigned char b[64];
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.hole, b, sizeof b), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, 0, b, sizeof b), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, 0xffffffffff600000ULL + 0x100000, b, 8), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, UINT64_MAX - 4, b, 8), -1);
    long n = src.read(src.ctx, fx.hole - 16, b, sizeof b);
    CU_ASSERT_EQUAL(n, 16);
    if (n == 16) CU_ASSERT_EQUAL(b[0], fixture_pattern(2 * fx.page - 16));
    src.close(src.ctx);
}

static void test_regions(void)
{
    if (!have_child()) return;
    rbp_region *r = NULL;
    size_t n = rbp_source_proc_regions((int)fx.pid, &r);
    CU_ASSERT_FATAL(n > 0 && r != NULL);
    bool exe0 = false, rodata = false, buf_anon = false, stack = false, hole_free = true, sorted = true;
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT(r[i].end > r[i].start);
        if (i > 0 && r[i].start < r[i - 1].end) sorted = false;
        if (r[i].path && strcmp(r[i].path, fx.exe) == 0 && r[i].file_offset == 0) exe0 = true;
        if (r[i].path && strcmp(r[i].path, fx.exe) == 0 && fx.string >= r[i].start && fx.string < r[i].end)
            rodata = true;
        if (fx.buf >= r[i].start && fx.buf < r[i].end && !r[i].path) buf_anon = true;
        if (fx.hole >= r[i].start && fx.hole < r[i].end) hole_free = false;
        if (r[i].path && strcmp(r[i].path, "[stack]") == 0) stack = true;
        free(r[i].path);
    }
    free(r);
    CU_ASSERT(exe0);
    CU_ASSERT(rodata);
    CU_ASSERT(buf_anon);
    CU_ASSERT(stack);
    CU_ASSERT(hole_free);
    CU_ASSERT(sorted);
}

static void test_bad_pids(void)
{
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FALSE(rbp_source_proc(-1, &src, err, sizeof err));
    CU_ASSERT(err[0] != '\0');
    err[0] = '\0';
    CU_ASSERT_FALSE(rbp_source_proc(0x3ffffff0, &src, err, sizeof err)); /* above pid_max */
    CU_ASSERT(strstr(err, "no process") != NULL);
    rbp_region *r = (rbp_region *)&src;
    CU_ASSERT_EQUAL(rbp_source_proc_regions(0x3ffffff0, &r), 0);
    CU_ASSERT_PTR_NULL(r);
}

/* The child exits: reads of a source opened before then fail, not crash. */
static void test_after_exit(void)
{
    if (!have_child()) return;
    rbp_source src;
    CU_ASSERT_FATAL(open_proc(&src));
    fixture_stop(&fx);
    fx_state = -1;
    unsigned char b[16];
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.buf, b, sizeof b), -1);
    src.close(src.ctx);
    fixture_remove(&fx);
}

/* rbp_mem_prefetch over this source: the pages the last generation used are
 * read again in one batch (process_vm_readv, here on this very process),
 * fresh values are served from it with no further source read, and a page
 * unmapped meanwhile, in the middle of the batch, is left to a plain read,
 * which fails. */
static void test_prefetch(void)
{
    if (fixture_emulated("qemu-user does not implement process_vm_readv (ENOSYS): reads are not batched, and the "
                         "counts this test checks are a batch's")) return;
    long pg = sysconf(_SC_PAGESIZE);
    CU_ASSERT_FATAL(pg == 4096);
    uint8_t *buf = mmap(NULL, (size_t)(4 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(buf != MAP_FAILED);
    for (int i = 0; i < 4; i++) buf[i * pg + 8] = (uint8_t)(i + 1);
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FATAL(rbp_source_proc((int)getpid(), &src, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(src.read_many);
    rbp_mem *m = rbp_mem_new(src);
    CU_ASSERT_FATAL(m != NULL);
    uint8_t b = 0;
    for (int i = 0; i < 4; i++) {
        CU_ASSERT(rbp_mem_read(m, (uint64_t)(uintptr_t)(buf + i * pg + 8), &b, 1));
        CU_ASSERT_EQUAL(b, i + 1);
    }
    for (int i = 0; i < 4; i++) buf[i * pg + 8] = (uint8_t)(10 + i);
    munmap(buf + pg, (size_t)pg);
    rbp_mem_invalidate(m);
    rbp_mem_reset_stats(m);
    rbp_mem_prefetch(m);
    rbpeek_read_stats st;
    rbp_mem_stats(m, &st);
    CU_ASSERT_EQUAL(st.source_reads, 1);
    CU_ASSERT_EQUAL(st.source_bytes, (uint64_t)(3 * pg));
    for (int i = 0; i < 4; i += i == 0 ? 2 : 1) {
        CU_ASSERT(rbp_mem_read(m, (uint64_t)(uintptr_t)(buf + i * pg + 8), &b, 1));
        CU_ASSERT_EQUAL(b, 10 + i);
    }
    rbp_mem_stats(m, &st);
    CU_ASSERT_EQUAL(st.source_reads, 1);   /* all three from the batch */
    CU_ASSERT_FALSE(rbp_mem_read(m, (uint64_t)(uintptr_t)(buf + pg + 8), &b, 1));
    rbp_mem_stats(m, &st);
    CU_ASSERT_EQUAL(st.source_reads, 2);
    /* Nothing used since the last invalidation but that: prefetch reads nothing. */
    rbp_mem_invalidate(m);
    rbp_mem_invalidate(m);
    rbp_mem_reset_stats(m);
    rbp_mem_prefetch(m);
    rbp_mem_stats(m, &st);
    CU_ASSERT_EQUAL(st.source_reads, 0);
    rbp_mem_free(m);
    munmap(buf, (size_t)pg);
    munmap(buf + 2 * pg, (size_t)(2 * pg));
}

/* rbp_mem_fence: pages read before it stay in use for ordinary reads (the
 * sampler's parked threads), strict reads get values read after it (the
 * stopped thread), and the pages strict reads used are fetched in one batch
 * at the next fence. Page 0 plays the stopped thread's stack, page 1 a
 * parked thread's. */
static void test_fence(void)
{
    if (fixture_emulated("qemu-user does not implement process_vm_readv (ENOSYS): reads are not batched, and the "
                         "counts this test checks are a batch's")) return;
    long pg = sysconf(_SC_PAGESIZE);
    CU_ASSERT_FATAL(pg == 4096);
    uint8_t *buf = mmap(NULL, (size_t)(2 * pg), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CU_ASSERT_FATAL(buf != MAP_FAILED);
    uint64_t a0 = (uint64_t)(uintptr_t)(buf + 8), a1 = (uint64_t)(uintptr_t)(buf + pg + 8);
    buf[8] = 1;
    buf[pg + 8] = 2;
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FATAL(rbp_source_proc((int)getpid(), &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    CU_ASSERT_FATAL(m != NULL);
    uint8_t b = 0;
    for (int round = 0; round < 2; round++) {
        /* Before the stop: both pages through the cache. */
        CU_ASSERT(rbp_mem_read(m, a0, &b, 1));
        CU_ASSERT_EQUAL(b, round ? 3 : 1);
        CU_ASSERT(rbp_mem_read(m, a1, &b, 1));
        CU_ASSERT_EQUAL(b, 2);
        buf[8] = (uint8_t)(round ? 4 : 3);   /* the running thread moves on before it stops */
        rbpeek_read_stats st;
        rbp_mem_reset_stats(m);
        rbp_mem_fence(m);
        rbp_mem_stats(m, &st);
        /* The first time no strict read has been made yet; the second,
         * page 0 comes in the fence's batch. */
        CU_ASSERT_EQUAL(st.source_reads, round ? 1u : 0u);
        CU_ASSERT_EQUAL(st.source_bytes, round ? (uint64_t)pg : 0u);
        bool was = rbp_mem_set_strict(m, true);
        CU_ASSERT_FALSE(was);
        CU_ASSERT(rbp_mem_read(m, a0, &b, 1));
        CU_ASSERT_EQUAL(b, round ? 4 : 3);
        rbp_mem_set_strict(m, false);
        /* The parked thread's page is still the one read before. */
        CU_ASSERT(rbp_mem_read(m, a1, &b, 1));
        CU_ASSERT_EQUAL(b, 2);
        rbp_mem_stats(m, &st);
        CU_ASSERT_EQUAL(st.source_reads, 1u);   /* page 0: on demand, or from the batch */
        rbp_mem_invalidate(m);
    }
    rbp_mem_free(m);
    munmap(buf, (size_t)(2 * pg));
}

static const rbp_cu_test tests[] = {
    {"prefetch: the last generation's pages in one batch", test_prefetch},
    {"fence: strict reads are served from pages read after it", test_fence},
    {"reads of a live child's memory", test_reads},
    {"unmapped and kernel addresses fail, reads into a hole are short", test_unreadable},
    {"regions from /proc/PID/maps", test_regions},
    {"bad pids are rejected with a message", test_bad_pids},
    {"a source whose process exited fails cleanly", test_after_exit},
    {NULL, NULL},
};

RBP_CU_MAIN("mem_proc", tests)
