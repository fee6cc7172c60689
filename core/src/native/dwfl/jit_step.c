/*
 * Stepping a frame of YJIT's code (x86-64), which has no CFI. YJIT's code
 * is entered only from C, by jit_exec in vm.c (inlined into rb_vm_exec
 * and vm_exec_core), as a call of the iseq's entry, and its entry
 * prologue, read per release (2026-11-28, CRuby's source of each tag):
 *
 *  - 3.1 (C YJIT, yjit_codegen.c yjit_entry_prologue): push r13 (REG_CFP),
 *    push r12 (REG_EC), push rbx (REG_SP); no frame pointer;
 *  - 3.3, 3.4 (Rust YJIT, codegen.rs gen_entry_prologue): frame_setup,
 *    which is nothing on x86-64 unless --yjit-perf asks for frame pointers
 *    (then push rbp; mov rbp, rsp; push rbp), then cpush CFP (r13), EC
 *    (r12), SP (rbx).
 *
 * YJIT's calls between Ruby methods are jumps, not machine calls, and its
 * code keeps nothing else on the machine stack but short-lived pushes
 * around some C calls (3.3, 3.4: a hash or array and its alignment twin,
 * 3.4 the stack temps it saves). So above a JIT frame's stack pointer lie
 * those pushes, the three saved registers (and in frame pointer mode the
 * saved rbp and its copy), then the return address into the VM. It is
 * found as the first word from the stack pointer up (at most MAX_SLOTS)
 * that is an address in a known module just after a call instruction:
 * what a VM's call of JIT code leaves, and what no pushed Ruby VALUE or
 * VM pointer is. Frame pointer mode is told by its copy of rbp, which
 * points at the saved rbp just below the return address. rbp, r14 and
 * r15 are not touched by YJIT's code without frame pointers: the caller's
 * are the frame's own.
 */
#include "native/dwfl/jit_step.h"

#include <stdio.h>
#include <string.h>

#define MAX_SLOTS 32

/* The length of an indirect call (FF /2, optionally REX-prefixed)
 * starting at b[0], or 0 if it is not one. */
static size_t indirect_call_len(const uint8_t *b, size_t avail)
{
    size_t n = 0;
    if (avail && (b[0] & 0xf0) == 0x40) n = 1; /* REX */
    if (n + 2 > avail || b[n] != 0xff) return 0;
    uint8_t modrm = b[n + 1], mod = modrm >> 6, reg = (modrm >> 3) & 7, rm = modrm & 7;
    if (reg != 2) return 0;
    size_t len = n + 2;
    if (mod == 3) return len;
    if (rm == 4) { /* SIB */
        if (len + 1 > avail) return 0;
        uint8_t base = b[len] & 7;
        len++;
        if (mod == 0 && base == 5) len += 4;
    } else if (mod == 0 && rm == 5) {
        len += 4; /* rip-relative */
    }
    if (mod == 1) len += 1;
    if (mod == 2) len += 4;
    return len;
}

bool rbp_jit_after_call(const rbp_uw_host *host, uint64_t ret)
{
    uint8_t b[8];
    if (ret < sizeof b || host->read(host->ctx, ret - sizeof b, b, sizeof b) != (long)sizeof b) return false;
    if (b[3] == 0xe8) return true; /* call rel32 */
    for (size_t l = 2; l <= 8; l++)
        if (indirect_call_len(b + 8 - l, l) == l) return true;
    return false;
}

bool rbp_jit_step(const rbp_uw_host *host, rbp_jit_in_module_fn in_module, void *ctx,
                  const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, uint64_t out[RBP_REGS_MAX],
                  rbp_regmask *out_known, char *why, size_t whylen)
{
    memset(out, 0, RBP_REGS_MAX * sizeof *out);
    *out_known = 0;
    if (!((known >> RBP_UW_X86_RSP) & 1)) {
        snprintf(why, whylen, "the stack pointer of YJIT's frame is not known");
        return false;
    }
    uint64_t sp = regs[RBP_UW_X86_RSP], w[MAX_SLOTS];
    long got = host->read(host->ctx, sp, w, sizeof w);
    size_t n = got > 0 ? (size_t)got / 8 : 0, i = 0;
    for (; i < n; i++)
        if (in_module(ctx, w[i]) && rbp_jit_after_call(host, w[i])) break;
    if (i == n) {
        snprintf(why, whylen, "no return address into the VM lies above YJIT's code (its frame at sp 0x%llx, %zu "
                 "words read): the frames below it cannot be unwound", (unsigned long long)sp, n);
        return false;
    }
    uint64_t at = sp + 8 * i;
    out[RBP_UW_X86_RIP] = w[i];
    out[RBP_UW_X86_RSP] = at + 8;
    rbp_regmask k = ((rbp_regmask)1 << RBP_UW_X86_RIP) | ((rbp_regmask)1 << RBP_UW_X86_RSP);
    /* rbp, r14, r15: the caller's (YJIT's code leaves them alone) */
    const int carried[] = {RBP_UW_X86_RBP, RBP_UW_X86_R14, RBP_UW_X86_R15, RBP_UW_X86_RBX, RBP_UW_X86_R12,
                           RBP_UW_X86_R13};
    for (size_t c = 0; c < sizeof carried / sizeof *carried; c++)
        if ((known >> carried[c]) & 1) {
            out[carried[c]] = regs[carried[c]];
            k |= (rbp_regmask)1 << carried[c];
        }
    /* the registers the entry saved, highest first: r13, r12, rbx */
    const int saved[] = {RBP_UW_X86_R13, RBP_UW_X86_R12, RBP_UW_X86_RBX};
    size_t first = i;
    if (i >= 5 && w[i - 2] == at - 8) { /* frame pointer mode: the saved rbp, its copy, then r13... */
        out[RBP_UW_X86_RBP] = w[i - 1];
        k |= (rbp_regmask)1 << RBP_UW_X86_RBP;
        first = i - 2;
    }
    /* in the prologue or the epilogue, registers not (or no longer) saved
     * still hold the caller's values: those carried above */
    for (size_t s = 0; s < 3 && s < first; s++) {
        out[saved[s]] = w[first - 1 - s];
        k |= (rbp_regmask)1 << saved[s];
    }
    *out_known = k;
    return true;
}
