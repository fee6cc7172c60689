/*
 * The register tables of the machines rbpeek reads (see regset.h). Each
 * is spelled out from the target's own definitions, not taken from the
 * headers of the machine rbpeek is built on: x86-64's struct
 * user_regs_struct (sys/user.h) and DWARF numbering (the System V
 * x86-64 psABI: rax rdx rcx rbx rsi rdi rbp rsp r8-r15, 16 the return
 * address column, which libdwfl's x86-64 backend takes as rip); aarch64's
 * struct user_pt_regs (x0-x30, sp, pc, pstate) and DWARF numbering (the
 * AArch64 DWARF ABI: x0-x30 are 0-30, sp 31; libdwfl's aarch64 backend
 * takes those 32 and the pc beside them). Both machines' struct
 * elf_prstatus is Linux's generic LP64 one: pr_pid at byte 32, pr_reg at
 * byte 112 (after siginfo's three ints, pr_cursig, two sigset words, four
 * pids and four timevals).
 */
#include "memory/regset.h"

#include <elf.h>

enum { X_R15, X_R14, X_R13, X_R12, X_RBP, X_RBX, X_R11, X_R10, X_R9, X_R8, X_RAX, X_RCX, X_RDX, X_RSI, X_RDI,
       X_ORIG_RAX, X_RIP, X_CS, X_EFLAGS, X_RSP, X_SS, X_FS_BASE, X_GS_BASE, X_DS, X_ES, X_FS, X_GS, X_WORDS };
_Static_assert(X_WORDS == 27, "x86-64's user_regs_struct is 27 words");

static const uint8_t X86_64_FROM[] = {X_RAX, X_RDX, X_RCX, X_RBX, X_RSI, X_RDI, X_RBP, X_RSP, X_R8,
                                      X_R9,  X_R10, X_R11, X_R12, X_R13, X_R14, X_R15, X_RIP};
static const char *const X86_64_NAMES[] = {"rax", "rdx", "rcx", "rbx", "rsi", "rdi", "rbp", "rsp", "r8",
                                           "r9",  "r10", "r11", "r12", "r13", "r14", "r15", "rip"};

/* user_pt_regs: x0-x30 are words 0-30, sp 31, pc 32, pstate 33; the
 * unwinder's registers are the first 33 in that same order. */
static const uint8_t AARCH64_FROM[] = {0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16,
                                       17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};
/* gdb's names, and lldb's where they differ (fp, lr) */
static const char *const AARCH64_NAMES[] = {
    "x0",  "x1",  "x2",  "x3",  "x4",  "x5",  "x6",  "x7",  "x8",  "x9",  "x10",     "x11",     "x12", "x13", "x14",
    "x15", "x16", "x17", "x18", "x19", "x20", "x21", "x22", "x23", "x24", "x25",     "x26",     "x27", "x28",
    "x29|fp", "x30|lr", "sp", "pc"};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
_Static_assert(COUNT(X86_64_FROM) == COUNT(X86_64_NAMES), "a name per x86-64 register");
_Static_assert(COUNT(AARCH64_FROM) == COUNT(AARCH64_NAMES), "a name per aarch64 register");
_Static_assert(COUNT(AARCH64_FROM) <= RBP_REGS_MAX && COUNT(X86_64_FROM) <= RBP_REGS_MAX, "RBP_REGS_MAX");

static const rbp_regset SETS[] = {
    {.machine = EM_X86_64, .nregs = COUNT(X86_64_FROM), .ndwarf = 17, .sp = 7, .pc = 16, .fp = 6, .ra = RBP_NO_REG,
     .prstatus_reg = 112, .prstatus_pid = 32, .prstatus_words = X_WORDS, .from_prstatus = X86_64_FROM,
     .names = X86_64_NAMES},
    {.machine = EM_AARCH64, .nregs = COUNT(AARCH64_FROM), .ndwarf = 32, .sp = 31, .pc = 32, .fp = 29, .ra = 30,
     .prstatus_reg = 112, .prstatus_pid = 32, .prstatus_words = 34, .from_prstatus = AARCH64_FROM,
     .names = AARCH64_NAMES},
};
_Static_assert(34 <= RBP_PRSTATUS_MAX_WORDS, "RBP_PRSTATUS_MAX_WORDS");

const rbp_regset *rbp_regset_of(uint16_t m)
{
    for (size_t i = 0; i < COUNT(SETS); i++)
        if (SETS[i].machine == m) return &SETS[i];
    return NULL;
}

const rbp_regset *rbp_regset_by_prstatus_size(size_t bytes)
{
    for (size_t i = 0; i < COUNT(SETS); i++)
        if ((size_t)SETS[i].prstatus_words * 8 == bytes) return &SETS[i];
    return NULL;
}

void rbp_regset_from_prstatus(const rbp_regset *rs, const uint64_t *words, uint64_t *regs)
{
    for (unsigned i = 0; i < rs->nregs; i++) regs[i] = words[rs->from_prstatus[i]];
    for (unsigned i = rs->nregs; i < RBP_REGS_MAX; i++) regs[i] = 0;
}
