/*
 * Tests of the core-file memory source (mem_core.c) against a real core:
 * the core_target fixture is started, cored with gcore, and killed; then
 * the bytes rbp_source_core serves at the addresses the fixture reported
 * are compared with what the fixture wrote there. Covers reads across two
 * segments, unmapped addresses, a read-only file-backed page the core
 * leaves out (served from the file named in NT_FILE), the region list, and
 * truncated and corrupted copies of the core, which must fail cleanly or
 * read short but never crash. (Copies whose NT_FILE note names a FIFO or a
 * device: test_mem_core_nt_file.c.)
 */
#include "fixture_proc.h"
#include "fixture_files.h"
#include "cu_main.h"

#include <elf.h>
#include <sys/stat.h>
#include <time.h>

#include "rbpeek.h"
#include "memory/elf_symbols.h"
#include "memory/mem.h"

#include "core_fixture.h"
#include "fixture_emulator.h"

static void test_pattern_and_marker(void)
{
    if (!have_core()) return;
    rbp_source src;
    CU_ASSERT_FATAL(open_core(core_path, &src));
    CU_ASSERT_STRING_EQUAL(src.kind, "core");

    size_t len = 2 * fx.page;
    unsigned char *buf = malloc(len);
    CU_ASSERT_FATAL(buf != NULL);
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.buf, buf, len), (long)len);
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) bad += buf[i] != fixture_pattern(i);
    CU_ASSERT_EQUAL(bad, 0);

    uint64_t marker = 0;
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.marker, &marker, sizeof marker), (long)sizeof marker);
    CU_ASSERT_EQUAL(marker, 0x52425045454b2121ULL);
    free(buf);
    src.close(src.ctx);
}

/* The buffer's two pages have different protections, so they are two
 * mappings and two PT_LOAD segments; one read must cross the boundary. */
static void test_read_spanning_segments(void)
{
    if (!have_core()) return;
    CU_ASSERT(core_holds(core_path, fx.buf) && core_holds(core_path, fx.buf + fx.page));
    rbp_source src;
    CU_ASSERT_FATAL(open_core(core_path, &src));
    unsigned char b[100];
    uint64_t at = fx.buf + fx.page - 37;
    CU_ASSERT_EQUAL(src.read(src.ctx, at, b, sizeof b), (long)sizeof b);
    size_t bad = 0;
    for (size_t i = 0; i < sizeof b; i++) bad += b[i] != fixture_pattern(fx.page - 37 + i);
    CU_ASSERT_EQUAL(bad, 0);

    /* Through the page cache as well. */
    rbp_mem *m = rbp_mem_new(src);
    CU_ASSERT_FATAL(m != NULL);
    memset(b, 0, sizeof b);
    CU_ASSERT(rbp_mem_read(m, at, b, sizeof b));
    CU_ASSERT_EQUAL(b[0], fixture_pattern(fx.page - 37));
    CU_ASSERT_EQUAL(b[99], fixture_pattern(fx.page - 37 + 99));
    rbp_mem_free(m);
}

static void test_unmapped(void)
{
    if (!have_core()) return;
    rbp_source src;
    CU_ASSERT_FATAL(open_core(core_path, &src));
    unsigned char b[64];
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.hole, b, sizeof b), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, 0, b, sizeof b), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, 0x10, b, 8), -1);
    CU_ASSERT_EQUAL(src.read(src.ctx, UINT64_MAX - 8, b, sizeof b), -1);
    /* A read running off the end of the buffer into the hole is short. */
    long n = src.read(src.ctx, fx.hole - 16, b, sizeof b);
    CU_ASSERT_EQUAL(n, 16);
    if (n == 16) CU_ASSERT_EQUAL(b[15], fixture_pattern(2 * fx.page - 1));
    src.close(src.ctx);
}

/* The fixture's .rodata sits in a read-only file-backed mapping that gcore
 * (like the kernel, by default) does not dump; the NT_FILE fallback must
 * read it from the executable. Hiding the executable then must make the
 * same read fail, which shows where the bytes came from. */
static void test_rodata_from_file(void)
{
    if (!have_core()) return;
    static const char want[] = "rbpeek fixture: read-only data served from the mapped file";
    bool in_core = core_holds(core_path, fx.string);
    if (in_core) fprintf(stderr, "\n  [note] this core contains .rodata; the file fallback is not exercised\n");

    rbp_source src;
    CU_ASSERT_FATAL(open_core(core_path, &src));
    char got[sizeof want];
    memset(got, 0, sizeof got);
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.string, got, sizeof want), (long)sizeof want);
    CU_ASSERT_STRING_EQUAL(got, want);
    src.close(src.ctx);

    char hidden[PATH_MAX + 8];
    snprintf(hidden, sizeof hidden, "%s.hidden", fx.exe);
    CU_ASSERT_FATAL(rename(fx.exe, hidden) == 0);
    CU_ASSERT_FATAL(open_core(core_path, &src));
    long n = src.read(src.ctx, fx.string, got, sizeof want);
    CU_ASSERT_EQUAL(n, in_core ? (long)sizeof want : -1);
    /* Memory the core does hold stays readable. */
    uint64_t marker = 0;
    CU_ASSERT_EQUAL(src.read(src.ctx, fx.marker, &marker, sizeof marker), 8);
    src.close(src.ctx);
    CU_ASSERT(rename(hidden, fx.exe) == 0);
}

/* A read starting in core data (the ELF header page, which cores keep)
 * and running into the next mapping, which only the file has, must be
 * served whole, the two parts from their two sources. */
static void test_read_core_then_file(void)
{
    if (!have_core()) return;
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions(core_path, &r);
    uint64_t base = 0, seam = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].path && strcmp(r[i].path, fx.exe) == 0 && r[i].file_offset == 0) base = r[i].start;
    for (size_t i = 0; i < n; i++)
        if (base && r[i].path && strcmp(r[i].path, fx.exe) == 0 && r[i].start > base &&
            r[i].file_offset == r[i].start - base && !seam)
            seam = r[i].start;
    for (size_t i = 0; i < n; i++) free(r[i].path);
    free(r);
    CU_ASSERT_FATAL(base != 0 && seam != 0);
    bool mixed = core_holds(core_path, seam - 64) && !core_holds(core_path, seam);
    if (!mixed) fprintf(stderr, "\n  [note] core layout does not put a core/file seam here\n");
    CU_ASSERT(mixed);

    rbp_source src;
    CU_ASSERT_FATAL(open_core(core_path, &src));
    unsigned char a[128], b[128];
    CU_ASSERT_EQUAL(src.read(src.ctx, seam - 64, a, sizeof a), (long)sizeof a);
    FILE *f = fopen(fx.exe, "rb");
    CU_ASSERT_FATAL(f != NULL);
    CU_ASSERT_FATAL(fseek(f, (long)(seam - base - 64), SEEK_SET) == 0);
    CU_ASSERT_EQUAL(fread(b, 1, sizeof b, f), sizeof b);
    fclose(f);
    CU_ASSERT(memcmp(a, b, sizeof a) == 0);
    src.close(src.ctx);
}

static void test_regions(void)
{
    if (!have_core()) return;
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions(core_path, &r);
    CU_ASSERT_FATAL(n > 0 && r != NULL);
    bool exe0 = false, libc = false, buf_anon = false, sorted = true, rodata = false;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && r[i].start < r[i - 1].start) sorted = false;
        CU_ASSERT(r[i].end > r[i].start);
        if (r[i].path && strcmp(r[i].path, fx.exe) == 0 && r[i].file_offset == 0) exe0 = true;
        if (r[i].path && strstr(r[i].path, "libc.so")) libc = true;
        if (fx.buf >= r[i].start && fx.buf < r[i].end && !r[i].path) buf_anon = true;
        if (fx.string >= r[i].start && fx.string < r[i].end && r[i].path && strcmp(r[i].path, fx.exe) == 0)
            rodata = true;
        free(r[i].path);
    }
    free(r);
    CU_ASSERT(sorted);
    CU_ASSERT(exe0);
    CU_ASSERT(libc);
    CU_ASSERT(buf_anon);
    CU_ASSERT(rodata);
    CU_ASSERT_EQUAL(rbp_source_core_regions("/nonexistent/core", &r), 0);
    CU_ASSERT_PTR_NULL(r);
}

static void test_not_a_core(void)
{
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FALSE(rbp_source_core("/nonexistent/core", &src, err, sizeof err));
    CU_ASSERT(strstr(err, "cannot open") != NULL);
    err[0] = '\0';
    /* An executable of the machine cores are read for (the fixture, its
     * ELF machine made x86-64's where it was built for another): refused
     * for its file type, not its machine. */
    char exe[PATH_MAX];
    snprintf(exe, sizeof exe, "%s/core_target_not_a_core", fixture_tmpdir());
    CU_ASSERT_EQUAL_FATAL(fixture_copy_file(RBP_CORE_TARGET, exe, 0644, -1), 0);
    int fd = open(exe, O_WRONLY | O_CLOEXEC);
    const unsigned char x86_64[2] = {62, 0}; /* e_machine, little-endian */
    CU_ASSERT_FATAL(fd >= 0 && pwrite(fd, x86_64, 2, 18) == 2);
    close(fd);
    CU_ASSERT_FALSE(rbp_source_core(exe, &src, err, sizeof err));
    CU_ASSERT(strstr(err, "not a core") != NULL);
    unlink(exe);
    err[0] = '\0';
    CU_ASSERT_FALSE(rbp_source_core("/etc/hostname", &src, err, sizeof err));
    CU_ASSERT(err[0] != '\0');
    CU_ASSERT_FALSE(rbp_source_core("/", &src, err, sizeof err));
}

/* Reads a handful of interesting addresses from a damaged core: each read
 * must return -1 or a count within the request, and bytes it does return
 * from the pattern buffer must be right (truncation may lose data, never
 * invent it). */
static void probe_damaged(const char *path, bool check_pattern)
{
    rbp_source src;
    char err[256] = "";
    if (!rbp_source_core(path, &src, err, sizeof err)) {
        CU_ASSERT(err[0] != '\0');
    } else {
        size_t len = 2 * fx.page;
        unsigned char *b = malloc(len + 64);
        CU_ASSERT_FATAL(b != NULL);
        long n = src.read(src.ctx, fx.buf, b, len);
        CU_ASSERT(n == -1 || (n > 0 && (size_t)n <= len));
        if (check_pattern && n > 0) {
            size_t bad = 0;
            for (long i = 0; i < n; i++) bad += b[i] != fixture_pattern((size_t)i);
            CU_ASSERT_EQUAL(bad, 0);
        }
        uint64_t probes[] = {fx.marker, fx.string, fx.hole - 8, fx.environ_addr, 0, fx.buf + fx.page - 3};
        for (size_t i = 0; i < sizeof probes / sizeof probes[0]; i++) {
            n = src.read(src.ctx, probes[i], b, 64);
            CU_ASSERT(n == -1 || (n > 0 && n <= 64));
        }
        free(b);
        src.close(src.ctx);
    }
    rbp_region *r = NULL;
    size_t nr = rbp_source_core_regions(path, &r);
    for (size_t i = 0; i < nr; i++) {
        CU_ASSERT(r[i].end > r[i].start);
        free(r[i].path);
    }
    free(r);
}

/* Where the core's last segment with contents ends. */
static uint64_t segments_end(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    Elf64_Ehdr eh;
    uint64_t end = 0;
    if (fread(&eh, sizeof eh, 1, f) == 1) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (fseek(f, (long)(eh.e_phoff + i * sizeof ph), SEEK_SET) != 0 || fread(&ph, sizeof ph, 1, f) != 1) break;
            if ((ph.p_type == PT_LOAD || ph.p_type == PT_NOTE) && ph.p_filesz && ph.p_offset + ph.p_filesz > end)
                end = ph.p_offset + ph.p_filesz;
        }
    }
    fclose(f);
    return end;
}

static void test_truncated(void)
{
    if (!have_core()) return;
    struct stat sb;
    CU_ASSERT_FATAL(stat(core_path, &sb) == 0);
    char cut[PATH_MAX + 16];
    snprintf(cut, sizeof cut, "%s.cut", core_path);
    off_t sizes[] = {0, 1, 10, 63, 64, 100, 64 + 56, 64 + 56 * 3, 4096, sb.st_size / 4, sb.st_size / 2,
                     sb.st_size - 4096, sb.st_size - 1};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (sizes[i] < 0 || sizes[i] >= sb.st_size) continue;
        CU_ASSERT_FATAL(fixture_copy_file(core_path, cut, 0644, sizes[i]) == 0);
        probe_damaged(cut, true);
        /* Cut into a segment: the source says it is truncated. */
        rbp_source cs;
        char e[256];
        if (sizes[i] < (off_t)segments_end(core_path) && rbp_source_core(cut, &cs, e, sizeof e)) {
            const char *note = cs.note ? cs.note(cs.ctx) : NULL;
            CU_ASSERT_PTR_NOT_NULL(note);
            if (note) {
                CU_ASSERT(strstr(note, "the core file is truncated:") != NULL);
                CU_ASSERT(strstr(note, "cut or missing (") != NULL);
                CU_ASSERT(strstr(note, "still readable:") != NULL);
            }
            cs.close(cs.ctx);
        }
    }
    {   /* The whole core: nothing to say. */
        rbp_source cs;
        char e[256];
        CU_ASSERT_FATAL(rbp_source_core(core_path, &cs, e, sizeof e));
        CU_ASSERT_PTR_NULL(cs.note(cs.ctx));
        cs.close(cs.ctx);
    }
    /* Too short for an ELF header: a clear error. */
    CU_ASSERT_FATAL(fixture_copy_file(core_path, cut, 0644, 10) == 0);
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FALSE(rbp_source_core(cut, &src, err, sizeof err));
    CU_ASSERT(strstr(err, "too short") != NULL);
    unlink(cut);
}

/* Random damage to the headers, program headers and notes: the parser
 * must survive every variant. Deterministic (fixed LCG seed). */
static void test_corrupted(void)
{
    if (!have_core()) return;
    FILE *f = fopen(core_path, "rb");
    CU_ASSERT_FATAL(f != NULL);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *orig = malloc((size_t)size), *copy = malloc((size_t)size);
    CU_ASSERT_FATAL(orig && copy && fread(orig, 1, (size_t)size, f) == (size_t)size);
    fclose(f);

    /* Find the note segment, to aim half of the damage at it. */
    Elf64_Ehdr *eh = (Elf64_Ehdr *)orig;
    uint64_t note_off = 0, note_len = 0;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = (Elf64_Phdr *)(orig + eh->e_phoff) + i;
        if (ph->p_type == PT_NOTE) note_off = ph->p_offset, note_len = ph->p_filesz;
    }
    uint64_t hdr_len = eh->e_phoff + (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr);

    char bad[PATH_MAX + 16];
    snprintf(bad, sizeof bad, "%s.bad", core_path);
    uint64_t seed = 0x2545F4914F6CDD1DULL;
    for (int round = 0; round < 60; round++) {
        memcpy(copy, orig, (size_t)size);
        for (int k = 0; k < 24; k++) {
            seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
            uint64_t r = seed >> 16;
            uint64_t at = (k & 1 && note_len) ? note_off + r % note_len : r % hdr_len;
            if (at < 24 && round < 50) continue; /* mostly keep the ELF ident valid */
            if (at < (uint64_t)size) copy[at] = (unsigned char)(r >> 40);
        }
        FILE *o = fopen(bad, "wb");
        CU_ASSERT_FATAL(o != NULL);
        fwrite(copy, 1, (size_t)size, o);
        fclose(o);
        probe_damaged(bad, false);
    }
    unlink(bad);
    free(orig);
    free(copy);
}

/* 1 if a PT_LOAD covers addr but its p_filesz stops short of it (the
 * kernel's way of leaving a page out), 0 if not, -1 on error. */
static int core_segment_lacks(const char *path, uint64_t addr)
{
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    Elf64_Ehdr eh;
    int res = 0;
    if (fread(&eh, sizeof eh, 1, f) == 1 && fseek(f, (long)eh.e_phoff, SEEK_SET) == 0) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            Elf64_Phdr ph;
            if (fread(&ph, sizeof ph, 1, f) != 1) break;
            if (ph.p_type == PT_LOAD && addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_memsz)
                res = addr - ph.p_vaddr >= ph.p_filesz;
        }
    }
    fclose(f);
    return res;
}

/* A core written by the kernel itself (fatal signal), when core_pattern
 * lets one land in a directory of ours. Unlike gcore, the kernel writes a
 * PT_LOAD for every mapping and marks left-out pages by p_filesz <
 * p_memsz, which is the other half of the file fallback. */
static void test_kernel_core(void)
{
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    char pattern[256] = "";
    FILE *pf = fopen("/proc/sys/kernel/core_pattern", "r");
    if (pf) {
        if (!fgets(pattern, sizeof pattern, pf)) pattern[0] = '\0';
        fclose(pf);
    }
    pattern[strcspn(pattern, "\n")] = '\0';
    if (!pattern[0] || pattern[0] == '|' || strchr(pattern, '/') || strchr(pattern, '%')) {
        fprintf(stderr, "\n  [skip] kernel.core_pattern is '%s'; cannot collect a kernel core here\n", pattern);
        return;
    }
    char dir[PATH_MAX / 2 + 16], kcore[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/kcore", fixture_tmpdir());
    mkdir(dir, 0755);
    snprintf(kcore, sizeof kcore, "%s/%s", dir, pattern);
    unlink(kcore);
    fixture_proc k;
    CU_ASSERT_FATAL(fixture_start_in(&k, "kcore", RBP_CORE_TARGET, dir));
    char pidcore[PATH_MAX + 16];
    snprintf(pidcore, sizeof pidcore, "%s.%d", kcore, (int)k.pid);
    unlink(pidcore);
    kill(k.pid, SIGSEGV);
    int st = 0;
    waitpid(k.pid, &st, 0);
    k.pid = 0;
    struct stat sb;
    const char *path = stat(kcore, &sb) == 0 ? kcore : stat(pidcore, &sb) == 0 ? pidcore : NULL;
    if (!WIFSIGNALED(st) || !WCOREDUMP(st) || !path) {
        fprintf(stderr, "\n  [skip] the kernel wrote no core (limits or policy)\n");
        fixture_remove(&k);
        return;
    }

    rbp_source src;
    CU_ASSERT_FATAL(open_core(path, &src));
    size_t len = 2 * k.page;
    unsigned char *b = malloc(len);
    CU_ASSERT_FATAL(b != NULL);
    CU_ASSERT_EQUAL(src.read(src.ctx, k.buf, b, len), (long)len);
    size_t bad = 0;
    for (size_t i = 0; i < len; i++) bad += b[i] != fixture_pattern(i);
    CU_ASSERT_EQUAL(bad, 0);
    free(b);
    uint64_t marker = 0;
    CU_ASSERT_EQUAL(src.read(src.ctx, k.marker, &marker, 8), 8);
    CU_ASSERT_EQUAL(marker, 0x52425045454b2121ULL);
    unsigned char h[8];
    CU_ASSERT_EQUAL(src.read(src.ctx, k.hole, h, sizeof h), -1);

    static const char want[] = "rbpeek fixture: read-only data served from the mapped file";
    CU_ASSERT_EQUAL(core_segment_lacks(path, k.string), 1);
    char got[sizeof want] = "";
    CU_ASSERT_EQUAL(src.read(src.ctx, k.string, got, sizeof want), (long)sizeof want);
    CU_ASSERT_STRING_EQUAL(got, want);
    src.close(src.ctx);
    unlink(path);
    rmdir(dir);
    fixture_remove(&k);
}

static const rbp_cu_test tests[] = {
    {"pattern and marker read from the core", test_pattern_and_marker},
    {"a read spanning two segments", test_read_spanning_segments},
    {"unmapped addresses fail, reads into a hole are short", test_unmapped},
    {".rodata missing from the core is read from the file", test_rodata_from_file},
    {"a read from core data into file-only pages", test_read_core_then_file},
    {"regions from NT_FILE and PT_LOAD", test_regions},
    {"non-core files are rejected with a message", test_not_a_core},
    {"truncated cores fail cleanly or read short", test_truncated},
    {"corrupted headers and notes do not crash", test_corrupted},
    {"a kernel-written core (p_filesz < p_memsz)", test_kernel_core},
    {"cleanup", test_cleanup},
    {NULL, NULL},
};

RBP_CU_MAIN("mem_core", tests)
