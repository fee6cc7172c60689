/*
 * What the tests of the native layer share: whether the unwinder object
 * loads (a sanitized build refuses to load it where libdwarf is in the
 * global scope, native/backend.c says why: those tests are then skipped,
 * saying so; any other failure to load it fails them), and the register
 * set of the test's own machine, which every target here runs on (the
 * fixture, its core, the test process itself).
 */
#ifndef RBP_FIXTURE_NATIVE_H
#define RBP_FIXTURE_NATIVE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "memory/machine.h"
#include "native/native.h"

static inline const rbp_regset *fixture_native_self_regset(void)
{
    uint16_t m = 0;
    CU_ASSERT_FATAL(rbp_file_machine("/proc/self/exe", &m));
    const rbp_regset *rs = rbp_regset_of(m);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rs);
    return rs;
}

static inline bool fixture_native_backend_ok(void)
{
    char err[512] = "";
    if (rbp_native_backend(err, sizeof err)) return true;
    if (strstr(err, "sanitized")) {
        fprintf(stderr, "(skipped: %s) ", err);
        return false;
    }
    fprintf(stderr, "%s\n", err);
    CU_FAIL("the unwinder could not be loaded");
    return false;
}

/* False, saying why, where the test process is not x86-64's: tests that
 * unwind a stack crafted in the test process itself by x86-64's rules (its
 * CFA = rsp + 8 at a function's first instruction, rbp chains) then have
 * no x86-64 process to unwind (the registers are the test process's own
 * machine's, memory/regset.h; the stacks crafted are not). */
static inline bool fixture_native_self_x86(void)
{
#if defined(__x86_64__)
    return true;
#else
    fprintf(stderr, "\n  [skip] the crafted stack is x86-64's and the test process is not\n");
    return false;
#endif
}

#endif
