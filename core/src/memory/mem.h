/*
 * Memory source and read cache. Everything rbpeek knows about a target comes
 * through here. A source is a read callback (a debugger's process handle, a
 * live /proc/PID/mem, or a core file); on top of it sits a page cache,
 * because stack walking re-reads the same few pages (control frames are
 * contiguous; iseqs and strings repeat across frames) and each source read
 * may be a syscall or a call back into a debugger's Python.
 *
 * The cache is direct-mapped, keyed by 4 KiB page, and is dropped in O(1) by
 * bumping a generation counter: the sampler invalidates after every resume.
 * Large reads (whole heap pages) bypass it so they cost one source call.
 */
#ifndef RBP_MEM_H
#define RBP_MEM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbpeek.h"
#include "base/target_file.h"
#include "memory/regset.h"

/* A memory source: read returns bytes read (short = rest unreadable) or -1.
 * read_many (optional) reads n ranges of len bytes at addrs[i] into bufs[i]
 * in as few system calls as it can, setting got[i] to the bytes read, or -1
 * where that range was not read (the caller reads it with read if needed). */
typedef struct rbp_source {
    long (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
    void (*read_many)(void *ctx, const uint64_t *addrs, uint8_t *const *bufs, size_t n, size_t len, long *got);
    void (*close)(void *ctx);       /* may be NULL */
    /* Where the source says what it refused (a file a core names that is
     * no regular file); may be NULL. rbp_mem_set_warn calls it. */
    void (*set_warn)(void *ctx, rbp_warnsink sink);
    /* A standing fact about the source worth saying to whoever reads
     * through it (a truncated core: what is missing), or NULL; may be NULL. */
    const char *(*note)(void *ctx);
    void *ctx;
    const char *kind;               /* "callback", "proc", "core" */
} rbp_source;

typedef struct rbp_mem rbp_mem;

/* Takes ownership of src (its close is called by rbp_mem_free). */
rbp_mem *rbp_mem_new(rbp_source src);
void rbp_mem_free(rbp_mem *m);
const char *rbp_mem_kind(const rbp_mem *m);
/* Where the source and the readers of the target's files (elf_symbols.c)
 * say what they refused: the session's warning line. */
void rbp_mem_set_warn(rbp_mem *m, rbp_warnsink sink);
const rbp_warnsink *rbp_mem_warn(const rbp_mem *m);
/* The source's standing note (rbp_source.note), or NULL. */
const char *rbp_mem_note(const rbp_mem *m);
/* A second source (taken over: closed with m), for what the first cannot
 * read; first: src is asked first, and the source m had for what src
 * cannot read. A debugger that could not map a core's files (gdb on a core
 * without NT_FILE reads their pages as zeros) has rbpeek's own reader of
 * the core first, which maps them, and its own reads after. */
void rbp_mem_add_source(rbp_mem *m, rbp_source src, bool first);

/* Reads exactly len bytes; false if any byte is unreadable. */
bool rbp_mem_read(rbp_mem *m, uint64_t addr, void *buf, size_t len);
/* Reads up to len bytes; returns how many leading bytes were readable. */
size_t rbp_mem_read_partial(rbp_mem *m, uint64_t addr, void *buf, size_t len);
bool rbp_mem_u64(rbp_mem *m, uint64_t addr, uint64_t *out);
bool rbp_mem_u32(rbp_mem *m, uint64_t addr, uint32_t *out);
/* Reads a NUL-terminated string of at most max-1 bytes into buf. */
bool rbp_mem_cstr(rbp_mem *m, uint64_t addr, char *buf, size_t max);

void rbp_mem_invalidate(rbp_mem *m);
/* Drops the cache like rbp_mem_invalidate, but within one walk: the pages
 * used before and after both count for the next rbp_mem_prefetch. */
void rbp_mem_refresh(rbp_mem *m);

/* After an invalidation: reads, in one batch where the source can, the
 * pages the generation before it used, on the bet that the next walk needs
 * the same ones (a sampler's walks do: the same threads, stacks and iseqs).
 * The pages are fetched at one moment: use them as a consistent picture only
 * while the target is stopped (the nonblocking sampler checks what it read
 * against direct reads instead). Called again after an rbp_mem_refresh, it
 * fetches the same pages again. A no-op for sources without read_many. */
void rbp_mem_prefetch(rbp_mem *m);
/* A fence inside one generation of the cache, for a sampler that fetched
 * its pages while the target ran and then stopped a thread: starts a new
 * generation in which the pages of the one before stay usable, except for
 * strict reads (rbp_mem_set_strict), which are served only from pages
 * fetched after the fence. It fetches at once, in one batch, the pages the
 * strict reads used before the last invalidation (the stopped thread's own
 * walk, the last time). Pages used on either side count for the next
 * rbp_mem_prefetch; rbp_mem_invalidate or rbp_mem_refresh ends the fence. */
void rbp_mem_fence(rbp_mem *m);
/* Strict mode (after rbp_mem_fence): reads use no page fetched before the
 * fence. Returns the previous mode. */
bool rbp_mem_set_strict(rbp_mem *m, bool on);
/* Pins a caller-owned copy of [addr, addr+len) so reads inside it are served
 * from it without touching the source or the page cache: the frame walker
 * fetches a thread's whole used VM value stack in one read and pins it for
 * the walk. Pass len 0 to unpin. The buffer must outlive the pin. */
void rbp_mem_pin(rbp_mem *m, uint64_t addr, const void *data, size_t len);
/* Direct mode: reads go to the source, neither served from nor kept in the
 * page cache, and not counted as pages the next prefetch should fetch. The
 * sampler reads a few words of a running target this way (who holds the
 * GVL) without disturbing the cache of the walk that follows. Returns the
 * previous mode. */
bool rbp_mem_set_direct(rbp_mem *m, bool on);
void rbp_mem_stats(const rbp_mem *m, rbpeek_read_stats *out);
void rbp_mem_reset_stats(rbp_mem *m);

/* Backends. Each returns false with a message in err on failure. */
bool rbp_source_proc(int pid, rbp_source *out, char *err, size_t errlen);
bool rbp_source_core(const char *core_path, rbp_source *out, char *err, size_t errlen);
/* The same, with the files the core names looked for under sysroot first
 * (NULL: as named), as gdb's "set sysroot" does for another machine's. */
bool rbp_source_core_at(const char *core_path, const char *sysroot, rbp_source *out, char *err, size_t errlen);
/* Whether the core source src names its mapped files by the dynamic
 * linker's list (it has no NT_FILE note: qemu-user's cores), not by the
 * kernel's note. */
bool rbp_source_core_by_linkmap(const rbp_source *src);

/* A mapped region of the target, as a backend or the caller reports it. */
typedef struct rbp_region {
    uint64_t start, end, file_offset;
    char *path;                     /* malloc'd, may be NULL */
} rbp_region;

/* The regions a proc or core source knows of (from /proc/PID/maps, or the
 * core's NT_FILE note or link map: sysroot as for rbp_source_core_at).
 * Returns a malloc'd array (caller frees it and each path) and its
 * length, or 0 with *out NULL. */
size_t rbp_source_proc_regions(int pid, rbp_region **out);
size_t rbp_source_core_regions(const char *core_path, rbp_region **out);
size_t rbp_source_core_regions_at(const char *core_path, const char *sysroot, rbp_region **out);

/* The threads a core records (its NT_PRSTATUS notes, the thread current
 * at the dump first), each with its registers in the unwinder's order of
 * the core's machine (memory/regset.h). Returns the count; *out is
 * malloc'd. */
typedef struct rbp_core_thread {
    int64_t tid;
    uint64_t regs[RBP_REGS_MAX];
    rbp_regmask known;
} rbp_core_thread;
size_t rbp_source_core_threads(const char *core_path, rbp_core_thread **out);

#endif
