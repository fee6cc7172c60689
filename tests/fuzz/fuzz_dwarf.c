/*
 * fuzz_dwarf: hostile ELF files with DWARF (what --debug-file and the
 * DWARF of a mapped libruby feed rbpeek). The input is the file: the DWARF
 * layout extractor reads it (via libdwarf and libelf), its layout is
 * rendered and parsed back, and the full .symtab lookup reads it as the
 * image of a mapped Ruby. libdwarf and libelf are not instrumented, so
 * what this catches is rbpeek's own handling of what they return.
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "layout/layout.h"
#include "layout/layout_dwarf.h"
#include "memory/elf_symbols.h"
#include "memory/mem.h"

static int g_fd = -1;
static char g_path[64];
static char g_ruby[128];   /* a link named like libruby to the input */

static void remove_link(void)
{
    unlink(g_ruby);
    *strrchr(g_ruby, '/') = '\0';
    rmdir(g_ruby);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    g_fd = memfd_create("fuzz_dwarf", 0);
    if (g_fd < 0) abort();
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    /* The .symtab fallback searches only files named like a Ruby. */
    snprintf(g_ruby, sizeof g_ruby, "/tmp/rbpeek-fuzz-dwarf-%d/libruby.so.3.1", (int)getpid());
    char dir[128];
    snprintf(dir, sizeof dir, "/tmp/rbpeek-fuzz-dwarf-%d", (int)getpid());
    mkdir(dir, 0700);
    unlink(g_ruby);
    if (symlink(g_path, g_ruby) != 0) abort();
    atexit(remove_link);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    rbp_layout *l = malloc(sizeof *l);
    char err[256];
    if (l && rbp_dwarf_layout(g_path, l, err, sizeof err) == 0) {
        char *text = rbp_layout_format(l, "fuzz");
        if (text && rbp_layout_parse(l, text, err, sizeof err) != 0) abort(); /* its own output must parse */
        free(text);
    } else if (l && err[0] == '\0') {
        abort(); /* a refusal must say why */
    }
    free(l);
    /* The same file as the libruby of a target: the .symtab fallback. */
    rbp_region r = {.start = 0x7f0000000000, .end = 0x7f0000400000, .file_offset = 0, .path = g_ruby};
    uint64_t addr;
    rbp_elf_symtab_lookup(&r, 1, "ruby_current_vm_ptr", &addr, NULL);
    return 0;
}
