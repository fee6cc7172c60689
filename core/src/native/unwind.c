/*
 * A target's unwinder: its modules (modules.c) reported to the backend
 * (libdwfl, loaded by backend.c), walks of its threads' native stacks, and
 * what is known of each pc met, cached. The cache matters for a sampler:
 * libdwfl finds a pc's symbol by scanning the module's symbol table, and
 * the same return addresses come back in every sample. The innermost
 * frame's pc is new at almost every sample, though, and for a pc in a
 * function no symbol names (the static functions of a stripped libruby,
 * the GC's) the scan reads the whole table and finds nothing: so each
 * function's range is kept too, and a new pc inside a known function is
 * named from it. The backend's strings stay valid until the module list
 * changes, which also empties the caches, so cached entries point at them
 * directly.
 */
#include "native/native.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"

#define PC_CACHE_ENTRIES (1u << 16)
#define RANGE_CACHE_ENTRIES (1u << 16)

typedef struct pcinfo {
    int32_t module;
    bool have_bias, lines_done, local;
    uint64_t bias;
    const char *symbol;
    uint64_t sym_offset;
    uint64_t lo, hi;
    const char *file;
    int32_t line;
} pcinfo;

/* A function met: [lo, hi) of the target's addresses, named symbol (NULL
 * when no symbol names it) from lo. */
typedef struct fnrange {
    uint64_t lo, hi, bias;
    const char *symbol;
    int32_t module;
    bool have_bias, local;
} fnrange;

struct rbp_native {
    rbp_mem *mem;
    const rbp_uw_ops *ops;
    rbp_uw *uw;
    rbp_uw_module *mods;
    size_t nmods;
    rbp_addrmap cache;      /* (pc << 1 | activation) -> pcinfo */
    rbp_addrmap names;      /* a backend's symbol -> its name without "@VERSION" (when it has one) */
    rbp_uw_frame *frames;   /* RBP_NATIVE_MAX_FRAMES, reused by every walk */
    fnrange *ranges;        /* sorted by lo, not overlapping; emptied when full */
    size_t nranges;
    int pid;                /* a live process's, or 0 */
    rbp_uw_range jit[RBP_UW_MAX_JIT]; /* the JIT regions the VM layer found */
    size_t njit;
    uint64_t gen;           /* rbp_native_generation */
    const rbp_regset *rs;   /* the target's registers */
};

static long host_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    return (long)rbp_mem_read_partial(ctx, addr, buf, len);
}

rbp_native *rbp_native_new(rbp_mem *mem, const rbp_regset *rs, char *err, size_t errlen)
{
    if (!rs) {
        snprintf(err, errlen, "rbpeek has no register set of the target's machine to unwind with");
        return NULL;
    }
    const rbp_uw_ops *ops = rbp_native_backend(err, errlen);
    if (!ops) return NULL;
    rbp_native *n = calloc(1, sizeof *n);
    if (!n || !(n->frames = malloc(RBP_NATIVE_MAX_FRAMES * sizeof *n->frames))) {
        free(n);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    n->mem = mem;
    n->ops = ops;
    n->rs = rs;
    rbp_addrmap_init(&n->cache, PC_CACHE_ENTRIES, free);
    rbp_addrmap_init(&n->names, 0, free);
    rbp_uw_host host = {.ctx = mem, .read = host_read};
    if (!(n->uw = ops->open(&host, rs, err, errlen))) {
        rbp_native_free(n);
        return NULL;
    }
    return n;
}

void rbp_native_free(rbp_native *n)
{
    if (!n) return;
    rbp_addrmap_destroy(&n->cache);
    rbp_addrmap_destroy(&n->names);
    if (n->uw) n->ops->close(n->uw);
    rbp_native_modules_free(n->mods, n->nmods);
    free(n->frames);
    free(n->ranges);
    free(n);
}

bool rbp_native_set_regions(rbp_native *n, const rbp_region *regions, size_t nregions, char *err, size_t errlen)
{
    rbp_addrmap_clear(&n->cache);
    rbp_addrmap_clear(&n->names);
    n->nranges = 0;
    n->gen++;
    rbp_native_modules_free(n->mods, n->nmods);
    n->nmods = rbp_native_modules(n->mem, regions, nregions, n->pid, &n->mods);
    return n->ops->set_modules(n->uw, n->mods, n->nmods, err, errlen);
}

void rbp_native_set_pid(rbp_native *n, int pid) { n->pid = pid; }

const rbp_regset *rbp_native_regset(const rbp_native *n) { return n ? n->rs : NULL; }

size_t rbp_native_module_count(const rbp_native *n) { return n ? n->nmods : 0; }

uint64_t rbp_native_generation(const rbp_native *n) { return n ? n->gen : 0; }

/* A symbol as its file names it, without the symbol version a debug
 * file's .symtab appends ("clock_nanosleep@GLIBC_2.2.5"): the copy lives
 * as long as the backend's string. */
static const char *plain_name(rbp_native *n, const char *name)
{
    const char *at = name ? strchr(name, '@') : NULL;
    if (!at || at == name) return name;
    char *copy = rbp_addrmap_get(&n->names, (uint64_t)(uintptr_t)name);
    if (copy) return copy;
    if (!(copy = strndup(name, (size_t)(at - name)))) return name;
    return rbp_addrmap_put(&n->names, (uint64_t)(uintptr_t)name, copy) ? copy : name;
}

/* The index of the first range whose lo is above at. */
static size_t range_after(const rbp_native *n, uint64_t at)
{
    size_t lo = 0, hi = n->nranges;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (n->ranges[mid].lo <= at) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static const fnrange *range_of(const rbp_native *n, uint64_t at)
{
    size_t i = range_after(n, at);
    return i > 0 && at < n->ranges[i - 1].hi ? &n->ranges[i - 1] : NULL;
}

/* Keeps pi's function (which holds at) as a range, when the whole of it
 * is one name: no symbol at all, or a sized symbol starting at lo. */
static void keep_range(rbp_native *n, uint64_t pc, uint64_t at, const pcinfo *pi)
{
    if (pi->module < 0 || !(pi->lo <= at && at < pi->hi)) return;
    if (pi->symbol && pi->sym_offset != pc - pi->lo) return;
    size_t i = range_after(n, pi->lo);
    if ((i > 0 && n->ranges[i - 1].hi > pi->lo) || (i < n->nranges && n->ranges[i].lo < pi->hi)) return;
    if (!n->ranges && !(n->ranges = malloc(RANGE_CACHE_ENTRIES * sizeof *n->ranges))) return;
    if (n->nranges == RANGE_CACHE_ENTRIES) {
        n->nranges = 0; /* as the pc cache does when full */
        i = 0;
    }
    memmove(&n->ranges[i + 1], &n->ranges[i], (n->nranges - i) * sizeof *n->ranges);
    n->ranges[i] = (fnrange){.lo = pi->lo, .hi = pi->hi, .bias = pi->bias, .symbol = pi->symbol,
                             .module = pi->module, .have_bias = pi->have_bias, .local = pi->local};
    n->nranges++;
}

/* The module holding addr, or NULL. */
static const rbp_uw_module *module_of(const rbp_native *n, uint64_t addr)
{
    size_t lo = 0, hi = n->nmods;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (n->mods[mid].start <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo > 0 && addr < n->mods[lo - 1].end ? &n->mods[lo - 1] : NULL;
}

static const pcinfo *lookup(rbp_native *n, uint64_t pc, bool activation, bool lines)
{
    uint64_t key = (pc << 1) | (activation ? 1 : 0);
    pcinfo *pi = key ? rbp_addrmap_get(&n->cache, key) : NULL;
    if (pi && (!lines || pi->lines_done)) return pi;
    uint64_t at = activation ? pc : pc - 1; /* inside the call, not after it (as the backend asks) */
    const fnrange *r = key && !pi && !lines ? range_of(n, at) : NULL;
    if (r && (r->module < 0 || module_of(n, at) != &n->mods[r->module])) r = NULL; /* never a neighbour's */
    if (r) {
        /* a new pc in a function met before: named as the function */
        if (!(pi = calloc(1, sizeof *pi))) return NULL;
        *pi = (pcinfo){.module = r->module, .have_bias = r->have_bias, .local = r->local, .bias = r->bias,
                       .symbol = r->symbol, .sym_offset = r->symbol ? pc - r->lo : 0, .lo = r->lo, .hi = r->hi};
        return rbp_addrmap_put(&n->cache, key, pi) ? pi : NULL; /* put frees it on failure */
    }
    rbp_uw_sym sym;
    bool found = n->ops->symbolize(n->uw, pc, activation, lines, &sym);
    if (!pi) {
        if (!(pi = calloc(1, sizeof *pi))) return NULL;
        if (!key || !rbp_addrmap_put(&n->cache, key, pi)) return NULL; /* put frees it on failure */
    }
    pi->module = found ? sym.module : -1;
    if (pi->module >= (int32_t)n->nmods || (pi->module >= 0 && module_of(n, at) != &n->mods[pi->module]))
        pi->module = -1; /* a module names only the addresses it holds */
    pi->have_bias = sym.have_bias;
    pi->bias = sym.bias;
    pi->symbol = plain_name(n, sym.symbol);
    pi->local = sym.local;
    pi->sym_offset = sym.sym_offset;
    pi->lo = sym.func_lo;
    pi->hi = sym.func_hi;
    pi->file = sym.file;
    pi->line = sym.line;
    pi->lines_done = lines;
    keep_range(n, pc, at, pi);
    return pi;
}

void rbp_native_describe(rbp_native *n, uint64_t pc, bool activation, bool lines, rbpeek_native_frame *out,
                         rbp_native_extra *extra)
{
    memset(out, 0, sizeof *out);
    out->pc = pc;
    out->activation = activation;
    if (extra) *extra = (rbp_native_extra){0};
    const pcinfo *pi = lookup(n, pc, activation, lines);
    if (!pi) return;
    if (pi->module >= 0) {
        const rbp_uw_module *m = &n->mods[pi->module];
        out->module = m->name;
        out->module_offset = pi->have_bias ? pc - pi->bias : pc - m->start;
    }
    out->symbol = pi->symbol;
    out->symbol_offset = pi->sym_offset;
    out->function = pi->lo;
    out->file = pi->file;
    out->line = pi->line;
    if (extra) *extra = (rbp_native_extra){pi->lo, pi->hi, pi->local, false};
    if (extra) extra->jit = rbp_native_in_jit(n, activation ? pc : pc - 1);
}

void rbp_native_set_jit(rbp_native *n, const rbp_uw_range *ranges, size_t count)
{
    size_t was = n->njit;
    rbp_uw_range old[RBP_UW_MAX_JIT];
    memcpy(old, n->jit, was * sizeof *old);
    n->njit = 0;
    for (size_t i = 0; i < count && n->njit < RBP_UW_MAX_JIT; i++)
        if (ranges[i].start < ranges[i].end) n->jit[n->njit++] = ranges[i];
    /* frames unwound before are stepped and flagged by the old regions */
    if (n->njit != was || memcmp(old, n->jit, was * sizeof *old) != 0) n->gen++;
    n->ops->set_jit(n->uw, n->jit, n->njit);
}

bool rbp_native_in_jit(const rbp_native *n, uint64_t addr)
{
    for (size_t i = 0; n && i < n->njit; i++)
        if (n->jit[i].start <= addr && addr < n->jit[i].end) return true;
    return false;
}

size_t rbp_native_unwind(rbp_native *n, const uint64_t regs[RBP_REGS_MAX], rbp_regmask known, size_t max,
                         bool lines, rbpeek_native_frame *out, rbp_native_extra *extra, char *cut, size_t cutlen)
{
    if (max > RBP_NATIVE_MAX_FRAMES) max = RBP_NATIVE_MAX_FRAMES;
    cut[0] = '\0';
    if (!n->nmods) {
        snprintf(cut, cutlen, "no loaded images are known (no mapped files with ELF headers)");
        return 0;
    }
    size_t got = n->ops->unwind(n->uw, regs, known, n->frames, max, cut, cutlen);
    for (size_t i = 0; i < got; i++) {
        rbp_native_describe(n, n->frames[i].pc, n->frames[i].activation, lines, &out[i], extra ? &extra[i] : NULL);
        if (extra) extra[i].jit = n->frames[i].jit;
    }
    if (got && cut[0] && (!strncmp(cut, "cannot unwind", 13) || !strncmp(cut, "no CFI", 6))) {
        /* Where the module of the last frame is known not to be usable
         * (its file missing, not the one mapped), that is the reason. */
        const rbpeek_native_frame *last = &out[got - 1];
        const rbp_uw_module *m = module_of(n, last->activation ? last->pc : last->pc - 1);
        const char *problem = m ? n->ops->module_problem(n->uw, (int32_t)(m - n->mods)) : "";
        if (m && problem && *problem)
            snprintf(cut, cutlen, "cannot unwind past 0x%llx in %s: %s", (unsigned long long)last->pc, m->name, problem);
    }
    return got;
}
