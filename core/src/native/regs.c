/*
 * A live thread's registers in the unwinder's order (memory/regset.h),
 * from the kernel's general registers: the NT_PRSTATUS register set,
 * which PTRACE_GETREGSET fills (a core's NT_PRSTATUS note holds the same
 * struct; memory/ reads those). The set is the thread's machine's, told
 * by its size; one that is not the target's machine (an emulator's own
 * registers, not its guest's) is refused in one line, never read as the
 * target's.
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

bool rbp_native_regs_ptrace(pid_t tid, const rbp_regset *want, uint64_t regs[RBP_REGS_MAX], char *err, size_t errlen)
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
    const rbp_regset *got = rbp_regset_by_prstatus_size(iov.iov_len);
    if (!want || got != want) {
        const char *is = got ? rbp_machine_name(got->machine) : NULL;
        const char *target = want ? rbp_machine_name(want->machine) : NULL;
        if (is)
            snprintf(err, errlen, "thread %d has %s's registers, the target is %s: its registers are not the "
                     "target's (an emulator's?)", (int)tid, is, target ? target : "another machine");
        else
            snprintf(err, errlen, "thread %d has a register set of %zu bytes, which rbpeek does not read",
                     (int)tid, (size_t)iov.iov_len);
        return false;
    }
    rbp_regset_from_prstatus(want, words, regs);
    return true;
}
