/*
 * A thread's registers in the unwinder's order (DWARF's x86-64 numbering,
 * native/unwind_backend.h), from the kernel's struct user_regs_struct,
 * which is what PTRACE_GETREGS fills and what a core's NT_PRSTATUS note
 * holds (memory/mem_core.c reads those).
 */
#define _GNU_SOURCE
#include "native/native.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

/* struct user_regs_struct, word by word (sys/user.h). */
enum {
    U_R15, U_R14, U_R13, U_R12, U_RBP, U_RBX, U_R11, U_R10, U_R9, U_R8, U_RAX, U_RCX, U_RDX, U_RSI, U_RDI,
    U_ORIG_RAX, U_RIP, U_CS, U_EFLAGS, U_RSP, U_SS, U_FS_BASE, U_GS_BASE, U_DS, U_ES, U_FS, U_GS, U_WORDS
};

_Static_assert(sizeof(struct user_regs_struct) == U_WORDS * 8, "struct user_regs_struct is 27 words");

void rbp_native_regs_from_user(const uint64_t user[27], uint64_t regs[RBP_UW_NREGS])
{
    static const int from[RBP_UW_NREGS] = {U_RAX, U_RDX, U_RCX, U_RBX, U_RSI, U_RDI, U_RBP, U_RSP, U_R8,
                                           U_R9,  U_R10, U_R11, U_R12, U_R13, U_R14, U_R15, U_RIP};
    for (int i = 0; i < RBP_UW_NREGS; i++) regs[i] = user[from[i]];
}

bool rbp_native_regs_ptrace(pid_t tid, uint64_t regs[RBP_UW_NREGS], char *err, size_t errlen)
{
    struct user_regs_struct u;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &u) != 0) {
        snprintf(err, errlen, "cannot read the registers of thread %d (%s): it must be stopped by rbpeek (ptrace)",
                 (int)tid, strerror(errno));
        return false;
    }
    uint64_t words[U_WORDS];
    memcpy(words, &u, sizeof words);
    rbp_native_regs_from_user(words, regs);
    return true;
}
