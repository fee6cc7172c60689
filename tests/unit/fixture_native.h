/*
 * What the tests of the native layer share: whether the unwinder object
 * loads. A sanitized build refuses to load it where libdwarf is in the
 * global scope (native/backend.c says why): those tests are then skipped,
 * saying so; any other failure to load it fails them.
 */
#ifndef RBP_FIXTURE_NATIVE_H
#define RBP_FIXTURE_NATIVE_H

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <CUnit/CUnit.h>

#include "native/native.h"

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

#endif
