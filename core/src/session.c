/*
 * Session lifecycle, the one place that ties the layers together:
 * choosing a memory source (memory/), collecting overrides, attach, which
 * runs the three discovery steps in order (version, layout, VM; vm/) and
 * records how each fact was found so `ruby info` can say so, and close,
 * which frees what every layer hung off the session.
 */
#include "context/context.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "memory/elf_symbols.h"
#include "memory/linkmap.h"
#include "memory/machine.h"
#include "memory/regset.h"
#include "native/native.h"
#include "vm/discover.h"
#include "vm/kernel_tid.h"
#include "vm/robject.h"
#include "vm/symbolize.h"
#include "vm/validate.h"

static const char *const STATUS_NAMES[] = {
    "RBPEEK_OK",        "RBPEEK_ERR_ARG",      "RBPEEK_ERR_NOMEM",     "RBPEEK_ERR_READ",
    "RBPEEK_ERR_NOT_RUBY", "RBPEEK_ERR_NO_LAYOUT", "RBPEEK_ERR_CORRUPT", "RBPEEK_ERR_NOT_FOUND",
    "RBPEEK_ERR_IO",    "RBPEEK_ERR_UNSUPPORTED", "RBPEEK_ERR_STATE",
};

const char *rbpeek_status_name(rbpeek_status status)
{
    if ((unsigned)status < sizeof STATUS_NAMES / sizeof STATUS_NAMES[0]) return STATUS_NAMES[status];
    return "RBPEEK_ERR_UNKNOWN";
}

rbpeek_session *rbpeek_session_new(void)
{
    rbpeek_session *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    rbp_layout_clear(&s->layout);
    return s;
}

static void free_regions(rbpeek_session *s)
{
    for (size_t i = 0; i < s->nregions; i++) free(s->regions[i].path);
    free(s->regions);
    s->regions = NULL;
    s->nregions = s->regions_cap = 0;
}

/* Frees the caches hung off the session by the layers below: the symbol
 * and label caches (vm/), the ELF parse results (memory/), the frame
 * walker's scratch room. */
static void free_caches(rbpeek_session *s)
{
    rbp_symcache_free(s->symcache);
    s->symcache = NULL;
    rbp_idcache_free(s->idcache);
    s->idcache = NULL;
    rbp_elfcache_free(s->elfcache);
    s->elfcache = NULL;
    rbp_scratch_free(&s->walk_raw);
    rbp_scratch_free(&s->walk_cframes);
    rbp_scratch_free(&s->walk_pending);
    rbp_scratch_free(&s->walk_values);
}

/* What native stacks hang off the session: the unwinder (it reads
 * through the memory source), the hold, the core's registers. */
static void free_native(rbpeek_session *s)
{
    rbp_hold_release(s->hold);
    s->hold = NULL;
    rbp_native_free(s->native);
    s->native = NULL;
    rbp_scratch_free(&s->native_frames);
    rbp_scratch_free(&s->native_extra);
    free(s->core_threads);
    s->core_threads = NULL;
    s->ncore_threads = 0;
    s->core_threads_read = false;
    free(s->core_path);
    s->core_path = NULL;
    free(s->thread_ids);
    s->thread_ids = NULL;
    s->nthread_ids = 0;
    s->pid = 0;
    s->vm_exec_looked_up = false;
    s->instantiates_looked_up = false;
}

void rbpeek_session_free(rbpeek_session *s)
{
    if (!s) return;
    free_native(s);
    rbp_mem_free(s->mem);
    free_regions(s);
    free(s->layout_file);
    free(s->sysroot);
    for (size_t i = 0; i < s->ndebug_files; i++) free(s->debug_files[i]);
    free(s->debug_files);
    free_caches(s);
    rbp_kernel_tids_free(s);
    free(s);
}

const char *rbpeek_session_error(const rbpeek_session *s) { return s ? s->error : "no session"; }

static rbpeek_status set_source(rbpeek_session *s, rbp_source src)
{
    rbp_mem *m = rbp_mem_new(src);
    if (!m) {
        if (src.close) src.close(src.ctx);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    }
    free_native(s);
    rbp_mem_free(s->mem);
    s->mem = m;
    s->pid = 0;
    s->core_note[0] = '\0';
    s->debugger_files = false;
    rbp_kernel_tids_free(s);   /* what the kernel lists is the new source's to say */
    rbp_mem_set_warn(m, rbp_session_warnsink(s));
    s->attached = false;
    return RBPEEK_OK;
}

/* A new target: what was said of the last one's machine is not its. */
static void forget_machine(rbpeek_session *s)
{
    s->machine = RBP_MACHINE_UNKNOWN;
    s->machine_how[0] = '\0';
}

/* A core's machine, from its ELF header, before anything else reads it:
 * an arm64 core is refused as such, not as a malformed one. */
static rbpeek_status core_machine(rbpeek_session *s, const char *core_path)
{
    uint16_t m;
    if (!rbp_file_machine(core_path, &m)) return RBPEEK_OK;   /* the core's reader says what is wrong */
    return rbp_machine_establish(s, m, "the core's ELF header");
}

rbpeek_status rbpeek_session_use_reader(rbpeek_session *s, rbpeek_read_fn fn, void *ctx)
{
    if (!s || !fn) return rbp_fail(s, RBPEEK_ERR_ARG, "use_reader: no read function given");
    forget_machine(s);
    return set_source(s, (rbp_source){.read = fn, .ctx = ctx, .kind = "callback"});
}

/* Regions a source or a core names (not the debugger's own list). */
static void adopt_regions(rbpeek_session *s, rbp_region *r, size_t n)
{
    bool listed = s->debugger_files;
    for (size_t i = 0; i < n; i++) {
        rbpeek_session_add_region(s, r[i].start, r[i].end, r[i].file_offset, r[i].path);
        free(r[i].path);
    }
    s->debugger_files = listed;
    free(r);
}

rbpeek_status rbpeek_session_use_pid(rbpeek_session *s, int pid)
{
    if (!s || pid <= 0) return rbp_fail(s, RBPEEK_ERR_ARG, "use_pid: invalid pid %d", pid);
    forget_machine(s);
    rbp_source src;
    char err[256];
    if (!rbp_source_proc(pid, &src, err, sizeof err)) return rbp_fail(s, RBPEEK_ERR_IO, "%s", err);
    rbpeek_status st = set_source(s, src);
    if (st != RBPEEK_OK) return st;
    s->pid = pid;
    rbp_region *r = NULL;
    size_t n = rbp_source_proc_regions(pid, &r);
    adopt_regions(s, r, n);
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_use_core(rbpeek_session *s, const char *core_path)
{
    if (!s || !core_path) return rbp_fail(s, RBPEEK_ERR_ARG, "use_core: no core file given");
    forget_machine(s);
    rbpeek_status mst = core_machine(s, core_path);
    if (mst != RBPEEK_OK) return mst;
    rbp_source src;
    char err[256];
    if (!rbp_source_core_at(core_path, s->sysroot, &src, err, sizeof err))
        return rbp_fail(s, RBPEEK_ERR_IO, "%s", err);
    rbpeek_status st = set_source(s, src);
    if (st != RBPEEK_OK) return st;
    if (!(s->core_path = strdup(core_path))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions_at(core_path, s->sysroot, &r);
    adopt_regions(s, r, n);
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_add_core_regions(rbpeek_session *s, const char *core_path)
{
    if (!s || !core_path) return rbp_fail(s, RBPEEK_ERR_ARG, "add_core_regions: no core file given");
    rbpeek_status mst = core_machine(s, core_path);
    if (mst != RBPEEK_OK) return mst;
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions_at(core_path, s->sysroot, &r);
    if (!n) return rbp_fail(s, RBPEEK_ERR_IO, "%s lists no mapped files (not an ELF core?)", core_path);
    adopt_regions(s, r, n);
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_core_file(rbpeek_session *s, const char *core_path)
{
    if (!s || !core_path) return rbp_fail(s, RBPEEK_ERR_ARG, "set_core_file: no core file given");
    s->core_note[0] = '\0';
    rbpeek_status mst = core_machine(s, core_path);
    if (mst != RBPEEK_OK) return mst;
    rbp_source src;
    char err[256];
    if (!rbp_source_core_at(core_path, s->sysroot, &src, err, sizeof err))
        return rbp_fail(s, RBPEEK_ERR_IO, "%s", err);
    const char *note = src.note ? src.note(src.ctx) : NULL;
    if (note) snprintf(s->core_note, sizeof s->core_note, "%s", note);
    /* The debugger lists the mapped files and reads their pages. Where it
     * knows none of them (gdb on a core without NT_FILE, whose files only
     * the dynamic linker's list in it names: it reads their pages as
     * zeros), the core's own are taken, and the core is read by rbpeek's
     * own reader of it, which maps those files, before the debugger. */
    bool linkmap = !s->debugger_files && rbp_source_core_by_linkmap(&src);
    if (linkmap && s->mem) rbp_mem_add_source(s->mem, src, true);
    else if (src.close) src.close(src.ctx);
    rbp_region *r = NULL;
    size_t n = rbp_source_core_regions_at(core_path, s->sysroot, &r), k = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].path || !s->debugger_files) r[k++] = r[i];
        else free(r[i].path);
    }
    adopt_regions(s, r, k);
    return RBPEEK_OK;
}

static long linkmap_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    rbpeek_session *s = ctx;
    size_t got = rbp_mem_read_partial(s->mem, addr, buf, len);
    return got ? (long)got : -1;
}

static bool linkmap_map(void *ctx, const char *path, const rbp_lm_seg *segs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (rbpeek_session_add_region(ctx, segs[i].start, segs[i].end, segs[i].file_ofs, path) != RBPEEK_OK)
            return false;
    return true;
}

rbpeek_status rbpeek_session_add_linkmap_regions(rbpeek_session *s, uint64_t phdr, uint64_t execfn, uint64_t pagesz)
{
    if (!s || !s->mem) return rbp_fail(s, RBPEEK_ERR_ARG, "add_linkmap_regions: no memory source yet");
    rbp_linkmap_io io = {s, linkmap_read, linkmap_map, rbp_machine_of_target(s), "the program", s->core_note,
                         sizeof s->core_note};
    if (!rbp_linkmap_walk(&io, s->sysroot, phdr, execfn, pagesz))
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_kernel_tids(rbpeek_session *s, const int64_t *tids, size_t n)
{
    if (!s || (n && !tids)) return rbp_fail(s, RBPEEK_ERR_ARG, "set_kernel_tids: no list given");
    if (!rbp_kernel_tids_set(s, tids, n)) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_arch(rbpeek_session *s, const char *debugger_arch)
{
    if (!s || !debugger_arch) return rbp_fail(s, RBPEEK_ERR_ARG, "set_arch: no architecture given");
    char how[200];
    snprintf(how, sizeof how, "the debugger's architecture %s", debugger_arch);
    return rbp_machine_establish(s, rbp_machine_from_debugger(debugger_arch), how);
}

rbpeek_status rbpeek_session_use_lookup(rbpeek_session *s, rbpeek_lookup_fn fn, void *ctx)
{
    if (!s) return RBPEEK_ERR_ARG;
    s->lookup = fn;
    s->lookup_ctx = ctx;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_add_region(rbpeek_session *s, uint64_t start, uint64_t end, uint64_t file_offset,
                                        const char *path)
{
    if (!s || end <= start) return rbp_fail(s, RBPEEK_ERR_ARG, "add_region: empty region");
    if (s->nregions == s->regions_cap) {
        size_t cap = s->regions_cap ? s->regions_cap * 2 : 64;
        rbp_region *r = realloc(s->regions, cap * sizeof *r);
        if (!r) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
        s->regions = r;
        s->regions_cap = cap;
    }
    s->regions[s->nregions++] = (rbp_region){start, end, file_offset, path && *path ? strdup(path) : NULL};
    s->debugger_files |= path && *path;   /* adopt_regions undoes it for a source's own */
    s->native_stale = true;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_use_registers(rbpeek_session *s, rbpeek_regs_fn fn, void *ctx)
{
    if (!s) return RBPEEK_ERR_ARG;
    s->regs_fn = fn;
    s->regs_ctx = ctx;
    return RBPEEK_OK;
}

const char *rbpeek_session_register_names(rbpeek_session *s)
{
    if (!s) return "";
    const rbp_regset *rs = rbp_regset_of(rbp_machine_of_target(s));
    size_t used = 0;
    s->register_names[0] = '\0';
    for (unsigned i = 0; rs && i < rs->nregs && used < sizeof s->register_names; i++)
        used += (size_t)snprintf(s->register_names + used, sizeof s->register_names - used, "%s%s", i ? " " : "",
                                 rs->names[i]);
    return s->register_names;
}

rbpeek_status rbpeek_session_set_sysroot(rbpeek_session *s, const char *dir)
{
    if (!s) return RBPEEK_ERR_ARG;
    free(s->sysroot);
    s->sysroot = NULL;
    if (dir && *dir && !(s->sysroot = strdup(dir))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_thread_ids(rbpeek_session *s, const int64_t *tids, size_t n)
{
    if (!s || (n && !tids)) return rbp_fail(s, RBPEEK_ERR_ARG, "set_thread_ids: no TIDs given");
    int64_t *copy = n ? malloc(n * sizeof *copy) : NULL;
    if (n && !copy) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    if (n) memcpy(copy, tids, n * sizeof *copy);
    free(s->thread_ids);
    s->thread_ids = copy;
    s->nthread_ids = n;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_hold(rbpeek_session *s)
{
    if (!s) return RBPEEK_ERR_ARG;
    if (s->pid <= 0) return rbp_fail(s, RBPEEK_ERR_STATE, "hold: the session does not read a live process by pid");
    if (s->hold) return RBPEEK_OK;
    char err[300];
    if (!(s->hold = rbp_hold_take(s->pid, err, sizeof err))) return rbp_fail(s, RBPEEK_ERR_STATE, "%s", err);
    rbp_mem_invalidate(s->mem); /* what was read before the stop is stale */
    return RBPEEK_OK;
}

void rbpeek_session_release(rbpeek_session *s)
{
    if (!s || !s->hold) return;
    rbp_hold_release(s->hold);
    s->hold = NULL;
    rbp_mem_invalidate(s->mem);
}

rbpeek_status rbpeek_session_set_vm(rbpeek_session *s, uint64_t vm_addr)
{
    if (!s) return RBPEEK_ERR_ARG;
    s->vm_override = vm_addr;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_layout_file(rbpeek_session *s, const char *path)
{
    if (!s) return RBPEEK_ERR_ARG;
    free(s->layout_file);
    s->layout_file = path && *path ? strdup(path) : NULL;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_layout_dwarf(rbpeek_session *s, int on)
{
    if (!s) return RBPEEK_ERR_ARG;
    s->layout_dwarf = on != 0;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_set_ruby_version(rbpeek_session *s, const char *version)
{
    if (!s) return RBPEEK_ERR_ARG;
    int a, b, c;
    if (version && *version && sscanf(version, "%d.%d.%d", &a, &b, &c) != 3)
        return rbp_fail(s, RBPEEK_ERR_ARG, "--ruby-version wants X.Y.Z (e.g. 3.1.2), not '%s'", version);
    snprintf(s->version_override, sizeof s->version_override, "%s", version ? version : "");
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_add_debug_file(rbpeek_session *s, const char *path)
{
    if (!s || !path || !*path) return rbp_fail(s, RBPEEK_ERR_ARG, "add_debug_file: no path");
    for (size_t i = 0; i < s->ndebug_files; i++)
        if (strcmp(s->debug_files[i], path) == 0) return RBPEEK_OK;
    char **d = realloc(s->debug_files, (s->ndebug_files + 1) * sizeof *d);
    if (!d) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    s->debug_files = d;
    if (!(d[s->ndebug_files] = strdup(path))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
    s->ndebug_files++;
    return RBPEEK_OK;
}

rbpeek_status rbpeek_session_attach(rbpeek_session *s)
{
    if (!s) return RBPEEK_ERR_ARG;
    if (!s->mem) return rbp_fail(s, RBPEEK_ERR_STATE, "no memory source: call use_reader, use_pid or use_core first");
    s->attached = false;
    s->error[0] = s->warning[0] = '\0';
    rbp_mem_invalidate(s->mem);
    free_caches(s);
    s->gc_objspace = 0;
    s->vm_exec_looked_up = false;
    s->instantiates_looked_up = false;

    /* The target's machine first: a table of another architecture can
     * validate by chance and print garbage. */
    rbpeek_status st = rbp_discover_machine(s);
    if (st != RBPEEK_OK) return st;
    st = rbp_discover_version(s);
    /* Each layout candidate in turn, until one the target validates: a
     * refusal (NO_LAYOUT) moves on to the next; any other failure is the
     * target's, whatever the layout. */
    rbp_layout_try it = {0};
    for (rbpeek_status last = RBPEEK_OK; st == RBPEEK_OK;) {
        st = rbp_discover_layout_next(s, &it, last);
        if (st != RBPEEK_OK) break;
        st = rbp_discover_vm(s);
        if (st == RBPEEK_OK) st = rbp_validate_layout(s);
        if (st != RBPEEK_ERR_NO_LAYOUT || it.stage >= 4) break;
        free_caches(s);   /* what the refused layout read is not to be trusted */
        last = st;
        st = RBPEEK_OK;
    }
    const char *note = rbp_mem_note(s->mem);   /* a truncated core says what it lacks */
    if (!note && s->core_note[0]) note = s->core_note;
    if (st != RBPEEK_OK) {
        if (note) {
            char why[sizeof s->error];
            snprintf(why, sizeof why, "%s", s->error);
            return rbp_fail(s, st, "%s; that was not enough: %s", note, why);
        }
        return st;
    }
    if (note) rbp_warn(s, "%s", note);
    s->attached = true;
    return RBPEEK_OK;
}

void rbpeek_session_invalidate(rbpeek_session *s)
{
    if (s && s->mem) rbp_mem_invalidate(s->mem);
}

const char *rbpeek_session_ruby_version(const rbpeek_session *s) { return s ? s->ruby_version : ""; }
const char *rbpeek_session_layout_source(const rbpeek_session *s) { return s ? s->layout_source : ""; }
const char *rbpeek_session_warning(const rbpeek_session *s) { return s ? s->warning : ""; }
uint64_t rbpeek_session_vm_addr(const rbpeek_session *s) { return s ? s->vm : 0; }
const char *rbpeek_session_vm_source(const rbpeek_session *s) { return s ? s->vm_source : ""; }

void rbpeek_session_read_stats(const rbpeek_session *s, rbpeek_read_stats *out)
{
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (s && s->mem) rbp_mem_stats(s->mem, out);
}

void rbpeek_session_reset_read_stats(rbpeek_session *s)
{
    if (s && s->mem) rbp_mem_reset_stats(s->mem);
}

void rbpeek_free(void *p) { free(p); }
