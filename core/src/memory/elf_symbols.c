/*
 * Symbol lookup in the dynamic symbol tables (.dynsym) of the ELF images
 * mapped in the target, the fallback when no debugger symbol table is at
 * hand (a bare /proc or core session). CRuby exports what rbpeek needs to
 * find the VM (ruby_current_vm_ptr, ruby_version, ruby_global_symbols...),
 * so .dynsym is enough; full .symtab and DWARF are other modules' business.
 *
 * An image is a path among the session's regions together with its region
 * at file offset 0, whose start is the load base. We read the ELF header,
 * program headers and PT_DYNAMIC from target memory, then the hash table
 * (DT_GNU_HASH, else DT_HASH, else a bounded linear scan) and .dynsym and
 * .dynstr. Where target memory lacks a piece (a core that left out the
 * read-only segments, a debugger that cannot serve them) we read the same
 * bytes from the file on disk, translating addresses through the file's
 * PT_LOAD headers; that serves exactly the tables the loader uses, which is
 * why plain parsing suffices and libelf is not needed. The file is used
 * only if its ELF and program headers match what memory holds (when memory
 * holds them), so an upgraded library cannot feed us wrong addresses,
 * and only if it is a regular file (base/target_file.h): the paths are the
 * target's word (a core's NT_FILE note), and a FIFO or a device is refused
 * with one line on the session's warning sink.
 *
 * Images are searched in ascending load address, which puts the main
 * executable (lowest in the usual layouts) first, as the dynamic linker
 * does; that matters for copy-relocated data such as environ. Per-image
 * parse results (table addresses, hash parameters) are cached in the
 * caller's rbp_elfcache (the session's): they come from data that does not
 * change while the image stays mapped. The cache is rebuilt whenever the
 * memory source or the region list changes; session.c frees it.
 */
#define _GNU_SOURCE
#include "memory/elf_symbols.h"

#include "base/target_file.h"
#include "memory/machine.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Bounds on target-derived counts (all far above real images). */
#define MAX_PHNUM 512
#define MAX_DYN_ENTRIES 4096
#define MAX_CHAIN_STEPS (1u << 20)
#define MAX_LINEAR_SYMS (1u << 20)
#define MAX_BUCKETS (1u << 24)
#define MAX_NAME 1024
#define PAGE_MASK_4K (~(uint64_t)0xfff)

typedef struct elf_image {
    char *path;
    uint64_t base;          /* start of the region at file offset 0 */
    int state;              /* 0 not parsed, 1 usable, -1 not an ELF image we can use */
    bool is_dyn;            /* ET_DYN: symbol values are relative to bias */
    uint64_t bias;          /* target address = ELF vaddr + bias */

    /* Target addresses of the dynamic tables (0 = absent). */
    uint64_t symtab, strtab, strsz, versym;
    /* GNU hash parameters, when gnu_ok. */
    bool gnu_ok;
    uint32_t gnu_nbuckets, gnu_symoffset, gnu_bloom_size, gnu_bloom_shift;
    uint64_t gnu_bloom, gnu_buckets, gnu_chains;
    /* SysV hash parameters, when sysv_ok. */
    bool sysv_ok;
    uint32_t sysv_nbucket, sysv_nchain;
    uint64_t sysv_bucket, sysv_chain;
    uint64_t nsyms_guess;   /* symbols to scan linearly when no hash works */

    /* The file on disk: PT_LOAD headers for vaddr -> offset translation. */
    int file_state;         /* 0 not tried, 1 usable, -1 unusable */
    Elf64_Phdr *fload;
    size_t nfload;
    int fd;                 /* open only during one rbp_elf_lookup call */
    const rbp_warnsink *warn;   /* the memory's (rbp_mem_warn) */
} elf_image;

struct rbp_elfcache {
    const rbp_mem *mem;     /* the source the cached results came from */
    uint64_t fingerprint;   /* of the regions when imgs was built */
    size_t nregions;
    elf_image *imgs;        /* by ascending base */
    size_t n;
};

static void image_clear(elf_image *im)
{
    free(im->path);
    free(im->fload);
    if (im->fd >= 0) close(im->fd);
}

void rbp_elfcache_free(rbp_elfcache *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) image_clear(&c->imgs[i]);
    free(c->imgs);
    free(c);
}

/* ---- reading an image's bytes: memory first, then the file ------------- */

static long pread_all(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    return (long)done;
}

static int image_fd(elf_image *im)
{
    /* A refusal leaves file_state -1 (load_file), so it is said once. */
    if (im->fd < 0 && im->path && im->path[0] == '/') {
        int fd = rbp_open_target_file_warn(im->path, "the mapped image", im->warn);
        im->fd = fd < 0 ? -1 : fd;
    }
    return im->fd;
}

/* An image of a machine rbpeek does not read is not parsed: the session
 * refused such a target at attach, in one line (context/machine.c). */
static bool ehdr_ok(const Elf64_Ehdr *eh)
{
    return memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
           eh->e_ident[EI_DATA] == ELFDATA2LSB && rbp_machine_read(eh->e_machine) &&
           (eh->e_type == ET_DYN || eh->e_type == ET_EXEC) && eh->e_phentsize == sizeof(Elf64_Phdr) &&
           eh->e_phnum > 0 && eh->e_phnum <= MAX_PHNUM;
}

/* Loads the file's ELF and program headers (once per image). If memory
 * holds them too (mem_eh/mem_ph non-NULL), the file must agree, else it is
 * not the file that was mapped and is never used. Keeps the PT_LOAD headers
 * for image_read; hands the headers to the caller if it asks. */
static bool load_file(elf_image *im, const Elf64_Ehdr *mem_eh, const Elf64_Phdr *mem_ph,
                      Elf64_Ehdr *eh_out, Elf64_Phdr **ph_out)
{
    im->file_state = -1;
    int fd = image_fd(im);
    Elf64_Ehdr eh;
    Elf64_Phdr *ph = NULL;
    if (fd < 0 || pread_all(fd, &eh, sizeof eh, 0) != (long)sizeof eh || !ehdr_ok(&eh)) return false;
    if (mem_eh && memcmp(mem_eh, &eh, sizeof eh) != 0) return false;
    size_t phbytes = (size_t)eh.e_phnum * sizeof *ph;
    ph = malloc(phbytes);
    im->fload = malloc(phbytes);
    if (!ph || !im->fload || pread_all(fd, ph, phbytes, eh.e_phoff) != (long)phbytes ||
        (mem_ph && memcmp(mem_ph, ph, phbytes) != 0)) {
        free(ph);
        free(im->fload);
        im->fload = NULL;
        return false;
    }
    for (size_t i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD) im->fload[im->nfload++] = ph[i];
    im->file_state = 1;
    if (eh_out) *eh_out = eh;
    if (ph_out) *ph_out = ph;
    else free(ph);
    return true;
}

/* Reads len bytes at target address addr of this image: from target
 * memory, or else from the file at the offset the loader mapped there. */
static bool image_read(rbp_mem *mem, elf_image *im, uint64_t addr, void *buf, size_t len)
{
    if (rbp_mem_read(mem, addr, buf, len)) return true;
    if (im->file_state <= 0 || addr < im->bias) return false;
    uint64_t v = addr - im->bias;
    for (size_t i = 0; i < im->nfload; i++) {
        const Elf64_Phdr *p = &im->fload[i];
        if (v < p->p_vaddr || v - p->p_vaddr >= p->p_filesz) continue;
        if (len > p->p_filesz - (v - p->p_vaddr)) return false;
        int fd = image_fd(im);
        return fd >= 0 && pread_all(fd, buf, len, p->p_offset + (v - p->p_vaddr)) == (long)len;
    }
    return false;
}

/* ---- parsing an image --------------------------------------------------- */

/* A d_ptr value as a target address: ld.so rewrites most of them to
 * absolute addresses when it relocates an object, but the file (and some
 * images, like the vDSO) hold them relative to the image's vaddr 0. A
 * relative value is below the bias; an absolute one cannot be. */
static uint64_t dyn_addr(const elf_image *im, uint64_t v)
{
    return (v < im->bias) ? v + im->bias : v;
}

static void parse_hashes(rbp_mem *mem, elf_image *im, uint64_t gnu, uint64_t sysv)
{
    if (gnu) {
        uint32_t h[4];
        if (image_read(mem, im, gnu, h, sizeof h) && h[0] > 0 && h[0] <= MAX_BUCKETS && h[2] > 0 &&
            h[2] <= MAX_BUCKETS && h[3] < 64) {
            im->gnu_nbuckets = h[0];
            im->gnu_symoffset = h[1];
            im->gnu_bloom_size = h[2];
            im->gnu_bloom_shift = h[3];
            im->gnu_bloom = gnu + 16;
            im->gnu_buckets = im->gnu_bloom + 8 * (uint64_t)h[2];
            im->gnu_chains = im->gnu_buckets + 4 * (uint64_t)h[0];
            im->gnu_ok = true;
        }
    }
    if (sysv) {
        uint32_t h[2];
        if (image_read(mem, im, sysv, h, sizeof h) && h[0] > 0 && h[0] <= MAX_BUCKETS && h[1] <= MAX_LINEAR_SYMS) {
            im->sysv_nbucket = h[0];
            im->sysv_nchain = h[1];
            im->sysv_bucket = sysv + 8;
            im->sysv_chain = im->sysv_bucket + 4 * (uint64_t)h[0];
            im->sysv_ok = true;
        }
    }
    /* For the linear scan: DT_HASH's nchain is the symbol count; otherwise
     * .dynstr usually follows .dynsym directly, bounding it. */
    if (im->sysv_ok) im->nsyms_guess = im->sysv_nchain;
    else if (im->strtab > im->symtab) im->nsyms_guess = (im->strtab - im->symtab) / sizeof(Elf64_Sym);
    if (im->nsyms_guess > MAX_LINEAR_SYMS) im->nsyms_guess = MAX_LINEAR_SYMS;
}

static bool parse_image(rbp_mem *mem, elf_image *im)
{
    Elf64_Ehdr eh;
    Elf64_Phdr *ph = NULL;
    bool mem_hdr = rbp_mem_read(mem, im->base, &eh, sizeof eh) && ehdr_ok(&eh);
    if (mem_hdr) {
        size_t phbytes = (size_t)eh.e_phnum * sizeof *ph;
        ph = malloc(phbytes);
        if (!ph) return false;
        if (!rbp_mem_read(mem, im->base + eh.e_phoff, ph, phbytes)) {
            /* Header page partly missing: take the headers from the file,
             * provided its ELF header matches the one in memory. */
            free(ph);
            ph = NULL;
            if (!load_file(im, &eh, NULL, &eh, &ph)) return false;
        } else {
            /* Check the file against these headers now, while we have
             * them, in case a table turns out to be missing from memory. */
            load_file(im, &eh, ph, NULL, NULL);
        }
    } else if (!load_file(im, NULL, NULL, &eh, &ph)) {
        return false; /* neither memory nor disk has an ELF image here */
    }

    /* The region at file offset 0 holds the PT_LOAD with p_offset 0. */
    const Elf64_Phdr *first = NULL, *dyn = NULL;
    for (size_t i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type == PT_LOAD && !first) first = &ph[i];
        if (ph[i].p_type == PT_DYNAMIC && !dyn) dyn = &ph[i];
    }
    if (!first || !dyn) {
        free(ph);
        return false;
    }
    im->is_dyn = eh.e_type == ET_DYN;
    im->bias = im->is_dyn ? im->base - (first->p_vaddr & PAGE_MASK_4K) : 0;
    uint64_t dyn_at = dyn->p_vaddr + im->bias;
    uint64_t ndyn = dyn->p_memsz / sizeof(Elf64_Dyn);
    free(ph);
    if (ndyn > MAX_DYN_ENTRIES) ndyn = MAX_DYN_ENTRIES;

    uint64_t gnu = 0, sysv = 0, syment = sizeof(Elf64_Sym);
    for (uint64_t i = 0; i < ndyn; i++) {
        Elf64_Dyn d;
        if (!image_read(mem, im, dyn_at + i * sizeof d, &d, sizeof d)) break;
        if (d.d_tag == DT_NULL) break;
        switch (d.d_tag) {
        case DT_SYMTAB: im->symtab = dyn_addr(im, d.d_un.d_ptr); break;
        case DT_STRTAB: im->strtab = dyn_addr(im, d.d_un.d_ptr); break;
        case DT_STRSZ: im->strsz = d.d_un.d_val; break;
        case DT_SYMENT: syment = d.d_un.d_val; break;
        case DT_GNU_HASH: gnu = dyn_addr(im, d.d_un.d_ptr); break;
        case DT_HASH: sysv = dyn_addr(im, d.d_un.d_ptr); break;
        case DT_VERSYM: im->versym = dyn_addr(im, d.d_un.d_ptr); break;
        default: break;
        }
    }
    if (!im->symtab || !im->strtab || syment != sizeof(Elf64_Sym)) return false;
    parse_hashes(mem, im, gnu, sysv);
    return true;
}

/* ---- looking a name up in one image ------------------------------------- */

typedef struct match {
    const char *name;
    size_t namelen;
    uint64_t addr;
    bool found;             /* a default-version definition */
    bool found_hidden;      /* only a non-default version so far */
} match;

/* Checks symbol idx against the name; records a definition. Returns true
 * when the search can stop (a default-version definition was found). */
static bool check_symbol(rbp_mem *mem, elf_image *im, uint64_t idx, match *m)
{
    Elf64_Sym sym;
    if (!image_read(mem, im, im->symtab + idx * sizeof sym, &sym, sizeof sym)) return false;
    if (sym.st_shndx == SHN_UNDEF || ELF64_ST_TYPE(sym.st_info) == STT_TLS) return false;
    if (im->strsz && (sym.st_name >= im->strsz || m->namelen + 1 > im->strsz - sym.st_name)) return false;
    char buf[MAX_NAME + 1];
    if (!image_read(mem, im, im->strtab + sym.st_name, buf, m->namelen + 1)) return false;
    if (memcmp(buf, m->name, m->namelen + 1) != 0) return false;

    /* SHN_ABS values are absolute even in a relocated object (as ld.so
     * treats them); everything else in an ET_DYN is relative to the bias. */
    uint64_t addr = sym.st_value + (im->is_dyn && sym.st_shndx != SHN_ABS ? im->bias : 0);
    uint16_t ver = 0;
    bool hidden = im->versym && image_read(mem, im, im->versym + idx * 2, &ver, sizeof ver) && (ver & 0x8000);
    if (hidden) {
        if (!m->found_hidden) {
            m->found_hidden = true;
            m->addr = addr;
        }
        return false;
    }
    m->found = true;
    m->addr = addr;
    return true;
}

static uint32_t gnu_hash(const char *name)
{
    uint32_t h = 5381;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) h = h * 33 + *p;
    return h;
}

static uint32_t sysv_hash(const char *name)
{
    uint32_t h = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        h = (h << 4) + *p;
        uint32_t g = h & 0xf0000000u;
        if (g) h ^= g >> 24;
        h &= ~g;
    }
    return h;
}

/* Returns 1 if the GNU table answered (found or proved absent), 0 if it
 * could not be read and another method should be tried. */
static int lookup_gnu(rbp_mem *mem, elf_image *im, match *m)
{
    uint32_t h = gnu_hash(m->name);
    uint64_t word;
    uint64_t widx = (h / 64) % im->gnu_bloom_size;
    if (!image_read(mem, im, im->gnu_bloom + 8 * widx, &word, sizeof word)) return 0;
    uint64_t mask = ((uint64_t)1 << (h % 64)) | ((uint64_t)1 << ((h >> im->gnu_bloom_shift) % 64));
    if ((word & mask) != mask) return 1; /* the bloom filter says: not here */

    uint32_t idx;
    if (!image_read(mem, im, im->gnu_buckets + 4 * (uint64_t)(h % im->gnu_nbuckets), &idx, sizeof idx)) return 0;
    if (idx < im->gnu_symoffset) return 1; /* empty bucket */
    for (uint32_t step = 0; step < MAX_CHAIN_STEPS; step++, idx++) {
        uint32_t ch;
        if (!image_read(mem, im, im->gnu_chains + 4 * (uint64_t)(idx - im->gnu_symoffset), &ch, sizeof ch))
            return 1;
        if ((ch | 1) == (h | 1) && check_symbol(mem, im, idx, m)) return 1;
        if (ch & 1) return 1; /* end of this bucket's chain */
        if (idx == UINT32_MAX) return 1;
    }
    return 1;
}

static int lookup_sysv(rbp_mem *mem, elf_image *im, match *m)
{
    uint32_t h = sysv_hash(m->name);
    uint32_t idx;
    if (!image_read(mem, im, im->sysv_bucket + 4 * (uint64_t)(h % im->sysv_nbucket), &idx, sizeof idx)) return 0;
    /* A chain visits each symbol at most once; nchain bounds it (and any
     * cycle a corrupt table might contain). */
    for (uint32_t step = 0; idx != STN_UNDEF && step <= im->sysv_nchain; step++) {
        if (idx >= im->sysv_nchain) return 1;
        if (check_symbol(mem, im, idx, m)) return 1;
        if (!image_read(mem, im, im->sysv_chain + 4 * (uint64_t)idx, &idx, sizeof idx)) return 1;
    }
    return 1;
}

static void lookup_linear(rbp_mem *mem, elf_image *im, match *m)
{
    for (uint64_t i = 1; i < im->nsyms_guess; i++)
        if (check_symbol(mem, im, i, m)) return;
}

static bool image_lookup(rbp_mem *mem, elf_image *im, const char *name, size_t namelen, uint64_t *addr)
{
    match m = {.name = name, .namelen = namelen};
    int done = 0;
    if (im->gnu_ok) done = lookup_gnu(mem, im, &m);
    if (!done && im->sysv_ok) done = lookup_sysv(mem, im, &m);
    if (!done) lookup_linear(mem, im, &m);
    if (m.found || m.found_hidden) {
        *addr = m.addr;
        return true;
    }
    return false;
}

/* ---- the image list ------------------------------------------------------ */

static uint64_t regions_fingerprint(const rbp_region *regions, size_t nregions)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < nregions; i++) {
        const rbp_region *r = &regions[i];
        uint64_t v[3] = {r->start, r->end, r->file_offset};
        for (int k = 0; k < 3; k++) h = (h ^ v[k]) * 1099511628211ULL;
        for (const char *p = r->path; p && *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    }
    return h;
}

static int cmp_image(const void *a, const void *b)
{
    const elf_image *x = a, *y = b;
    if (x->base != y->base) return x->base < y->base ? -1 : 1;
    return strcmp(x->path, y->path);
}

/* Builds the image list from the regions: one image per region at file
 * offset 0 with a path, sorted by base, duplicates dropped. */
static rbp_elfcache *cache_build(const rbp_mem *mem, const rbp_region *regions, size_t nregions, uint64_t fp)
{
    rbp_elfcache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->mem = mem;
    c->fingerprint = fp;
    c->nregions = nregions;
    size_t want = 0;
    for (size_t i = 0; i < nregions; i++)
        want += regions[i].file_offset == 0 && regions[i].path && regions[i].path[0];
    c->imgs = calloc(want ? want : 1, sizeof *c->imgs);
    if (!c->imgs) {
        free(c);
        return NULL;
    }
    for (size_t i = 0; i < nregions; i++) {
        const rbp_region *r = &regions[i];
        if (r->file_offset != 0 || !r->path || !r->path[0]) continue;
        char *dup = strdup(r->path);
        if (!dup) {
            rbp_elfcache_free(c);
            return NULL;
        }
        c->imgs[c->n++] = (elf_image){.path = dup, .base = r->start, .fd = -1, .warn = rbp_mem_warn(mem)};
    }
    qsort(c->imgs, c->n, sizeof *c->imgs, cmp_image);
    size_t out = 0;
    for (size_t i = 0; i < c->n; i++) {
        if (out > 0 && cmp_image(&c->imgs[out - 1], &c->imgs[i]) == 0) {
            image_clear(&c->imgs[i]);
            continue;
        }
        c->imgs[out++] = c->imgs[i];
    }
    c->n = out;
    return c;
}

/* The target's image list, rebuilt whenever the memory source or the
 * regions changed: parse results are only trusted for the exact mapping
 * they were made from, and re-parsing costs about a tenth of a millisecond. */
static rbp_elfcache *cache_get(const rbp_mem *mem, const rbp_region *regions, size_t nregions, rbp_elfcache **cache)
{
    uint64_t fp = regions_fingerprint(regions, nregions);
    rbp_elfcache *c = *cache;
    if (c && c->mem == mem && c->fingerprint == fp && c->nregions == nregions) return c;
    rbp_elfcache_free(c);
    *cache = cache_build(mem, regions, nregions, fp);
    return *cache;
}

bool rbp_elf_lookup(rbp_mem *mem, const rbp_region *regions, size_t nregions, rbp_elfcache **cache,
                    const char *name, uint64_t *addr)
{
    if (!mem || !cache || !name || !addr) return false;
    size_t namelen = strlen(name);
    if (namelen == 0 || namelen > MAX_NAME) return false;
    rbp_elfcache *c = cache_get(mem, regions, nregions, cache);
    if (!c) return false;

    bool found = false;
    for (size_t k = 0; k < c->n && !found; k++) {
        elf_image *im = &c->imgs[k];
        if (im->state == 0) im->state = parse_image(mem, im) ? 1 : -1;
        if (im->state > 0) found = image_lookup(mem, im, name, namelen, addr);
    }
    /* Files are opened only for the duration of a lookup, so a process
     * mapping hundreds of libraries never holds hundreds of our fds. */
    for (size_t i = 0; i < c->n; i++) {
        if (c->imgs[i].fd >= 0) {
            close(c->imgs[i].fd);
            c->imgs[i].fd = -1;
        }
    }
    return found;
}
