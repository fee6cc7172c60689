/*
 * Version, layout and VM discovery (see discover.h).
 *
 * Layout candidates are tried in the documented order (layouts.md): an
 * explicit --layout file; the built-in table of the exact release, which
 * needs no parsing; DWARF from the target's own libruby/ruby when no table
 * fits (so any Ruby with debug info works, even one we have no table for),
 * or when asked (--layout dwarf); then the nearest patch release of the
 * same minor line, with a warning. A candidate is only tried if it has
 * every member the stack walker cannot do without, and only kept if the
 * target validates it (session.c's attach runs the VM discovery and the
 * checks of validate.c on each).
 */
#include "vm/discover.h"

#include "layout/layout_dwarf.h"
#include "memory/machine.h"
#include "vm/discover_scan.h"
#include "vm/robject.h"
#include "vm/validate.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A live process whose Ruby is of another machine than its executable is
 * an emulator's (qemu-user running an arm64 Ruby): its registers are the
 * emulator's, and its guest's addresses need not be its own, so it is
 * read through the emulator's gdb stub or from a core, never by pid. */
static rbpeek_status emulated(rbpeek_session *s, uint16_t ruby_m, const char *how)
{
    char exe[64];
    uint16_t m;
    snprintf(exe, sizeof exe, "/proc/%d/exe", s->pid);
    if (s->pid <= 0 || !rbp_file_machine(exe, &m) || m == ruby_m) return rbp_machine_establish(s, ruby_m, how);
    const char *ruby = rbp_machine_name(ruby_m), *host = rbp_machine_name(m);
    return rbp_fail(s, RBPEEK_ERR_UNSUPPORTED,
                    "process %d runs a Ruby of %s (%s) in an emulator of another machine (its executable is %s's): "
                    "read it through the emulator's gdb stub (qemu -g) with gdb-multiarch, or read its core",
                    s->pid, ruby ? ruby : "another machine", how, host ? host : "another machine");
}

rbpeek_status rbp_discover_machine(rbpeek_session *s)
{
    /* One Ruby image of a machine rbpeek reads outvotes others: a process
     * that maps an arm64 libruby as data is not an arm64 Ruby. An emulator
     * of an arm64 Ruby maps only arm64 ones. */
    char foreign[200] = "", ours[200] = "";
    uint16_t foreign_m = RBP_MACHINE_UNKNOWN, ours_m = RBP_MACHINE_UNKNOWN;
    for (size_t i = 0; i < s->nregions; i++) {
        const rbp_region *r = &s->regions[i];
        if (!r->path || r->file_offset != 0 || !rbp_is_ruby_image_path(r->path)) continue;
        /* The header in memory is the image mapped; the file's serves a
         * core that left the page out. */
        unsigned char h[20];
        uint16_t m;
        if (!(rbp_mem_read(s->mem, r->start, h, sizeof h) && rbp_elf_header_machine(h, sizeof h, &m)) &&
            !rbp_file_machine(r->path, &m))
            continue;
        bool read = rbp_machine_read(m);
        if (read ? ours_m : foreign_m) continue;
        snprintf(read ? ours : foreign, sizeof ours, "the ELF header of %s", r->path);
        *(read ? &ours_m : &foreign_m) = m;
    }
    if (ours_m) return emulated(s, ours_m, ours);
    return rbp_machine_establish(s, foreign_m, foreign);
}

static bool parse_version(rbpeek_session *s, const char *v)
{
    int a, b, c;
    if (sscanf(v, "%d.%d.%d", &a, &b, &c) != 3 || a < 1 || a > 9 || b < 0 || b > 99 || c < 0 || c > 999)
        return false;
    s->ver_major = a;
    s->ver_minor = b;
    s->ver_patch = c;
    rbp_release_init(&s->rel, a, b, c);
    snprintf(s->ruby_version, sizeof s->ruby_version, "%d.%d.%d", a, b, c);
    return true;
}

rbpeek_status rbp_discover_version(rbpeek_session *s)
{
    uint64_t addr = 0;
    char buf[32];
    s->version_addr = 0;
    s->version_how = NULL;
    s->target_version[0] = '\0';
    if (rbp_symbol_lookup(s, "ruby_version", &addr, &s->version_how) && rbp_mem_cstr(s->mem, addr, buf, sizeof buf) &&
        parse_version(s, buf)) {
        s->version_addr = addr;
        snprintf(s->target_version, sizeof s->target_version, "%s", s->ruby_version);
        if (s->version_override[0] && strcmp(s->version_override, buf) != 0)
            rbp_warn(s, "target reports Ruby %s; using --ruby-version %s as asked", buf, s->version_override);
        if (s->version_override[0]) parse_version(s, s->version_override);
        return RBPEEK_OK;
    }
    /* A core without its binaries lacks .rodata, where ruby_version's bytes
     * are; the mapped file's name still says which release it is (and a
     * refusal of --ruby-version can name it). */
    bool named = rbp_version_from_image_name(s, s->target_version, sizeof s->target_version);
    if (s->version_override[0] && parse_version(s, s->version_override)) return RBPEEK_OK;
    if (named && parse_version(s, s->target_version)) {
        s->version_how = "the name of the mapped libruby";
        return RBPEEK_OK;
    }
    s->target_version[0] = '\0';
    if (addr)
        return rbp_fail(s, RBPEEK_ERR_READ,
                        "found symbol ruby_version at 0x%llx but could not read a version there; "
                        "pass --ruby-version X.Y.Z",
                        (unsigned long long)addr);
    return rbp_fail(s, RBPEEK_ERR_NOT_RUBY,
                    "this does not look like a CRuby process: no 'ruby_version' symbol in the target "
                    "(if it is Ruby with hidden symbols, pass --ruby-version X.Y.Z and --vm ADDR)");
}

/* Members the walker cannot do without, whatever the version. */
static const rbp_field_id REQUIRED[] = {
    RBP_L_cfp_size,      RBP_L_cfp_pc,         RBP_L_cfp_iseq,       RBP_L_cfp_ep,
    RBP_L_ec_vm_stack,   RBP_L_ec_vm_stack_size, RBP_L_ec_cfp,       RBP_L_th_ec,
    RBP_L_th_self,       RBP_L_th_status,      RBP_L_th_name,        RBP_L_iseq_body,
    RBP_L_body_type,     RBP_L_body_iseq_encoded, RBP_L_body_pathobj, RBP_L_body_label,
    RBP_L_body_insns_body, RBP_L_body_insns_size, RBP_L_insn_info_size, RBP_L_insn_info_line_no,
    RBP_L_basic_flags,   RBP_L_rstring_heap_ptr, RBP_L_rarray_heap_ptr, RBP_L_me_def,
    RBP_L_mdef_original_id,
};

static const char *layout_missing(const rbp_layout *l)
{
    for (size_t i = 0; i < sizeof REQUIRED / sizeof REQUIRED[0]; i++)
        if (!rbp_has(l, REQUIRED[i])) return rbp_field_name(REQUIRED[i]);
    bool ractors = rbp_has(l, RBP_L_vm_ractor_set) && rbp_has(l, RBP_L_ractor_threads_set) &&
                   rbp_has(l, RBP_L_th_lt_node) && rbp_has(l, RBP_L_ractor_vmlr_node);
    bool legacy = rbp_has(l, RBP_L_vm_living_threads) && rbp_has(l, RBP_L_th_vmlt_node);
    if (!ractors && !legacy) return "vm thread list (ractor.set or living_threads)";
    if (l->f[RBP_L_cfp_size].size < 40 || l->f[RBP_L_cfp_size].size > 128) return "cfp_size (implausible)";
    return NULL;
}

/* The one gate every layout passes, from a file, DWARF or a built-in table:
 * it has what the walker needs, and every member lies where it can be read
 * (layout.c's bounds check). False with why set to "<source> ...". */
static bool layout_usable(const rbpeek_session *s, const rbp_layout *l, const char *source, char *why,
                          size_t whylen)
{
    /* A table is chosen for the target's architecture: another's structs
     * differ after the first pthread or jmp_buf member. */
    uint16_t target = rbp_machine_of_target(s);
    if (l->machine != target) {
        const char *lm = rbp_machine_name(l->machine), *tm = rbp_machine_name(target);
        snprintf(why, whylen, "%s was made for %s (ELF machine %u), the target is %s (ELF machine %u)", source,
                 lm ? lm : "another machine", l->machine, tm ? tm : "another machine", target);
        return false;
    }
    const char *missing = layout_missing(l);
    if (missing) {
        snprintf(why, whylen, "%s lacks %s", source, missing);
        return false;
    }
    char bad[200];
    if (!rbp_layout_check(l, bad, sizeof bad)) {
        snprintf(why, whylen, "%s: %s", source, bad);
        return false;
    }
    return true;
}

static bool try_layout_text(rbpeek_session *s, const char *text, const char *source, char *why, size_t whylen)
{
    rbp_layout l;
    char err[256];
    if (rbp_layout_parse(&l, text, err, sizeof err) != 0) {
        snprintf(why, whylen, "%s: %s", source, err);
        return false;
    }
    if (!layout_usable(s, &l, source, why, whylen)) return false;
    s->layout = l;
    snprintf(s->layout_source, sizeof s->layout_source, "%s", source);
    return true;
}

static char *read_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            if (cap > (1 << 22)) break; /* a layout file is a few KiB */
            cap = cap ? cap * 2 : 8192;
            char *nb = realloc(buf, cap);
            if (!nb) break;
            buf = nb;
        }
        size_t n = fread(buf + len, 1, 4096, f);
        len += n;
        if (n < 4096) break;
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static bool try_dwarf(rbpeek_session *s, const char *path, char *why, size_t whylen)
{
    rbp_layout l;
    char err[256];
    rbp_layout_clear(&l);
    int rc = rbp_dwarf_layout(path, &l, err, sizeof err);
    if (rc != 0) {
        snprintf(why, whylen, "%s", err);
        /* A file the target names that is a FIFO or a device: said even
         * when another layout is found. */
        if (rc == RBP_NOT_REGULAR) rbp_warnsink_say(rbp_mem_warn(s->mem), "%s", err);
        return false;
    }
    char source[600];
    snprintf(source, sizeof source, "DWARF of %s", path);
    if (!layout_usable(s, &l, source, why, whylen)) return false;
    s->layout = l;
    snprintf(s->layout_source, sizeof s->layout_source, "dwarf:%s", path);
    return true;
}

/* The next DWARF candidate from it->dwarf on: the files the caller named,
 * then mapped images that look like libruby or a ruby executable (a static
 * Ruby), each file once. */
static bool next_dwarf(rbpeek_session *s, rbp_layout_try *it, char *why, size_t whylen)
{
    size_t nd = s->ndebug_files;
    for (; it->dwarf < nd + s->nregions; it->dwarf++) {
        const char *p;
        if (it->dwarf < nd) {
            p = s->debug_files[it->dwarf];
        } else {
            size_t i = it->dwarf - nd;
            p = s->regions[i].path;
            if (!p || s->regions[i].file_offset != 0 || !rbp_is_ruby_image_path(p)) continue;
            bool seen = false; /* the same file is often mapped several times */
            for (size_t j = 0; j < i && !seen; j++) seen = s->regions[j].path && strcmp(s->regions[j].path, p) == 0;
            for (size_t j = 0; j < nd && !seen; j++) seen = strcmp(s->debug_files[j], p) == 0;
            if (seen) continue;
        }
        if (try_dwarf(s, p, why, whylen)) {
            it->dwarf++;
            return true;
        }
    }
    return false;
}

static bool try_table(rbpeek_session *s, long idx, char *why, size_t whylen)
{
    char src[64];
    snprintf(src, sizeof src, "builtin:%s", rbp_builtin_layout_version((size_t)idx));
    return try_layout_text(s, rbp_builtin_layout_text((size_t)idx), src, why, whylen);
}

rbpeek_status rbp_discover_layout_next(rbpeek_session *s, rbp_layout_try *it, rbpeek_status last)
{
    char why[512] = "";
    if (last != RBPEEK_OK) it->misfits++;
    if (it->stage == 0) { /* --layout FILE: the only candidate */
        it->stage = 1;
        if (s->layout_file) {
            it->stage = 4;
            char *text = read_file(s->layout_file);
            if (!text) return rbp_fail(s, RBPEEK_ERR_IO, "cannot read layout file %s", s->layout_file);
            char src[600];
            snprintf(src, sizeof src, "file:%s", s->layout_file);
            bool ok = try_layout_text(s, text, src, why, sizeof why);
            free(text);
            if (!ok) return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT, "unusable layout file: %s", why);
            return RBPEEK_OK;
        }
        it->table = rbp_builtin_layout_find(s->ruby_version, rbp_machine_of_target(s), &it->exact);
    }
    /* The release's own table first (exact and validated against the
     * target: no DWARF to parse), unless DWARF was asked for. */
    if (it->stage == 1) {
        it->stage = 2;
        if (!s->layout_dwarf && it->table >= 0 && it->exact && try_table(s, it->table, why, sizeof why))
            return RBPEEK_OK;
    }
    /* The target's own DWARF when no table fits. */
    if (it->stage == 2) {
        if (next_dwarf(s, it, why, sizeof why)) {
            if (it->misfits) rbp_warn(s, "the built-in table does not fit this process; using %s", s->layout_source);
            return RBPEEK_OK;
        }
        it->stage = 3;
    }
    /* The nearest table of the line, with a warning. */
    if (it->stage == 3) {
        it->stage = 4;
        if (!s->layout_dwarf && it->table >= 0 && !it->exact && try_table(s, it->table, why, sizeof why)) {
            rbp_warn(s, "no debug info and no table for Ruby %s; using the nearest table (%s)", s->ruby_version,
                     rbp_builtin_layout_version((size_t)it->table));
            return RBPEEK_OK;
        }
    }
    if (it->misfits) return last;   /* the last candidate's refusal says why */
    if (s->layout_dwarf)
        return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT, "--layout dwarf: no usable DWARF for Ruby %s%s%s%s; install debug info "
                        "for libruby, or drop --layout dwarf", s->ruby_version, why[0] ? " (" : "", why,
                        why[0] ? ")" : "");
    return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                    "no struct layout for Ruby %s: no usable debug info%s%s and no built-in table; "
                    "install debug info for libruby, or pass --layout FILE (made by rbpeek-layoutgen) "
                    "or --ruby-version X.Y.Z to use a table for a compatible version",
                    s->ruby_version, why[0] ? " (" : "", why[0] ? why : "");
}

rbpeek_status rbp_discover_vm(rbpeek_session *s)
{
    char why[256];
    const char *how = NULL;
    uint64_t gs = 0;
    s->global_symbols_how = NULL;
    /* Not exported by every libruby (Debian's): a scan of libruby's data
     * finds it then, and only where that fails is the debugger asked. */
    s->global_symbols =
        rbp_symbol_lookup_in(s, "ruby_global_symbols", &gs, &s->global_symbols_how, RBP_SYM_IMAGES) ? gs : 0;

    if (s->vm_override) {
        if (!rbp_vm_plausible(s, s->vm_override, why, sizeof why))
            return rbp_fail(s, RBPEEK_ERR_NOT_RUBY, "--vm: %s (or the layout %s does not fit it)", why,
                            s->layout_source);
        s->vm = s->vm_override;
        snprintf(s->vm_source, sizeof s->vm_source, "--vm override");
        /* ruby_global_symbols sits in libruby's data beside the VM pointer;
         * where that pointer is stored anchors the search for it. */
        if (!s->global_symbols) {
            s->global_symbols = rbp_locate_global_symbols(s, rbp_scan_image_data_for(s, s->vm));
            s->global_symbols_how = s->global_symbols ? "scan of libruby's data, beside the VM pointer" : NULL;
        }
        if (!s->global_symbols && rbp_symbol_lookup_in(s, "ruby_global_symbols", &gs, &s->global_symbols_how,
                                                       RBP_SYM_DEBUGGER))
            s->global_symbols = gs;
        return RBPEEK_OK;
    }
    uint64_t ptr_addr = 0, vm = 0;
    bool vm_scanned = false;
    if (rbp_symbol_lookup(s, "ruby_current_vm_ptr", &ptr_addr, &how)) {
        if (!rbp_mem_u64(s->mem, ptr_addr, &vm))
            return rbp_fail(s, RBPEEK_ERR_READ, "cannot read ruby_current_vm_ptr at 0x%llx",
                            (unsigned long long)ptr_addr);
        if (!vm)
            return rbp_fail(s, RBPEEK_ERR_NOT_RUBY, "the Ruby VM is not initialised yet (ruby_current_vm_ptr is NULL)");
        /* ruby_current_vm_ptr is the VM: if it does not read as one, the
         * layout is what is wrong. */
        if (!rbp_vm_plausible(s, vm, why, sizeof why)) return rbp_layout_misfit(s, why);
    } else {
        /* Hidden or gone (a source build's hidden symbol, a core without its
         * binaries): the pointer still lives in libruby's data. */
        vm = rbp_scan_image_data_for_vm(s, &ptr_addr);
        how = "scan of libruby's data for a pointer to a VM";
        vm_scanned = true;
        if (!vm)
            return rbp_fail(s, RBPEEK_ERR_NOT_RUBY,
                            "Ruby %s found, but not its VM: no 'ruby_current_vm_ptr' symbol and no pointer to a VM "
                            "in libruby's data; pass --vm ADDR",
                            s->ruby_version);
    }
    s->vm_ptr_addr = ptr_addr;
    s->vm = vm;
    s->vm_ptr_how = how;
    if (!s->global_symbols) {
        s->global_symbols = rbp_locate_global_symbols(s, ptr_addr);
        s->global_symbols_how = s->global_symbols ? "scan of the data next to the VM pointer" : NULL;
    }
    if (!s->global_symbols && rbp_symbol_lookup_in(s, "ruby_global_symbols", &gs, &s->global_symbols_how,
                                                   RBP_SYM_DEBUGGER))
        s->global_symbols = gs;
    snprintf(s->vm_source, sizeof s->vm_source, "%s at 0x%llx (%s)",
             vm_scanned ? "a pointer to it" : "ruby_current_vm_ptr", (unsigned long long)ptr_addr, how ? how : "symbol");
    return RBPEEK_OK;
}
