/*
 * A machine's registers, as rbpeek meets them: the general registers a
 * core's NT_PRSTATUS note holds (and PTRACE_GETREGSET fills: the same
 * struct), the registers the native unwinder takes (DWARF's numbering of
 * the machine, as libdwfl's backend for it does) and the names debuggers
 * give them. One table per machine rbpeek reads (regset.c), chosen by the
 * target's ELF machine, never by the machine rbpeek runs on: the core
 * reader, the unwinder and the debuggers' register callbacks all ask it.
 */
#ifndef RBP_MEMORY_REGSET_H
#define RBP_MEMORY_REGSET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most registers any machine's unwinder takes (aarch64: x0-x30, sp,
 * pc), and the most words of any NT_PRSTATUS register set read. */
#define RBP_REGS_MAX 33
#define RBP_PRSTATUS_MAX_WORDS 34
/* No such register (rbp_regset.ra of x86-64). */
#define RBP_NO_REG 0xff
/* A set of registers known: bit i for the unwinder's register i. */
typedef uint64_t rbp_regmask;

typedef struct rbp_regset {
    uint16_t machine;              /* ELF machine */
    uint8_t nregs;                 /* the unwinder's registers: 0 .. nregs - 1 */
    uint8_t ndwarf;                /* registers 0 .. ndwarf - 1 are DWARF's of the same numbers */
    uint8_t sp, pc;                /* the stack pointer's and the program counter's */
    uint8_t fp;                    /* the frame pointer's (rbp, x29) */
    uint8_t ra;                    /* the return address's at a function's entry (aarch64's link
                                    * register, x30), or RBP_NO_REG where it is on the stack (x86-64) */
    size_t prstatus_reg;           /* where pr_reg lies in struct elf_prstatus */
    size_t prstatus_pid;           /* where pr_pid (the thread's id) lies in it */
    uint8_t prstatus_words;        /* pr_reg's 64-bit words */
    const uint8_t *from_prstatus;  /* register i is pr_reg's word from_prstatus[i] */
    const char *const *names;      /* register i as debuggers name it; "x29|fp": either */
} rbp_regset;

/* The registers of machine m; NULL for one rbpeek has no table of. */
const rbp_regset *rbp_regset_of(uint16_t m);
/* The register set whose NT_PRSTATUS register words are bytes long (what
 * PTRACE_GETREGSET says of a live thread's): NULL when none is. */
const rbp_regset *rbp_regset_by_prstatus_size(size_t bytes);
/* Every register of the set. */
static inline rbp_regmask rbp_regset_all(const rbp_regset *rs)
{
    return rs->nregs >= 64 ? ~(rbp_regmask)0 : (((rbp_regmask)1 << rs->nregs) - 1);
}
/* regs (RBP_REGS_MAX words, the unwinder's order) from pr_reg's words. */
void rbp_regset_from_prstatus(const rbp_regset *rs, const uint64_t *words, uint64_t *regs);

#endif
