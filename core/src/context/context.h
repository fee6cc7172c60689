/*
 * The context every reader of Ruby state shares: struct rbpeek_session,
 * which callers of the public API hold as an opaque handle. It holds one
 * target's memory source and mapped regions, the facts found at attach
 * (version, layout, VM address, symbol addresses), and the caches that make
 * repeated walks cheap; plus the error reporting (rbp_fail, rbp_warn) and
 * symbol lookup every reader uses. It sits below the readers (vm/ and up)
 * and above what they are built on (memory/, layout/); opening, attaching
 * and closing a session is session.c's job, on top of every layer.
 */
#ifndef RBP_CONTEXT_H
#define RBP_CONTEXT_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "rbpeek.h"
#include "base/scratch.h"
#include "context/release.h"
#include "layout/layout.h"
#include "memory/mem.h"

typedef struct rbp_symcache rbp_symcache;   /* vm/symbolize.c */
typedef struct rbp_idcache rbp_idcache;     /* vm/robject.c */
struct rbp_elfcache;                        /* memory/elf_symbols.c */
struct rbp_ktids;                           /* vm/kernel_tid.c */
struct rbp_native;                          /* native/unwind.c */
struct rbp_hold;                            /* native/hold.c */
struct rbp_core_thread;                     /* memory/mem_core.c */
#define RBP_INSTANTIATING_FNS 5             /* vm/instantiates.c */

struct rbpeek_session {
    char error[1024];
    char warning[512];

    /* Memory source and the regions known to be mapped in the target. */
    rbp_mem *mem;
    rbp_region *regions;
    size_t nregions, regions_cap;

    rbpeek_lookup_fn lookup;
    void *lookup_ctx;

    /* Overrides. */
    uint64_t vm_override;
    char *layout_file;
    bool layout_dwarf;          /* --layout dwarf: the target's own DWARF, not a table */
    char version_override[32];
    char **debug_files;
    size_t ndebug_files;

    /* The target's ELF machine (memory/machine.h; 0 while no source has
     * said) and which source said it ("the core's ELF header"...):
     * context/machine.c records and judges it. */
    uint16_t machine;
    char machine_how[200];

    /* Facts found by attach. */
    bool attached;
    char ruby_version[32];      /* the version in use (--ruby-version, if given) */
    char target_version[32];    /* what the target itself reports, "" if unknown */
    int ver_major, ver_minor, ver_patch;
    rbp_release rel;            /* what the version means for every reader (release.h) */
    rbp_layout layout;
    char layout_source[600];
    char layout_checks[320];    /* what validation verified (validate.c) */
    uint64_t vm_ptr_addr;       /* &ruby_current_vm_ptr, 0 if --vm was given */
    uint64_t vm;
    char vm_source[160];
    uint64_t global_symbols;    /* &ruby_global_symbols, 0 if unknown */
    uint64_t version_addr;      /* &ruby_version, 0 if --ruby-version was used */
    /* How each symbol was found (static strings), for `ruby info`. */
    const char *version_how, *vm_ptr_how, *global_symbols_how;

    /* Caches that survive rbpeek_session_invalidate (keyed by addresses of
     * objects that are immutable while alive, and validated on use). */
    rbp_symcache *symcache;
    rbp_idcache *idcache;
    struct rbp_elfcache *elfcache;  /* per-image .dynsym parse results */

    /* The kernel's view of the target's threads (vm/kernel_tid.c): the
     * live process read directly (use_pid; 0 otherwise), and the caller's
     * list of TIDs, glibc's descriptor offset and the pairs verified. */
    int pid;
    struct rbp_ktids *ktids;
    /* What the core a reader's memory comes from lacks (set_core_file), "" if whole. */
    char core_note[640];

    /* The frame walker's temporaries (vm/frames.c), kept from walk to walk
     * so that a sample allocates none of them: the control frames as read
     * and as decoded, the frames being built, the value stack it pins. */
    rbp_scratch walk_raw, walk_cframes, walk_pending, walk_values;

    /* Native stacks (vm/native_stack.c over native/): the target's
     * unwinder, made on first use and kept (its modules' CFI and symbols
     * stay loaded); whether the regions changed since its module list was
     * made; where threads' registers come from: a debugger's callback, a
     * core's notes (read on first use), or ptrace stops of a live pid
     * (this session's hold, or the tracer's). */
    struct rbp_native *native;
    bool native_stale;
    rbp_scratch native_frames, native_extra;   /* an unwind's frames, kept from walk to walk */
    rbpeek_regs_fn regs_fn;
    void *regs_ctx;
    char register_names[400];           /* rbpeek_session_register_names' answer */
    int64_t *thread_ids;                /* the debugger's TIDs (rbpeek_session_set_thread_ids) */
    size_t nthread_ids;
    struct rbp_hold *hold;
    char *core_path;                    /* use_core's file, NULL otherwise */
    char *sysroot;                      /* where a core's files are looked for first (set_sysroot), or NULL */
    bool debugger_files;                /* the caller (a debugger) named mapped files (add_region) */
    struct rbp_core_thread *core_threads;
    size_t ncore_threads;
    bool core_threads_read;
    uint64_t vm_exec_addr;              /* rb_vm_exec, where the VM runs Ruby frames (0: not found yet) */
    uint64_t jit_lo[8], jit_hi[8];      /* YJIT's code regions found (vm/native_jit.c), given to the */
    size_t njit;                        /* unwinder */
    uint64_t gc_objspace;               /* the objspace (vm/gc_state.c): set at boot, never moved; 0 unread */
    bool vm_exec_looked_up;
    uint64_t class_Class;               /* rb_cClass's value (vm/instantiates.c; 0: not found) */
    uint64_t instantiating_fn[RBP_INSTANTIATING_FNS]; /* C functions that make their receiver's
                                        * instance (vm/instantiates.c; 0: not found) */
    bool instantiates_looked_up;
};

/* Records a one-line error and returns status. */
rbpeek_status rbp_fail(rbpeek_session *s, rbpeek_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void rbp_warn(rbpeek_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A sink onto the session's warning line, for the layers below that take
 * one (memory/: files a core names that are not regular files). A line
 * already on the warning line is not added again. */
rbp_warnsink rbp_session_warnsink(rbpeek_session *s);

/* The target's machine (context/machine.c): a source (how: "the core's
 * ELF header", "the debugger (aarch64)"...) says it is m, which is kept
 * unless a machine rbpeek does not read was said before; returns the
 * verdict. rbp_machine_verdict: RBPEEK_OK, or RBPEEK_ERR_UNSUPPORTED with
 * the one-line refusal of a machine rbpeek does not read. The machine the
 * layout must be made for: the target's, x86-64 while none is known. */
rbpeek_status rbp_machine_establish(rbpeek_session *s, uint16_t m, const char *how);
rbpeek_status rbp_machine_verdict(rbpeek_session *s);
uint16_t rbp_machine_of_target(const rbpeek_session *s);

/* The label quoting of the target's backtraces. */
static inline const rbp_label_quotes *rbp_release_quotes(const rbpeek_session *s) { return &s->rel.frames.quotes; }

/* Symbol resolution: the ELF images mapped in the target (their dynamic
 * symbols in memory, then .symtab on disk: memory/elf_symbols.c,
 * memory/elf_symtab.c), then the caller's lookup (the debugger's). Sets
 * *how to a short description. rbp_symbol_lookup_in asks only the sources
 * named. */
enum { RBP_SYM_IMAGES = 1, RBP_SYM_DEBUGGER = 2 };
bool rbp_symbol_lookup_in(rbpeek_session *s, const char *name, uint64_t *addr, const char **how, unsigned from);
bool rbp_symbol_lookup(rbpeek_session *s, const char *name, uint64_t *addr, const char **how);

#endif
