/*
 * Tests of the .dynsym lookup (elf_symbols.c) on a real target: the
 * core_target fixture, exported with -rdynamic, read live through /proc and
 * through a gcore core. rbp_elf_lookup must find the fixture's globals and
 * libc's environ at the addresses the fixture itself reported, find nothing
 * for names that are not there, and still work when target memory serves
 * none of the file-backed pages (so every table comes from the files on
 * disk), or when the region list contains files that are not ELF images.
 *
 * Most sessions are assembled directly from the pieces (a zeroed session
 * struct with a memory source and regions), whose memory, regions and ELF
 * cache are all rbp_elf_lookup takes; one goes through
 * rbpeek_session_use_core.
 */
#include "fixture_proc.h"
#include "cu_main.h"

#include <elf.h>

#include "context/context.h"
#include "memory/elf_symbols.h"
#include "memory/mem.h"

static fixture_proc fx;
static char core_path[PATH_MAX];
static int fx_state;   /* 0 not tried, 1 running, -1 unavailable */
static int core_state; /* 0 not tried, 1 ready, -1 unavailable */

static bool have_child(void)
{
    if (fx_state == 0) {
        fx_state = fixture_start(&fx, "elfsym") ? 1 : -1;
        if (fx_state < 0) fprintf(stderr, "\n  [skip] could not start the core_target fixture\n");
    }
    return fx_state > 0;
}

static bool have_core(void)
{
    if (core_state == 0) {
        core_state = -1;
        if (!fixture_have("gcore")) fprintf(stderr, "\n  [skip] gcore not found on PATH; core tests skipped\n");
        else if (have_child() && fixture_gcore(&fx, "elfsym", core_path, sizeof core_path)) core_state = 1;
        else fprintf(stderr, "\n  [skip] gcore failed\n");
    }
    return core_state > 0;
}

/* rbp_elf_lookup on a session's memory, regions and ELF cache. */
static bool elf_lookup(rbpeek_session *s, const char *name, uint64_t *addr)
{
    return rbp_elf_lookup(s->mem, s->regions, s->nregions, &s->elfcache, name, addr);
}

static rbpeek_session *session_over(rbp_source src, rbp_region *regions, size_t n)
{
    rbpeek_session *s = calloc(1, sizeof *s);
    CU_ASSERT_FATAL(s != NULL);
    s->mem = rbp_mem_new(src);
    CU_ASSERT_FATAL(s->mem != NULL);
    s->regions = regions;
    s->nregions = s->regions_cap = n;
    return s;
}

static void session_done(rbpeek_session *s)
{
    rbp_elfcache_free(s->elfcache);
    rbp_mem_free(s->mem);
    for (size_t i = 0; i < s->nregions; i++) free(s->regions[i].path);
    free(s->regions);
    free(s);
}

static rbpeek_session *core_session(void)
{
    rbp_source src;
    char err[256] = "";
    if (!rbp_source_core(core_path, &src, err, sizeof err)) {
        fprintf(stderr, "\n  rbp_source_core: %s\n", err);
        return NULL;
    }
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions(core_path, &r);
    CU_ASSERT(n > 0);
    return session_over(src, r, n);
}

static rbpeek_session *proc_session(void)
{
    rbp_source src;
    char err[256] = "";
    if (!rbp_source_proc((int)fx.pid, &src, err, sizeof err)) {
        fprintf(stderr, "\n  rbp_source_proc: %s\n", err);
        return NULL;
    }
    rbp_region *r = NULL;
    size_t n = rbp_source_proc_regions((int)fx.pid, &r);
    CU_ASSERT(n > 0);
    return session_over(src, r, n);
}

/* The path of the region containing addr, or "" (for messages/asserts). */
static const char *region_path(const rbpeek_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nregions; i++)
        if (addr >= s->regions[i].start && addr < s->regions[i].end)
            return s->regions[i].path ? s->regions[i].path : "";
    return "";
}

/* The checks every kind of session must pass. */
static void check_session(rbpeek_session *s)
{
    uint64_t a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_marker", &a));
    CU_ASSERT_EQUAL(a, fx.marker);
    uint64_t v = 0;
    CU_ASSERT(rbp_mem_u64(s->mem, a, &v) && v == 0x52425045454b2121ULL);

    a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_string", &a));
    CU_ASSERT_EQUAL(a, fx.string);

    /* environ: the executable's copy (copy relocation) when it has one,
     * which is where the fixture's own code sees it. */
    a = 0;
    CU_ASSERT(elf_lookup(s, "environ", &a));
    CU_ASSERT_EQUAL(a, fx.environ_addr);
    CU_ASSERT(rbp_mem_u64(s->mem, a, &v) && v != 0);

    /* A symbol only libc defines, found in libc's mapping. */
    a = 0;
    CU_ASSERT(elf_lookup(s, "pause", &a));
    CU_ASSERT(strstr(region_path(s, a), "libc.so") != NULL);

    CU_ASSERT_FALSE(elf_lookup(s, "rbpeek_no_such_symbol_anywhere", &a));
    CU_ASSERT_FALSE(elf_lookup(s, "", &a));
    /* Undefined in the executable (imported), so only libc's counts. */
    a = 0;
    CU_ASSERT(elf_lookup(s, "printf", &a));
    CU_ASSERT(strstr(region_path(s, a), "libc.so") != NULL);

    /* Repeated lookups use the cache and give the same answers. */
    for (int i = 0; i < 3; i++) {
        a = 0;
        CU_ASSERT(elf_lookup(s, "rbpeek_fixture_marker", &a) && a == fx.marker);
    }
}

static void test_live(void)
{
    if (!have_child()) return;
    rbpeek_session *s = proc_session();
    CU_ASSERT_FATAL(s != NULL);
    check_session(s);
    session_done(s);
}

static void test_core(void)
{
    if (!have_core()) return;
    rbpeek_session *s = core_session();
    CU_ASSERT_FATAL(s != NULL);
    check_session(s);
    session_done(s);
}

/* Through the public session API: use_core fills in the source and the
 * regions; rbpeek_session_free must release the ELF cache (valgrind). */
static void test_public_session(void)
{
    if (!have_core()) return;
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_use_core(s, core_path), RBPEEK_OK);
    check_session(s);
    CU_ASSERT_PTR_NOT_NULL(s->elfcache);
    uint64_t a = 0;
    const char *how = NULL;
    CU_ASSERT(rbp_symbol_lookup(s, "rbpeek_fixture_marker", &a, &how));
    CU_ASSERT_EQUAL(a, fx.marker);
    rbpeek_session_free(s);
}

/* A source that serves nothing of any file-backed region: every ELF
 * header, dynamic section and symbol table must then come from disk.
 * (Writable data such as the marker's value is unreadable too, so only
 * addresses are checked.) */
typedef struct hide_files {
    rbp_source inner;
    const rbp_region *r;
    size_t n;
} hide_files;

static long hide_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    hide_files *h = ctx;
    for (size_t i = 0; i < h->n; i++)
        if (h->r[i].path && h->r[i].path[0] == '/' && addr < h->r[i].end && addr + len > h->r[i].start) return -1;
    return h->inner.read(h->inner.ctx, addr, buf, len);
}

static void hide_close(void *ctx)
{
    hide_files *h = ctx;
    h->inner.close(h->inner.ctx);
    free(h);
}

static void test_tables_from_disk(void)
{
    if (!have_core()) return;
    rbpeek_session *s = core_session();
    CU_ASSERT_FATAL(s != NULL);
    hide_files *h = malloc(sizeof *h);
    CU_ASSERT_FATAL(h != NULL);
    /* Swap the session's source for the hiding wrapper around a fresh one. */
    rbp_mem_free(s->mem);
    char err[256];
    CU_ASSERT_FATAL(rbp_source_core(core_path, &h->inner, err, sizeof err));
    h->r = s->regions;
    h->n = s->nregions;
    s->mem = rbp_mem_new((rbp_source){.read = hide_read, .close = hide_close, .ctx = h, .kind = "test"});
    CU_ASSERT_FATAL(s->mem != NULL);

    uint64_t probe;
    CU_ASSERT_FALSE(rbp_mem_u64(s->mem, fx.marker, &probe)); /* really hidden */
    uint64_t a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_marker", &a));
    CU_ASSERT_EQUAL(a, fx.marker);
    a = 0;
    CU_ASSERT(elf_lookup(s, "environ", &a));
    CU_ASSERT_EQUAL(a, fx.environ_addr);
    a = 0;
    CU_ASSERT(elf_lookup(s, "pause", &a));
    CU_ASSERT(strstr(region_path(s, a), "libc.so") != NULL);
    CU_ASSERT_FALSE(elf_lookup(s, "rbpeek_no_such_symbol_anywhere", &a));
    session_done(s);
}

/* Regions naming files that are not ELF, do not exist, or are ELF files
 * other than what is mapped (the fixture's path over libc's base) must be
 * skipped without disturbing lookups in the real images. */
static void test_bogus_regions(void)
{
    if (!have_core()) return;
    rbpeek_session *s = core_session();
    CU_ASSERT_FATAL(s != NULL);
    uint64_t libc_base = 0;
    for (size_t i = 0; i < s->nregions; i++)
        if (s->regions[i].path && strstr(s->regions[i].path, "libc.so") && s->regions[i].file_offset == 0)
            libc_base = s->regions[i].start;
    CU_ASSERT_FATAL(libc_base != 0);
    rbp_region *r = realloc(s->regions, (s->nregions + 4) * sizeof *r);
    CU_ASSERT_FATAL(r != NULL);
    s->regions = r;
    r[s->nregions++] = (rbp_region){0x1000, 0x2000, 0, strdup("/etc/hostname")};
    r[s->nregions++] = (rbp_region){0x3000, 0x4000, 0, strdup("/nonexistent/lib.so")};
    r[s->nregions++] = (rbp_region){0x5000, 0x6000, 0, strdup("[weird]")};
    r[s->nregions++] = (rbp_region){libc_base, libc_base + 0x1000, 0, strdup(fx.exe)};
    s->regions_cap = s->nregions;

    uint64_t a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_marker", &a));
    CU_ASSERT_EQUAL(a, fx.marker);
    a = 0;
    CU_ASSERT(elf_lookup(s, "pause", &a));
    CU_ASSERT(strstr(region_path(s, a), "libc.so") != NULL);
    CU_ASSERT_FALSE(elf_lookup(s, "rbpeek_no_such_symbol_anywhere", &a));
    session_done(s);
}

/* No regions, or no memory: false, no crash. */
static void test_empty(void)
{
    rbpeek_session s;
    memset(&s, 0, sizeof s);
    uint64_t a = 0;
    CU_ASSERT_FALSE(elf_lookup(&s, "environ", &a));
    CU_ASSERT_FALSE(rbp_elf_lookup(NULL, NULL, 0, &s.elfcache, "environ", &a));
    rbp_elfcache_free(s.elfcache);
    rbp_elfcache_free(NULL);
}

/* 1 if the ELF file has a SHT_HASH section and no SHT_GNU_HASH one,
 * 0 otherwise (an independent look at the fixture's linking). */
static int hash_sections(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    Elf64_Ehdr eh;
    bool sysv = false, gnu = false;
    if (fread(&eh, sizeof eh, 1, f) == 1 && fseek(f, (long)eh.e_shoff, SEEK_SET) == 0) {
        for (unsigned i = 0; i < eh.e_shnum; i++) {
            Elf64_Shdr sh;
            if (fread(&sh, sizeof sh, 1, f) != 1) break;
            sysv |= sh.sh_type == SHT_HASH;
            gnu |= sh.sh_type == SHT_GNU_HASH;
        }
    }
    fclose(f);
    return sysv && !gnu;
}

/* The same program linked with only a SysV DT_HASH table. */
static void test_sysv_hash(void)
{
    fixture_proc sv;
    if (!fixture_start_exe(&sv, "elfsym_sysv", RBP_CORE_TARGET_SYSV)) {
        fprintf(stderr, "\n  [skip] could not start core_target_sysv\n");
        return;
    }
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FATAL(rbp_source_proc((int)sv.pid, &src, err, sizeof err));
    rbp_region *r = NULL;
    size_t n = rbp_source_proc_regions((int)sv.pid, &r);
    rbpeek_session *s = session_over(src, r, n);

    uint64_t a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_marker", &a));
    CU_ASSERT_EQUAL(a, sv.marker);
    a = 0;
    CU_ASSERT(elf_lookup(s, "rbpeek_fixture_string", &a));
    CU_ASSERT_EQUAL(a, sv.string);
    a = 0;
    CU_ASSERT(elf_lookup(s, "environ", &a));
    CU_ASSERT_EQUAL(a, sv.environ_addr);
    CU_ASSERT_FALSE(elf_lookup(s, "rbpeek_no_such_symbol_anywhere", &a));
    session_done(s);
    /* The executable really has only DT_HASH, so that table was used. */
    CU_ASSERT_EQUAL(hash_sections(sv.exe), 1);
    fixture_remove(&sv);
}

static void test_cleanup(void)
{
    fixture_remove(&fx);
    if (core_state > 0) unlink(core_path);
}

static const rbp_cu_test tests[] = {
    {"lookups in a live process", test_live},
    {"lookups in a gcore core", test_core},
    {"lookups through rbpeek_session_use_core", test_public_session},
    {"lookups when memory serves no file-backed page", test_tables_from_disk},
    {"bogus regions are skipped", test_bogus_regions},
    {"SysV hash table", test_sysv_hash},
    {"empty sessions", test_empty},
    {"cleanup", test_cleanup},
    {NULL, NULL},
};

RBP_CU_MAIN("elf_symbols", tests)
