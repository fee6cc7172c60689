/*
 * The state of an unwinder session (struct rbp_uw) and of its modules,
 * shared by the files of native/dwfl/ that make librbpeek-unwind.so:
 * unwind_dwfl.c (the session, the walk, symbols) and dwfl_files.c (the
 * files libdwfl reads for a module). Only these files include libdwfl.h.
 */
#ifndef RBPEEK_NATIVE_DWFL_UW_STATE_H
#define RBPEEK_NATIVE_DWFL_UW_STATE_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "native/unwind_backend.h"

#define MAX_VDSO_BYTES (1u << 20)
#define MAX_BUILD_ID 64

typedef struct uw_module {
    uint64_t start, end;
    char *path;             /* NULL: image in target memory */
    char *name;
    uint8_t *image;         /* the vdso's bytes, once read */
    char problem[200];
} uw_module;

struct rbp_uw {
    rbp_uw_host host;
    const rbp_regset *rs;   /* the target's registers: which are DWARF's, the sp, the pc */
    Dwfl *dwfl;
    Elf *arch_elf;          /* tells dwfl_attach_state the architecture */
    uint8_t arch_image[64];
    bool attached;
    uw_module *mods;        /* sorted by start */
    size_t nmods;
    /* The walk in progress (set_initial_registers reads these), and the
     * first read of target memory that failed since its last frame. */
    const uint64_t *regs;
    rbp_regmask known;
    bool read_failed;
    uint64_t failed_at;
    rbp_uw_range jit[RBP_UW_MAX_JIT];   /* JIT regions, sorted */
    size_t njit;
};

/* The module mapped at start (NULL: none). Here, inline, as dwfl_files.c
 * asks it too: the two files would otherwise each call the other. */
static inline uw_module *rbp_uw_module_at(rbp_uw *u, uint64_t start)
{
    size_t lo = 0, hi = u->nmods;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->mods[mid].start < start) lo = mid + 1;
        else hi = mid;
    }
    return lo < u->nmods && u->mods[lo].start == start ? &u->mods[lo] : NULL;
}

/* len bytes of target memory at addr, all of them or false. */
static inline bool rbp_uw_read_exact(rbp_uw *u, uint64_t addr, void *buf, size_t len)
{
    return u->host.read(u->host.ctx, addr, buf, len) == (long)len;
}
/* The build ID of the image mapped at start, from target memory (its
 * length, 0 if none), and where it lies. */
size_t rbp_uw_memory_build_id(rbp_uw *u, uint64_t start, uint8_t *id, uint64_t *id_vaddr);
/* libdwfl's callbacks that find a module's ELF file and its debug info. */
extern const Dwfl_Callbacks rbp_uw_callbacks;

#endif
