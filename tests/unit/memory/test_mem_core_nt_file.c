/*
 * A core's NT_FILE note is the core's word, and cores come from anyone:
 * copies of the core_target fixture's core whose note names a FIFO or
 * /dev/zero in place of the fixture's executable must have that file
 * refused (read as missing) and said once on the source's warning line,
 * and must never block on the FIFO or read the device's bytes.
 *
 * A core without the note (qemu-user writes none) names its files in the
 * dynamic linker's list in its memory (memory/linkmap.c): a copy of
 * the fixture's core with its NT_FILE note renamed must map every file
 * the note maps, the same bytes at the same addresses, from the link map
 * alone; and with its auxiliary vector gone too, it says it knows no
 * files, in one line. The same walk through a reader that is only a
 * callback (a debugger's reads, where it lists no mapped files: gdb on
 * qemu's gdb stub), from the auxiliary vector's three words, finds the
 * same files.
 */
#define CORE_FIXTURE_TAG "memcore_nt"
#include "core_fixture.h"
#include "fixture_files.h"
#include "cu_main.h"

#include <sys/stat.h>
#include <time.h>

#include "rbpeek.h"
#include "memory/core_file.h"
#include "memory/elf_symbols.h"
#include "memory/linkmap.h"

/* The warnings a source says, collected. */
typedef struct said {
    char text[2048];
    int n;
} said;

static void collect(void *ctx, const char *line)
{
    said *w = ctx;
    size_t used = strlen(w->text);
    snprintf(w->text + used, sizeof w->text - used, "%s\n", line);
    w->n++;
}

/* A path as long as len naming what dir/name names: slashes in between
 * (the note's strings are replaced in place, so the length must stay). */
static bool same_length_path(char *out, size_t len, const char *dir, const char *name)
{
    size_t d = strlen(dir), n = strlen(name);
    if (d + n + 1 > len || len + 1 > PATH_MAX) return false;
    memcpy(out, dir, d);
    memset(out + d, '/', len - d - n);
    memcpy(out + len - n, name, n + 1);
    return true;
}

/* A copy of the core at out whose NT_FILE note names instead of every
 * occurrence of path; false if the note or the path is not found. */
static bool core_with_renamed_file(const char *in, const char *out, const char *path, const char *instead)
{
    size_t size = 0;
    unsigned char *b = (unsigned char *)slurp(in, &size);
    if (!b) return false;
    size_t plen = strlen(path);
    int hits = 0;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = (Elf64_Phdr *)(b + eh->e_phoff) + i;
        if (ph->p_type != PT_NOTE || ph->p_offset + ph->p_filesz > size) continue;
        /* Every whole NUL-terminated occurrence in the note segment. */
        for (size_t k = ph->p_offset; k + plen < ph->p_offset + ph->p_filesz; k++) {
            if (b[k + plen] == '\0' && (k == 0 || b[k - 1] == '\0') && memcmp(b + k, path, plen) == 0) {
                memcpy(b + k, instead, plen);
                hits++;
            }
        }
    }
    FILE *f = hits ? fopen(out, "wb") : NULL;
    bool ok = f && fwrite(b, 1, size, f) == size;
    if (f) ok = fclose(f) == 0 && ok;
    free(b);
    return ok;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec / 1e9;
}

/* One damaged core: reads of the executable's .rodata (which only the
 * file has) fail at once, the refusal is said once, with the path and
 * what it is; the symbol lookup that would read the file's .dynsym is
 * refused the same way, and a session says it on its warning line. */
static void check_refused(const char *bad, const char *named, const char *kind)
{
    rbp_source src;
    CU_ASSERT_FATAL(open_core(bad, &src));
    rbp_mem *m = rbp_mem_new(src);
    CU_ASSERT_FATAL(m != NULL);
    said w = {{0}, 0};
    rbp_mem_set_warn(m, (rbp_warnsink){collect, &w});
    char got[64];
    double t0 = now_s();
    memset(got, 0x5a, sizeof got);
    CU_ASSERT_FALSE(rbp_mem_read(m, fx.string, got, sizeof got));
    CU_ASSERT_FALSE(rbp_mem_read(m, fx.string + 64, got, sizeof got));   /* tried once, said once */
    CU_ASSERT(now_s() - t0 < 5);
    CU_ASSERT_EQUAL(got[0], 0x5a);   /* nothing of the device came in */
    CU_ASSERT_EQUAL(w.n, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(w.text, named));
    CU_ASSERT_PTR_NOT_NULL(strstr(w.text, kind));
    CU_ASSERT_PTR_NOT_NULL(strstr(w.text, "not a regular file: not read"));
    if (w.n != 1 || !strstr(w.text, kind)) fprintf(stderr, "\n  said: %s", w.text);
    /* Memory the core holds is still served. */
    uint64_t marker = 0;
    CU_ASSERT(rbp_mem_read(m, fx.marker, &marker, 8));
    CU_ASSERT_EQUAL(marker, 0x52425045454b2121ULL);

    /* The symbol lookup checks the executable's file against the headers
     * in memory (and would read the tables memory lacks from it): refused,
     * said once over two lookups; what memory holds still answers. */
    rbp_region *r = NULL;
    size_t nr = rbp_source_core_regions(bad, &r);
    CU_ASSERT(nr > 0);
    rbp_elfcache *cache = NULL;
    w = (said){{0}, 0};
    uint64_t addr = 0;
    (void)rbp_elf_lookup(m, r, nr, &cache, "rbpeek_fixture_marker", &addr);
    (void)rbp_elf_lookup(m, r, nr, &cache, "rbpeek_fixture_string", &addr);
    CU_ASSERT_EQUAL(w.n, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(w.text, kind));
    rbp_elfcache_free(cache);
    for (size_t i = 0; i < nr; i++) free(r[i].path);
    free(r);
    rbp_mem_free(m);

    /* Through a session: attach fails (no Ruby here), having said why the
     * file was not read on its warning line. */
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL_FATAL(rbpeek_session_use_core(s, bad), RBPEEK_OK);
    t0 = now_s();
    CU_ASSERT_NOT_EQUAL(rbpeek_session_attach(s), RBPEEK_OK);
    CU_ASSERT(now_s() - t0 < 10);
    const char *warning = rbpeek_session_warning(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(warning, kind));
    CU_ASSERT_PTR_NOT_NULL(strstr(warning, named));
    /* Said once, however many reads met it. */
    const char *first = strstr(warning, named);
    CU_ASSERT(first && !strstr(first + 1, named));
    if (!strstr(warning, kind)) fprintf(stderr, "\n  session warning: '%s'\n", warning);
    rbpeek_session_free(s);
}

/* A core is untrusted input (users open cores sent to them): its NT_FILE
 * note may name a FIFO, whose open would wait for a writer for ever, or a
 * device, which must not be opened or read (issue 24). */
static void test_nt_file_not_regular(void)
{
    if (!have_core()) return;
    if (core_holds(core_path, fx.string)) {
        fprintf(stderr, "\n  [skip] this core contains .rodata; the file fallback is not exercised\n");
        return;
    }
    /* The whole test may not block: a blocked open ends it here. */
    unsigned prev = alarm(60);
    size_t len = strlen(fx.exe);
    char fifo[PATH_MAX], fifo_named[PATH_MAX], zero_named[PATH_MAX], bad[PATH_MAX + 16];
    snprintf(fifo, sizeof fifo, "%s/fifo", fixture_tmpdir());
    unlink(fifo);
    CU_ASSERT_FATAL(mkfifo(fifo, 0600) == 0);
    CU_ASSERT_FATAL(same_length_path(fifo_named, len, fixture_tmpdir(), "fifo"));
    CU_ASSERT_FATAL(same_length_path(zero_named, len, "/dev", "zero"));
    snprintf(bad, sizeof bad, "%s.notreg", core_path);

    CU_ASSERT_FATAL(core_with_renamed_file(core_path, bad, fx.exe, fifo_named));
    check_refused(bad, fifo_named, "is a FIFO");
    CU_ASSERT_FATAL(core_with_renamed_file(core_path, bad, fx.exe, zero_named));
    check_refused(bad, zero_named, "is a character device");

    /* A core path that is itself a FIFO: refused at once, not waited on. */
    rbp_source src;
    char err[256] = "";
    CU_ASSERT_FALSE(rbp_source_core(fifo, &src, err, sizeof err));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "is a FIFO, not a regular file"));

    /* The .symtab search of Ruby images: a FIFO named like libruby. */
    char ruby_fifo[PATH_MAX];
    snprintf(ruby_fifo, sizeof ruby_fifo, "%s/libruby.so.3.1", fixture_tmpdir());
    unlink(ruby_fifo);
    CU_ASSERT_FATAL(mkfifo(ruby_fifo, 0600) == 0);
    rbp_region reg = {0x10000, 0x20000, 0, ruby_fifo};
    said w = {{0}, 0};
    rbp_warnsink sink = {collect, &w};
    uint64_t addr = 0;
    CU_ASSERT_FALSE(rbp_elf_symtab_lookup(&reg, 1, "ruby_current_vm_ptr", &addr, &sink));
    CU_ASSERT_EQUAL(w.n, 1);
    CU_ASSERT_PTR_NOT_NULL(strstr(w.text, "is a FIFO"));
    unlink(ruby_fifo);
    unlink(fifo);
    unlink(bad);
    alarm(prev);
}

/* A copy of the core whose notes of type from are of type to instead. */
static bool core_with_note_type(const char *in, const char *out, uint32_t from, uint32_t to)
{
    size_t size = 0;
    unsigned char *b = (unsigned char *)slurp(in, &size);
    if (!b) return false;
    int hits = 0;
    Elf64_Ehdr *eh = (Elf64_Ehdr *)b;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        Elf64_Phdr *ph = (Elf64_Phdr *)(b + eh->e_phoff) + i;
        if (ph->p_type != PT_NOTE || ph->p_offset + ph->p_filesz > size) continue;
        for (size_t k = ph->p_offset; k + sizeof(Elf64_Nhdr) <= ph->p_offset + ph->p_filesz;) {
            Elf64_Nhdr *nh = (Elf64_Nhdr *)(b + k);
            if (nh->n_type == from) nh->n_type = to, hits++;
            k += sizeof *nh + ((nh->n_namesz + 3u) & ~3u) + ((nh->n_descsz + 3u) & ~3u);
        }
    }
    FILE *f = hits ? fopen(out, "wb") : NULL;
    bool ok = f && fwrite(b, 1, size, f) == size;
    if (f) ok = fclose(f) == 0 && ok;
    free(b);
    return ok;
}

/* Whether every page of [a, b) at file offset ofs of a file whose real
 * path is real lies in one of the regions r, of the same file at the same
 * offset (the kernel's list splits a segment where its protections differ:
 * RELRO). */
static bool covered(const rbp_region *r, size_t n, uint64_t a, uint64_t b, uint64_t ofs, const char *real)
{
    for (uint64_t p = a; p < b; p += 4096) {
        bool hit = false;
        for (size_t i = 0; i < n && !hit; i++) {
            char rp[PATH_MAX];
            hit = r[i].path && p >= r[i].start && p < r[i].end && p - r[i].start == ofs + (p - a) - r[i].file_offset &&
                  realpath(r[i].path, rp) && strcmp(rp, real) == 0;
        }
        if (!hit) return false;
    }
    return true;
}

static void test_no_nt_file(void)
{
    if (!have_core()) return;
    char bare[PATH_MAX + 16], noaux[PATH_MAX + 16];
    snprintf(bare, sizeof bare, "%s.nofile", core_path);
    snprintf(noaux, sizeof noaux, "%s.noaux", core_path);
    CU_ASSERT_FATAL(core_with_note_type(core_path, bare, 0x46494c45 /* NT_FILE */, 0x7fff0001));
    rbp_region *want = NULL, *got = NULL;
    size_t nwant = rbp_source_core_regions(core_path, &want), ngot = rbp_source_core_regions(bare, &got);
    size_t files = 0, seen = 0;
    for (size_t i = 0; i < ngot; i++) {
        char rp[PATH_MAX];
        if (!got[i].path) continue;
        files++;
        bool ok = realpath(got[i].path, rp) && covered(want, nwant, got[i].start, got[i].end, got[i].file_offset, rp);
        if (!ok) fprintf(stderr, "\n  link map's %s at 0x%llx is not the note's\n", got[i].path,
                         (unsigned long long)got[i].start);
        seen += ok;
    }
    CU_ASSERT(files >= 4);   /* the fixture, libc, ld.so: each a mapping or more */
    CU_ASSERT_EQUAL(seen, files);
    /* the fixture's .rodata, which only its file holds, reads the same */
    rbp_source a, b;
    CU_ASSERT_FATAL(open_core(core_path, &a) && open_core(bare, &b));
    char sa[64] = "", sb[64] = "x";
    CU_ASSERT_EQUAL(a.read(a.ctx, fx.string, sa, sizeof sa), (long)sizeof sa);
    CU_ASSERT_EQUAL(b.read(b.ctx, fx.string, sb, sizeof sb), (long)sizeof sb);
    CU_ASSERT_EQUAL(memcmp(sa, sb, sizeof sa), 0);
    CU_ASSERT(rbp_source_core_by_linkmap(&b) && !rbp_source_core_by_linkmap(&a));
    CU_ASSERT_PTR_NULL(b.note(b.ctx));   /* every file found: nothing to say */
    a.close(a.ctx);
    b.close(b.ctx);
    /* without the auxiliary vector either: no files, said in one line */
    CU_ASSERT_FATAL(core_with_note_type(bare, noaux, NT_AUXV, 0x7fff0002));
    CU_ASSERT_FATAL(open_core(noaux, &b));
    const char *note = b.note(b.ctx);
    CU_ASSERT(note && strstr(note, "the core names no mapped files") && !strchr(note, '\n'));
    b.close(b.ctx);
    for (size_t i = 0; i < nwant; i++) free(want[i].path);
    for (size_t i = 0; i < ngot; i++) free(got[i].path);
    free(want);
    free(got);
    unlink(bare);
    unlink(noaux);
}

/* The walk's reader (the core's source, as a debugger's reads) and its
 * sink: the regions it names, as a debugger's session adds them. */
typedef struct found {
    rbp_source src;
    rbp_region r[256];
    size_t n;
} found;

static bool found_map(void *ctx, const char *path, const rbp_lm_seg *segs, size_t n)
{
    found *f = ctx;
    for (size_t i = 0; i < n && f->n < 256; i++)
        f->r[f->n++] = (rbp_region){segs[i].start, segs[i].end, segs[i].file_ofs, strdup(path)};
    return true;
}

static long source_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    rbp_source *src = &((found *)ctx)->src;
    return src->read(src->ctx, addr, buf, len);
}

static void test_walk_by_callback(void)
{
    if (!have_core()) return;
    char err[256] = "";
    core *c = rbp_core_open(core_path, NULL, err, sizeof err);
    CU_ASSERT_FATAL(c != NULL);
    found *f = calloc(1, sizeof *f);
    CU_ASSERT_FATAL(f && open_core(core_path, &f->src));
    char said[256] = "x";
    rbp_linkmap_io io = {f, source_read, found_map, c->regset->machine, "the program", said, sizeof said};
    CU_ASSERT(rbp_linkmap_walk(&io, NULL, c->auxv.phdr, c->auxv.execfn, c->auxv.pagesz));
    CU_ASSERT_STRING_EQUAL(said, "");   /* every file found */
    rbp_region *want = NULL;
    size_t nwant = rbp_source_core_regions(core_path, &want), seen = 0;
    for (size_t i = 0; i < f->n; i++) {
        char rp[PATH_MAX];
        seen += realpath(f->r[i].path, rp) && covered(want, nwant, f->r[i].start, f->r[i].end, f->r[i].file_offset, rp);
    }
    CU_ASSERT(f->n >= 4);
    CU_ASSERT_EQUAL(seen, f->n);
    /* no executable in the auxiliary vector: nothing mapped, said in one line */
    size_t before = f->n;
    CU_ASSERT(rbp_linkmap_walk(&io, NULL, c->auxv.phdr, 0, c->auxv.pagesz));
    CU_ASSERT(f->n == before && strstr(said, "the program names no mapped files") && !strchr(said, '\n'));
    for (size_t i = 0; i < f->n; i++) free(f->r[i].path);
    for (size_t i = 0; i < nwant; i++) free(want[i].path);
    free(want);
    f->src.close(f->src.ctx);
    free(f);
    rbp_core_free(c);
}

static const rbp_cu_test tests[] = {
    {"NT_FILE naming a FIFO or /dev/zero: refused, said, never blocks", test_nt_file_not_regular},
    {"no NT_FILE: the same files from the link map; no auxv: said", test_no_nt_file},
    {"the link map walked through a callback reader: the same files", test_walk_by_callback},
    {"cleanup", test_cleanup},
    {NULL, NULL},
};

RBP_CU_MAIN("mem_core_nt_file", tests)
