/*
 * The notes of an ELF core (its PT_NOTE segments): NT_FILE, the files
 * mapped and where (the kernel's and gdb's cores write it; qemu-user's do
 * not, linkmap.c then finds them); NT_PRSTATUS, one per thread, its
 * id and general registers, laid out as the core's machine lays them
 * (memory/regset.h); NT_AUXV, the auxiliary vector the program started
 * with. Everything is bounded by the note's own size: a malformed entry
 * is dropped, a malformed header drops the note, never a read past it.
 */
#define _GNU_SOURCE
#include "memory/core_file.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

/* ---- NT_FILE ---------------------------------------------------------- */

/* Interns path into c->files through a small open-addressing table, so a
 * library with five mappings gets one entry (and one cached fd). */
typedef struct intern {
    uint32_t *slots;        /* file index + 1; 0 = empty */
    size_t mask;
} intern;

static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

static long intern_path(core *c, intern *t, const char *path)
{
    size_t i = (size_t)hash_str(path) & t->mask;
    for (size_t probes = 0; probes <= t->mask; probes++, i = (i + 1) & t->mask) {
        uint32_t v = t->slots[i];
        if (v == 0) {
            char *dup = strdup(path);
            if (!dup) return -1;
            c->files[c->nfiles] = (core_file){.path = dup, .fd = -1};
            t->slots[i] = (uint32_t)(++c->nfiles);
            return (long)c->nfiles - 1;
        }
        if (strcmp(c->files[v - 1].path, path) == 0) return (long)v - 1;
    }
    return -1; /* cannot happen: the table has twice as many slots as entries */
}

/* Parses one NT_FILE descriptor: count, page size, count x {start, end,
 * page offset}, then count NUL-terminated paths. Entries that are
 * malformed are dropped; a malformed header drops the note. */
static bool parse_nt_file(core *c, const uint8_t *d, uint64_t len)
{
    if (len < 16) return true;
    uint64_t count, page;
    memcpy(&count, d, 8);
    memcpy(&page, d + 8, 8);
    if (page == 0 || page > ((uint64_t)1 << 30)) return true;
    if (count > MAX_FILE_MAPS || count > (len - 16) / 24) return true;
    if (count == 0) return true;

    c->maps = calloc(count, sizeof *c->maps);
    c->files = calloc(count, sizeof *c->files);
    size_t nslots = 64;
    while (nslots < 2 * count) nslots <<= 1;
    intern t = {calloc(nslots, sizeof(uint32_t)), nslots - 1};
    if (!c->maps || !c->files || !t.slots) {
        free(t.slots);
        return false;
    }

    const uint8_t *ent = d + 16;
    const char *str = (const char *)(d + 16 + count * 24);
    const char *end = (const char *)(d + len);
    for (uint64_t i = 0; i < count && str < end; i++) {
        const char *nul = memchr(str, '\0', (size_t)(end - str));
        if (!nul) break; /* truncated string table: keep what was complete */
        uint64_t v[3];
        memcpy(v, ent + i * 24, sizeof v);
        const char *path = str;
        str = nul + 1;
        if (v[1] <= v[0] || *path == '\0') continue;
        if (v[2] > UINT64_MAX / page) continue;
        long f = intern_path(c, &t, path);
        if (f < 0) {
            free(t.slots);
            return false;
        }
        c->maps[c->nmaps++] = (core_fmap){v[0], v[1], v[2] * page, (uint32_t)f};
    }
    free(t.slots);
    rbp_core_sort_maps(c);
    return true;
}

static int cmp_fmap(const void *a, const void *b)
{
    const core_fmap *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

void rbp_core_sort_maps(core *c) { qsort(c->maps, c->nmaps, sizeof *c->maps, cmp_fmap); }

long rbp_core_add_file(core *c, const char *path)
{
    core_file *f = realloc(c->files, (c->nfiles + 1) * sizeof *f);
    if (!f) return -1;
    c->files = f;
    char *dup = strdup(path);
    if (!dup) return -1;
    c->files[c->nfiles] = (core_file){.path = dup, .fd = -1};
    return (long)c->nfiles++;
}

/* ---- NT_PRSTATUS, NT_AUXV ---------------------------------------------- */

/* One thread's id and registers, where the machine's struct elf_prstatus
 * keeps them. False only when out of memory. */
static bool parse_prstatus(core *c, const uint8_t *desc, uint64_t len)
{
    const rbp_regset *rs = c->regset;
    if (!rs || len < rs->prstatus_reg + rs->prstatus_words * 8u || c->nthreads >= MAX_CORE_THREADS) return true;
    if (c->nthreads == c->threads_cap) {
        size_t cap = c->threads_cap ? c->threads_cap * 2 : 16;
        core_thread_regs *t = realloc(c->threads, cap * sizeof *t);
        if (!t) return false;
        c->threads = t;
        c->threads_cap = cap;
    }
    core_thread_regs *t = &c->threads[c->nthreads++];
    memset(t, 0, sizeof *t);
    int32_t pid;
    memcpy(&pid, desc + rs->prstatus_pid, 4);
    t->tid = pid;
    memcpy(t->regs, desc + rs->prstatus_reg, rs->prstatus_words * 8u);
    return true;
}

/* The auxiliary vector: (type, value) words up to AT_NULL. */
static void parse_auxv(core *c, const uint8_t *desc, uint64_t len)
{
    for (uint64_t pos = 0; len - pos >= 16; pos += 16) {
        uint64_t type, v;
        memcpy(&type, desc + pos, 8);
        memcpy(&v, desc + pos + 8, 8);
        if (type == AT_NULL) break;
        if (type == AT_PHDR) c->auxv.phdr = v;
        else if (type == AT_PHNUM) c->auxv.phnum = v;
        else if (type == AT_EXECFN) c->auxv.execfn = v;
        else if (type == AT_PAGESZ) c->auxv.pagesz = v;
        else if (type == AT_BASE) c->auxv.base = v;
    }
}

/* Notes in a 64-bit core still use 4-byte namesz/descsz/type words, with
 * name and descriptor each padded to 4 bytes. */
bool rbp_core_parse_notes(core *c, const uint8_t *buf, uint64_t len)
{
    uint64_t pos = 0;
    /* Each note is at least 12 bytes, so this terminates within len/12. */
    while (len - pos >= sizeof(Elf64_Nhdr)) {
        Elf64_Nhdr nh;
        memcpy(&nh, buf + pos, sizeof nh);
        pos += sizeof nh;
        uint64_t namesz = ((uint64_t)nh.n_namesz + 3) & ~(uint64_t)3;
        uint64_t descsz = ((uint64_t)nh.n_descsz + 3) & ~(uint64_t)3;
        if (namesz > len - pos) break;
        const char *name = (const char *)(buf + pos);
        pos += namesz;
        if (nh.n_descsz > len - pos) break;
        const uint8_t *desc = buf + pos;
        pos += descsz > len - pos ? len - pos : descsz;
        if (nh.n_namesz != 5 || memcmp(name, "CORE", 5) != 0) continue;
        if (nh.n_type == NT_FILE && c->maps == NULL && !parse_nt_file(c, desc, nh.n_descsz)) return false;
        if (nh.n_type == NT_PRSTATUS && !parse_prstatus(c, desc, nh.n_descsz)) return false;
        if (nh.n_type == NT_AUXV) parse_auxv(c, desc, nh.n_descsz);
    }
    return true;
}
