/*
 * The files libdwfl reads for a module of the target (librbpeek-unwind.so,
 * with unwind_dwfl.c): its ELF file, refused where it is not the one mapped
 * (its build ID against the one in target memory), the vdso's image from
 * memory, and its separate debug info. Separate debug files are looked for
 * on disk only (build-id under /usr/lib/debug/.build-id, then the
 * .gnu_debuglink beside the file, in .debug/ and under /usr/lib/debug):
 * never through debuginfod, which would make a backtrace wait on the
 * network.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"
#include "native/dwfl/uw_state.h"

/* The build ID of the image mapped at start, from target memory (its ELF
 * header, program headers and PT_NOTE segments), so that a file on disk
 * that is not the one mapped (a library upgraded since the core was made)
 * is refused by libdwfl rather than unwound with the wrong CFI. */
size_t rbp_uw_memory_build_id(rbp_uw *u, uint64_t start, uint8_t *id, uint64_t *id_vaddr)
{
    Elf64_Ehdr eh;
    if (!rbp_uw_read_exact(u, start, &eh, sizeof eh) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
        return 0;
    Elf64_Phdr ph[64];
    if (!rbp_uw_read_exact(u, start + eh.e_phoff, ph, eh.e_phnum * sizeof *ph)) return 0;
    /* The mapping's address is the load bias plus the first PT_LOAD's
     * page-aligned vaddr. */
    uint64_t first = UINT64_MAX;
    for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first) first = ph[i].p_vaddr & ~(uint64_t)0xfff;
    if (first == UINT64_MAX) return 0;
    uint64_t bias = start - first;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        if (ph[i].p_type != PT_NOTE || ph[i].p_filesz > 4096) continue;
        uint8_t notes[4096];
        size_t len = (size_t)ph[i].p_filesz;
        if (!rbp_uw_read_exact(u, bias + ph[i].p_vaddr, notes, len)) continue;
        for (size_t pos = 0; pos + 12 <= len;) {
            uint32_t nsz, dsz, type;
            memcpy(&nsz, notes + pos, 4);
            memcpy(&dsz, notes + pos + 4, 4);
            memcpy(&type, notes + pos + 8, 4);
            size_t name_at = pos + 12, desc_at = name_at + ((nsz + 3u) & ~3u);
            if (nsz > len || dsz > len || desc_at > len || dsz > len - desc_at) break;
            if (type == NT_GNU_BUILD_ID && nsz == 4 && memcmp(notes + name_at, "GNU", 4) == 0 && dsz > 0 &&
                dsz <= MAX_BUILD_ID) {
                memcpy(id, notes + desc_at, dsz);
                *id_vaddr = bias + ph[i].p_vaddr + desc_at;
                return dsz;
            }
            pos = desc_at + ((dsz + 3u) & ~3u);
        }
    }
    return 0;
}

static int find_elf_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base, char **file_name,
                       Elf **elfp)
{
    (void)modname;
    rbp_uw *u = userdata ? *userdata : NULL;
    uw_module *m = u ? rbp_uw_module_at(u, base) : NULL;
    if (!m || m->problem[0]) return -1; /* a file known not to be the one mapped is not read */
    if (!m->path) { /* the vdso: its image is in memory only */
        size_t len = (size_t)(m->end - m->start);
        if (len > MAX_VDSO_BYTES || !(m->image = malloc(len)) || !rbp_uw_read_exact(u, m->start, m->image, len)) {
            free(m->image);
            m->image = NULL;
            snprintf(m->problem, sizeof m->problem, "its image could not be read from memory");
            return -1;
        }
        *elfp = elf_memory((char *)m->image, len);
        if (!*elfp) snprintf(m->problem, sizeof m->problem, "its image in memory is not ELF");
        return -1;
    }
    char kind[64];
    int fd = rbp_open_target_file(m->path, kind, sizeof kind);
    if (fd == RBP_NOT_REGULAR) {
        snprintf(m->problem, sizeof m->problem, "its file is %s, not a regular file: not read", kind);
        return -1;
    }
    if (fd < 0) {
        snprintf(m->problem, sizeof m->problem, "its file cannot be opened (%s)", strerror(errno));
        return -1;
    }
    if (!(*file_name = strdup(m->path))) {
        close(fd);
        return -1;
    }
    (void)mod;
    return fd; /* libdwfl takes it, checks it against the build ID reported, and closes it */
}

static int try_open(const char *path, char **name)
{
    char kind[64];
    int fd = rbp_open_target_file(path, kind, sizeof kind); /* named after the target's files */
    if (fd >= 0 && !(*name = strdup(path))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Separate debug info on disk: by build ID, then by .gnu_debuglink. */
static int find_debuginfo_cb(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                             const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                             char **debuginfo_file_name)
{
    (void)userdata;
    (void)modname;
    (void)base;
    (void)debuglink_crc;
    char path[4096];
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (len > 1 && len <= MAX_BUILD_ID) {
        int n = snprintf(path, sizeof path, "/usr/lib/debug/.build-id/%02x/", bits[0]);
        for (int i = 1; i < len && n < (int)sizeof path - 8; i++) n += snprintf(path + n, sizeof path - n, "%02x", bits[i]);
        snprintf(path + n, sizeof path - n, ".debug");
        int fd = try_open(path, debuginfo_file_name);
        if (fd >= 0) return fd;
    }
    if (!debuglink_file || !*debuglink_file || strchr(debuglink_file, '/') || !file_name) return -1;
    const char *slash = strrchr(file_name, '/');
    int dirlen = slash ? (int)(slash - file_name) : 0;
    const char *fmts[] = {"%.*s/%s", "%.*s/.debug/%s", "/usr/lib/debug%.*s/%s"};
    for (size_t i = 0; i < sizeof fmts / sizeof fmts[0]; i++) {
        if (snprintf(path, sizeof path, fmts[i], dirlen, file_name, debuglink_file) >= (int)sizeof path) continue;
        if (strcmp(path, file_name) == 0) continue; /* the file itself (it has no DWARF) */
        int fd = try_open(path, debuginfo_file_name);
        if (fd >= 0) return fd;
    }
    return -1;
}

const Dwfl_Callbacks rbp_uw_callbacks = {
    .find_elf = find_elf_cb,
    .find_debuginfo = find_debuginfo_cb,
    .section_address = dwfl_offline_section_address,
};

