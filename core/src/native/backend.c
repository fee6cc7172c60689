/*
 * Finding and loading the unwinder object, librbpeek-unwind.so.1 (see
 * native/unwind_backend.h for why it is an object of its own), once per
 * process. It is looked for where $RBPEEK_UNWINDER says, else beside the
 * object this code is linked into (librbpeek.so, installed or in the build
 * tree's lib/), else, for programs linked with librbpeek.a, where the build
 * put it (the unit tests) and where `cmake --install` puts it.
 *
 * It is loaded with RTLD_LOCAL | RTLD_DEEPBIND: its own group (itself,
 * libdw, libelf...) is searched before the global scope, so libdw's calls
 * to its own dwarf_* functions cannot bind to libdwarf's, whichever of the
 * two the process loaded first (gdb has libdw in its global scope,
 * librbpeek's test programs have libdwarf in theirs). Sanitizer runtimes
 * refuse RTLD_DEEPBIND (their malloc would be bypassed); a sanitized build
 * loads it without, which is safe only where libdwarf is not in the global
 * scope, and refuses otherwise (without RTLD_DEEPBIND, test_native crashes
 * in its first line lookup: libdw's own dwarf_* calls land in libdwarf).
 * ctest's unit.native_bindings checks every binding (docs/native.md).
 */
#define _GNU_SOURCE
#include "native/native.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__SANITIZE_ADDRESS__)
#define RBP_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RBP_SANITIZED 1
#endif
#endif
#ifndef RBP_SANITIZED
#define RBP_SANITIZED 0
#endif

/* Its soname, which carries the interface's version (CMakeLists.txt gives
 * it the same): librbpeek-unwind.so.1. */
#define UNWINDER_STR_(x) #x
#define UNWINDER_STR(x) UNWINDER_STR_(x)
#define UNWINDER_NAME "librbpeek-unwind.so." UNWINDER_STR(RBP_UW_ABI)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static const rbp_uw_ops *loaded;
static char load_error[512];
static char load_path[1024];

static const rbp_uw_ops *try_load(const char *path, char *why, size_t whylen)
{
    int mode = RTLD_NOW | RTLD_LOCAL;
#ifdef RTLD_DEEPBIND
    if (!RBP_SANITIZED) mode |= RTLD_DEEPBIND;
#endif
    void *h = dlopen(path, mode);
    if (!h) {
        const char *e = dlerror();
        snprintf(why, whylen, "%s", e ? e : "dlopen failed");
        return NULL;
    }
    rbp_uw_backend_fn fn = (rbp_uw_backend_fn)dlsym(h, RBP_UW_BACKEND_SYMBOL);
    const rbp_uw_ops *ops = fn ? fn() : NULL;
    if (!ops || ops->abi != RBP_UW_ABI) {
        snprintf(why, whylen, "%s is not an rbpeek unwinder of this version (ABI %d, want %d)", path,
                 ops ? ops->abi : -1, RBP_UW_ABI);
        dlclose(h);
        return NULL;
    }
    snprintf(load_path, sizeof load_path, "%s", path);
    return ops; /* kept loaded for the life of the process */
}

static void load_once(void)
{
    char why[400] = "";
    if (RBP_SANITIZED && dlsym(RTLD_DEFAULT, "dwarf_init_b")) {
        /* Without RTLD_DEEPBIND, libdw's calls to its own dwarf_* functions
         * would bind to libdwarf's, found first in the global scope (a
         * test run that way crashes in its first line lookup). */
        snprintf(load_error, sizeof load_error,
                 "native stacks are not available in this sanitized build: its runtime refuses RTLD_DEEPBIND, "
                 "and libdwarf is in the global scope, where libdw's own calls would land");
        return;
    }
    const char *env = getenv("RBPEEK_UNWINDER");
    if (env && *env) {
        if (!(loaded = try_load(env, why, sizeof why)))
            snprintf(load_error, sizeof load_error, "cannot load the unwinder $RBPEEK_UNWINDER=%s: %s", env, why);
        return;
    }
    char cand[4][1024];
    size_t ncand = 0;
    Dl_info info;
    if (dladdr((void *)rbp_native_backend, &info) && info.dli_fname && strchr(info.dli_fname, '/')) {
        const char *slash = strrchr(info.dli_fname, '/');
        snprintf(cand[ncand++], sizeof cand[0], "%.*s/%s", (int)(slash - info.dli_fname), info.dli_fname,
                 UNWINDER_NAME);
    }
#ifdef RBPEEK_UNWINDER_BUILD_PATH
    snprintf(cand[ncand++], sizeof cand[0], "%s", RBPEEK_UNWINDER_BUILD_PATH);
#endif
#ifdef RBPEEK_UNWINDER_INSTALL_PATH
    snprintf(cand[ncand++], sizeof cand[0], "%s", RBPEEK_UNWINDER_INSTALL_PATH);
#endif
    for (size_t i = 0; i < ncand && !loaded; i++) loaded = try_load(cand[i], why, sizeof why);
    if (!loaded)
        snprintf(load_error, sizeof load_error,
                 "native stacks need %s beside librbpeek, which could not be loaded (%s); reinstall rbpeek "
                 "(it needs elfutils' libdw1), or set RBPEEK_UNWINDER=/path/to/" UNWINDER_NAME,
                 UNWINDER_NAME, ncand ? why : "no place to look");
}

const rbp_uw_ops *rbp_native_backend(char *err, size_t errlen)
{
    pthread_once(&once, load_once);
    if (!loaded && err && errlen) snprintf(err, errlen, "%s", load_error);
    return loaded;
}

const char *rbp_native_backend_path(void)
{
    pthread_once(&once, load_once);
    return loaded ? load_path : "";
}
