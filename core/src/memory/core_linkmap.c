/*
 * The mapped files of a core that has no NT_FILE note. qemu-user's cores
 * (an arm64 program run under qemu-aarch64) have none, and they leave out
 * the pages of every executable mapping that starts with an ELF header,
 * so without the files neither the code, the read-only data (symbol
 * tables, strings) nor the unwind tables of any image can be read. What
 * such a core does hold is everything written, and so the dynamic
 * linker's own list of what it loaded, as gdb finds it for a program
 * (solib-svr4):
 *
 *  - NT_AUXV gives AT_PHDR (where the executable's program headers were
 *    mapped) and AT_EXECFN (its path, a string on the stack);
 *  - the executable's file gives its program headers, hence its load
 *    bias (AT_PHDR less PT_PHDR's address) and where PT_DYNAMIC lies;
 *  - its dynamic section, in the core, holds DT_DEBUG: the address of
 *    r_debug, whose r_map starts the list of link_map entries {l_addr,
 *    l_name, l_ld, l_next}, one per shared object;
 *  - each object's file (l_name) gives its PT_LOAD segments, mapped at
 *    l_addr; it is taken only if its PT_DYNAMIC lands on l_ld, the
 *    address the dynamic linker recorded, so that another build of the
 *    library under the same name is refused, not read.
 *
 * Each path is looked for under the sysroot first (the files of another
 * machine's program live there on this one), then as it is. Every count
 * read from the core is bounded; what cannot be found is said in
 * c->maps_from, which the session puts on its warning line.
 */
#define _GNU_SOURCE
#include "memory/core_file.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"

#define MAX_LINKMAP 4096       /* objects a process loads: far above any real one */
#define MAX_DYNAMIC 1024       /* entries of a dynamic section */
#define MAX_IMAGE_PHDRS 128
#define PATH_BYTES 4096

/* One file's ELF header and program headers, read from disk. */
typedef struct image {
    char path[PATH_BYTES];     /* the file opened: under the sysroot, or as named */
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_IMAGE_PHDRS];
    size_t nph;
} image;

static void say(core *c, const char *what)
{
    if (!c->maps_from[0]) snprintf(c->maps_from, sizeof c->maps_from, "%s", what);
}

/* Opens name (under sysroot first) and reads its headers; false when no
 * such file of the core's machine can be read. */
static bool image_read(core *c, const char *sysroot, const char *name, image *im)
{
    char kind[32];
    int fd = -1;
    if (sysroot && *sysroot && name[0] == '/') {
        snprintf(im->path, sizeof im->path, "%s%s", sysroot, name);
        fd = rbp_open_target_file(im->path, kind, sizeof kind);
    }
    if (fd < 0) {
        snprintf(im->path, sizeof im->path, "%s", name);
        fd = rbp_open_target_file(im->path, kind, sizeof kind);
    }
    if (fd < 0) return false;
    bool ok = pread(fd, &im->eh, sizeof im->eh, 0) == (ssize_t)sizeof im->eh &&
              memcmp(im->eh.e_ident, ELFMAG, SELFMAG) == 0 && im->eh.e_ident[EI_CLASS] == ELFCLASS64 &&
              im->eh.e_machine == c->regset->machine && im->eh.e_phentsize == sizeof(Elf64_Phdr) &&
              im->eh.e_phnum > 0 && im->eh.e_phnum <= MAX_IMAGE_PHDRS;
    if (ok) {
        im->nph = im->eh.e_phnum;
        size_t bytes = im->nph * sizeof(Elf64_Phdr);
        ok = pread(fd, im->ph, bytes, (off_t)im->eh.e_phoff) == (ssize_t)bytes;
    }
    close(fd);
    return ok;
}

static const Elf64_Phdr *image_phdr(const image *im, uint32_t type)
{
    for (size_t i = 0; i < im->nph; i++)
        if (im->ph[i].p_type == type) return &im->ph[i];
    return NULL;
}

/* Where the image's program headers lie in its own addresses: PT_PHDR's,
 * else within the PT_LOAD that maps the file's start. */
static bool phdr_vaddr(const image *im, uint64_t *at)
{
    const Elf64_Phdr *p = image_phdr(im, PT_PHDR);
    if (p) {
        *at = p->p_vaddr;
        return true;
    }
    for (size_t i = 0; i < im->nph; i++)
        if (im->ph[i].p_type == PT_LOAD && im->ph[i].p_offset == 0) {
            *at = im->ph[i].p_vaddr + im->eh.e_phoff;
            return true;
        }
    return false;
}

static int cmp_fmap(const void *a, const void *b)
{
    const core_fmap *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* The image's file-backed mappings at bias, as the dynamic linker made
 * them (page-aligned; the zero-filled tail of a segment is the core's). */
static bool image_map(core *c, const image *im, uint64_t bias, uint64_t page)
{
    long f = rbp_core_add_file(c, im->path);
    if (f < 0) return false;
    for (size_t i = 0; i < im->nph; i++) {
        const Elf64_Phdr *p = &im->ph[i];
        if (p->p_type != PT_LOAD || p->p_filesz == 0) continue;
        uint64_t start = bias + (p->p_vaddr & ~(page - 1)), ofs = p->p_offset & ~(page - 1);
        uint64_t end = bias + ((p->p_vaddr + p->p_filesz + page - 1) & ~(page - 1));
        if (end <= start) continue;
        core_fmap *m = realloc(c->maps, (c->nmaps + 1) * sizeof *m);
        if (!m) return false;
        c->maps = m;
        c->maps[c->nmaps++] = (core_fmap){start, end, ofs, (uint32_t)f};
    }
    /* sorted at once: the next object is found by reads that may ask them */
    qsort(c->maps, c->nmaps, sizeof *c->maps, cmp_fmap);
    return true;
}

static bool read_word(core *c, uint64_t addr, uint64_t *v) { return rbp_core_read(c, addr, v, 8) == 8; }

static bool read_str(core *c, uint64_t addr, char *buf, size_t n)
{
    long got = addr ? rbp_core_read(c, addr, buf, n - 1) : -1;
    if (got <= 0) return false;
    return memchr(buf, '\0', (size_t)got) != NULL;
}

/* r_debug's address: DT_DEBUG of the dynamic section at dyn; 0 if none. */
static uint64_t dt_debug(core *c, uint64_t dyn)
{
    for (size_t i = 0; i < MAX_DYNAMIC; i++) {
        uint64_t tag, val;
        if (!read_word(c, dyn + 16 * i, &tag) || !read_word(c, dyn + 16 * i + 8, &val) || tag == DT_NULL) return 0;
        if (tag == DT_DEBUG) return val;
    }
    return 0;
}

/* The shared objects of the link map from r_debug at rd. */
static bool map_objects(core *c, const char *sysroot, uint64_t rd, uint64_t page, image *im, size_t *missing,
                        size_t *named)
{
    uint64_t lm = 0;
    if (!read_word(c, rd + 8, &lm)) return true; /* r_map */
    for (size_t n = 0; lm && n < MAX_LINKMAP; n++) {
        uint64_t w[4]; /* l_addr, l_name, l_ld, l_next */
        if (rbp_core_read(c, lm, w, sizeof w) != (long)sizeof w) break;
        char name[PATH_BYTES];
        if (read_str(c, w[1], name, sizeof name) && name[0] == '/') {
            ++*named;
            const Elf64_Phdr *dyn = NULL;
            bool same = image_read(c, sysroot, name, im) && (dyn = image_phdr(im, PT_DYNAMIC)) &&
                        w[0] + dyn->p_vaddr == w[2];
            if (same) {
                if (!image_map(c, im, w[0], page)) return false;
            } else {
                ++*missing;
            }
        }
        lm = w[3];
    }
    return true;
}

bool rbp_core_maps_from_linkmap(core *c, const char *sysroot)
{
    const core_auxv *a = &c->auxv;
    bool sane = a->pagesz >= 4096 && a->pagesz <= (1u << 24) && !(a->pagesz & (a->pagesz - 1));
    uint64_t page = sane ? a->pagesz : 4096;
    char exe[PATH_BYTES];
    if (!a->phdr || !read_str(c, a->execfn, exe, sizeof exe)) {
        say(c, "the core names no mapped files (no NT_FILE note, no executable in its auxiliary vector)");
        return true;
    }
    image *im = malloc(sizeof *im);
    if (!im) return false;
    uint64_t phdr_at;
    if (!image_read(c, sysroot, exe, im) || !phdr_vaddr(im, &phdr_at)) {
        snprintf(c->maps_from, sizeof c->maps_from, "the core names no mapped files (no NT_FILE note) and its "
                 "executable %.60s cannot be read%s: give the files' root (--sysroot)", exe,
                 sysroot && *sysroot ? " under the sysroot either" : "");
        free(im);
        return true;
    }
    uint64_t bias = a->phdr - phdr_at;
    const Elf64_Phdr *dyn = image_phdr(im, PT_DYNAMIC);   /* none: a static program, which maps nothing else */
    bool ok = image_map(c, im, bias, page);
    uint64_t rd = ok && dyn ? dt_debug(c, bias + dyn->p_vaddr) : 0;
    size_t missing = 0, named = 0;
    if (ok && rd) ok = map_objects(c, sysroot, rd, page, im, &missing, &named);
    else if (ok && dyn) say(c, "the core's executable has no r_debug in its dynamic section: only its own mappings "
                               "are known");
    if (ok && missing)
        snprintf(c->maps_from, sizeof c->maps_from, "%zu of the %zu shared objects the core's link map names are %s, "
                 "or are another build: their code is unknown%s", missing, named,
                 sysroot && *sysroot ? "neither under the sysroot nor where it names them" : "not where it names them",
                 sysroot && *sysroot ? "" : "; give the files' root (--sysroot)");
    free(im);
    return ok;
}
