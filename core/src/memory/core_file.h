/*
 * The parsed form of an ELF core file, shared by the files that read one:
 * mem_core.c (the memory source: segments, NT_FILE mappings, the mapped
 * files it opens for what the core left out) and core_regions.c (the
 * regions a core maps, for symbols and modules). rbp_core_open validates
 * everything it takes from the file against the file's size and bounds
 * every count (see mem_core.c's opening comment).
 */
#ifndef RBP_MEMORY_CORE_FILE_H
#define RBP_MEMORY_CORE_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "base/target_file.h"   /* rbp_warnsink */

/* Bounds on what we accept from a core: far above anything real (the kernel
 * caps a process at vm.max_map_count mappings, 65530 by default), low
 * enough that a corrupt count cannot make us allocate gigabytes. */
#define MAX_PHDRS ((uint64_t)1 << 20)
#define MAX_NOTE_BYTES ((uint64_t)64 << 20)
#define MAX_FILE_MAPS ((uint64_t)1 << 20)
/* struct elf_prstatus on x86-64: the thread's id and its registers (a
 * struct user_regs_struct of 27 words). */
#define PRSTATUS_PID_OFFSET 32
#define PRSTATUS_REG_OFFSET 112
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
    uint64_t regs[27];      /* struct user_regs_struct */
} core_thread_regs;

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
    core_thread_regs *threads;  /* NT_PRSTATUS notes, in the core's order (the current thread first) */
    size_t nthreads, threads_cap;
} core;

/* Opens and parses the core at path; NULL with a reason in err (if given). */
core *rbp_core_open(const char *path, char *err, size_t errlen);
void rbp_core_free(core *c);

#endif
