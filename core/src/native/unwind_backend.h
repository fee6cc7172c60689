/*
 * The interface between librbpeek and its unwinder object,
 * librbpeek-unwind.so (native/dwfl/unwind_dwfl.c), the one file that calls
 * elfutils' libdwfl. It is a separate shared object because librbpeek
 * links libdwarf (for layouts), and libdw and libdwarf export functions of
 * the same names (dwarf_attr, dwarf_child, dwarf_tag... 34 of them) with
 * different signatures, which each calls through its own PLT: linked into
 * one object, one library's internal calls would bind to the other's
 * functions. librbpeek loads the unwinder with dlopen(RTLD_LOCAL |
 * RTLD_DEEPBIND) (native/backend.c), so that libdw's lookups stay within
 * its own group and libdwarf's within librbpeek's (docs/native.md has the
 * proof). Only plain C types cross this interface, and only one symbol is
 * exported from the object: rbp_uw_backend.
 *
 * Registers are the target machine's, in the unwinder's order of its
 * register set (memory/regset.h, given to open): DWARF's numbering, the
 * registers libdwfl's backend for that machine takes. On x86-64 the 17
 * rax rdx rcx rbx rsi rdi rbp rsp r8-r15 (0-15) and the return address
 * column (16), which holds rip; on aarch64 x0-x30 (0-30), sp (31) and the
 * pc (32).
 */
#ifndef RBP_NATIVE_UNWIND_BACKEND_H
#define RBP_NATIVE_UNWIND_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/regset.h"

#define RBP_UW_ABI 3
/* x86-64's registers by name, for the one x86-64 rule here: stepping a
 * frame of YJIT's code (jit_step.c). Everything else asks the set. */
#define RBP_UW_X86_RBX 3
#define RBP_UW_X86_RBP 6
#define RBP_UW_X86_RSP 7
#define RBP_UW_X86_R12 12
#define RBP_UW_X86_R13 13
#define RBP_UW_X86_R14 14
#define RBP_UW_X86_R15 15
#define RBP_UW_X86_RIP 16

typedef struct rbp_uw rbp_uw;

#define RBP_UW_MAX_JIT 8

/* How the unwinder reads the target: the session's memory (cached). */
typedef struct rbp_uw_host {
    void *ctx;
    /* Bytes read at addr (a short count: the rest is unreadable), or -1. */
    long (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
} rbp_uw_host;

/* One loaded image: a file mapped at [start, end) (its lowest mapping to
 * its highest), or the vdso, whose image is read from target memory. */
typedef struct rbp_uw_module {
    uint64_t start, end;
    const char *path;          /* the file; NULL: read the image from memory */
    const char *name;          /* as shown: the path, or "[vdso]" */
    const char *problem;       /* NULL, or why the file must not be read (it is not the one
                                * mapped): the module is known, but unwinding stops in it */
} rbp_uw_module;

/* One frame as unwound. pc is the frame's program counter: the current
 * instruction for the innermost frame (and a signal frame's interrupted
 * one: activation 1), the return address for the others (activation 0,
 * so that pc - 1 lies in the call). */
typedef struct rbp_uw_frame {
    uint64_t pc;
    uint64_t sp;
    uint8_t activation;
    uint8_t jit;               /* pc lies in a JIT region (set_jit): YJIT's code, stepped by its own rule */
} rbp_uw_frame;

/* A region of JIT code, [start, end): the VM layer finds it from the VM's
 * own state (vm/native_stack.c). The frames of code there have no CFI:
 * they are stepped by what YJIT guarantees of its frames (unwind_dwfl.c's
 * jit_step), and a pc there is never named by a module. */
typedef struct rbp_uw_range {
    uint64_t start, end;
} rbp_uw_range;

/* What is known of a pc. Strings belong to the backend and stay valid
 * until the next set_modules or close. */
typedef struct rbp_uw_sym {
    int32_t module;            /* index in the last set_modules, or -1 */
    bool have_bias;            /* the module's file was read: ... */
    uint64_t bias;             /* ... pc - bias is the address in the file */
    const char *symbol;        /* from .symtab (the file's or its debug file's), else .dynsym; NULL */
    bool local;                /* the symbol is a file's own (STB_LOCAL: a static function) */
    uint64_t sym_offset;       /* pc - the symbol's address */
    uint64_t func_lo, func_hi; /* the function holding pc: its symbol's extent, else from
                                * .eh_frame_hdr its FDE's start and the next FDE's; 0, 0 when
                                * neither is known */
    const char *file;          /* source file from DWARF's line table, NULL */
    int32_t line;
} rbp_uw_sym;

typedef struct rbp_uw_ops {
    int abi;                   /* RBP_UW_ABI */
    const char *(*version)(void);   /* "elfutils 0.188" */
    /* An unwinder of the target whose registers are regs' (kept: librbpeek's
     * own table, valid while it is loaded). */
    rbp_uw *(*open)(const rbp_uw_host *host, const rbp_regset *regs, char *err, size_t errlen);
    void (*close)(rbp_uw *u);
    /* Replaces the module list (copied). */
    bool (*set_modules)(rbp_uw *u, const rbp_uw_module *mods, size_t n, char *err, size_t errlen);
    /* Unwinds from the registers (known: a bit per register that is
     * known; the stack pointer and pc must be), writing at most max
     * frames, innermost first. *why gets why the walk ended before the
     * outermost frame (its CFI marks the end), or "" when it reached it. */
    size_t (*unwind)(rbp_uw *u, const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, rbp_uw_frame *out, size_t max,
                     char *why, size_t whylen);
    /* Names pc (a frame's, activation as unwound). lines: also its source
     * file and line, which may load DWARF. false: pc is in no module. */
    bool (*symbolize)(rbp_uw *u, uint64_t pc, bool activation, bool lines, rbp_uw_sym *out);
    /* Why a module's file could not be used ("" if it could or was not
     * tried yet). */
    const char *(*module_problem)(rbp_uw *u, int32_t module);
    /* Replaces the JIT regions (copied; at most RBP_UW_MAX_JIT, sorted,
     * not overlapping a module): kept across set_modules. */
    void (*set_jit)(rbp_uw *u, const rbp_uw_range *ranges, size_t n);
} rbp_uw_ops;

/* The one symbol librbpeek-unwind.so exports. */
typedef const rbp_uw_ops *(*rbp_uw_backend_fn)(void);
#define RBP_UW_BACKEND_SYMBOL "rbp_uw_backend"

#endif
