/*
 * Memory source over an ELF core file (little-endian, ELFCLASS64, of a
 * machine rbpeek reads: memory/machine.h).
 *
 * A core holds the target's memory as PT_LOAD segments, but not all of it:
 * the kernel (by coredump_filter) and gdb's gcore leave out file-backed
 * mappings that were never written, typically the read-only text and
 * .rodata of every executable and library, either by giving the segment a
 * p_filesz smaller than p_memsz or by writing no PT_LOAD at all. The NT_FILE
 * note still names the file behind each mapping and the offset it was
 * mapped from, so for addresses the core lacks we read that file instead
 * (qemu-user writes no NT_FILE: the dynamic linker's list in the core's
 * memory names them then, linkmap.c; a sysroot given is where they
 * are looked for first, as gdb does for a core of another machine).
 * Those paths are the core's word, and a core may come from anyone: a file
 * is read only if it is a regular file (base/target_file.h), so a note
 * naming a FIFO or a device cannot block or feed us its bytes; each refusal
 * is said once on the session's warning line.
 *
 * Reads use pread on a descriptor kept open rather than mmap of the core:
 * a core may be truncated (a crash while it was being written, a disk that
 * filled up) or shrink while we hold it, and touching an mmap'd page past
 * the end of the file raises SIGBUS, whereas pread just returns short. The
 * page cache in mem.c already absorbs repeated reads, so the syscall per
 * miss costs little. Cores can also be many GiB; we never map or load them.
 *
 * Everything taken from the core is validated against the file size before
 * use, and every loop over core-derived counts is bounded, so a corrupt or
 * truncated core gives an error or short reads, never a crash.
 */
#define _GNU_SOURCE
#include "base/errbuf.h"
#include "base/target_file.h"
#include "memory/core_file.h"
#include "memory/linkmap.h"
#include "memory/machine.h"
#include "memory/mem.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* pread that retries on EINTR and on partial transfers; returns bytes read
 * (short at end of file) or -1 if the very first attempt failed. */
static long pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t done = 0;
    while (done < len) {
        if (off + done > (uint64_t)INT64_MAX) break;
        ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += (size_t)n;
    }
    return done ? (long)done : (len ? -1 : 0);
}

/* True if [off, off+len) lies inside a file of the given size. */
static bool in_file(uint64_t off, uint64_t len, uint64_t size)
{
    return off <= size && len <= size - off;
}

void rbp_core_free(core *c)
{
    if (!c) return;
    if (c->fd >= 0) close(c->fd);
    for (size_t i = 0; i < c->nfiles; i++) {
        if (c->files[i].fd >= 0) close(c->files[i].fd);
        free(c->files[i].path);
    }
    free(c->files);
    free(c->threads);
    free(c->maps);
    free(c->segs);
    free(c);
}

static int cmp_seg(const void *a, const void *b)
{
    const core_seg *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* ---- truncation ---------------------------------------------------------- */

static double mib(uint64_t bytes) { return (double)bytes / (1024.0 * 1024.0); }

/* A core cut short (a crash while it was written, a full disk, a size
 * limit) still opens: what its headers promise past the end of the file
 * reads as missing. Says so in c->note: how much of the file is there,
 * which segments are cut or missing, and what can still be read (the
 * notes, the whole segments, the pages of mapped files, which come from
 * the files themselves). The session puts it on its warning line, and in
 * front of an attach that fails for it. */
static void describe_truncation(core *c, const Elf64_Phdr *ph, uint64_t phnum)
{
    enum { SHOWN = 3 };
    uint64_t want = 0, bytes_missing = 0;
    size_t nload = 0, ncut = 0;
    uint64_t lo[SHOWN], hi[SHOWN];   /* the lowest cut ranges, sorted */
    bool notes_cut = false;
    for (uint64_t i = 0; i < phnum; i++) {
        const Elf64_Phdr *p = &ph[i];
        if (p->p_filesz == 0 || p->p_offset + p->p_filesz < p->p_offset) continue;
        uint64_t end = p->p_offset + p->p_filesz;
        if (end > want) want = end;
        if (p->p_type == PT_NOTE && end > c->size) notes_cut = true;
        if (p->p_type != PT_LOAD) continue;
        nload++;
        if (end <= c->size) continue;
        uint64_t have = p->p_offset >= c->size ? 0 : c->size - p->p_offset;
        bytes_missing += p->p_filesz - have;
        uint64_t a = p->p_vaddr + have, b = p->p_vaddr + p->p_filesz;
        size_t k = ncut < SHOWN ? ncut : SHOWN;
        while (k > 0 && lo[k - 1] > a) {
            if (k < SHOWN) lo[k] = lo[k - 1], hi[k] = hi[k - 1];
            k--;
        }
        if (k < SHOWN) lo[k] = a, hi[k] = b;
        ncut++;
    }
    if (want <= c->size) return;
    char ranges[160] = "";
    size_t used = 0;
    for (size_t k = 0; k < ncut && k < SHOWN; k++)
        used += (size_t)snprintf(ranges + used, used < sizeof ranges ? sizeof ranges - used : 0, "%s0x%llx-0x%llx",
                                 k ? ", " : "", (unsigned long long)lo[k], (unsigned long long)hi[k]);
    snprintf(c->note, sizeof c->note,
             "the core file is truncated: %.1f of the %.1f MiB its headers describe are in it; %zu of %zu memory "
             "segments are cut or missing (%.1f MiB: %s%s)%s; still readable: %zu whole segments and pages of "
             "mapped files (from the files)",
             mib(c->size), mib(want), ncut, nload, mib(bytes_missing), ranges, ncut > SHOWN ? ", ..." : "",
             notes_cut ? ", and so are its notes (threads, registers, the mapped files' names)" : "", nload - ncut);
}

/* ---- ELF header and program headers ----------------------------------- */

/* Opens the core file itself into c (a regular file only) and takes its
 * size. False with err set when it cannot. */
static bool core_open_file(core *c, const char *path, char *err, size_t errlen)
{
    char kind[32];
    c->fd = rbp_open_target_file(path, kind, sizeof kind);
    if (c->fd == RBP_NOT_REGULAR) {
        rbp_set_err(err, errlen, "core %s is %s, not a regular file", path, kind);
        return false;
    }
    if (c->fd < 0) {
        rbp_set_err(err, errlen, "cannot open core %s: %s", path, strerror(errno));
        return false;
    }
    struct stat st;
    if (fstat(c->fd, &st) != 0) {
        rbp_set_err(err, errlen, "cannot stat core %s: %s", path, strerror(errno));
        return false;
    }
    c->size = (uint64_t)st.st_size;
    return true;
}

/* The ELF header, checked to be a little-endian ELF64 core of a machine
 * rbpeek reads; its machine's registers kept. */
static bool core_read_ehdr(core *c, const char *path, Elf64_Ehdr *eh, char *err, size_t errlen)
{
    if (pread_full(c->fd, eh, sizeof *eh, 0) != (long)sizeof *eh) {
        rbp_set_err(err, errlen, "core %s: too short for an ELF header", path);
        return false;
    }
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) {
        rbp_set_err(err, errlen, "core %s: not an ELF file", path);
        return false;
    }
    /* The session refuses a core of a machine rbpeek does not read before
     * it gets here, naming it (context/machine.c); this stays the reader's
     * own guard. */
    if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
        !rbp_machine_read(eh->e_machine) || !(c->regset = rbp_regset_of(eh->e_machine))) {
        char read[64];
        rbp_machines_read(read, sizeof read);
        rbp_set_err(err, errlen, "core %s: only 64-bit little-endian cores of %s are supported "
                "(class %u, data %u, machine %u)", path, read, eh->e_ident[EI_CLASS], eh->e_ident[EI_DATA],
                eh->e_machine);
        return false;
    }
    if (eh->e_type != ET_CORE) {
        rbp_set_err(err, errlen, "core %s: not a core file (ELF type %u)", path, eh->e_type);
        return false;
    }
    if (eh->e_phentsize != sizeof(Elf64_Phdr)) {
        rbp_set_err(err, errlen, "core %s: unexpected program header size %u", path, eh->e_phentsize);
        return false;
    }
    return true;
}

/* The program headers (*phnum of them), malloc'd; NULL with err set when
 * they are missing, too many or cannot be read. */
static Elf64_Phdr *core_read_phdrs(core *c, const char *path, const Elf64_Ehdr *eh, uint64_t *phnum, char *err,
                                   size_t errlen)
{
    /* With more than 65534 segments the real count lives in section 0. */
    uint64_t n = eh->e_phnum;
    if (n == PN_XNUM) {
        Elf64_Shdr sh0;
        if (eh->e_shentsize != sizeof sh0 || !in_file(eh->e_shoff, sizeof sh0, c->size) ||
            pread_full(c->fd, &sh0, sizeof sh0, eh->e_shoff) != (long)sizeof sh0) {
            rbp_set_err(err, errlen, "core %s: PN_XNUM without a readable section header", path);
            return NULL;
        }
        n = sh0.sh_info;
    }
    if (n == 0 || n > MAX_PHDRS || !in_file(eh->e_phoff, n * sizeof(Elf64_Phdr), c->size)) {
        rbp_set_err(err, errlen, "core %s: program headers missing or past the end of the file (truncated?)",
                path);
        return NULL;
    }
    Elf64_Phdr *ph = malloc(n * sizeof *ph);
    if (!ph) {
        rbp_set_err(err, errlen, "out of memory");
        return NULL;
    }
    if (pread_full(c->fd, ph, n * sizeof *ph, eh->e_phoff) != (long)(n * sizeof *ph)) {
        rbp_set_err(err, errlen, "core %s: cannot read program headers", path);
        free(ph);
        return NULL;
    }
    *phnum = n;
    return ph;
}

/* A PT_LOAD segment, kept in c->segs. Data the header promises but the
 * (truncated) file lacks is treated as absent, so the file fallback or a
 * short read takes over instead of reading past EOF. */
static void core_add_load(core *c, const Elf64_Phdr *p)
{
    if (p->p_memsz == 0 || p->p_vaddr + p->p_memsz < p->p_vaddr) return;
    uint64_t avail = p->p_filesz < p->p_memsz ? p->p_filesz : p->p_memsz;
    if (p->p_offset >= c->size) avail = 0;
    else if (avail > c->size - p->p_offset) avail = c->size - p->p_offset;
    c->segs[c->nsegs++] = (core_seg){p->p_vaddr, p->p_memsz, p->p_offset, avail};
}

/* A PT_NOTE segment's notes (the part the file holds, at most
 * MAX_NOTE_BYTES). False only when out of memory parsing them. */
static bool core_add_notes(core *c, const Elf64_Phdr *p)
{
    uint64_t len = p->p_filesz;
    if (p->p_offset >= c->size || len == 0) return true;
    if (len > c->size - p->p_offset) len = c->size - p->p_offset;
    if (len > MAX_NOTE_BYTES) len = MAX_NOTE_BYTES;
    uint8_t *buf = malloc(len);
    if (!buf) return true;
    long got = pread_full(c->fd, buf, len, p->p_offset);
    bool ok = got <= 0 || rbp_core_parse_notes(c, buf, (uint64_t)got);
    free(buf);
    return ok;
}

/* The segments and notes of the program headers; false when out of memory. */
static bool core_read_segments(core *c, const Elf64_Phdr *ph, uint64_t phnum)
{
    describe_truncation(c, ph, phnum);
    size_t nload = 0;
    for (uint64_t i = 0; i < phnum; i++) nload += ph[i].p_type == PT_LOAD;
    c->segs = calloc(nload ? nload : 1, sizeof *c->segs);
    if (!c->segs) return false;
    for (uint64_t i = 0; i < phnum; i++) {
        if (ph[i].p_type == PT_LOAD) core_add_load(c, &ph[i]);
        else if (ph[i].p_type == PT_NOTE && !core_add_notes(c, &ph[i])) return false;
    }
    qsort(c->segs, c->nsegs, sizeof *c->segs, cmp_seg);
    return true;
}

/* For a core without NT_FILE (qemu-user writes none), the files the
 * program mapped, from its executable's dynamic section and the dynamic
 * linker's list (r_debug), found through NT_AUXV (linkmap.c); each file
 * under sysroot first. Adds them to c->maps; says in c->maps_from how far
 * it got. False only when out of memory. */
static bool maps_from_linkmap(core *c, const char *sysroot);

core *rbp_core_open(const char *path, const char *sysroot, char *err, size_t errlen)
{
    core *c = calloc(1, sizeof *c);
    if (!c) {
        rbp_set_err(err, errlen, "out of memory");
        return NULL;
    }
    Elf64_Ehdr eh;
    uint64_t phnum = 0;
    Elf64_Phdr *ph = NULL;
    if (!core_open_file(c, path, err, errlen) || !core_read_ehdr(c, path, &eh, err, errlen) ||
        !(ph = core_read_phdrs(c, path, &eh, &phnum, err, errlen)))
        goto fail;
    bool ok = core_read_segments(c, ph, phnum);
    free(ph);
    if (ok && c->nmaps == 0) {
        c->by_linkmap = true;
        ok = maps_from_linkmap(c, sysroot);
    }
    if (ok && c->maps_from[0]) {   /* said beside a truncation, if any */
        size_t used = strlen(c->note);
        snprintf(c->note + used, sizeof c->note - used, "%s%s", used ? "; " : "", c->maps_from);
    }
    if (!ok) {
        rbp_set_err(err, errlen, "out of memory");
        goto fail;
    }
    if (c->nsegs == 0 && c->nmaps == 0) {
        rbp_set_err(err, errlen, "core %s: no memory segments and no mapped files", path);
        goto fail;
    }
    return c;

fail:
    rbp_core_free(c);
    return NULL;
}

/* ---- reading ---------------------------------------------------------- */

/* The segment containing addr, or the first one after it (via *next), or
 * NULL with *next = NULL when none follows. */
static const core_seg *find_seg(const core *c, uint64_t addr, const core_seg **next)
{
    size_t lo = 0, hi = c->nsegs; /* first index with vaddr > addr */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->segs[mid].vaddr <= addr) lo = mid + 1;
        else hi = mid;
    }
    *next = lo < c->nsegs ? &c->segs[lo] : NULL;
    if (lo > 0) {
        const core_seg *s = &c->segs[lo - 1];
        if (addr - s->vaddr < s->memsz) return s;
    }
    return NULL;
}

static const core_fmap *find_map(const core *c, uint64_t addr)
{
    size_t lo = 0, hi = c->nmaps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->maps[mid].start <= addr) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0 && addr < c->maps[lo - 1].end) return &c->maps[lo - 1];
    return NULL;
}

/* Where the core does hold part of a file's first page (kernels and gdb
 * keep the ELF header page), compare it with the file on disk: a library
 * upgraded since the crash must not silently feed us the new version's
 * bytes. Only offset 0 is compared because later writable pages legitimately
 * differ (relocations). Returns false if the file is known to differ. */
static bool file_matches_core(core *c, uint32_t file, int fd)
{
    for (size_t i = 0; i < c->nmaps; i++) {
        const core_fmap *m = &c->maps[i];
        if (m->file != file || m->file_ofs != 0) continue;
        const core_seg *next, *s = find_seg(c, m->start, &next);
        if (!s || m->start - s->vaddr >= s->avail) continue;
        uint64_t n = s->avail - (m->start - s->vaddr);
        if (n > 512) n = 512;
        if (n > m->end - m->start) n = m->end - m->start;
        uint8_t a[512], b[512];
        if (pread_full(c->fd, a, n, s->offset + (m->start - s->vaddr)) != (long)n) continue;
        if (pread_full(fd, b, n, 0) != (long)n || memcmp(a, b, n) != 0) return false;
        return true;
    }
    return true; /* nothing to compare against */
}

/* The open fd for a mapped file, opening it on first use (and closing the
 * least recently used one when too many are open); -1 if unusable. */
static int file_fd(core *c, uint32_t file)
{
    core_file *f = &c->files[file];
    f->last_use = ++c->clock;
    if (f->fd >= 0) return f->fd;
    if (f->state < 0) return -1;
    if (c->nopen >= MAX_OPEN_FILES) {
        core_file *lru = NULL;
        for (size_t i = 0; i < c->nfiles; i++)
            if (c->files[i].fd >= 0 && (!lru || c->files[i].last_use < lru->last_use)) lru = &c->files[i];
        if (lru) {
            close(lru->fd);
            lru->fd = -1;
            c->nopen--;
        }
    }
    int fd = rbp_open_target_file_warn(f->path, "the core's mapped file", &c->warn);
    if (fd < 0) {
        f->state = -1;   /* never tried again, so never said twice */
        return -1;
    }
    if (f->state == 0 && !file_matches_core(c, file, fd)) {
        close(fd);
        f->state = -1;
        return -1;
    }
    f->state = 1;
    f->fd = fd;
    c->nopen++;
    return fd;
}

/* Reads the longest prefix of [addr, addr+want) that one source (core data
 * or one mapped file) can serve. Returns bytes read, 0 if addr is
 * unreadable. */
static size_t read_piece(core *c, uint64_t addr, uint8_t *buf, size_t want)
{
    const core_seg *next, *s = find_seg(c, addr, &next);
    uint64_t limit = want; /* bytes before the source may change */
    if (s) {
        uint64_t rel = addr - s->vaddr;
        if (rel < s->avail) {
            uint64_t n = s->avail - rel;
            if (n > want) n = want;
            long got = pread_full(c->fd, buf, (size_t)n, s->offset + rel);
            return got > 0 ? (size_t)got : 0;
        }
        if (s->memsz - rel < limit) limit = s->memsz - rel;
    } else if (next && next->vaddr - addr < limit) {
        limit = next->vaddr - addr;
    }

    const core_fmap *m = find_map(c, addr);
    if (!m) return 0;
    if (m->end - addr < limit) limit = m->end - addr;
    uint64_t off = m->file_ofs + (addr - m->start);
    if (off < m->file_ofs) return 0;
    int fd = file_fd(c, m->file);
    if (fd < 0) return 0;
    long got = pread_full(fd, buf, (size_t)limit, off);
    return got > 0 ? (size_t)got : 0;
}

long rbp_core_read(core *c, uint64_t addr, void *buf, size_t len)
{
    size_t done = 0;
    /* Each piece either advances or ends the read; pieces end at segment
     * or mapping boundaries, so a read spanning several is served whole. */
    while (done < len) {
        uint64_t a = addr + done;
        if (a < addr) break; /* wrapped around the address space */
        size_t n = read_piece(c, a, (uint8_t *)buf + done, len - done);
        if (n == 0) break;
        done += n;
    }
    return done ? (long)done : -1;
}

static long core_read(void *ctx, uint64_t addr, void *buf, size_t len) { return rbp_core_read(ctx, addr, buf, len); }

/* ---- a core's files from the link map (no NT_FILE) -------------------- */

static bool core_io_map(void *ctx, const char *path, const rbp_lm_seg *segs, size_t n)
{
    core *c = ctx;
    long f = rbp_core_add_file(c, path);
    if (f < 0) return false;
    core_fmap *m = realloc(c->maps, (c->nmaps + n + 1) * sizeof *m);
    if (!m) return false;
    c->maps = m;
    for (size_t i = 0; i < n; i++) c->maps[c->nmaps++] = (core_fmap){segs[i].start, segs[i].end, segs[i].file_ofs,
                                                                     (uint32_t)f};
    /* sorted at once: the next object is found by reads that may ask them */
    rbp_core_sort_maps(c);
    return true;
}

static bool maps_from_linkmap(core *c, const char *sysroot)
{
    rbp_linkmap_io io = {c, core_read, core_io_map, c->regset->machine, "the core", c->maps_from,
                         sizeof c->maps_from};
    return rbp_linkmap_walk(&io, sysroot, c->auxv.phdr, c->auxv.execfn, c->auxv.pagesz);
}

static void core_close(void *ctx) { rbp_core_free(ctx); }

static void core_set_warn(void *ctx, rbp_warnsink sink) { ((core *)ctx)->warn = sink; }

static const char *core_note(void *ctx) { return ((core *)ctx)->note[0] ? ((core *)ctx)->note : NULL; }

bool rbp_source_core_by_linkmap(const rbp_source *src)
{
    return src && src->read == core_read && ((const core *)src->ctx)->by_linkmap;
}

bool rbp_source_core(const char *core_path, rbp_source *out, char *err, size_t errlen)
{
    return rbp_source_core_at(core_path, NULL, out, err, errlen);
}

bool rbp_source_core_at(const char *core_path, const char *sysroot, rbp_source *out, char *err, size_t errlen)
{
    if (!core_path || !out) {
        rbp_set_err(err, errlen, "no core file given");
        return false;
    }
    core *c = rbp_core_open(core_path, sysroot, err, errlen);
    if (!c) return false;
    *out = (rbp_source){.read = core_read, .close = core_close, .set_warn = core_set_warn, .note = core_note, .ctx = c,
                        .kind = "core"};
    return true;
}
