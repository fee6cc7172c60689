/*
 * The native layer: a target's native (machine) stacks, from registers and
 * memory, with the names of their functions. It knows nothing of Ruby; the
 * merge with a thread's Ruby frames is vm/native_merge.c's job.
 *
 *  - backend.c loads the unwinder object (elfutils' libdwfl, behind
 *    native/unwind_backend.h);
 *  - modules.c turns the target's mapped regions into its loaded images;
 *  - unwind.c is a target's unwinder: the module list, the walk (bounded),
 *    and a cache of what is known of each pc (symbol, function range,
 *    source line);
 *  - regs.c gets a live thread's registers from ptrace (a thread stopped
 *    by the calling thread); a core's come from its NT_PRSTATUS notes
 *    (memory/), a debugger's through the session;
 *  - hold.c stops a live process's threads for the command line;
 *  - frame_cache.c keeps a sampler's unwinds of threads that did not run
 *    from one sample to the next.
 */
#ifndef RBP_NATIVE_H
#define RBP_NATIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rbpeek.h"
#include "memory/mem.h"
#include "native/unwind_backend.h"

/* The most native frames one walk keeps: far deeper than any real C stack
 * between two Ruby frames (a thread's default stack is 8 MiB; 1 MiB for
 * Ruby threads' own), low enough to bound a walk of garbage. */
#define RBP_NATIVE_MAX_FRAMES 4096

/* backend.c: the unwinder's functions, loaded once per process; NULL with
 * a message (one line, what to do) when it cannot be loaded. */
const rbp_uw_ops *rbp_native_backend(char *err, size_t errlen);
/* Where it was loaded from ("" if not loaded). */
const char *rbp_native_backend_path(void);

/* modules.c: the images among regions: one per file whose ELF header is
 * mapped (a region at file offset 0), spanning its mappings, plus the
 * vdso; sorted and non-overlapping. Reads mem to tell ELF files from
 * other mapped files. pid > 0: a live process, whose files deleted since
 * they were mapped are read through /proc/PID/map_files. Returns the
 * count; *out is malloc'd (free with rbp_native_modules_free). */
size_t rbp_native_modules(rbp_mem *mem, const rbp_region *regions, size_t nregions, int pid, rbp_uw_module **out);
void rbp_native_modules_free(rbp_uw_module *mods, size_t n);

/* unwind.c: a target's unwinder. */
typedef struct rbp_native rbp_native;

/* An unwinder of the target whose registers are rs's (its machine's). */
rbp_native *rbp_native_new(rbp_mem *mem, const rbp_regset *rs, char *err, size_t errlen);
/* The target's register set. */
const rbp_regset *rbp_native_regset(const rbp_native *n);
void rbp_native_free(rbp_native *n);
/* The target is the live process pid (its deleted files can still be
 * read): call before rbp_native_set_regions. */
void rbp_native_set_pid(rbp_native *n, int pid);
/* (Re)builds the module list from the target's regions; the cache of
 * pcs is dropped. */
bool rbp_native_set_regions(rbp_native *n, const rbp_region *regions, size_t nregions, char *err, size_t errlen);
/* The number of modules known. */
size_t rbp_native_module_count(const rbp_native *n);
/* Moves whenever what names the frames changes (the module list, the JIT
 * regions): frames unwound under another generation are not to be used. */
uint64_t rbp_native_generation(const rbp_native *n);

/* What is known of a frame beyond what rbpeek_native_frame shows: the
 * function holding its pc, [lo, hi): lo is its first address (its
 * symbol's, else its FDE's in .eh_frame_hdr), hi its symbol's end or the
 * next FDE's start (0, 0 if unknown); and whether its symbol is a file's
 * own (static). */
typedef struct rbp_native_extra {
    uint64_t lo, hi;
    bool local;
    bool jit;               /* the pc lies in JIT code (rbp_native_set_jit): no module names it */
} rbp_native_extra;

/* Unwinds from regs (known: a bit per register known), at most max frames
 * (<= RBP_NATIVE_MAX_FRAMES) into out (and extra, if given), innermost
 * first, each named (and with its source line if lines). Returns the
 * count; *cut gets why the walk stopped before the outermost frame, ""
 * when it reached it. The frames' strings belong to n and stay valid
 * until its regions change or it is freed. */
size_t rbp_native_unwind(rbp_native *n, const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, size_t max,
                         bool lines, rbpeek_native_frame *out, rbp_native_extra *extra, char *cut, size_t cutlen);

/* The regions of JIT code (at most RBP_UW_MAX_JIT), as the VM layer finds
 * them from the VM's state: a frame there is stepped by YJIT's rules and
 * named by no module. Replaces the last ones; kept across set_regions. */
void rbp_native_set_jit(rbp_native *n, const rbp_uw_range *ranges, size_t count);
bool rbp_native_in_jit(const rbp_native *n, uint64_t addr);

/* What n knows of one pc, as rbp_native_unwind names frames. */
void rbp_native_describe(rbp_native *n, uint64_t pc, bool activation, bool lines, rbpeek_native_frame *out,
                         rbp_native_extra *extra);

/* frame_cache.c: threads' unwound frames kept from one sample to the next
 * while each thread's stamp (its source's proof that it has not run: its
 * count of runs on a CPU and its time there) and the unwinder's generation
 * stay those they were kept with. Bounded: at most RBP_FRAME_CACHE_THREADS
 * threads of at most RBP_FRAME_CACHE_FRAMES frames (a parked Ruby thread
 * has some tens); a deeper stack or one more thread is not kept. */
#define RBP_FRAME_CACHE_THREADS 256
#define RBP_FRAME_CACHE_FRAMES 256
typedef struct rbp_frame_cache rbp_frame_cache;
rbp_frame_cache *rbp_frame_cache_new(void);
void rbp_frame_cache_free(rbp_frame_cache *c);
/* Thread key's frames (borrowed until the next call), when kept under the
 * same generation and stamp; false otherwise, and a thread kept under
 * another is dropped. */
bool rbp_frame_cache_get(rbp_frame_cache *c, uint64_t gen, int64_t key, const uint64_t stamp[2],
                         const rbpeek_native_frame **frames, const rbp_native_extra **extra, size_t *n);
/* Keeps a copy of thread key's n frames (their strings are the unwinder's,
 * valid for its generation gen), replacing what was kept; false when not
 * kept (none, too deep, the cache full, out of memory). */
bool rbp_frame_cache_put(rbp_frame_cache *c, uint64_t gen, int64_t key, const uint64_t stamp[2],
                         const rbpeek_native_frame *frames, const rbp_native_extra *extra, size_t n);
/* Ends a sample: drops the threads neither found nor kept since the last
 * sweep (they exited, or were not read from a sleep). */
void rbp_frame_cache_sweep(rbp_frame_cache *c);
/* The threads' stacks found since the cache was made; the threads kept. */
uint64_t rbp_frame_cache_hits(const rbp_frame_cache *c);
size_t rbp_frame_cache_count(const rbp_frame_cache *c);

/* regs.c: the registers of tid (PTRACE_GETREGSET, NT_PRSTATUS) in the
 * unwinder's order of want, the target's set; tid must be in a ptrace
 * stop of the calling thread. False with the reason in err, also for a
 * thread whose registers are another machine's than want's (an emulator
 * running the target). */
bool rbp_native_regs_ptrace(pid_t tid, const rbp_regset *want, uint64_t regs[RBP_REGS_MAX], char *err,
                            size_t errlen);

/* hold.c: every thread of a live process stopped by the calling thread
 * (PTRACE_SEIZE, PTRACE_INTERRUPT), for reading registers; released
 * (detached, running again) by rbp_hold_release, which must be called by
 * the same thread. A hold of a process that exits meanwhile ends quietly. */
typedef struct rbp_hold rbp_hold;
rbp_hold *rbp_hold_take(pid_t pid, char *err, size_t errlen);
bool rbp_hold_has(const rbp_hold *h, pid_t tid);
void rbp_hold_release(rbp_hold *h);

#endif
