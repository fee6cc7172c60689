/*
 * The whole core, debugger-free, on a real Ruby: Debian's stripped ruby3.1
 * runs fixtures/walk_target.rb, which records its own backtrace_locations
 * and parks; gcore takes a core of it. Then:
 *
 *  - the pristine core, opened with rbpeek_session_use_core, must give
 *    exactly Ruby's own frames (label, path, line) for every thread;
 *  - copies of the core with one structure corrupted (a cyclic thread list,
 *    a wild frame pointer, garbage control frames, a cyclic ep chain, an
 *    absurd stack size) must still snapshot: no crash, no hang, the damage
 *    reported in the damaged thread's error, the other threads intact.
 *
 * Corruptions are written into a copy of the core file at the file offset
 * of the target address (through the PT_LOAD headers), so what is tested is
 * exactly "rbpeek reading a corrupted core".
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cu_main.h"
#include "fixture_ruby_core.h"
#include "context/context.h"
#include "vm/robject.h"


static char g_dir[512], g_core[600];
static bool g_ready;

typedef struct expected_frame {
    char thread[64], label[256], path[512];
    int lineno;
} expected_frame;
static expected_frame g_exp[2000];
static size_t g_nexp;
/* The fixture's own RUBY_VERSION: Debian ships patch releases (3.1.2, now
 * 3.1.7), and the core must name whichever one is installed. */
static char g_version[32];


/* Starts the fixture, waits for it to record and park, gcores it. */
static bool setup(void)
{
    if (g_ready) return true;
    if (!fixture_ruby_core("walk_core", g_dir, sizeof g_dir, g_core, sizeof g_core)) return false;

    char tsv[700];
    snprintf(tsv, sizeof tsv, "%s/expected.tsv", g_dir);
    FILE *f = fopen(tsv, "r");
    if (!f) return false;
    char line[1500];
    while (fgets(line, sizeof line, f) && g_nexp < sizeof g_exp / sizeof g_exp[0]) {
        expected_frame *e = &g_exp[g_nexp];
        if (sscanf(line, "%63[^\t]\t%255[^\t]\t%511[^\t]\t%d", e->thread, e->label, e->path, &e->lineno) == 4)
            g_nexp++;
    }
    fclose(f);
    snprintf(tsv, sizeof tsv, "%s/version", g_dir);
    f = fopen(tsv, "r");
    if (!f) return false;
    bool have_version = fscanf(f, "%31s", g_version) == 1;
    fclose(f);
    g_ready = g_nexp > 300 && have_version;
    return g_ready;
}

static rbpeek_session *open_core(const char *path)
{
    rbpeek_session *s = rbpeek_session_new();
    if (rbpeek_session_use_core(s, path) != RBPEEK_OK || rbpeek_session_attach(s) != RBPEEK_OK) {
        fprintf(stderr, "open %s: %s\n", path, rbpeek_session_error(s));
        rbpeek_session_free(s);
        return NULL;
    }
    return s;
}

static const rbpeek_thread *find_thread(const rbpeek_snapshot *snap, const char *name)
{
    for (size_t i = 0; i < rbpeek_snapshot_thread_count(snap); i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        if ((t->is_main && strcmp(name, "<main>") == 0) || (t->name && strcmp(t->name, name) == 0)) return t;
    }
    return NULL;
}

/* Frames of the named thread equal Ruby's own recording. */
static int frames_match(const rbpeek_snapshot *snap, const char *name)
{
    const rbpeek_thread *t = find_thread(snap, name);
    if (!t) return 0;
    size_t k = 0;
    for (size_t i = 0; i < g_nexp; i++) {
        if (strcmp(g_exp[i].thread, name) != 0) continue;
        if (k >= t->nframes) return 0;
        const rbpeek_frame *f = &t->frames[k++];
        /* The fixture writes a nil path as "" (nil.to_s); rbpeek gives NULL. */
        if (strcmp(f->label, g_exp[i].label) != 0 || strcmp(f->path ? f->path : "", g_exp[i].path) != 0 ||
            f->lineno != g_exp[i].lineno) {
            fprintf(stderr, "%s frame %zu: got %s %s:%d, Ruby said %s %s:%d\n", name, k - 1, f->label,
                    f->path ? f->path : "(nil)",
                    f->lineno, g_exp[i].label, g_exp[i].path, g_exp[i].lineno);
            return 0;
        }
    }
    return k == t->nframes && k > 0;
}

static void test_pristine_core_matches_ruby(void)
{
    if (!setup()) {
        CU_PASS("skipped: needs /usr/bin/ruby3.1 and gcore");
        return;
    }
    rbpeek_session *s = open_core(g_core);
    CU_ASSERT_FATAL(s != NULL);
    CU_ASSERT_STRING_EQUAL(rbpeek_session_ruby_version(s), g_version);
    rbpeek_snapshot *snap = NULL;
    CU_ASSERT_EQUAL_FATAL(rbpeek_snapshot_take(s, 0, &snap), RBPEEK_OK);
    const char *names[] = {"deep", "callbacks", "queue", "<main>"};
    for (size_t i = 0; i < 4; i++) CU_ASSERT(frames_match(snap, names[i]));
    const rbpeek_thread *deep = find_thread(snap, "deep");
    CU_ASSERT(deep && deep->nframes > 300);
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
}

/* --- corrupting a copy of the core ---------------------------------------- */

typedef struct patch {
    uint64_t addr;
    uint8_t bytes[4096];
    size_t len;
} patch;

/* Copies the core and writes the patches at their addresses' file offsets. */
static bool write_corrupt_copy(const char *dst, const patch *p, size_t n)
{
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", g_core, dst);
    if (!fixture_run(cmd)) return false;
    int fd = open(dst, O_RDWR);
    if (fd < 0) return false;
    Elf64_Ehdr eh;
    bool ok = pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh;
    for (size_t k = 0; ok && k < n; k++) {
        bool done = false;
        for (int i = 0; i < eh.e_phnum && !done; i++) {
            Elf64_Phdr ph;
            if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)) != (ssize_t)sizeof ph)
                break;
            if (ph.p_type != PT_LOAD || p[k].addr < ph.p_vaddr || p[k].addr + p[k].len > ph.p_vaddr + ph.p_filesz)
                continue;
            done = pwrite(fd, p[k].bytes, p[k].len, (off_t)(ph.p_offset + (p[k].addr - ph.p_vaddr))) ==
                   (ssize_t)p[k].len;
        }
        ok = done;
    }
    close(fd);
    return ok;
}

static patch *word_patch(patch *p, uint64_t addr, uint64_t value)
{
    p->addr = addr;
    memcpy(p->bytes, &value, 8);
    p->len = 8;
    return p;
}

/* Takes a snapshot of a corrupted copy; it must finish within a few
 * seconds (no endless loop) and never crash. Returns it (or NULL if attach
 * itself refused the damaged core, which is also acceptable). */
static rbpeek_snapshot *snapshot_of(const char *path, rbpeek_session **out_s, double *secs)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    rbpeek_session *s = open_core(path);
    rbpeek_snapshot *snap = NULL;
    if (s && rbpeek_snapshot_take(s, 0, &snap) != RBPEEK_OK) snap = NULL;
    clock_gettime(CLOCK_MONOTONIC, &b);
    *secs = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
    *out_s = s;
    return snap;
}

/* Addresses of the "deep" thread's structures, and the offsets needed to
 * damage them, from the pristine core and its layout. */
typedef struct deep_addrs {
    uint64_t th, ec, cfp, node;
    uint64_t ractor_list; /* the VM's list of ractors (3.0+): another list a thread node can point into */
    int32_t ec_cfp_off, ec_stack_size_off;
    uint64_t eps[6];
    size_t neps;
} deep_addrs;

static bool locate_deep(deep_addrs *d)
{
    rbpeek_session *s = open_core(g_core);
    if (!s) return false;
    rbpeek_snapshot *snap = NULL;
    bool ok = rbpeek_snapshot_take(s, 0, &snap) == RBPEEK_OK;
    const rbpeek_thread *t = ok ? find_thread(snap, "deep") : NULL;
    ok = t != NULL;
    if (ok) {
        d->th = t->thread_addr;
        const rbp_layout *L = &s->layout;
        ok = rbp_read_field(s, d->th, RBP_L_th_ec, &d->ec) && rbp_read_field(s, d->ec, RBP_L_ec_cfp, &d->cfp);
        d->node = d->th + (uint64_t)rbp_off(L, RBP_L_th_lt_node);
        d->ractor_list = rbp_has(L, RBP_L_vm_ractor_set) ? s->vm + (uint64_t)rbp_off(L, RBP_L_vm_ractor_set) : 0;
        d->ec_cfp_off = rbp_off(L, RBP_L_ec_cfp);
        d->ec_stack_size_off = rbp_off(L, RBP_L_ec_vm_stack_size);
        uint64_t cfp_size = (uint64_t)L->f[RBP_L_cfp_size].size;
        d->neps = 0;
        for (uint64_t i = 0; ok && i < 6; i++) {
            uint64_t ep = 0;
            if (rbp_mem_u64(s->mem, d->cfp + i * cfp_size + (uint64_t)rbp_off(L, RBP_L_cfp_ep), &ep) && ep)
                d->eps[d->neps++] = ep;
        }
    }
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
    return ok;
}

static void check_damage(const char *what, const patch *p, size_t n, const char *damaged_thread)
{
    char path[700];
    snprintf(path, sizeof path, "%s/damaged-%s.core", g_dir, what);
    CU_ASSERT_FATAL(write_corrupt_copy(path, p, n));
    rbpeek_session *s = NULL;
    double secs = 0;
    rbpeek_snapshot *snap = snapshot_of(path, &s, &secs);
    fprintf(stderr, "  %-22s %.2fs, %zu threads", what, secs, snap ? rbpeek_snapshot_thread_count(snap) : 0);
    CU_ASSERT(secs < 10.0);
    CU_ASSERT_PTR_NOT_NULL(snap);
    /* the target has a handful of threads: damage must not conjure thousands */
    CU_ASSERT(!snap || rbpeek_snapshot_thread_count(snap) <= 64);
    if (snap) {
        const rbpeek_thread *t = damaged_thread ? find_thread(snap, damaged_thread) : NULL;
        if (t) fprintf(stderr, ", %s: %zu frames, error: %s", damaged_thread, t->nframes, t->error ? t->error : "-");
        /* The untouched threads still walk exactly. */
        if (damaged_thread && strcmp(damaged_thread, "deep") == 0) CU_ASSERT(frames_match(snap, "queue"));
    }
    fprintf(stderr, "\n");
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
    unlink(path);
}

static void test_corrupted_cores(void)
{
    if (!setup()) {
        CU_PASS("skipped: needs /usr/bin/ruby3.1 and gcore");
        return;
    }
    deep_addrs d;
    CU_ASSERT_FATAL(locate_deep(&d));
    static patch p[8];

    /* A thread list node pointing at itself: the list walk must stop. */
    check_damage("cyclic-thread-list", word_patch(&p[0], d.node, d.node), 1, NULL);
    /* A thread's list node pointing into another (intact, circular) list,
     * the VM's ractor list: the walk went round that list to the 100,000-
     * thread limit (issue #12, defect 2). */
    CU_ASSERT_FATAL(d.ractor_list != 0);
    check_damage("node-into-ractor-list", word_patch(&p[0], d.node, d.ractor_list), 1, NULL);
    /* A wild current frame pointer: that thread reports an error. */
    check_damage("wild-cfp", word_patch(&p[0], d.ec + (uint64_t)d.ec_cfp_off, UINT64_C(0xdeadbeef000)), 1, "deep");
    /* An absurd VM stack size. */
    check_damage("huge-stack-size", word_patch(&p[0], d.ec + (uint64_t)d.ec_stack_size_off, UINT64_C(1) << 60), 1,
                 "deep");

    /* Garbage over the first control frames (pc, iseq, ep pointing anywhere). */
    p[0].addr = d.cfp;
    p[0].len = 4096;
    for (size_t i = 0; i < p[0].len; i += 8) {
        uint64_t v = i % 16 ? d.cfp + i : UINT64_C(0x4141414141414140);
        memcpy(p[0].bytes + i, &v, 8);
    }
    check_damage("garbage-frames", p, 1, "deep");

    /* Every ep of the first frames pointing back at itself, not local:
     * the method-entry search must give up, not loop. */
    size_t n = 0;
    for (size_t i = 0; i < d.neps && n + 2 <= 8; i++) {
        word_patch(&p[n++], d.eps[i] - 8, d.eps[i]); /* specval: the previous ep is itself */
        word_patch(&p[n++], d.eps[i], 0);            /* flags: not a local env */
    }
    check_damage("cyclic-ep-chain", p, n, "deep");
}

/* The built-in table of the core's Ruby with one line appended (a later
 * line overrides an earlier one), as --layout: attach must refuse it with
 * one line naming the member (issue #12, defects 3 and 4). */
static void expect_layout_refused(const char *line, const char *field)
{
    bool exact = false;
    long idx = rbp_builtin_layout_find(g_version, RBP_MACHINE_DEFAULT, &exact);
    CU_ASSERT_FATAL(idx >= 0);
    char path[700];
    snprintf(path, sizeof path, "%s/bad.layout", g_dir);
    FILE *f = fopen(path, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%s\n%s\n", rbp_builtin_layout_text((size_t)idx), line);
    fclose(f);
    rbpeek_session *s = rbpeek_session_new();
    CU_ASSERT_EQUAL(rbpeek_session_use_core(s, g_core), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_set_layout_file(s, path), RBPEEK_OK);
    CU_ASSERT_EQUAL(rbpeek_session_attach(s), RBPEEK_ERR_NO_LAYOUT);
    const char *err = rbpeek_session_error(s);
    fprintf(stderr, "  %s: %s\n", line, err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, field));
    CU_ASSERT_PTR_NULL(strchr(err, '\n'));
    rbpeek_session_free(s);
    unlink(path);
}

static void test_layouts_that_do_not_fit_are_refused(void)
{
    if (!setup()) {
        CU_PASS("skipped: needs /usr/bin/ruby3.1 and gcore");
        return;
    }
    expect_layout_refused("ec_vm_stack 0 8 63 64", "ec_vm_stack");
    expect_layout_refused("cfp_iseq 96 8", "cfp_iseq");
    expect_layout_refused("th_status 240 4 30 4", "th_status");
}

/* Native stacks of the same core (docs/native.md): every thread's machine
 * stack unwound from its NT_PRSTATUS registers to its end, with its Ruby
 * frames merged in, each once and in Ruby's order; the C methods (sleep,
 * Array#each and Integer#times calling back into Ruby) found at their C
 * functions, though the stripped libruby names none of the static ones,
 * and one that is not (Queue#pop: rb_queue_pop tail-calls queue_do_pop,
 * so it has no frame of its own) named in the note, not guessed;
 * rb_vm_exec, where the VM runs each run of Ruby frames, hidden as
 * internal. */
static void test_native_stacks_merged(void)
{
    if (!setup()) {
        CU_PASS("skipped: needs /usr/bin/ruby3.1 and gcore");
        return;
    }
    rbpeek_session *s = open_core(g_core);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    rbpeek_snapshot *snap = NULL;
    rbpeek_status st = rbpeek_snapshot_take_native(s, 0, 0, &snap);
    if (st != RBPEEK_OK) fprintf(stderr, "take_native: %s\n", rbpeek_session_error(s));
    CU_ASSERT_EQUAL_FATAL(st, RBPEEK_OK);
    size_t cfuncs = 0, vm_execs = 0;
    for (size_t i = 0; i < rbpeek_snapshot_thread_count(snap); i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        const rbpeek_native_stack *ns = rbpeek_snapshot_native(snap, i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(ns);
        if (!ns->merged || ns->note || ns->cut)
            fprintf(stderr, "thread %s: merged %d, note %s, cut %s\n", t->name ? t->name : "main", ns->merged,
                    ns->note ? ns->note : "-", ns->cut ? ns->cut : "-");
        CU_ASSERT(ns->merged);
        CU_ASSERT_PTR_NULL(ns->cut);
        CU_ASSERT(ns->nnative > 5);
        size_t next = 0;
        for (size_t k = 0; k < ns->nframes; k++) {
            const rbpeek_stack_frame *f = &ns->frames[k];
            if (f->ruby) {
                CU_ASSERT(next < t->nframes && f->ruby == &t->frames[next]);
                next++;
                if (f->kind == RBPEEK_FRAME_CFUNC) {
                    /* at its function, or said not to be */
                    CU_ASSERT(f->native || (ns->note && strstr(ns->note, f->ruby->label)));
                    cfuncs += f->native != NULL;
                }
            } else if (f->native && f->native->symbol && strcmp(f->native->symbol, "rb_vm_exec") == 0) {
                CU_ASSERT(f->internal);
                vm_execs++;
            }
        }
        CU_ASSERT_EQUAL(next, t->nframes);
    }
    CU_ASSERT(cfuncs >= 5); /* sleep x3 (deep, callbacks, main), each, times */
    CU_ASSERT(vm_execs >= 6);
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
}

static const rbp_cu_test TESTS[] = {
    {"layouts whose members do not fit are refused at attach", test_layouts_that_do_not_fit_are_refused},
    {"pristine core matches Ruby's backtrace_locations", test_pristine_core_matches_ruby},
    {"native stacks of the core, merged with the Ruby frames", test_native_stacks_merged},
    {"corrupted cores: no crash, no hang, damage reported", test_corrupted_cores},
    {NULL, NULL},
};

RBP_CU_MAIN("walk_core", TESTS)
