/*
 * A thread's registers in the unwinder's order (DWARF's x86-64 numbering,
 * native/unwind_backend.h), from the kernel's general registers: the
 * NT_PRSTATUS register set, which PTRACE_GETREGSET fills and a core's
 * NT_PRSTATUS note holds (memory/mem_core.c reads those). Its layout is
 * the thread's machine's, told by its size: x86-64's struct
 * user_regs_struct (27 words) is the one the unwinder takes. Another
 * machine's set (an aarch64 thread, where rbpeek runs on aarch64) is
 * refused in one line, never read as x86-64's.
 */
#define _GNU_SOURCE
#include "native/native.h"

#include <elf.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "memory/machine.h"

/* x86-64's struct user_regs_struct, word by word (its sys/user.h): the
 * target's layout, so spelled out here rather than taken from the
 * headers of the machine rbpeek is built for. */
enum {
    U_R15, U_R14, U_R13, U_R12, U_RBP, U_RBX, U_R11, U_R10, U_R9, U_R8, U_RAX, U_RCX, U_RDX, U_RSI, U_RDI,
    U_ORIG_RAX, U_RIP, U_CS, U_EFLAGS, U_RSP, U_SS, U_FS_BASE, U_GS_BASE, U_DS, U_ES, U_FS, U_GS, U_WORDS
};
_Static_assert(U_WORDS == 27, "x86-64's user_regs_struct is 27 words");

/* The NT_PRSTATUS register sets the kernel gives, by size, to name the
 * machine of a set the unwinder does not take: aarch64's struct
 * user_pt_regs (x0-x30, sp, pc, pstate), i386's user_regs_struct. */
static const struct {
    size_t bytes;
    uint16_t machine;
} SETS[] = {{U_WORDS * 8, EM_X86_64}, {34 * 8, EM_AARCH64}, {17 * 4, EM_386}};

void rbp_native_regs_from_user(const uint64_t user[27], uint64_t regs[RBP_UW_NREGS])
{
    static const int from[RBP_UW_NREGS] = {U_RAX, U_RDX, U_RCX, U_RBX, U_RSI, U_RDI, U_RBP, U_RSP, U_R8,
                                           U_R9,  U_R10, U_R11, U_R12, U_R13, U_R14, U_R15, U_RIP};
    for (int i = 0; i < RBP_UW_NREGS; i++) regs[i] = user[from[i]];
}

static const char *set_machine(size_t bytes)
{
    for (size_t i = 0; i < sizeof SETS / sizeof SETS[0]; i++)
        if (SETS[i].bytes == bytes) return rbp_machine_name(SETS[i].machine);
    return NULL;
}

bool rbp_native_regs_ptrace(pid_t tid, uint64_t regs[RBP_UW_NREGS], char *err, size_t errlen)
{
    /* Room for any machine's set: the kernel writes at most iov_len bytes
     * and says how many it wrote. */
    uint64_t words[64];
    struct iovec iov = {.iov_base = words, .iov_len = sizeof words};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_PRSTATUS, &iov) != 0) {
        snprintf(err, errlen, "cannot read the registers of thread %d (%s): it must be stopped by rbpeek (ptrace)",
                 (int)tid, strerror(errno));
        return false;
    }
    if (iov.iov_len != U_WORDS * 8) {
        const char *m = set_machine(iov.iov_len);
        if (m) snprintf(err, errlen, "native unwinding of an %s process is not supported yet (thread %d)", m, (int)tid);
        else snprintf(err, errlen, "thread %d has a register set of %zu bytes, not x86-64's: native unwinding of "
                                   "it is not supported", (int)tid, (size_t)iov.iov_len);
        return false;
    }
    rbp_native_regs_from_user(words, regs);
    return true;
}
