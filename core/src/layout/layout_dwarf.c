/*
 * Layouts from DWARF: reads the debug info of a Ruby ELF image (libruby.so or
 * a static ruby) with libdwarf and fills an rbp_layout with the offset, size
 * and bit position of every member listed in layout_fields.def.
 *
 * The scan looks only at the top-level DIEs of each compilation unit (C puts
 * every struct, union and typedef there), matches struct/union tags and
 * typedef names against the wanted types, and resolves all fields of a type
 * as soon as its first complete definition turns up. It stops as soon as
 * every wanted type has been seen, so on a libruby it rarely reads more than
 * a handful of CUs' top levels. Everything derived from the file is bounded:
 * DWARF from a strange compiler must give "absent" fields, never a crash.
 */
#include "layout/layout_dwarf.h"
#include "memory/machine.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/errbuf.h"
#include "base/target_file.h"
#include "layout/dwarf_read.h"

/* A top-level struct/union/typedef named like a wanted type: if it leads to
 * a complete struct or union, resolve all of that type's fields. */
static void consider(dctx *c, Dwarf_Die d, int ti)
{
    Dwarf_Off agg;
    Dwarf_Half tag;
    if (!dw_strip_type(c, dw_die_off(c, d), &agg, &tag) || !dw_is_aggregate(tag)) return;
    Dwarf_Die ad;
    if (!dw_die_at(c, agg, &ad)) return;
    Dwarf_Die ch = NULL;
    Dwarf_Error e = NULL;
    /* A definition has members; a declaration (or an empty struct, which
     * nothing we read is) has none. */
    bool complete = !dw_die_has(c, ad, DW_AT_declaration) && dwarf_child(ad, &ch, &e) == DW_DLV_OK;
    dw_drop_err(c, &e);
    if (ch) dwarf_dealloc_die(ch);
    dwarf_dealloc_die(ad);
    if (!complete) return;
    for (int id = 0; id < RBP_L_COUNT; id++)
        if (c->type_of_field[id] == ti) dw_resolve_field(c, (rbp_field_id)id, agg);
    c->types[ti].found = true;
    c->pending--;
}

static int wanted_index(dctx *c, const char *name)
{
    for (int i = 0; i < c->ntypes; i++)
        if (!c->types[i].found && strcmp(c->types[i].name, name) == 0) return i;
    return -1;
}

/* Walks the top-level DIEs of the current CU. Returns false to stop the
 * whole scan (DIE budget spent).
 *
 * Siblings lie at increasing offsets in .debug_info, and libdwarf follows
 * a DIE's DW_AT_sibling as the file gives it: a malformed one pointing
 * back (or at itself) made this a cycle, walked until the budget of 5e7
 * DIEs ran out, minutes per file (fuzz_dwarf, 2026-11-25). A step that
 * does not move forward ends this CU's walk, so the walk is bounded by the
 * size of the section whatever the file says. */
static bool scan_cu(dctx *c, Dwarf_Die cu, long *budget)
{
    Dwarf_Die d = NULL;
    Dwarf_Error e = NULL;
    Dwarf_Off last = 0;
    int rc = dwarf_child(cu, &d, &e);
    dw_drop_err(c, &e);
    while (rc == DW_DLV_OK && c->pending > 0) {
        bool forward = dw_die_after(c, d, &last);
        if (--*budget <= 0 || !forward) {
            dwarf_dealloc_die(d);
            return forward;
        }
        Dwarf_Half tag = dw_die_tag(c, d);
        if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_typedef) {
            const char *name = dw_die_name(c, d);
            int ti = name ? wanted_index(c, name) : -1;
            if (ti >= 0) consider(c, d, ti);
        }
        Dwarf_Die next = NULL;
        rc = dw_die_next(c, d, &next);
        dwarf_dealloc_die(d);
        d = next;
    }
    if (rc == DW_DLV_OK && d) dwarf_dealloc_die(d);
    return true;
}

/* Whether a CU can define CRuby's types: those are in its C sources only.
 * Since 3.2 a libruby built with YJIT also holds Rust CUs, most of its
 * DIEs (LLVM writes no DW_AT_sibling, so stepping over each of their
 * subprograms and namespaces means reading it all); a CU that names another
 * language is not read. One that names none is. */
static bool cu_in_c(dctx *c, Dwarf_Die cu)
{
    long long lang;
    if (!dw_attr_int(c, cu, DW_AT_language, &lang)) return true;
    switch (lang) {
    case DW_LANG_C89: case DW_LANG_C: case DW_LANG_C99: case DW_LANG_C11:
    case 0x2c: /* DW_LANG_C17, newer than this libdwarf's dwarf.h */
    case DW_LANG_C_plus_plus: case DW_LANG_C_plus_plus_03: case DW_LANG_C_plus_plus_11:
    case DW_LANG_C_plus_plus_14:
        return true;
    default:
        return false;
    }
}

/* The "ruby_version" string constant exported by every libruby (version.c),
 * read from the file's own bytes via the symbol table. Best effort. */
static void read_ruby_version(const char *path, char *out, size_t outlen)
{
    int fd = rbp_open_target_file(path, NULL, 0);
    if (fd < 0) return;
    if (elf_version(EV_CURRENT) == EV_NONE) {
        close(fd);
        return;
    }
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    Elf_Scn *scn = NULL;
    uint64_t addr = 0;
    for (int guard = 0; elf && !addr && (scn = elf_nextscn(elf, scn)) && guard < 100000; guard++) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_DYNSYM && sh.sh_type != SHT_SYMTAB)) continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        if (!data || sh.sh_entsize == 0) continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < n && i < 10000000; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(data, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_OBJECT) continue;
            const char *nm = elf_strptr(elf, sh.sh_link, sym.st_name);
            if (nm && strcmp(nm, "ruby_version") == 0 && sym.st_value) {
                addr = sym.st_value;
                break;
            }
        }
    }
    char buf[32] = {0};
    for (scn = NULL; elf && addr && (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC)) continue;
        if (addr < sh.sh_addr || addr - sh.sh_addr >= sh.sh_size) continue;
        uint64_t avail = sh.sh_size - (addr - sh.sh_addr);
        size_t want = avail < sizeof buf - 1 ? (size_t)avail : sizeof buf - 1;
        if (pread(fd, buf, want, (off_t)(sh.sh_offset + (addr - sh.sh_addr))) != (ssize_t)want) buf[0] = '\0';
        break;
    }
    /* Accept only something shaped like "3.4.5". */
    size_t len = strnlen(buf, sizeof buf);
    bool ok = len >= 3 && len < sizeof buf && buf[0] >= '0' && buf[0] <= '9';
    for (size_t i = 0; ok && i < len; i++) ok = (buf[i] >= '0' && buf[i] <= '9') || buf[i] == '.';
    if (ok && len < outlen) memcpy(out, buf, len + 1);
    if (elf) elf_end(elf);
    close(fd);
}

/* Checks readability ourselves: libdwarf reports a missing file as "no
 * DWARF", which would hide the real problem; and it opens the file with a
 * plain open, which a FIFO would block forever. 0, or -1 or
 * RBP_NOT_REGULAR with err set. */
static int check_readable(const char *elf_path, char *err, size_t errlen)
{
    char kind[32];
    int fd = rbp_open_target_file(elf_path, kind, sizeof kind);
    if (fd == RBP_NOT_REGULAR) {
        rbp_set_err(err, errlen, "%s is %s, not a regular file: not read", elf_path, kind);
        return RBP_NOT_REGULAR;
    }
    if (fd < 0) {
        rbp_set_err(err, errlen, "cannot open %s: %s", elf_path, strerror(errno));
        return -1;
    }
    close(fd);
    return 0;
}

/* A scan's context for out, with the wanted types of every field (each
 * type once, all pending). NULL when out of memory. */
static dctx *new_dctx(rbp_layout *out)
{
    static dctx zero;
    dctx *c = malloc(sizeof *c);
    if (!c) return NULL;
    *c = zero;
    c->out = out;
    c->addr_size = 8;
    c->skip_checks = MAX_SKIP_CHECKS;
    for (int id = 0; id < RBP_L_COUNT; id++) {
        const char *t = rbp_field_type((rbp_field_id)id);
        int ti = 0;
        while (ti < c->ntypes && strcmp(c->types[ti].name, t) != 0) ti++;
        if (ti == c->ntypes) c->types[c->ntypes++] = (wanted_type){t, false};
        c->type_of_field[id] = ti;
    }
    c->pending = c->ntypes;
    return c;
}

/* libdwarf over the file, into c->dbg; false with err set when it has no
 * DWARF or it cannot be read. */
static bool open_dwarf(dctx *c, const char *elf_path, char *err, size_t errlen)
{
    /* A buffer for the true path lets libdwarf follow .gnu_debuglink and
     * build-id links to separate debug files (e.g. Debian -dbgsym). */
    char true_path[4096];
    Dwarf_Error e = NULL;
    int rc = dwarf_init_path(elf_path, true_path, sizeof true_path, DW_DLC_READ, DW_GROUPNUMBER_ANY, NULL,
                             NULL, &c->dbg, NULL, 0, NULL, &e);
    if (rc == DW_DLV_OK) return true;
    if (rc == DW_DLV_ERROR)
        rbp_set_err(err, errlen, "cannot read DWARF from %s: %s", elf_path, e ? dwarf_errmsg(e) : "unknown error");
    else
        rbp_set_err(err, errlen, "%s has no DWARF debug info", elf_path);
    if (e) dwarf_dealloc_error(NULL, e);
    return false;
}

/* The compilation units' top levels, until every wanted type is seen (or
 * the bounds are reached); libdwarf is finished after. Whether there was
 * any CU at all. */
static bool scan_cus(dctx *c)
{
    Dwarf_Error e = NULL;
    long budget = MAX_TOP_DIES;
    bool any_cu = false;
    for (int ncus = 0; ncus < MAX_CUS && c->pending > 0; ncus++) {
        Dwarf_Unsigned hdr_len = 0, typeoff = 0, next_off = 0;
        Dwarf_Half ver = 0, addr_size = 0, len_size = 0, ext_size = 0, cu_type = 0;
        Dwarf_Off abbrev = 0;
        Dwarf_Sig8 sig;
        int rc = dwarf_next_cu_header_d(c->dbg, 1, &hdr_len, &ver, &abbrev, &addr_size, &len_size, &ext_size, &sig,
                                        &typeoff, &next_off, &cu_type, &e);
        if (rc != DW_DLV_OK) break; /* end of .debug_info, or a header we cannot read */
        any_cu = true;
        c->addr_size = addr_size == 4 || addr_size == 8 ? addr_size : 8;
        Dwarf_Die cu = NULL;
        if (dwarf_siblingof_b(c->dbg, NULL, 1, &cu, &e) != DW_DLV_OK) {
            dw_drop_err(c, &e);
            continue;
        }
        bool go_on = !cu_in_c(c, cu) || scan_cu(c, cu, &budget);
        dwarf_dealloc_die(cu);
        if (!go_on) break;
    }
    dw_drop_err(c, &e);
    dwarf_finish(c->dbg, &e);
    if (e) dwarf_dealloc_error(NULL, e);
    return any_cu;
}

int rbp_dwarf_layout(const char *elf_path, rbp_layout *out, char *err, size_t errlen)
{
    rbp_layout_clear(out);
    if (!elf_path) {
        rbp_set_err(err, errlen, "no file given");
        return -1;
    }
    int rc = check_readable(elf_path, err, errlen);
    if (rc != 0) return rc;
    dctx *c = new_dctx(out);
    if (!c) {
        rbp_set_err(err, errlen, "out of memory");
        return -1;
    }
    if (!open_dwarf(c, elf_path, err, errlen)) {
        free(c);
        return -1;
    }
    int ret = 0;
    if (!scan_cus(c)) {
        rbp_set_err(err, errlen, "%s has no DWARF debug info", elf_path);
        ret = -1;
    } else if (!rbp_has(out, RBP_L_cfp_size)) {
        rbp_set_err(err, errlen,
                    "%s: DWARF has no struct rb_control_frame_struct (not a Ruby binary, or its debug info lacks "
                    "the VM types)",
                    elf_path);
        ret = -1;
    }
    free(c);
    if (ret != 0) {
        rbp_layout_clear(out);
        return -1;
    }
    read_ruby_version(elf_path, out->ruby_version, sizeof out->ruby_version);
    /* The DWARF's structs are its own architecture's (a debug file's
     * header names it as the binary's does). */
    uint16_t m;
    if (rbp_file_machine(elf_path, &m)) out->machine = m;
    return 0;
}
