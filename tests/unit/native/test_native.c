/*
 * The native layer (core/src/native/): the unwinder object loaded as
 * librbpeek does, module maps, registers from ptrace and from a core, the
 * walk of a real process's stack (fixtures/native_target.c: main -> level1
 * -> level2 -> level3 -> pause), live, on a gcore'd core, stripped, and
 * with its file gone; and garbage: a wild pc, a wild sp, a stack whose
 * frames repeat without end, one whose frame pointer loops, random
 * registers over random stacks. Each must end with the frames it could
 * vouch for and a reason, never crash or hang.
 */
#define _GNU_SOURCE
#include "fixture_proc.h"

#include <dlfcn.h>
#include <link.h>
#include <sys/mman.h>

#include "cu_main.h"
#include "fixture_native.h"
#include "layout/layout.h"
#include "layout/layout_dwarf.h"
#include "memory/mem.h"
#include "native/native.h"
#include "fixture_emulator.h"

#ifndef RBP_DWARF_FIXTURE
#error "RBP_DWARF_FIXTURE (a DWARF layout fixture) must be defined by the build"
#endif
#ifndef RBP_NATIVE_TARGET
#error "RBP_NATIVE_TARGET must be defined by the build"
#endif

/* The fixture's functions, as it printed them. */
typedef struct target {
    fixture_proc p;
    uint64_t level1, level2, level3, main_fn;
} target;

static bool start_target(target *t, const char *tag, const char *exe)
{
    if (!fixture_start_exe(&t->p, tag, exe)) return false;
    t->level1 = t->p.buf;
    t->level2 = t->p.hole;
    t->level3 = t->p.marker;
    t->main_fn = t->p.string;
    usleep(20000); /* into pause() */
    return true;
}

typedef struct unwound {
    rbpeek_native_frame f[RBP_NATIVE_MAX_FRAMES];
    rbp_native_extra x[RBP_NATIVE_MAX_FRAMES];
    size_t n;
    char cut[512];
} unwound;

static unwound U; /* large: one at a time */

static rbp_native *native_over(rbp_mem *m, const rbp_region *r, size_t nr)
{
    char err[512] = "";
    rbp_native *n = rbp_native_new(m, fixture_native_self_regset(), err, sizeof err);
    if (!n) fprintf(stderr, "rbp_native_new: %s\n", err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n);
    bool ok = rbp_native_set_regions(n, r, nr, err, sizeof err);
    if (!ok) fprintf(stderr, "set_regions: %s\n", err);
    CU_ASSERT_FATAL(ok);
    return n;
}

static void free_regions(rbp_region *r, size_t n)
{
    for (size_t i = 0; i < n; i++) free(r[i].path);
    free(r);
}

static long find_sym(const unwound *u, const char *name)
{
    for (size_t i = 0; i < u->n; i++)
        if (u->f[i].symbol && strcmp(u->f[i].symbol, name) == 0) return (long)i;
    return -1;
}

static void assert_sp_grows(const unwound *u)
{
    /* rbp_uw_frame's sp is not in rbpeek_native_frame: the check of
     * growth is the backend's; here every frame must have a pc */
    for (size_t i = 0; i < u->n; i++) CU_ASSERT(u->f[i].pc != 0);
}

/* The fixture's chain, innermost first, as a real stack holds it. */
static void assert_chain(const target *t, const unwound *u, bool named_level2)
{
    long l3 = find_sym(u, "level3"), l1 = find_sym(u, "level1"), m = find_sym(u, "main");
    CU_ASSERT(l3 >= 1);                       /* above it, pause() in libc */
    CU_ASSERT_FATAL(l3 >= 1 && l1 == l3 + 2 && m == l1 + 1);
    CU_ASSERT_EQUAL(u->x[l3].lo, t->level3);
    CU_ASSERT_EQUAL(u->x[l3 + 1].lo, t->level2); /* static: by .symtab, or by its FDE when stripped */
    CU_ASSERT_EQUAL(u->x[l1].lo, t->level1);
    CU_ASSERT_EQUAL(u->x[m].lo, t->main_fn);
    if (named_level2) {
        CU_ASSERT_STRING_EQUAL(u->f[l3 + 1].symbol ? u->f[l3 + 1].symbol : "", "level2");
    } else {
        CU_ASSERT_PTR_NULL(u->f[l3 + 1].symbol);
    }
    CU_ASSERT_PTR_NOT_NULL(u->f[l3].module);
    CU_ASSERT(u->f[l3].module && strstr(u->f[l3].module, "core_target_"));
    CU_ASSERT(u->f[0].module && strstr(u->f[0].module, "libc"));
    CU_ASSERT_STRING_EQUAL(u->cut, ""); /* unwound to _start, whose CFI ends the stack */
    assert_sp_grows(u);
}

static void unwind_pid(pid_t pid, bool lines)
{
    char err[512];
    rbp_hold *h = rbp_hold_take(pid, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_proc(pid, &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    rbp_region *r = NULL;
    size_t nr = rbp_source_proc_regions(pid, &r);
    rbp_native *n = native_over(m, r, nr);
    uint64_t regs[RBP_REGS_MAX];
    bool ok = rbp_native_regs_ptrace(pid, fixture_native_self_regset(), regs, err, sizeof err);
    CU_ASSERT(ok);
    U.n = ok ? rbp_native_unwind(n, regs, rbp_regset_all(fixture_native_self_regset()), RBP_NATIVE_MAX_FRAMES, lines, U.f, U.x,
                                 U.cut, sizeof U.cut)
             : 0;
    /* strings outlive the unwinder in the test: copy what is checked */
    static char names[64][128], mods[64][512];
    for (size_t i = 0; i < U.n && i < 64; i++) {
        if (U.f[i].symbol) U.f[i].symbol = strcpy(names[i], U.f[i].symbol);
        if (U.f[i].module) {
            snprintf(mods[i], sizeof mods[i], "%s", U.f[i].module);
            U.f[i].module = mods[i];
        }
        U.f[i].file = NULL; /* checked before the copy only */
    }
    rbp_native_free(n);
    rbp_mem_free(m);
    free_regions(r, nr);
    rbp_hold_release(h);
    /* let go: running again, untraced */
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    for (int tries = 0; tries < 100; tries++) {
        FILE *f = fopen(path, "r");
        bool traced = false;
        while (f && fgets(line, sizeof line, f))
            if (!strncmp(line, "TracerPid:", 10)) traced = atoi(line + 10) != 0;
        if (f) fclose(f);
        if (!traced) return;
        usleep(10000);
    }
    CU_FAIL("the fixture is still traced after the hold was released");
}

static void test_live(void)
{
    if (!fixture_native_backend_ok()) return;
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    target t;
    CU_ASSERT_FATAL(start_target(&t, "native_live", RBP_NATIVE_TARGET));
    unwind_pid(t.p.pid, false);
    assert_chain(&t, &U, true);
    fixture_remove(&t.p);
}

static void test_lines(void)
{
    if (!fixture_native_backend_ok()) return;
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    target t;
    CU_ASSERT_FATAL(start_target(&t, "native_lines", RBP_NATIVE_TARGET));
    char err[512];
    rbp_hold *h = rbp_hold_take(t.p.pid, err, sizeof err);
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_proc(t.p.pid, &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    rbp_region *r = NULL;
    size_t nr = rbp_source_proc_regions(t.p.pid, &r);
    rbp_native *n = native_over(m, r, nr);
    uint64_t regs[RBP_REGS_MAX];
    CU_ASSERT_FATAL(rbp_native_regs_ptrace(t.p.pid, fixture_native_self_regset(), regs, err, sizeof err));
    U.n = rbp_native_unwind(n, regs, rbp_regset_all(fixture_native_self_regset()), 64, true, U.f, U.x, U.cut, sizeof U.cut);
    long l3 = find_sym(&U, "level3"), l1 = find_sym(&U, "level1");
    CU_ASSERT_FATAL(l3 >= 0 && l1 >= 0);
    CU_ASSERT(U.f[l3].file && strstr(U.f[l3].file, "native_target.c"));
    CU_ASSERT(U.f[l3].line > 0);
    CU_ASSERT(U.f[l1].file && strstr(U.f[l1].file, "native_target.c"));
    rbp_native_free(n);
    rbp_mem_free(m);
    free_regions(r, nr);
    rbp_hold_release(h);
    fixture_remove(&t.p);
}

static void test_stripped(void)
{
    if (!fixture_native_backend_ok()) return;
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    char stripped[PATH_MAX];
    snprintf(stripped, sizeof stripped, "%s/native_target_stripped", fixture_tmpdir());
    char cmd[3 * PATH_MAX];
    /* --strip-all leaves .dynsym (the exported functions), drops .symtab */
    snprintf(cmd, sizeof cmd, "%s --strip-all %s %s", RBP_OBJCOPY, RBP_NATIVE_TARGET, stripped);
    CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
    target t;
    CU_ASSERT_FATAL(start_target(&t, "native_stripped", stripped));
    unwind_pid(t.p.pid, false);
    assert_chain(&t, &U, false);
    fixture_remove(&t.p);
    unlink(stripped);
}

/* The same stack from a core: registers from NT_PRSTATUS. */
static void unwind_core(const char *core, pid_t pid)
{
    char err[512];
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_core(core, &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    rbp_region *r = NULL;
    size_t nr = rbp_source_core_regions(core, &r);
    rbp_core_thread *th = NULL;
    size_t nth = rbp_source_core_threads(core, &th);
    CU_ASSERT_FATAL(nth >= 1);
    CU_ASSERT_EQUAL(th[0].tid, pid);
    rbp_native *n = native_over(m, r, nr);
    CU_ASSERT_EQUAL(th[0].known, rbp_regset_all(fixture_native_self_regset()));
    U.n = rbp_native_unwind(n, th[0].regs, th[0].known, RBP_NATIVE_MAX_FRAMES, false, U.f, U.x, U.cut, sizeof U.cut);
    static char names[64][128], mods[64][512];
    for (size_t i = 0; i < U.n && i < 64; i++) {
        if (U.f[i].symbol) U.f[i].symbol = strcpy(names[i], U.f[i].symbol);
        if (U.f[i].module) U.f[i].module = strcpy(mods[i], U.f[i].module);
    }
    rbp_native_free(n);
    rbp_mem_free(m);
    free_regions(r, nr);
    free(th);
}

static void test_core(void)
{
    if (!fixture_native_backend_ok()) return;
    if (fixture_emulated(FIXTURE_EMU_NO_CHILD)) return;
    if (!fixture_have("gcore")) {
        CU_FAIL("gcore is not installed");
        return;
    }
    target t;
    CU_ASSERT_FATAL(start_target(&t, "native_core", RBP_NATIVE_TARGET));
    char core[PATH_MAX];
    CU_ASSERT_FATAL(fixture_gcore(&t.p, "native", core, sizeof core));
    pid_t pid = t.p.pid;
    fixture_stop(&t.p);
    unwind_core(core, pid);
    assert_chain(&t, &U, true);
    /* Without the executable's file: libc's frames, then the frame in the
     * executable (its pc is in a known mapping), and a cut saying why the
     * walk could go no further; nothing guessed past it. */
    fixture_remove(&t.p);
    unwind_core(core, pid);
    CU_ASSERT(U.n >= 2);
    CU_ASSERT(find_sym(&U, "level1") < 0);
    CU_ASSERT(U.cut[0] != '\0');
    CU_ASSERT(strstr(U.cut, "core_target_native_core") != NULL || strstr(U.cut, "no CFI") != NULL);
    fprintf(stderr, "(without its file: %zu frames, cut: %s) ", U.n, U.cut);
    /* Another program at its path (a core opened on a machine whose file
     * differs): refused as not the one mapped, not read for CFI or names. */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/core_target_native_core", fixture_tmpdir());
    CU_ASSERT_EQUAL_FATAL(fixture_copy_file("/bin/true", path, 0755, -1), 0);
    unwind_core(core, pid);
    CU_ASSERT(find_sym(&U, "level3") < 0);
    CU_ASSERT(strstr(U.cut, "not the one the target mapped") != NULL);
    fprintf(stderr, "(another file in its place: %zu frames, cut: %s) ", U.n, U.cut);
    unlink(path);
    unlink(core);
}

/* --- the test process itself, with crafted stacks ----------------------- */

static volatile uint64_t fp_ra;

__attribute__((noinline)) static void capture(void) { fp_ra = (uint64_t)__builtin_return_address(0); }

__attribute__((noinline, optimize("no-omit-frame-pointer"))) static void fp_func(void)
{
    capture();
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void native_test_leaf(void) { __asm__ volatile("" ::: "memory"); }

typedef struct self {
    rbp_mem *m;
    rbp_region *r;
    size_t nr;
    rbp_native *n;
} self;

static void self_open(self *s)
{
    char err[256];
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_proc(getpid(), &src, err, sizeof err));
    s->m = rbp_mem_new(src);
    s->nr = rbp_source_proc_regions(getpid(), &s->r);
    s->n = native_over(s->m, s->r, s->nr);
}

static void self_close(self *s)
{
    rbp_native_free(s->n);
    rbp_mem_free(s->m);
    free_regions(s->r, s->nr);
}

static size_t self_unwind(self *s, const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, size_t max)
{
    rbp_mem_invalidate(s->m); /* the crafted stack changes between walks */
    U.n = rbp_native_unwind(s->n, regs, known, max, false, U.f, U.x, U.cut, sizeof U.cut);
    return U.n;
}

static uint64_t stack_buf[16384];

static void test_wild_pc(void)
{
    if (!fixture_native_backend_ok()) return;
    self s;
    self_open(&s);
    uint64_t regs[RBP_REGS_MAX] = {0};
    const rbp_regset *rs = fixture_native_self_regset();
    regs[rs->pc] = 0x1000;
    regs[rs->sp] = (uint64_t)&stack_buf[8192];
    regs[rs->fp] = (uint64_t)&stack_buf[8200];
    stack_buf[8200] = (uint64_t)&stack_buf[8200]; /* a frame pointer chain libdwfl would follow */
    stack_buf[8201] = (uint64_t)native_test_leaf + 1;
    if (rs->ra != RBP_NO_REG) regs[rs->ra] = (uint64_t)native_test_leaf + 1; /* aarch64's: the link register */
    CU_ASSERT_EQUAL(self_unwind(&s, regs, rbp_regset_all(rs), 100), 1);
    CU_ASSERT_PTR_NULL(U.f[0].module);
    CU_ASSERT(strstr(U.cut, "no mapped file") != NULL);
    self_close(&s);
}

static void test_wild_sp(void)
{
    if (!fixture_native_backend_ok()) return;
    self s;
    self_open(&s);
    uint64_t regs[RBP_REGS_MAX] = {0};
    const rbp_regset *rs = fixture_native_self_regset();
    regs[rs->pc] = (uint64_t)native_test_leaf;
    regs[rs->sp] = 0x10; /* unmapped */
    /* aarch64's leaf returns through its link register, not the stack:
     * one into a module, whose frame finds the stack pointer unchanged */
    if (rs->ra != RBP_NO_REG) regs[rs->ra] = (uint64_t)native_test_leaf + 1;
    CU_ASSERT_EQUAL(self_unwind(&s, regs, rbp_regset_all(rs), 100), 1);
    CU_ASSERT(U.cut[0] != '\0');
    /* only the two registers an unwind cannot start without */
    CU_ASSERT_EQUAL(self_unwind(&s, regs, rbp_regset_all(rs) & ~((rbp_regmask)1 << rs->sp), 100), 0);
    CU_ASSERT(strstr(U.cut, "not known") != NULL);
    self_close(&s);
}

/* Return addresses that lead back into the same function forever: the
 * walk ends at its bound. */
static void test_endless(void)
{
    if (!fixture_native_backend_ok()) return;
    if (!fixture_native_self_x86()) return;
    self s;
    self_open(&s);
    for (size_t i = 0; i < 16384; i++) stack_buf[i] = (uint64_t)native_test_leaf + 1;
    uint64_t regs[RBP_REGS_MAX] = {0};
    const rbp_regset *rs = fixture_native_self_regset();
    regs[rs->pc] = (uint64_t)native_test_leaf; /* at its first instruction: CFA = rsp + 8 */
    regs[rs->sp] = (uint64_t)&stack_buf[0];
    CU_ASSERT_EQUAL(self_unwind(&s, regs, rbp_regset_all(rs), 100), 100);
    CU_ASSERT(strstr(U.cut, "cut after 100") != NULL);
    CU_ASSERT(self_unwind(&s, regs, rbp_regset_all(rs), RBP_NATIVE_MAX_FRAMES) == RBP_NATIVE_MAX_FRAMES);
    self_close(&s);
}

/* A frame pointer that points at itself: the stack pointer stops growing,
 * and the walk stops there. */
static void test_fp_loop(void)
{
    if (!fixture_native_backend_ok()) return;
    if (!fixture_native_self_x86()) return;
    fp_func();
    CU_ASSERT_FATAL(fp_ra != 0);
    self s;
    self_open(&s);
    uint64_t b = (uint64_t)&stack_buf[8192];
    stack_buf[8192] = b;       /* saved rbp: itself */
    stack_buf[8193] = fp_ra;   /* return address: the same place again */
    uint64_t regs[RBP_REGS_MAX] = {0};
    const rbp_regset *rs = fixture_native_self_regset();
    regs[rs->pc] = fp_ra;
    regs[rs->fp] = b;
    regs[rs->sp] = b - 32;
    size_t n = self_unwind(&s, regs, rbp_regset_all(rs), 100);
    CU_ASSERT(n >= 1 && n <= 3);
    CU_ASSERT(strstr(U.cut, "did not grow") != NULL);
    self_close(&s);
}

static uint64_t xorshift(uint64_t *r)
{
    *r ^= *r << 13;
    *r ^= *r >> 7;
    *r ^= *r << 17;
    return *r;
}

/* Random registers over random stacks: every walk ends, within its bound,
 * with a reason or at an end its CFI marks. */
static void test_garbage(void)
{
    if (!fixture_native_backend_ok()) return;
    self s;
    self_open(&s);
    uint64_t rng = 0x9e3779b97f4a7c15ull;
#define NEXT() xorshift(&rng)
    /* pcs worth trying: inside this executable, libc, and nowhere */
    uint64_t anchors[] = {(uint64_t)native_test_leaf, (uint64_t)fp_func, (uint64_t)printf, (uint64_t)malloc,
                          (uint64_t)test_garbage, 0x1000, 0};
    size_t runs = getenv("RBPEEK_NATIVE_GARBAGE_RUNS") ? strtoul(getenv("RBPEEK_NATIVE_GARBAGE_RUNS"), NULL, 0) : 3000;
    size_t frames = 0, cut = 0;
    for (size_t run = 0; run < runs; run++) {
        for (size_t i = 0; i < 16384; i++) {
            uint64_t v = NEXT();
            switch (v & 7) {
            case 0: stack_buf[i] = anchors[(v >> 3) % 7] + ((v >> 8) & 0xff); break;
            case 1: stack_buf[i] = (uint64_t)&stack_buf[(v >> 3) % 16384]; break;
            case 2: stack_buf[i] = 0; break;
            default: stack_buf[i] = v; break;
            }
        }
        uint64_t regs[RBP_REGS_MAX];
        const rbp_regset *rs = fixture_native_self_regset();
        for (int i = 0; i < RBP_REGS_MAX; i++) regs[i] = stack_buf[NEXT() % 16384];
        regs[rs->pc] = anchors[NEXT() % 7] + (NEXT() & 0x3f);
        regs[rs->sp] = (uint64_t)&stack_buf[NEXT() % 16000];
        rbp_regmask known = (NEXT() & rbp_regset_all(rs)) | ((rbp_regmask)1 << rs->sp) | ((rbp_regmask)1 << rs->pc);
        size_t n = self_unwind(&s, regs, known, 256);
        CU_ASSERT(n <= 256);
        frames += n;
        cut += U.cut[0] != '\0';
    }
    fprintf(stderr, "(%zu walks, %zu frames, %zu cut) ", runs, frames, cut);
    self_close(&s);
}

/* Images from regions: ELF files by their header, the vdso, not data
 * files; each from its header's mapping to its last. */
static void test_modules(void)
{
    if (fixture_emulated("qemu-user 7.2 maps no [vdso] into an aarch64 guest, a module this test expects")) return;
    char err[256];
    rbp_source src;
    CU_ASSERT_FATAL(rbp_source_proc(getpid(), &src, err, sizeof err));
    rbp_mem *m = rbp_mem_new(src);
    rbp_region *r = NULL;
    size_t nr = rbp_source_proc_regions(getpid(), &r);
    rbp_uw_module *mods = NULL;
    size_t n = rbp_native_modules(m, r, nr, 0, &mods);
    CU_ASSERT(n >= 3);
    bool vdso = false, libc = false, self_exe = false;
    char exe[PATH_MAX] = "";
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) exe[el] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (i) CU_ASSERT(mods[i].start >= mods[i - 1].end);
        vdso |= !mods[i].path && strcmp(mods[i].name, "[vdso]") == 0;
        libc |= mods[i].path && strstr(mods[i].path, "libc.so") != NULL;
        self_exe |= mods[i].path && strcmp(mods[i].path, exe) == 0;
        unsigned char magic[4];
        CU_ASSERT(rbp_mem_read(m, mods[i].start, magic, 4) && memcmp(magic, "\177ELF", 4) == 0);
    }
    CU_ASSERT(vdso && libc && self_exe);
    rbp_native_modules_free(mods, n);
    /* a file mapped as data (not ELF) is no module */
    char data[PATH_MAX];
    snprintf(data, sizeof data, "%s/native_data_file", fixture_tmpdir());
    FILE *f = fopen(data, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    for (int i = 0; i < 4096; i++) fputc('x', f);
    fclose(f);
    int fd = open(data, O_RDONLY);
    void *p = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    CU_ASSERT_FATAL(p != MAP_FAILED);
    free_regions(r, nr);
    nr = rbp_source_proc_regions(getpid(), &r);
    rbp_mem_invalidate(m);
    n = rbp_native_modules(m, r, nr, 0, &mods);
    for (size_t i = 0; i < n; i++) CU_ASSERT(!mods[i].path || strcmp(mods[i].path, data) != 0);
    rbp_native_modules_free(mods, n);
    munmap(p, 4096);
    unlink(data);
    free_regions(r, nr);
    rbp_mem_free(m);
}

/* The unwinder is loaded from its own object, libdw in its own group,
 * while this process has libdwarf in its global scope (it links the
 * layout extractor, as every program linking librbpeek does): libdwarf
 * extracts the same layout before and after libdw is loaded and used, and
 * libdw's lookups (line tables, CFI) work in between. The bindings
 * themselves are checked by tests/tools/check_dw_bindings.py over this
 * test run with LD_DEBUG=bindings (ctest unit.native_bindings). */
static int layout_fields(void)
{
    rbp_layout l;
    char err[256];
    if (rbp_dwarf_layout(RBP_DWARF_FIXTURE, &l, err, sizeof err) != 0) return -1;
    int n = 0;
    for (int i = 0; i < RBP_L_COUNT; i++) n += rbp_has(&l, (rbp_field_id)i);
    return n;
}

static int fields_before;

static void test_isolation(void)
{
    fields_before = layout_fields();
    CU_ASSERT(fields_before > 10);
    if (!fixture_native_backend_ok()) return;
    CU_ASSERT(strstr(rbp_native_backend_path(), "librbpeek-unwind.so") != NULL);
    void *global = dlopen(NULL, RTLD_NOW);
    void *d_attr = dlsym(global, "dwarf_attr");
    Dl_info info;
    CU_ASSERT_FATAL(d_attr && dladdr(d_attr, &info));
    CU_ASSERT(strstr(info.dli_fname, "libdwarf") != NULL);
    void *dw = dlopen("libdw.so.1", RTLD_NOW | RTLD_NOLOAD);
    CU_ASSERT_PTR_NOT_NULL(dw);
    if (dw) {
        void *dw_attr = dlsym(dw, "dwarf_attr");
        CU_ASSERT(dw_attr && dw_attr != d_attr);
        CU_ASSERT(dw_attr && dladdr(dw_attr, &info) && strstr(info.dli_fname, "libdw") != NULL);
        dlclose(dw);
    }
    dlclose(global);
}

static void test_isolation_after(void)
{
    if (!fixture_native_backend_ok()) return;
    CU_ASSERT_EQUAL(layout_fields(), fields_before);
}

static const rbp_cu_test TESTS[] = {
    {"libdw isolated from libdwarf", test_isolation},
    {"a live process's stack, from its registers (ptrace)", test_live},
    {"source files and lines from DWARF", test_lines},
    {"a stripped executable: static functions by their FDEs", test_stripped},
    {"a core's stack (NT_PRSTATUS), without its executable, with another in its place", test_core},
    {"a wild pc: one frame, and why", test_wild_pc},
    {"a wild sp, or no sp: cut, and why", test_wild_sp},
    {"endless frames: cut at the bound", test_endless},
    {"a looping frame pointer: cut where sp stops growing", test_fp_loop},
    {"random registers over random stacks", test_garbage},
    {"modules from regions", test_modules},
    {"libdwarf as before, after libdw's use", test_isolation_after},
    {NULL, NULL},
};

RBP_CU_MAIN("native", TESTS)
