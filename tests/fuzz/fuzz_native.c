/*
 * fuzz_native: the native unwinder (core/src/native/, libdwfl behind it)
 * on hostile stacks and hostile CFI. The harness process is the target:
 * its own modules (this executable, libc, the vdso...) are the module
 * list, and a thread's registers and stack come from the input. Memory is
 * served through a reader callback: the input's stack at a fixed buffer,
 * this process's own mappings (process_vm_readv on itself, so an
 * unmapped address just fails), and, when the input asks, a copy of a
 * small ELF executable (the native_target fixture) whose bytes the input
 * edits (its .eh_frame, .eh_frame_hdr, headers), written to a file and
 * reported as one more module at a fixed address, so that libdwfl reads
 * corrupt CFI from it. Every walk must end, within its bound, whatever
 * the input: a crash, a hang or a leak is a finding.
 *
 * Input: byte 0 = flags (bit 0: the edited ELF is a module and the pc may
 * lie in it; bit 1: source lines; bit 2: drop libc from the modules;
 * bit 3: only rip and rsp known; bit 4: the input's stack is a JIT region,
 * a lie (it is data), so that a pc or return address into it is stepped
 * by YJIT's rules over whatever the stack holds; bit 5: a JIT region that
 * lies over this executable's code, a module's), byte 1 = how many ELF
 * edits follow;
 * then 17 registers of 9 bytes (a kind byte and a value, below); then the
 * edits, 8 bytes each (u32 offset into the ELF, u32 value xored into it);
 * the rest is the stack (8-byte words). A register's or a stack word's
 * kind (for a stack word, its top byte) makes it a pointer: 0xa5 into the
 * stack (low 16 bits), 0x5a into a function of an anchor list (bits 16-18
 * pick it, low 16 bits are the offset), 0x3c into the edited ELF's image;
 * else the value is taken as it is.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "memory/mem.h"
#include "native/native.h"

#ifndef RBP_NATIVE_TARGET
#error "RBP_NATIVE_TARGET (the fixture executable whose CFI is edited) must be defined by the build"
#endif

#define STACK_WORDS 8192
#define ELF_BASE 0x7e0000000000ull   /* where the edited ELF is "mapped" */
#define MAX_FRAMES 512

static uint64_t g_stack[STACK_WORDS];
static uint8_t *g_elf, *g_work;   /* the pristine fixture, the edited copy */
static size_t g_elf_size;
static char g_elf_path[96];
static rbp_region *g_regions;    /* this process's mappings */
static size_t g_nregions;
static rbpeek_native_frame g_out[MAX_FRAMES];
static rbp_native_extra g_extra[MAX_FRAMES];

__attribute__((noinline)) void fuzz_native_leaf(void) { __asm__ volatile("" ::: "memory"); }
__attribute__((noinline, optimize("no-omit-frame-pointer"))) void fuzz_native_fp(void)
{
    fuzz_native_leaf();
    __asm__ volatile("" ::: "memory");
}

static uint64_t anchor(unsigned i)
{
    const uint64_t a[8] = {(uint64_t)fuzz_native_leaf, (uint64_t)fuzz_native_fp, (uint64_t)memcpy,
                           (uint64_t)malloc,           (uint64_t)write,          (uint64_t)getpid,
                           ELF_BASE + 0x1000,          0};
    return a[i & 7];
}

static uint64_t fix(uint64_t v, uint8_t kind)
{
    switch (kind) {
    case 0xa5: return (uint64_t)&g_stack[(v & 0xffff) % STACK_WORDS] + (v & 7);
    case 0x5a: return anchor((unsigned)(v >> 16)) + (v & 0xffff);
    case 0x3c: return ELF_BASE + (v & 0xffff) % (g_elf_size ? g_elf_size : 1);
    default: return v;
    }
}

static long reader(void *ctx, uint64_t addr, void *buf, size_t len)
{
    bool elf = ctx != NULL;
    uint64_t lo = (uint64_t)g_stack, hi = lo + sizeof g_stack;
    if (addr >= lo && addr < hi) {
        size_t n = len < hi - addr ? len : (size_t)(hi - addr);
        memcpy(buf, (const uint8_t *)(uintptr_t)addr, n);
        return (long)n;
    }
    if (elf && addr >= ELF_BASE && addr < ELF_BASE + g_elf_size) {
        size_t off = (size_t)(addr - ELF_BASE), n = len < g_elf_size - off ? len : g_elf_size - off;
        memcpy(buf, g_work + off, n);
        return (long)n;
    }
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    ssize_t n = process_vm_readv(getpid(), &local, 1, &remote, 1, 0);
    return n > 0 ? (long)n : -1;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    FILE *f = fopen(RBP_NATIVE_TARGET, "rb");
    if (f) {
        fseek(f, 0, SEEK_END);
        long size = ftell(f);
        fseek(f, 0, SEEK_SET);
        if (size > 0 && size < (1 << 22) && (g_elf = malloc((size_t)size)) && (g_work = malloc((size_t)size)) &&
            fread(g_elf, 1, (size_t)size, f) == (size_t)size)
            g_elf_size = (size_t)size;
        fclose(f);
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_elf_path, sizeof g_elf_path, "%s/fuzz_native.%d.elf", tmp && *tmp ? tmp : "/tmp", (int)getpid());
    g_nregions = rbp_source_proc_regions(getpid(), &g_regions);
    char err[512];
    if (!rbp_native_backend(err, sizeof err)) {
        fprintf(stderr, "fuzz_native: %s\n", err);
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 + 17 * 9 || !g_elf_size) return 0;
    uint8_t flags = data[0], nedits = data[1];
    const uint8_t *p = data + 2, *end = data + size;
    /* the harness is an x86-64 process (fuzz builds are native x86-64 ones):
     * the input's 17 registers are x86-64's */
    const rbp_regset *rs = rbp_regset_of(EM_X86_64);
    uint64_t regs[RBP_REGS_MAX] = {0};
    for (int i = 0; i < 17; i++, p += 9) {
        uint64_t v;
        memcpy(&v, p + 1, 8);
        regs[i] = fix(v, p[0]);
    }
    memcpy(g_work, g_elf, g_elf_size);
    for (unsigned e = 0; e < nedits && end - p >= 8; e++, p += 8) {
        uint32_t off, x;
        memcpy(&off, p, 4);
        memcpy(&x, p + 4, 4);
        off %= (uint32_t)(g_elf_size - 3);
        uint32_t v;
        memcpy(&v, g_work + off, 4);
        v ^= x;
        memcpy(g_work + off, &v, 4);
    }
    memset(g_stack, 0, sizeof g_stack);
    for (size_t w = 0; w < STACK_WORDS && end - p >= 8; w++, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        g_stack[w] = fix(v & 0x00ffffffffffffffull, (uint8_t)(v >> 56));
    }

    bool with_elf = flags & 1;
    /* the module list: this process's, less libc if asked, plus the ELF */
    rbp_region *r = calloc(g_nregions + 1, sizeof *r);
    if (!r) return 0;
    size_t nr = 0;
    for (size_t i = 0; i < g_nregions; i++) {
        if ((flags & 4) && g_regions[i].path && strstr(g_regions[i].path, "libc.so")) continue;
        r[nr++] = g_regions[i];
    }
    if (with_elf) {
        int fd = open(g_elf_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (write(fd, g_work, g_elf_size) != (ssize_t)g_elf_size) {
                close(fd);
                free(r);
                return 0;
            }
            close(fd);
        }
        r[nr++] = (rbp_region){ELF_BASE, ELF_BASE + ((g_elf_size + 4095) & ~(size_t)4095), 0, g_elf_path};
    }
    rbp_mem *m = rbp_mem_new((rbp_source){.read = reader, .ctx = with_elf ? (void *)1 : NULL, .kind = "fuzz"});
    char err[512], cut[512];
    rbp_native *n = m ? rbp_native_new(m, rs, err, sizeof err) : NULL;
    if (n && rbp_native_set_regions(n, r, nr, err, sizeof err)) {
        rbp_uw_range jit[2];
        size_t njit = 0;
        if (flags & 16) jit[njit++] = (rbp_uw_range){(uint64_t)g_stack, (uint64_t)g_stack + sizeof g_stack};
        if (flags & 32) jit[njit++] = (rbp_uw_range){anchor(0) & ~0xfffull, (anchor(0) & ~0xfffull) + 0x10000};
        rbp_native_set_jit(n, jit, njit);
        rbp_regmask known = (flags & 8) ? ((rbp_regmask)1 << rs->sp) | ((rbp_regmask)1 << rs->pc) : rbp_regset_all(rs);
        size_t got = rbp_native_unwind(n, regs, known, MAX_FRAMES, flags & 2, g_out, g_extra, cut, sizeof cut);
        if (got > MAX_FRAMES) abort();
        volatile size_t sum = 0; /* every string given must be readable (ASan checks) */
        for (size_t i = 0; i < got; i++)
            sum += (g_out[i].symbol ? strlen(g_out[i].symbol) : 0) + (g_out[i].module ? strlen(g_out[i].module) : 0) +
                   (g_out[i].file ? strlen(g_out[i].file) : 0);
        (void)sum;
    }
    rbp_native_free(n);
    rbp_mem_free(m);
    free(r);
    if (with_elf) unlink(g_elf_path);
    return 0;
}
