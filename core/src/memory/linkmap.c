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
 * read from the memory is bounded; what cannot be found is said in the
 * caller's io->said.
 *
 * The walk reads and maps through the caller's callbacks (linkmap.h): a
 * core's reader (mem_core.c), and a live program whose debugger lists no
 * mappings (gdb on qemu's gdb stub), from the auxiliary vector the
 * debugger gives and the memory it reads.
 */
#define _GNU_SOURCE
#include "memory/linkmap.h"

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

/* Opens name (under sysroot first) and reads its headers; false when no
 * such file of the core's machine can be read. */
static bool image_read(const rbp_linkmap_io *io, const char *sysroot, const char *name, image *im)
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
              im->eh.e_machine == io->machine && im->eh.e_phentsize == sizeof(Elf64_Phdr) &&
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

/* The image's file-backed mappings at bias, as the dynamic linker made
 * them (page-aligned; the zero-filled tail of a segment is not the file's). */
static bool image_map(const rbp_linkmap_io *io, const image *im, uint64_t bias, uint64_t page)
{
    rbp_lm_seg segs[MAX_IMAGE_PHDRS];
    size_t n = 0;
    for (size_t i = 0; i < im->nph; i++) {
        const Elf64_Phdr *p = &im->ph[i];
        if (p->p_type != PT_LOAD || p->p_filesz == 0) continue;
        uint64_t start = bias + (p->p_vaddr & ~(page - 1)), ofs = p->p_offset & ~(page - 1);
        uint64_t end = bias + ((p->p_vaddr + p->p_filesz + page - 1) & ~(page - 1));
        if (end > start) segs[n++] = (rbp_lm_seg){start, end, ofs};
    }
    return io->map(io->ctx, im->path, segs, n);
}

static bool read_word(const rbp_linkmap_io *io, uint64_t addr, uint64_t *v)
{
    return io->read(io->ctx, addr, v, 8) == 8;
}

/* A string read a page at a time (a debugger's reads are whole or none,
 * and AT_EXECFN's string ends near the top of the stack). */
static bool read_str(const rbp_linkmap_io *io, uint64_t addr, char *buf, size_t n)
{
    size_t have = 0;
    while (addr && have < n - 1) {
        size_t want = 4096 - (size_t)((addr + have) & 4095);
        if (want > n - 1 - have) want = n - 1 - have;
        long got = io->read(io->ctx, addr + have, buf + have, want);
        if (got <= 0) return false;
        if (memchr(buf + have, '\0', (size_t)got)) return true;
        have += (size_t)got;
    }
    return false;
}

/* r_debug's address: DT_DEBUG of the dynamic section at dyn; 0 if none. */
static uint64_t dt_debug(const rbp_linkmap_io *io, uint64_t dyn)
{
    for (size_t i = 0; i < MAX_DYNAMIC; i++) {
        uint64_t tag, val;
        if (!read_word(io, dyn + 16 * i, &tag) || !read_word(io, dyn + 16 * i + 8, &val) || tag == DT_NULL) return 0;
        if (tag == DT_DEBUG) return val;
    }
    return 0;
}

/* The shared objects of the link map from r_debug at rd. */
static bool map_objects(const rbp_linkmap_io *io, const char *sysroot, uint64_t rd, uint64_t page, image *im,
                        size_t *missing, size_t *named)
{
    uint64_t lm = 0;
    if (!read_word(io, rd + 8, &lm)) return true; /* r_map */
    for (size_t n = 0; lm && n < MAX_LINKMAP; n++) {
        uint64_t w[4]; /* l_addr, l_name, l_ld, l_next */
        if (io->read(io->ctx, lm, w, sizeof w) != (long)sizeof w) break;
        char name[PATH_BYTES];
        if (read_str(io, w[1], name, sizeof name) && name[0] == '/') {
            ++*named;
            const Elf64_Phdr *dyn = NULL;
            bool same = image_read(io, sysroot, name, im) && (dyn = image_phdr(im, PT_DYNAMIC)) &&
                        w[0] + dyn->p_vaddr == w[2];
            if (same) {
                if (!image_map(io, im, w[0], page)) return false;
            } else {
                ++*missing;
            }
        }
        lm = w[3];
    }
    return true;
}

bool rbp_linkmap_walk(const rbp_linkmap_io *io, const char *sysroot, uint64_t phdr, uint64_t execfn, uint64_t pagesz)
{
    bool sane = pagesz >= 4096 && pagesz <= (1u << 24) && !(pagesz & (pagesz - 1));
    uint64_t page = sane ? pagesz : 4096;
    char exe[PATH_BYTES];
    io->said[0] = '\0';
    if (!phdr || !read_str(io, execfn, exe, sizeof exe)) {
        snprintf(io->said, io->saidlen, "%s names no mapped files (no NT_FILE note, no executable in its auxiliary "
                 "vector)", io->who);
        return true;
    }
    image *im = malloc(sizeof *im);
    if (!im) return false;
    uint64_t phdr_at;
    if (!image_read(io, sysroot, exe, im) || !phdr_vaddr(im, &phdr_at)) {
        snprintf(io->said, io->saidlen, "%s names no mapped files (no NT_FILE note) and its "
                 "executable %.60s cannot be read%s: give the files' root (--sysroot)", io->who, exe,
                 sysroot && *sysroot ? " under the sysroot either" : "");
        free(im);
        return true;
    }
    uint64_t bias = phdr - phdr_at;
    const Elf64_Phdr *dyn = image_phdr(im, PT_DYNAMIC);   /* none: a static program, which maps nothing else */
    bool ok = image_map(io, im, bias, page);
    uint64_t rd = ok && dyn ? dt_debug(io, bias + dyn->p_vaddr) : 0;
    size_t missing = 0, named = 0;
    if (ok && rd) ok = map_objects(io, sysroot, rd, page, im, &missing, &named);
    else if (ok && dyn)
        snprintf(io->said, io->saidlen, "%s's executable has no r_debug in its dynamic section: only its own "
                 "mappings are known", io->who);
    if (ok && missing)
        snprintf(io->said, io->saidlen, "%zu of the %zu shared objects %s's link map names are %s, "
                 "or are another build: their code is unknown%s", missing, named, io->who,
                 sysroot && *sysroot ? "neither under the sysroot nor where it names them" : "not where it names them",
                 sysroot && *sysroot ? "" : "; give the files' root (--sysroot)");
    free(im);
    return ok;
}
