/*
 * The dynamic linker's list of a program's mapped files, walked through a
 * reader of its memory (linkmap.c): for a core without NT_FILE, and
 * for a live program whose debugger lists no mappings (gdb on qemu's gdb
 * stub), from the auxiliary vector's AT_PHDR, AT_EXECFN and AT_PAGESZ.
 */
#ifndef RBP_MEMORY_LINKMAP_H
#define RBP_MEMORY_LINKMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One file-backed mapping: target addresses, and where it starts in the file. */
typedef struct rbp_lm_seg {
    uint64_t start, end, file_ofs;
} rbp_lm_seg;

typedef struct rbp_linkmap_io {
    void *ctx;
    /* bytes read at addr (the leading readable ones), or -1 */
    long (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    /* an image's mappings (its file, under the sysroot if found there); false: out of memory */
    bool (*map)(void *ctx, const char *path, const rbp_lm_seg *segs, size_t n);
    uint16_t machine;   /* the target's ELF machine: another machine's file is not taken */
    const char *who;    /* what is read, in what is said: "the core", "the program" */
    char *said;         /* how far the walk got: "" when every file was found */
    size_t saidlen;
} rbp_linkmap_io;

/* Maps the executable (its path at execfn, its program headers at phdr)
 * and every shared object of the link map whose file is found, under
 * sysroot first, and is the build the dynamic linker loaded. False only
 * when out of memory. */
bool rbp_linkmap_walk(const rbp_linkmap_io *io, const char *sysroot, uint64_t phdr, uint64_t execfn,
                      uint64_t pagesz);

#endif
