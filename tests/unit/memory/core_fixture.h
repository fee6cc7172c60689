/*
 * The core the mem_core tests read: the core_target fixture started once
 * per test program, gcore'd, and stopped (have_core), and an independent
 * check of which addresses the core itself holds (core_holds). Included
 * by test_mem_core.c and test_mem_core_nt_file.c, each with its own core.
 */
#ifndef RBP_TEST_CORE_FIXTURE_H
#define RBP_TEST_CORE_FIXTURE_H

#include "fixture_proc.h"   /* first: it asks for _GNU_SOURCE */

/* Each test program names its own copy of the fixture and its core (they
 * run side by side, and a copy is removed at the end). */
#ifndef CORE_FIXTURE_TAG
#define CORE_FIXTURE_TAG "memcore"
#endif

#include <elf.h>
#include <stdio.h>
#include "memory/mem.h"

static fixture_proc fx;
static char core_path[PATH_MAX];
static int core_state; /* 0 not tried, 1 ready, -1 unavailable */

/* Makes the core once for all tests; false (with a message) to skip. */
static bool have_core(void)
{
    if (core_state == 0) {
        core_state = -1;
        if (!fixture_have("gcore")) {
            fprintf(stderr, "\n  [skip] gcore not found on PATH; core tests skipped\n");
        } else if (!fixture_start(&fx, CORE_FIXTURE_TAG)) {
            fprintf(stderr, "\n  [skip] could not start the core_target fixture\n");
        } else {
            if (fixture_gcore(&fx, CORE_FIXTURE_TAG, core_path, sizeof core_path)) core_state = 1;
            else fprintf(stderr, "\n  [skip] gcore failed on pid %d\n", (int)fx.pid);
            fixture_stop(&fx);
        }
    }
    return core_state > 0;
}

static bool open_core(const char *path, rbp_source *src)
{
    char err[256] = "";
    bool ok = rbp_source_core(path, src, err, sizeof err);
    if (!ok) fprintf(stderr, "\n  rbp_source_core(%s): %s\n", path, err);
    return ok;
}

/* True if the core itself holds data for addr (a PT_LOAD with p_filesz
 * covering it), found by our own independent scan of the program headers. */
static bool core_holds(const char *path, uint64_t addr)
{
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    Elf64_Ehdr eh;
    bool hit = false;
    if (fread(&eh, sizeof eh, 1, f) == 1 && fseek(f, (long)eh.e_phoff, SEEK_SET) == 0) {
        for (unsigned i = 0; i < eh.e_phnum && !hit; i++) {
            Elf64_Phdr ph;
            if (fread(&ph, sizeof ph, 1, f) != 1) break;
            hit = ph.p_type == PT_LOAD && addr >= ph.p_vaddr && addr - ph.p_vaddr < ph.p_filesz;
        }
    }
    fclose(f);
    return hit;
}

static void test_cleanup(void)
{
    fixture_remove(&fx);
    if (core_state > 0) unlink(core_path);
}

#endif
