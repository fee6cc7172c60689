/*
 * Whether this machine's hardware watchpoints work (rbpeek_watch_probe):
 * `ruby allocs` samples allocations by watching, with a debug register, the
 * heap slot that a chosen allocation will take (docs/allocations.md), which
 * writes nothing into the target. Before it relies on that, it asks the
 * kernel for a write watchpoint on a word of the calling thread's own stack
 * (perf_event_open, PERF_TYPE_BREAKPOINT, counting only: no signal, no
 * sample, nothing in any other thread or process), writes the word a few
 * times and reads the count back.
 *
 * Why a probe and not just perf_event_open's return code: a virtual machine
 * may accept the registers and never trap. On the PVM guest this project is
 * developed on (kernel 6.18, "kvm-pvm" in dmesg) the kernel accepts both
 * write and execute breakpoints, through perf_event_open and through
 * ptrace's PTRACE_POKEUSER into u_debugreg, and neither ever fires (gdb's
 * `watch` and `hbreak` are silently ignored there too). Only a write that
 * was counted proves the mechanism.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rbpeek.h"

#define PROBE_WRITES 4

static int paranoid_level(void)
{
    int level = -100;
    FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "r");
    if (f) {
        if (fscanf(f, "%d", &level) != 1) level = -100;
        fclose(f);
    }
    return level;
}

/* Writes the watched word through a volatile pointer, out of line, so the
 * compiler keeps every store. */
static __attribute__((noinline)) void poke(volatile uint64_t *w)
{
    for (uint64_t i = 1; i <= PROBE_WRITES; i++) *w = i;
}

int rbpeek_watch_probe(char *msg, size_t msgsize)
{
    char scratch[8];
    if (!msg || msgsize == 0) {
        msg = scratch;
        msgsize = sizeof scratch;
    }
    volatile uint64_t word = 0;
    struct perf_event_attr a;
    memset(&a, 0, sizeof a);
    a.size = sizeof a;
    a.type = PERF_TYPE_BREAKPOINT;
    a.bp_type = HW_BREAKPOINT_W;
    a.bp_addr = (uint64_t)(uintptr_t)&word;
    a.bp_len = HW_BREAKPOINT_LEN_8;
    a.exclude_kernel = 1;
    a.exclude_hv = 1;
    /* This thread only (pid 0, any CPU); counting mode: no signal, no buffer. */
    int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOSPC) {
            snprintf(msg, msgsize, "no free debug register for a hardware watchpoint (all four are in use)");
            return RBPEEK_WATCH_NO_REGISTER;
        }
        if (e == EACCES || e == EPERM) {
            snprintf(msg, msgsize,
                     "the kernel refuses perf_event_open breakpoints here: %s (perf_event_paranoid is %d; "
                     "a seccomp filter can refuse it too)",
                     strerror(e), paranoid_level());
            return RBPEEK_WATCH_FORBIDDEN;
        }
        snprintf(msg, msgsize, "this kernel has no hardware breakpoint events (perf_event_open: %s)", strerror(e));
        return RBPEEK_WATCH_UNSUPPORTED;
    }
    poke(&word);
    uint64_t count = 0;
    ssize_t got = read(fd, &count, sizeof count);
    close(fd);
    if (got != (ssize_t)sizeof count) {
        snprintf(msg, msgsize, "this kernel has no hardware breakpoint events (the count could not be read)");
        return RBPEEK_WATCH_UNSUPPORTED;
    }
    if (count == 0) {
        snprintf(msg, msgsize,
                 "hardware watchpoints do not fire on this machine: the kernel accepted a write watchpoint, but "
                 "%d writes to the watched word never triggered it (a virtual machine that does not pass debug "
                 "registers through)",
                 PROBE_WRITES);
        return RBPEEK_WATCH_NEVER_FIRES;
    }
    snprintf(msg, msgsize, "hardware watchpoints work here (%llu of %d watched writes trapped)",
             (unsigned long long)count, PROBE_WRITES);
    return RBPEEK_WATCH_FIRES;
}
