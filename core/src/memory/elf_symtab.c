/*
 * Symbol lookup in the full symbol table (.symtab) of the Ruby images'
 * files on disk: the last resort, after the debugger's lookup and .dynsym.
 * A Ruby built from source keeps ruby_current_vm_ptr and ruby_global_symbols
 * hidden (local symbols, absent from .dynsym), so a session without a
 * debugger (rbpeek-bt on a core, the unit tests) needs .symtab to find them.
 * Only images that look like libruby or a ruby executable are searched, and
 * only when they were not stripped, and only regular files: the paths
 * are the target's word (base/target_file.h).
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"
#include "memory/elf_symbols.h"

#define MAX_SYMS (1u << 22)

static bool ruby_image(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    return strncmp(base, "libruby", 7) == 0 || strncmp(base, "ruby", 4) == 0;
}

/* Searches one file; *bias_base is where its first byte is mapped. */
static bool search_file(const char *path, uint64_t map_base, const char *name, uint64_t *addr,
                        const rbp_warnsink *warn)
{
    int fd = rbp_open_target_file_warn(path, "the mapped Ruby image", warn);
    if (fd < 0) return false;
    bool found = false;
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    GElf_Ehdr eh;
    if (!e || elf_kind(e) != ELF_K_ELF || !gelf_getehdr(e, &eh)) goto out;
    /* Load bias: the mapped base minus the vaddr of the segment at offset 0. */
    uint64_t bias = 0;
    if (eh.e_type == ET_DYN) {
        size_t nph = 0;
        if (elf_getphdrnum(e, &nph) != 0) goto out;
        bool have = false;
        for (size_t i = 0; i < nph && i < 512; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && ph.p_offset == 0) {
                bias = map_base - ph.p_vaddr;
                have = true;
                break;
            }
        }
        if (!have) goto out;
    }
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn)) != NULL && !found) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || sh.sh_entsize == 0) continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data) continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        if (n > MAX_SYMS) n = MAX_SYMS;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym) || sym.st_shndx == SHN_UNDEF) continue;
            int type = GELF_ST_TYPE(sym.st_info);
            if (type != STT_OBJECT && type != STT_FUNC && type != STT_NOTYPE) continue;
            const char *sname = elf_strptr(e, sh.sh_link, sym.st_name);
            if (sname && strcmp(sname, name) == 0) {
                *addr = sym.st_shndx == SHN_ABS ? sym.st_value : sym.st_value + bias;
                found = true;
                break;
            }
        }
    }
out:
    if (e) elf_end(e);
    close(fd);
    return found;
}

bool rbp_elf_symtab_lookup(const rbp_region *regions, size_t nregions, const char *name, uint64_t *addr,
                           const rbp_warnsink *warn)
{
    if (elf_version(EV_CURRENT) == EV_NONE) return false;
    for (size_t i = 0; i < nregions; i++) {
        const rbp_region *r = &regions[i];
        if (!r->path || r->file_offset != 0 || !ruby_image(r->path)) continue;
        bool seen = false; /* a file is mapped several times; search it once */
        for (size_t j = 0; j < i && !seen; j++)
            seen = regions[j].path && regions[j].file_offset == 0 && strcmp(regions[j].path, r->path) == 0;
        if (!seen && search_file(r->path, r->start, name, addr, warn)) return true;
    }
    return false;
}
