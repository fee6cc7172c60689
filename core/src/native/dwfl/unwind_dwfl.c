/*
 * librbpeek-unwind.so: native stack unwinding, symbol names and source
 * lines with elfutils' libdwfl, behind the plain interface of
 * native/unwind_backend.h. Only this folder's files include libdwfl.h
 * (this one, dwfl_files.c: the files libdwfl reads for a module, and
 * uw_state.h: the state they share), and they are built into their own
 * shared object, not into librbpeek (the header says why).
 *
 * One Dwfl per session, kept: modules are reported once (their ELF files,
 * CFI and symbol tables are loaded lazily by libdwfl and stay loaded), and
 * the process state is attached once with callbacks of our own
 * (dwfl_attach_state): memory comes from rbpeek's memory source (live,
 * core or debugger), registers from whoever stopped the thread. Each
 * unwind hands the registers over through the get_thread and
 * set_initial_registers callbacks and lets dwfl_getthread_frames walk;
 * the walk is bounded here, whatever libdwfl does: at most max frames, the
 * stack pointer must grow from frame to frame, a return address must lie
 * in a known module or in a JIT region (set_jit). A frame of JIT code has
 * no CFI: the walk stops there, the frame is stepped by YJIT's rules
 * (jit_step.c), and a new walk starts from its caller's registers.
 */
#define _GNU_SOURCE
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <elfutils/version.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/target_file.h"
#include "native/dwfl/eh_frame_hdr.h"
#include "native/dwfl/jit_step.h"
#include "native/dwfl/uw_state.h"
#include "native/unwind_backend.h"

#define EXPORT __attribute__((visibility("default")))

/* -- modules ---------------------------------------------------------------- */

static int32_t module_index(rbp_uw *u, Dwfl_Module *mod)
{
    Dwarf_Addr low = 0;
    if (!mod || !dwfl_module_info(mod, NULL, &low, NULL, NULL, NULL, NULL, NULL)) return -1;
    uw_module *m = rbp_uw_module_at(u, low);
    return m ? (int32_t)(m - u->mods) : -1;
}

static bool in_module(rbp_uw *u, uint64_t addr)
{
    size_t lo = 0, hi = u->nmods;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (u->mods[mid].start <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && addr < u->mods[lo - 1].end;
}

static bool in_module_cb(void *ctx, uint64_t addr) { return in_module(ctx, addr); }

static bool in_jit(const rbp_uw *u, uint64_t addr)
{
    for (size_t i = 0; i < u->njit; i++)
        if (u->jit[i].start <= addr && addr < u->jit[i].end) return true;
    return false;
}

/* The module libdwfl holds at, if at lies in it: libdwfl answers an
 * address above its last module with that module (Debian's ruby3.1 --yjit
 * maps its JIT code just above ld.so, whose name the JIT's pcs took). */
static Dwfl_Module *module_holding(rbp_uw *u, uint64_t at)
{
    Dwfl_Module *mod = u->dwfl ? dwfl_addrmodule(u->dwfl, at) : NULL;
    Dwarf_Addr low = 0, high = 0;
    if (!mod || !dwfl_module_info(mod, NULL, &low, &high, NULL, NULL, NULL, NULL)) return NULL;
    return low <= at && at < high && in_module(u, at) ? mod : NULL;
}

/* -- process state ----------------------------------------------------------- */

static pid_t next_thread_cb(Dwfl *dwfl, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)arg;
    (void)thread_argp;
    return 0; /* threads are never listed: each walk names its own */
}

static bool get_thread_cb(Dwfl *dwfl, pid_t tid, void *arg, void **thread_argp)
{
    (void)dwfl;
    (void)tid;
    *thread_argp = arg;
    return true;
}

static bool memory_read_cb(Dwfl *dwfl, Dwarf_Addr addr, Dwarf_Word *result, void *arg)
{
    (void)dwfl;
    rbp_uw *u = arg;
    uint64_t v;
    if (!rbp_uw_read_exact(u, addr, &v, sizeof v)) {
        if (!u->read_failed) u->failed_at = addr;
        u->read_failed = true;
        return false;
    }
    *result = v;
    return true;
}

/* The registers that are DWARF's (the set's first ndwarf: on x86-64 rip
 * among them, as the return address column), then the pc, as libdwfl's
 * own backends hand a live thread's over. */
static bool set_initial_registers_cb(Dwfl_Thread *thread, void *arg)
{
    rbp_uw *u = arg;
    if (!u->regs) return false;
    rbp_regmask dwarf = u->rs->ndwarf >= 64 ? ~(rbp_regmask)0 : ((rbp_regmask)1 << u->rs->ndwarf) - 1;
    if ((u->known & dwarf) == dwarf) {
        if (!dwfl_thread_state_registers(thread, 0, u->rs->ndwarf, u->regs)) return false;
    } else {
        for (int i = 0; i < u->rs->ndwarf; i++)
            if ((u->known >> i) & 1)
                if (!dwfl_thread_state_registers(thread, i, 1, &u->regs[i])) return false;
    }
    dwfl_thread_state_register_pc(thread, u->regs[u->rs->pc]);
    return true;
}

static const Dwfl_Thread_Callbacks THREAD_CALLBACKS = {
    .next_thread = next_thread_cb,
    .get_thread = get_thread_cb,
    .memory_read = memory_read_cb,
    .set_initial_registers = set_initial_registers_cb,
};

/* -- the interface ------------------------------------------------------------ */

static const char *uw_version(void)
{
    static char v[32];
    if (!v[0]) snprintf(v, sizeof v, "elfutils %s", dwfl_version(NULL));
    return v;
}

static void free_modules(rbp_uw *u)
{
    for (size_t i = 0; i < u->nmods; i++) {
        free(u->mods[i].path);
        free(u->mods[i].name);
        free(u->mods[i].image);
    }
    free(u->mods);
    u->mods = NULL;
    u->nmods = 0;
}

static void uw_close(rbp_uw *u)
{
    if (!u) return;
    if (u->dwfl) dwfl_end(u->dwfl); /* before the vdso images it may point into */
    if (u->arch_elf) elf_end(u->arch_elf);
    free_modules(u);
    free(u);
}

static rbp_uw *uw_open(const rbp_uw_host *host, const rbp_regset *rs, char *err, size_t errlen)
{
    if (!host || !host->read) {
        snprintf(err, errlen, "no memory to unwind with");
        return NULL;
    }
    if (!rs || rs->nregs > RBP_REGS_MAX || rs->ndwarf > rs->nregs || rs->sp >= rs->nregs || rs->pc >= rs->nregs) {
        snprintf(err, errlen, "no register set of the target's machine to unwind with");
        return NULL;
    }
    elf_version(EV_CURRENT);
    rbp_uw *u = calloc(1, sizeof *u);
    if (!u) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    u->host = *host;
    u->rs = rs;
    /* An ELF header of the target's machine is all dwfl_attach_state needs
     * to pick its architecture backend, whether or not any module can be
     * read: libdwfl unwinds another machine's stacks as well as its own. */
    Elf64_Ehdr *eh = (Elf64_Ehdr *)u->arch_image;
    memcpy(eh->e_ident, ELFMAG, SELFMAG);
    eh->e_ident[EI_CLASS] = ELFCLASS64;
    eh->e_ident[EI_DATA] = ELFDATA2LSB;
    eh->e_ident[EI_VERSION] = EV_CURRENT;
    eh->e_type = ET_CORE;
    eh->e_machine = rs->machine;
    eh->e_version = EV_CURRENT;
    eh->e_ehsize = sizeof *eh;
    u->arch_elf = elf_memory((char *)u->arch_image, sizeof u->arch_image);
    if (!u->arch_elf) {
        snprintf(err, errlen, "libelf: %s", elf_errmsg(-1));
        uw_close(u);
        return NULL;
    }
    return u;
}

static bool uw_set_modules(rbp_uw *u, const rbp_uw_module *mods, size_t n, char *err, size_t errlen)
{
    /* A new Dwfl: libdwfl keeps a module's file and tables for as long as
     * the module is reported, and the list is replaced whole. */
    if (u->dwfl) dwfl_end(u->dwfl);
    u->attached = false;
    free_modules(u);
    if (!(u->dwfl = dwfl_begin(&rbp_uw_callbacks))) {
        snprintf(err, errlen, "libdwfl: %s", dwfl_errmsg(-1));
        return false;
    }
    if (n && !(u->mods = calloc(n, sizeof *u->mods))) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (mods[i].end <= mods[i].start) continue;
        if (u->nmods && mods[i].start < u->mods[u->nmods - 1].end) continue; /* overlaps the one before: dropped */
        uw_module *m = &u->mods[u->nmods];
        *m = (uw_module){.start = mods[i].start, .end = mods[i].end};
        m->name = strdup(mods[i].name ? mods[i].name : mods[i].path ? mods[i].path : "?");
        if (mods[i].path) m->path = strdup(mods[i].path);
        if (mods[i].problem) snprintf(m->problem, sizeof m->problem, "%s", mods[i].problem);
        if (!m->name || (mods[i].path && !m->path)) {
            free(m->name);
            free(m->path);
            snprintf(err, errlen, "out of memory");
            return false;
        }
        u->nmods++;
    }
    dwfl_report_begin(u->dwfl);
    for (size_t i = 0; i < u->nmods; i++) {
        uw_module *m = &u->mods[i];
        Dwfl_Module *dm = dwfl_report_module(u->dwfl, m->name, m->start, m->end);
        if (!dm) {
            snprintf(m->problem, sizeof m->problem, "libdwfl: %s", dwfl_errmsg(-1));
            continue;
        }
        void **ud = NULL;
        dwfl_module_info(dm, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
        if (ud) *ud = u;
        uint8_t id[MAX_BUILD_ID];
        uint64_t id_vaddr = 0;
        size_t idlen = m->path ? rbp_uw_memory_build_id(u, m->start, id, &id_vaddr) : 0;
        if (idlen) dwfl_module_report_build_id(dm, id, idlen, id_vaddr);
    }
    dwfl_report_end(u->dwfl, NULL, NULL);
    if (!dwfl_attach_state(u->dwfl, u->arch_elf, 1, &THREAD_CALLBACKS, u)) {
        snprintf(err, errlen, "libdwfl: cannot attach the unwinder's state: %s", dwfl_errmsg(-1));
        return false;
    }
    u->attached = true;
    return true;
}

typedef struct walk {
    rbp_uw *u;
    rbp_uw_frame *out;
    size_t n, max;
    char *why;
    size_t whylen;
    size_t first;                   /* this pass's first frame: the thread's, or a JIT frame's caller */
    bool jit_stop;                  /* the pass stopped at a frame of JIT code, whose registers are: */
    uint64_t jregs[RBP_REGS_MAX];
    rbp_regmask jknown;
} walk;

/* The registers libdwfl knows of a frame (the pc aside). */
static void frame_regs(const rbp_regset *rs, Dwfl_Frame *state, uint64_t regs[RBP_REGS_MAX], rbp_regmask *known)
{
    *known = 0;
    memset(regs, 0, RBP_REGS_MAX * sizeof *regs);
    for (unsigned i = 0; i < rs->ndwarf; i++) {
        Dwarf_Word v;
        if (i != rs->pc && dwfl_frame_reg(state, i, &v) == 0) {
            regs[i] = v;
            *known |= (rbp_regmask)1 << i;
        }
    }
}

/* Whether the CFI of pc's module covers it. Where it does not, libdwfl
 * unwinds the frame by its frame pointer (rbp or x29 chain) instead, which gives
 * garbage for code built without frame pointers (most of it): a frame
 * found that way is not shown. */
static bool has_cfi(rbp_uw *u, uint64_t pc, bool activation)
{
    uint64_t at = activation ? pc : pc - 1;
    Dwfl_Module *mod = module_holding(u, at);
    if (!mod) return false;
    Dwarf_CFI *cfi[2];
    Dwarf_Addr biases[2];
    cfi[0] = dwfl_module_eh_cfi(mod, &biases[0]);
    cfi[1] = NULL;
    for (int i = 0; i < 2; i++) {
        if (i == 1) cfi[1] = dwfl_module_dwarf_cfi(mod, &biases[1]);
        Dwarf_Frame *fr = NULL;
        if (cfi[i] && dwarf_cfi_addrframe(cfi[i], at - biases[i], &fr) == 0 && fr) {
            free(fr);
            return true;
        }
    }
    return false;
}

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    walk *w = arg;
    Dwarf_Addr pc = 0;
    bool activation = false;
    if (!dwfl_frame_pc(state, &pc, &activation)) {
        snprintf(w->why, w->whylen, "libdwfl: %s", dwfl_errmsg(-1));
        return DWARF_CB_ABORT;
    }
    if (w->n > 0 && w->n == w->first)
        activation = false; /* a JIT frame's caller: its pc is the return address the step verified */
    Dwarf_Word sp = 0;
    bool have_sp = dwfl_frame_reg(state, w->u->rs->sp, &sp) == 0;
    uint64_t at = activation ? pc : pc - 1;
    if (w->n > w->first) {
        const rbp_uw_frame *prev = &w->out[w->n - 1];
        if (!has_cfi(w->u, prev->pc, prev->activation)) {
            snprintf(w->why, w->whylen, "no CFI covers 0x%llx%s: the frames beyond it cannot be unwound reliably",
                     (unsigned long long)prev->pc, in_module(w->u, prev->activation ? prev->pc : prev->pc - 1)
                                                     ? "" : ", which lies in no mapped file");
            return DWARF_CB_ABORT;
        }
        if (!in_module(w->u, at) && !in_jit(w->u, at)) {
            snprintf(w->why, w->whylen, "the return address 0x%llx lies in no mapped file %s", (unsigned long long)pc,
                     w->u->njit ? "nor in YJIT's code (a damaged stack, or JIT code rbpeek does not know)"
                                : "(a damaged stack, or code without CFI such as JIT code)");
            return DWARF_CB_ABORT;
        }
    }
    if (w->n > 0 && have_sp && w->out[w->n - 1].sp && sp <= w->out[w->n - 1].sp) {
        snprintf(w->why, w->whylen, "the stack pointer did not grow (0x%llx after 0x%llx): a loop or a "
                 "damaged stack", (unsigned long long)sp, (unsigned long long)w->out[w->n - 1].sp);
        return DWARF_CB_ABORT;
    }
    if (w->n >= w->max) {
        snprintf(w->why, w->whylen, "cut after %zu native frames", w->max);
        return DWARF_CB_ABORT;
    }
    bool jit = in_jit(w->u, at);
    w->out[w->n++] = (rbp_uw_frame){.pc = pc, .sp = have_sp ? sp : 0, .activation = activation, .jit = jit};
    w->u->read_failed = false;
    if (jit) { /* no CFI: stepped by YJIT's rules, then a new pass */
        frame_regs(w->u->rs, state, w->jregs, &w->jknown);
        w->jit_stop = true;
        return DWARF_CB_ABORT;
    }
    return DWARF_CB_OK;
}

/* One pass of libdwfl's walk from regs, appending to w. Returns
 * dwfl_getthread_frames' result. */
static int walk_pass(rbp_uw *u, walk *w, const uint64_t *regs, rbp_regmask known)
{
    w->first = w->n;
    w->jit_stop = false;
    u->regs = regs;
    u->known = known;
    u->read_failed = false;
    int rc = dwfl_getthread_frames(u->dwfl, 1, frame_cb, w);
    u->regs = NULL;
    return rc;
}

static size_t uw_unwind(rbp_uw *u, const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, rbp_uw_frame *out,
                        size_t max, char *why, size_t whylen)
{
    why[0] = '\0';
    if (!u->attached) {
        snprintf(why, whylen, "the unwinder has no modules");
        return 0;
    }
    if (!((known >> u->rs->sp) & 1) || !((known >> u->rs->pc) & 1)) {
        snprintf(why, whylen, "the thread's stack and instruction pointers are not known");
        return 0;
    }
    walk w = {.u = u, .out = out, .max = max, .why = why, .whylen = whylen};
    uint64_t cur[RBP_REGS_MAX];
    memcpy(cur, regs, sizeof cur);
    int rc = walk_pass(u, &w, cur, known);
    /* each pass that stops at a JIT frame has added it: bounded by max */
    while (w.jit_stop && !why[0]) {
        rbp_regmask k = 0;
        if (u->rs->machine != EM_X86_64) { /* YJIT's frames are stepped by x86-64's rule alone */
            snprintf(why, whylen, "cannot unwind past JIT code: YJIT's frames are stepped on x86-64 only");
            return w.n;
        }
        if (!rbp_jit_step(&u->host, in_module_cb, u, w.jregs, w.jknown, cur, &k, why, whylen)) return w.n;
        if (w.n >= max) {
            snprintf(why, whylen, "cut after %zu native frames", max);
            return w.n;
        }
        rc = walk_pass(u, &w, cur, k);
    }
    if (rc == 0 && u->read_failed && w.n) {
        /* libdwfl ends the walk quietly when the stack cannot be read: that
         * is a cut, not the stack's end (which CFI marks) */
        snprintf(why, whylen, "cannot unwind past 0x%llx: the stack at 0x%llx cannot be read",
                 (unsigned long long)out[w.n - 1].pc, (unsigned long long)u->failed_at);
    }
    if (rc == -1 && !why[0]) {
        /* libdwfl could not unwind past the last frame: say where */
        const char *msg = dwfl_errmsg(-1);
        if (w.n) {
            uint64_t pc = out[w.n - 1].pc;
            snprintf(why, whylen, "cannot unwind past 0x%llx: %s", (unsigned long long)pc, msg ? msg : "?");
        } else {
            snprintf(why, whylen, "cannot unwind: %s", msg ? msg : "?");
        }
    }
    return w.n;
}

static bool uw_symbolize(rbp_uw *u, uint64_t pc, bool activation, bool lines, rbp_uw_sym *out)
{
    memset(out, 0, sizeof *out);
    out->module = -1;
    if (!u->dwfl) return false;
    uint64_t at = activation ? pc : pc - 1; /* inside the call, not after it */
    Dwfl_Module *mod = in_jit(u, at) ? NULL : module_holding(u, at);
    if (!mod) return false;
    out->module = module_index(u, mod);
    Dwarf_Addr elf_bias = 0;
    if (dwfl_module_getelf(mod, &elf_bias)) {
        out->have_bias = true;
        out->bias = elf_bias;
    }
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, at, &off, &sym, NULL, NULL, NULL);
    if (name && *name) {
        out->symbol = name;
        out->local = GELF_ST_BIND(sym.st_info) == STB_LOCAL;
        out->sym_offset = pc - (at - off);
        if (sym.st_size) {
            out->func_lo = at - off;
            out->func_hi = out->func_lo + sym.st_size;
        }
    }
    /* Where no symbol names it (the static functions of a stripped
     * libruby), the function's start is its FDE's: the entry of the
     * module's .eh_frame_hdr search table that holds the pc. */
    if (!out->func_lo) {
        Dwarf_Addr bias = 0;
        Elf *e = dwfl_module_getelf(mod, &bias);
        if (e) rbp_eh_frame_hdr_function(e, bias, at, &out->func_lo, &out->func_hi);
    }
    if (lines) {
        Dwfl_Line *l = dwfl_module_getsrc(mod, at);
        int line = 0;
        const char *file = l ? dwfl_lineinfo(l, NULL, &line, NULL, NULL, NULL) : NULL;
        if (file && line > 0) {
            out->file = file;
            out->line = line;
        }
    }
    return true;
}

static const char *uw_module_problem(rbp_uw *u, int32_t module)
{
    if (module < 0 || (size_t)module >= u->nmods) return "";
    uw_module *m = &u->mods[module];
    if (!m->problem[0] && u->dwfl) {
        /* libdwfl's own reason, e.g. "ELF file does not match build ID" */
        Dwfl_Module *dm = dwfl_addrmodule(u->dwfl, m->start);
        Dwarf_Addr bias;
        if (dm && !dwfl_module_getelf(dm, &bias))
            snprintf(m->problem, sizeof m->problem, "its file cannot be used (%s)", dwfl_errmsg(-1));
    }
    return m->problem;
}

static void uw_set_jit(rbp_uw *u, const rbp_uw_range *ranges, size_t n)
{
    u->njit = 0;
    for (size_t i = 0; i < n && u->njit < RBP_UW_MAX_JIT; i++)
        if (ranges[i].start < ranges[i].end) u->jit[u->njit++] = ranges[i];
}

static const rbp_uw_ops OPS = {
    .abi = RBP_UW_ABI,
    .version = uw_version,
    .open = uw_open,
    .close = uw_close,
    .set_modules = uw_set_modules,
    .unwind = uw_unwind,
    .symbolize = uw_symbolize,
    .module_problem = uw_module_problem,
    .set_jit = uw_set_jit,
};

EXPORT const rbp_uw_ops *rbp_uw_backend(void) { return &OPS; }
