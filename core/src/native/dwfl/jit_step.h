/*
 * One step of the unwind through a frame of YJIT's code, for the
 * unwinder (unwind_dwfl.c): JIT code has no CFI, so libdwfl cannot step
 * it; what YJIT guarantees of its frames can (jit_step.c says what, per
 * release). Part of librbpeek-unwind.so; reads target memory through the
 * host's read only.
 */
#ifndef RBP_NATIVE_DWFL_JIT_STEP_H
#define RBP_NATIVE_DWFL_JIT_STEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "native/unwind_backend.h"

/* Whether addr lies in a known module (a file's image or the vdso). */
typedef bool (*rbp_jit_in_module_fn)(void *ctx, uint64_t addr);

/* From the registers of a frame whose pc lies in JIT code (known: a bit
 * per register known; rsp must be), the registers of its caller (*out,
 * *out_known): its return address as rip, its stack pointer, and the
 * callee-saved registers YJIT's entry saved. False, with why, when no
 * return address above the frame can be verified: one that lies in a
 * known module just after a call instruction. */
bool rbp_jit_step(const rbp_uw_host *host, rbp_jit_in_module_fn in_module, void *ctx,
                  const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, uint64_t out[RBP_REGS_MAX],
                  rbp_regmask *out_known, char *why, size_t whylen);

/* Whether ret (a return address) follows a call instruction: the bytes
 * before it, read from the target, end with one (a direct call, or an
 * indirect one through a register or memory). */
bool rbp_jit_after_call(const rbp_uw_host *host, uint64_t ret);

#endif
