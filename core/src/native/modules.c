/*
 * A target's loaded images from its mapped regions (/proc/PID/maps, a
 * core's NT_FILE note, or a debugger's list): each file whose ELF header
 * is mapped (one of its regions starts at file offset 0) is one module,
 * spanning its mappings from the lowest to the highest, as the dynamic
 * loader lays them out; the vdso is one more, read from memory. Files that
 * are mapped but are not ELF (locale archives, fonts, data files) are told
 * apart by the first bytes of their mapping, read from target memory
 * (which for a core may come from the file itself); where those cannot be
 * read the file is kept, and the unwinder says later why it could not be
 * used.
 */
#include "native/native.h"

#include <elf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"

#define PAGE 4096u
#define MAX_PHDRS 64

typedef struct span {
    const char *path;
    uint64_t start, end, offset;
    uint64_t header;               /* the address of its file offset 0, or 0 */
} span;

static int cmp_path(const void *a, const void *b)
{
    const span *x = a, *y = b;
    int c = strcmp(x->path, y->path);
    if (c) return c;
    return x->start < y->start ? -1 : x->start > y->start;
}

static int cmp_start(const void *a, const void *b)
{
    const rbp_uw_module *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

static bool is_vdso(const char *p) { return strcmp(p, "[vdso]") == 0; }

/* Whether the file on disk is laid out as the target mapped it: each of
 * its PT_LOAD segments must be mapped, from the page of its file offset,
 * where its vaddr puts it relative to the image's header. A core made on
 * another machine names files this machine has too (/usr/lib/x86_64-linux-
 * gnu/libc.so.6) but of another build, whose CFI and symbols would name
 * another library's functions; the build IDs (the backend compares them)
 * settle it only where the core holds the header page, this needs none.
 * Returns NULL when it matches or cannot be told (no file: said later). */
static const char *layout_problem(const char *path, const span *maps, size_t n, uint64_t header)
{
    char kind[64];
    int fd = rbp_open_target_file(path, kind, sizeof kind);
    if (fd < 0) return NULL;
    Elf64_Ehdr eh;
    Elf64_Phdr ph[MAX_PHDRS];
    const char *problem = NULL;
    if (pread(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > MAX_PHDRS ||
        pread(fd, ph, eh.e_phnum * sizeof *ph, (off_t)eh.e_phoff) != (ssize_t)(eh.e_phnum * sizeof *ph)) {
        close(fd);
        return "its file on disk is not an ELF image like the one mapped";
    }
    close(fd);
    uint64_t first = UINT64_MAX;
    for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_vaddr & ~(uint64_t)(PAGE - 1)) < first)
            first = ph[i].p_vaddr & ~(uint64_t)(PAGE - 1);
    for (unsigned i = 0; i < eh.e_phnum && !problem; i++) {
        if (ph[i].p_type != PT_LOAD || !ph[i].p_filesz) continue;
        uint64_t at = header + ((ph[i].p_vaddr & ~(uint64_t)(PAGE - 1)) - first);
        uint64_t ofs = ph[i].p_offset & ~(uint64_t)(PAGE - 1);
        bool found = false;
        /* page by page: a debugger's list (lldb's PT_LOAD sections) gives
         * the segments' own addresses and offsets, /proc and NT_FILE whole pages */
        for (size_t k = 0; k < n && !found; k++)
            found = (maps[k].start & ~(uint64_t)(PAGE - 1)) == at && (maps[k].offset & ~(uint64_t)(PAGE - 1)) == ofs;
        if (!found) problem = "its file on disk is not the one the target mapped (its segments lie elsewhere)";
    }
    return problem;
}

/* " (deleted)": the kernel's mark on a mapped file since removed (an
 * upgrade, a rebuilt extension). A live process's mapping still reads it. */
static const char *DELETED = " (deleted)";

static bool deleted(const char *path)
{
    size_t n = strlen(path), d = strlen(DELETED);
    return n > d && strcmp(path + n - d, DELETED) == 0;
}

size_t rbp_native_modules(rbp_mem *mem, const rbp_region *regions, size_t nregions, int pid, rbp_uw_module **out)
{
    *out = NULL;
    span *sp = nregions ? malloc(nregions * sizeof *sp) : NULL;
    if (!sp) return 0;
    size_t n = 0;
    for (size_t i = 0; i < nregions; i++) {
        const rbp_region *r = &regions[i];
        if (!r->path || r->end <= r->start) continue;
        if (r->path[0] != '/' && !is_vdso(r->path)) continue; /* [heap], [stack], anonymous */
        sp[n++] = (span){r->path, r->start, r->end, r->file_offset,
                         r->file_offset == 0 || is_vdso(r->path) ? r->start : 0};
    }
    qsort(sp, n, sizeof *sp, cmp_path);
    rbp_uw_module *mods = n ? calloc(n, sizeof *mods) : NULL;
    size_t m = 0;
    for (size_t i = 0; i < n && mods;) {
        size_t j = i;
        uint64_t lo = sp[i].start, hi = sp[i].end, header = 0;
        for (; j < n && strcmp(sp[j].path, sp[i].path) == 0; j++) {
            if (sp[j].start < lo) lo = sp[j].start;
            if (sp[j].end > hi) hi = sp[j].end;
            if (sp[j].header && (!header || sp[j].header < header)) header = sp[j].header;
        }
        /* The image starts at its ELF header: mappings below it are not its
         * own (a file mapped twice, once as data, is kept from there on). */
        if (header) {
            unsigned char magic[4];
            bool elf = !rbp_mem_read(mem, header, magic, 4) || memcmp(magic, "\177ELF", 4) == 0;
            if (elf && header >= lo) {
                bool vdso = is_vdso(sp[i].path);
                char *name = strdup(sp[i].path);
                char *path = NULL;
                if (!vdso && pid > 0 && deleted(sp[i].path)) {
                    /* its header's mapping, which is the file */
                    char mf[96];
                    uint64_t hend = 0;
                    for (size_t k = i; k < j; k++)
                        if (sp[k].start == header) hend = sp[k].end;
                    snprintf(mf, sizeof mf, "/proc/%d/map_files/%llx-%llx", pid, (unsigned long long)header,
                             (unsigned long long)hend);
                    path = strdup(mf);
                } else if (!vdso) {
                    path = strdup(sp[i].path);
                }
                if (name && (vdso || path)) {
                    const char *problem = vdso ? NULL : layout_problem(path, &sp[i], j - i, header);
                    mods[m++] = (rbp_uw_module){.start = header, .end = hi, .path = path, .name = name,
                                                .problem = problem};
                } else {
                    free(name);
                    free(path);
                }
            }
        }
        i = j;
    }
    free(sp);
    if (!mods) return 0;
    qsort(mods, m, sizeof *mods, cmp_start);
    /* Overlapping images (a corrupt list, or one file mapped inside
     * another's gaps) cannot both be told by address: keep the first. */
    size_t k = 0;
    for (size_t i = 0; i < m; i++) {
        if (k && mods[i].start < mods[k - 1].end) {
            free((char *)mods[i].path);
            free((char *)mods[i].name);
            continue;
        }
        mods[k++] = mods[i];
    }
    if (!k) {
        free(mods);
        return 0;
    }
    *out = mods;
    return k;
}

void rbp_native_modules_free(rbp_uw_module *mods, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)mods[i].path);
        free((char *)mods[i].name);
    }
    free(mods);
}
