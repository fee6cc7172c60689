/*
 * The parsed form of an ELF core file, shared by the files that read one:
 * mem_core.c (the memory source: segments, the mapped files it opens for
 * what the core left out), core_notes.c (its notes: NT_FILE mappings,
 * threads' registers, the auxiliary vector) and core_regions.c (the
 * regions a core maps, for symbols and modules).
 * rbp_core_open validates everything it takes from the file against the
 * file's size and bounds every count (see mem_core.c's opening comment).
 */
#ifndef RBP_MEMORY_CORE_FILE_H
#define RBP_MEMORY_CORE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/target_file.h"   /* rbp_warnsink */
#include "memory/regset.h"

/* Bounds on what we accept from a core: far above anything real (the kernel
 * caps a process at vm.max_map_count mappings, 65530 by default), low
 * enough that a corrupt count cannot make us allocate gigabytes. */
#define MAX_PHDRS ((uint64_t)1 << 20)
#define MAX_NOTE_BYTES ((uint64_t)64 << 20)
#define MAX_FILE_MAPS ((uint64_t)1 << 20)
#define MAX_CORE_THREADS ((size_t)1 << 20)
/* Mapped files we keep open at once; older ones are closed and reopened on
 * demand, so a process mapping thousands of files cannot exhaust our fds. */
#define MAX_OPEN_FILES 16

typedef struct core_seg {
    uint64_t vaddr, memsz;
    uint64_t offset;        /* where its data starts in the core */
    uint64_t avail;         /* leading bytes whose data really is in the core */
} core_seg;

typedef struct core_fmap {
    uint64_t start, end;    /* target addresses */
    uint64_t file_ofs;      /* bytes, already multiplied by the page size */
    uint32_t file;          /* index into core.files */
} core_fmap;

typedef struct core_file {
    char *path;
    int fd;                 /* -1 when not open */
    int state;              /* 0 not tried yet, 1 usable, -1 unusable */
    uint64_t last_use;      /* for closing the least recently used */
} core_file;

typedef struct core_thread_regs {
    int64_t tid;
    uint64_t regs[RBP_PRSTATUS_MAX_WORDS];  /* pr_reg: the machine's general registers (regset.h) */
} core_thread_regs;

/* What the auxiliary vector (NT_AUXV) says of the program: where its
 * program headers were mapped, its path, the page size. 0 when not said. */
typedef struct core_auxv {
    uint64_t phdr, phnum, execfn, pagesz, base;
} core_auxv;

typedef struct core {
    int fd;
    uint64_t size;
    core_seg *segs;         /* sorted by vaddr */
    size_t nsegs;
    core_fmap *maps;        /* sorted by start */
    size_t nmaps;
    core_file *files;
    size_t nfiles;
    size_t nopen;
    uint64_t clock;
    rbp_warnsink warn;      /* where refused files are said (rbp_mem_set_warn) */
    char note[640];         /* a truncated core: what is missing, what can be read ("" if whole) */
    const rbp_regset *regset;   /* the core's machine's registers (its ELF header's e_machine) */
    core_thread_regs *threads;  /* NT_PRSTATUS notes, in the core's order (the current thread first) */
    size_t nthreads, threads_cap;
    core_auxv auxv;
    bool by_linkmap;            /* no NT_FILE: the files come from the link map (linkmap.c) */
    char maps_from[256];        /* where the mapped files' list came from: "" (NT_FILE, or none) or the
                                 * link map's word (linkmap.c) */
} core;

/* Opens and parses the core at path; NULL with a reason in err (if given).
 * sysroot (NULL: none): where the files the core names are looked for
 * first, as gdb's "set sysroot" (a core of another machine's files). */
core *rbp_core_open(const char *path, const char *sysroot, char *err, size_t errlen);
void rbp_core_free(core *c);

/* core_notes.c: the notes of one PT_NOTE segment (len bytes of buf):
 * NT_FILE, NT_PRSTATUS, NT_AUXV. False only when out of memory. */
bool rbp_core_parse_notes(core *c, const uint8_t *buf, uint64_t len);
/* A mapped file's entry in c->files (its index), made for path; -1 when
 * out of memory. Each call makes a new entry (NT_FILE interns its own). */
long rbp_core_add_file(core *c, const char *path);
/* c->maps in address order, as find_map's bisection needs them. */
void rbp_core_sort_maps(core *c);

/* mem_core.c: the bytes at addr that the core or its mapped files hold
 * (as the memory source reads them); or -1. */
long rbp_core_read(core *c, uint64_t addr, void *buf, size_t len);

#endif
