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

#include "base/errbuf.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<libdwarf/libdwarf.h>)
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#else
#include <dwarf.h>
#include <libdwarf.h>
#endif
#else
#include <libdwarf/dwarf.h>
#include <libdwarf/libdwarf.h>
#endif

/* Bounds on walks over file-derived data. Ruby's deepest real path is 4
 * components with 2 anonymous levels; these are generous. */
enum {
    MAX_PATH_PARTS = 8,
    MAX_ANON_DEPTH = 8,
    MAX_TYPE_CHAIN = 32,       /* typedef/const/volatile hops */
    MAX_CHILDREN = 20000,      /* members of one struct, subranges of an array */
    MAX_CUS = 100000,
    MAX_TOP_DIES = 50000000,   /* top-level DIEs over the whole file */
};

/* One distinct type name wanted by layout_fields.def. */
typedef struct wanted_type {
    const char *name;
    bool found;
} wanted_type;

typedef struct dctx {
    Dwarf_Debug dbg;
    Dwarf_Half addr_size;      /* of the current CU, for pointer types without a size */
    wanted_type types[RBP_L_COUNT];
    int ntypes, pending;
    int type_of_field[RBP_L_COUNT];
    rbp_layout *out;
} dctx;

/* libdwarf allocates an error record for every failure; give it back at
 * once so a long scan over odd DWARF does not accumulate them. */
static void drop_err(dctx *c, Dwarf_Error *e)
{
    if (*e) {
        dwarf_dealloc_error(c->dbg, *e);
        *e = NULL;
    }
}

static bool die_at(dctx *c, Dwarf_Off off, Dwarf_Die *d)
{
    Dwarf_Error e = NULL;
    if (dwarf_offdie_b(c->dbg, off, 1, d, &e) == DW_DLV_OK) return true;
    drop_err(c, &e);
    return false;
}

static Dwarf_Half die_tag(dctx *c, Dwarf_Die d)
{
    Dwarf_Half tag = 0;
    Dwarf_Error e = NULL;
    if (dwarf_tag(d, &tag, &e) != DW_DLV_OK) {
        drop_err(c, &e);
        return 0;
    }
    return tag;
}

static const char *die_name(dctx *c, Dwarf_Die d)
{
    char *name = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_diename(d, &name, &e);
    if (rc == DW_DLV_OK) return name;
    drop_err(c, &e);
    return NULL;
}

static bool die_has(dctx *c, Dwarf_Die d, Dwarf_Half at)
{
    Dwarf_Bool has = 0;
    Dwarf_Error e = NULL;
    if (dwarf_hasattr(d, at, &has, &e) != DW_DLV_OK) {
        drop_err(c, &e);
        return false;
    }
    return has != 0;
}

/* An integer-valued attribute, signed or not as its form says. */
static bool attr_int(dctx *c, Dwarf_Die d, Dwarf_Half at, long long *v)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    if (dwarf_attr(d, at, &a, &e) != DW_DLV_OK) {
        drop_err(c, &e);
        return false;
    }
    bool ok = false;
    Dwarf_Half form = 0;
    if (dwarf_whatform(a, &form, &e) == DW_DLV_OK) {
        if (form == DW_FORM_sdata || form == DW_FORM_implicit_const) {
            Dwarf_Signed s;
            if (dwarf_formsdata(a, &s, &e) == DW_DLV_OK) *v = (long long)s, ok = true;
        } else {
            Dwarf_Unsigned u;
            if (dwarf_formudata(a, &u, &e) == DW_DLV_OK && u <= (Dwarf_Unsigned)1 << 40)
                *v = (long long)u, ok = true;
        }
    }
    drop_err(c, &e);
    dwarf_dealloc_attribute(a);
    return ok;
}

/* The global offset of the DIE an attribute (normally DW_AT_type) refers to.
 * Type-unit signatures (DW_FORM_ref_sig8) are not followed: GCC and Clang do
 * not use them for C unless asked, and a miss only makes a field absent. */
static bool attr_ref(dctx *c, Dwarf_Die d, Dwarf_Half at, Dwarf_Off *off)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    if (dwarf_attr(d, at, &a, &e) != DW_DLV_OK) {
        drop_err(c, &e);
        return false;
    }
    bool ok = dwarf_global_formref(a, off, &e) == DW_DLV_OK;
    drop_err(c, &e);
    dwarf_dealloc_attribute(a);
    return ok;
}

static Dwarf_Off die_off(dctx *c, Dwarf_Die d)
{
    Dwarf_Off off = 0;
    Dwarf_Error e = NULL;
    if (dwarf_dieoffset(d, &off, &e) != DW_DLV_OK) drop_err(c, &e);
    return off;
}

static bool is_aggregate(Dwarf_Half tag)
{
    return tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

static bool is_qualifier(Dwarf_Half tag)
{
    return tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type ||
           tag == DW_TAG_restrict_type || tag == DW_TAG_atomic_type;
}

/* Follows typedefs and qualifiers from the type at off to the underlying
 * type. Returns false on a broken chain or a qualified "void". */
static bool strip_type(dctx *c, Dwarf_Off off, Dwarf_Off *out, Dwarf_Half *tag_out)
{
    for (int hop = 0; hop < MAX_TYPE_CHAIN; hop++) {
        Dwarf_Die d;
        if (!die_at(c, off, &d)) return false;
        Dwarf_Half tag = die_tag(c, d);
        if (!is_qualifier(tag)) {
            dwarf_dealloc_die(d);
            *out = off;
            *tag_out = tag;
            return true;
        }
        bool ok = attr_ref(c, d, DW_AT_type, &off);
        dwarf_dealloc_die(d);
        if (!ok) return false;
    }
    return false;
}

/* sizeof the type at off, or -1 when DWARF does not say. */
static long type_size(dctx *c, Dwarf_Off off, int depth)
{
    if (depth > MAX_TYPE_CHAIN) return -1;
    Dwarf_Die d;
    if (!die_at(c, off, &d)) return -1;
    long size = -1;
    long long v;
    Dwarf_Half tag = die_tag(c, d);
    Dwarf_Off sub;
    if (attr_int(c, d, DW_AT_byte_size, &v)) {
        size = (long)v;
    } else if (is_qualifier(tag)) {
        if (attr_ref(c, d, DW_AT_type, &sub)) size = type_size(c, sub, depth + 1);
    } else if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type) {
        size = c->addr_size;
    } else if (tag == DW_TAG_array_type && attr_ref(c, d, DW_AT_type, &sub)) {
        /* Element size times every dimension; a dimension without a bound
         * (a flexible array member) contributes nothing: sizeof is 0. */
        long elem = type_size(c, sub, depth + 1);
        if (elem >= 0) {
            long total = elem;
            Dwarf_Die ch = NULL;
            Dwarf_Error e = NULL;
            int rc = dwarf_child(d, &ch, &e);
            drop_err(c, &e);
            for (int i = 0; rc == DW_DLV_OK && i < MAX_CHILDREN; i++) {
                if (die_tag(c, ch) == DW_TAG_subrange_type) {
                    long long n = 0, lo = 0, hi;
                    if (attr_int(c, ch, DW_AT_count, &n)) {
                    } else if (attr_int(c, ch, DW_AT_upper_bound, &hi)) {
                        attr_int(c, ch, DW_AT_lower_bound, &lo);
                        n = hi - lo + 1;
                    }
                    if (n < 0 || n > (1 << 24)) n = 0;
                    total *= (long)n;
                }
                Dwarf_Die next = NULL;
                rc = dwarf_siblingof_b(c->dbg, ch, 1, &next, &e);
                drop_err(c, &e);
                dwarf_dealloc_die(ch);
                ch = next;
            }
            size = total;
        }
    }
    dwarf_dealloc_die(d);
    return size > (1L << 24) ? -1 : size;
}

/* DW_AT_data_member_location as a byte offset: a constant (DWARF 3+) or a
 * DW_OP_plus_uconst expression (DWARF 2). Absent means 0 (union members,
 * DWARF 5 bitfields that carry DW_AT_data_bit_offset instead). */
static bool member_location(dctx *c, Dwarf_Die m, long *bytes)
{
    *bytes = 0;
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_attr(m, DW_AT_data_member_location, &a, &e);
    if (rc == DW_DLV_NO_ENTRY) return true;
    if (rc != DW_DLV_OK) {
        drop_err(c, &e);
        return false;
    }
    bool ok = false;
    Dwarf_Half form = 0;
    if (dwarf_whatform(a, &form, &e) == DW_DLV_OK) {
        const unsigned char *p = NULL;
        Dwarf_Unsigned len = 0;
        Dwarf_Unsigned u;
        Dwarf_Signed s;
        Dwarf_Ptr ptr;
        Dwarf_Block *blk = NULL;
        switch (form) {
        case DW_FORM_data1: case DW_FORM_data2: case DW_FORM_data4: case DW_FORM_data8:
        case DW_FORM_udata:
            if (dwarf_formudata(a, &u, &e) == DW_DLV_OK && u < (1u << 24)) *bytes = (long)u, ok = true;
            break;
        case DW_FORM_sdata: case DW_FORM_implicit_const:
            if (dwarf_formsdata(a, &s, &e) == DW_DLV_OK && s >= 0 && s < (1 << 24)) *bytes = (long)s, ok = true;
            break;
        case DW_FORM_exprloc:
            if (dwarf_formexprloc(a, &len, &ptr, &e) == DW_DLV_OK) p = ptr;
            break;
        case DW_FORM_block1: case DW_FORM_block2: case DW_FORM_block4: case DW_FORM_block:
            if (dwarf_formblock(a, &blk, &e) == DW_DLV_OK) {
                p = blk->bl_data;
                len = blk->bl_len;
            }
            break;
        default:
            break;
        }
        /* The only expression compilers emit here: DW_OP_plus_uconst ULEB128
         * (or DW_OP_constu ULEB128 DW_OP_plus). */
        if (p && len >= 2 && len <= 16 && (p[0] == DW_OP_plus_uconst || p[0] == DW_OP_constu)) {
            unsigned long long v = 0;
            unsigned shift = 0;
            Dwarf_Unsigned i = 1;
            for (; i < len && shift < 35; i++, shift += 7) {
                v |= (unsigned long long)(p[i] & 0x7f) << shift;
                if (!(p[i] & 0x80)) break;
            }
            bool done = i < len && !(p[i] & 0x80);
            bool tail_ok = p[0] == DW_OP_plus_uconst ? i + 1 == len : (i + 2 == len && p[i + 1] == DW_OP_plus);
            if (done && tail_ok && v < (1u << 24)) *bytes = (long)v, ok = true;
        }
        if (blk) dwarf_dealloc(c->dbg, blk, DW_DLA_BLOCK);
    }
    drop_err(c, &e);
    dwarf_dealloc_attribute(a);
    return ok;
}

/* A resolved member: where it starts (in bits, from the start of the
 * outermost struct) and its type. */
typedef struct member_hit {
    long bit_pos;
    long bit_size;             /* 0 unless a bitfield */
    long type_bytes;           /* sizeof the member's type, -1 if unknown */
    Dwarf_Off type_off;
    bool has_type;
} member_hit;

/* Fills hit for member DIE m, whose enclosing struct starts base_bits into
 * the outermost one. */
static bool member_info(dctx *c, Dwarf_Die m, long base_bits, member_hit *hit)
{
    long bytes;
    if (!member_location(c, m, &bytes)) return false;
    hit->has_type = attr_ref(c, m, DW_AT_type, &hit->type_off);
    hit->type_bytes = hit->has_type ? type_size(c, hit->type_off, 0) : -1;
    hit->bit_size = 0;
    hit->bit_pos = base_bits + bytes * 8;
    long long bsize;
    if (!attr_int(c, m, DW_AT_bit_size, &bsize)) return true;
    if (bsize <= 0 || bsize > 64) return false;
    hit->bit_size = (long)bsize;
    long long dbo, bo, unit;
    if (attr_int(c, m, DW_AT_data_bit_offset, &dbo)) {
        /* DWARF 4/5: bits from the start of the containing struct. */
        if (dbo < 0 || dbo > (1LL << 27)) return false;
        hit->bit_pos = base_bits + (long)dbo;
    } else if (attr_int(c, m, DW_AT_bit_offset, &bo)) {
        /* DWARF 2/3: bits from the most significant bit of a storage unit of
         * DW_AT_byte_size bytes at the member location. On a little-endian
         * target that is unit_bits - bit_offset - bit_size from the least
         * significant bit. It may be negative when the field spills past the
         * unit; the arithmetic below still lands on the right bit. */
        if (!attr_int(c, m, DW_AT_byte_size, &unit)) unit = hit->type_bytes;
        if (unit <= 0 || unit > 16) return false;
        long lsb = (long)(unit * 8 - bo - bsize);
        hit->bit_pos = base_bits + bytes * 8 + lsb;
        if (hit->bit_pos < 0) return false;
    }
    return true;
}

/* Searches the struct/union at agg_off for a member called name, descending
 * through unnamed struct/union members. base_bits is where that aggregate
 * starts in the outermost one. */
static bool find_member(dctx *c, Dwarf_Off agg_off, const char *name, long base_bits, int depth,
                        member_hit *hit)
{
    if (depth > MAX_ANON_DEPTH) return false;
    Dwarf_Die agg;
    if (!die_at(c, agg_off, &agg)) return false;
    Dwarf_Die ch = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_child(agg, &ch, &e);
    drop_err(c, &e);
    dwarf_dealloc_die(agg);
    bool found = false;
    for (int i = 0; rc == DW_DLV_OK && i < MAX_CHILDREN && !found; i++) {
        if (die_tag(c, ch) == DW_TAG_member) {
            const char *mname = die_name(c, ch);
            if (mname && strcmp(mname, name) == 0) {
                found = member_info(c, ch, base_bits, hit);
            } else if (!mname) {
                /* An anonymous struct/union member: its members are ours. */
                member_hit anon;
                Dwarf_Off inner;
                Dwarf_Half tag;
                if (member_info(c, ch, base_bits, &anon) && anon.has_type && anon.bit_size == 0 &&
                    strip_type(c, anon.type_off, &inner, &tag) && is_aggregate(tag))
                    found = find_member(c, inner, name, anon.bit_pos, depth + 1, hit);
            }
        }
        if (found) break;
        Dwarf_Die next = NULL;
        rc = dwarf_siblingof_b(c->dbg, ch, 1, &next, &e);
        drop_err(c, &e);
        dwarf_dealloc_die(ch);
        ch = next;
    }
    if (rc == DW_DLV_OK && ch) dwarf_dealloc_die(ch);
    return found;
}

/* Resolves the dotted path of one field inside the complete aggregate at
 * agg_off and records it. Unresolvable paths leave the field absent. */
static void resolve_field(dctx *c, rbp_field_id id, Dwarf_Off agg_off)
{
    const char *path = rbp_field_member(id);
    rbp_field *f = &c->out->f[id];
    if (!path) {
        long size = type_size(c, agg_off, 0);
        if (size >= 0) *f = (rbp_field){.offset = 0, .size = (int32_t)size};
        return;
    }
    char buf[128];
    if (strlen(path) >= sizeof buf) return;
    strcpy(buf, path);
    char *parts[MAX_PATH_PARTS];
    int nparts = 0;
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok; tok = strtok_r(NULL, ".", &save)) {
        if (nparts == MAX_PATH_PARTS) return;
        parts[nparts++] = tok;
    }
    long base_bits = 0;
    Dwarf_Off cur = agg_off;
    member_hit hit = {0};
    for (int i = 0; i < nparts; i++) {
        if (!find_member(c, cur, parts[i], base_bits, 0, &hit)) return;
        if (i + 1 == nparts) break;
        /* Descend: the member must itself be a complete struct or union. */
        Dwarf_Half tag;
        Dwarf_Die d;
        if (hit.bit_size || !hit.has_type || !strip_type(c, hit.type_off, &cur, &tag) || !is_aggregate(tag))
            return;
        if (!die_at(c, cur, &d)) return;
        bool decl = die_has(c, d, DW_AT_declaration);
        dwarf_dealloc_die(d);
        if (decl) return;
        base_bits = hit.bit_pos;
    }
    if (hit.bit_pos < 0 || hit.bit_pos / 8 > (1L << 20)) return;
    f->offset = (int32_t)(hit.bit_pos / 8);
    f->size = hit.type_bytes >= 0 ? (int32_t)hit.type_bytes : 0;
    if (hit.bit_size) {
        f->bit_offset = (int16_t)(hit.bit_pos % 8);
        f->bit_size = (int16_t)hit.bit_size;
    } else if (hit.bit_pos % 8) {
        *f = (rbp_field){.offset = -1}; /* a non-bitfield off a byte boundary: nonsense */
    }
}

/* A top-level struct/union/typedef named like a wanted type: if it leads to
 * a complete struct or union, resolve all of that type's fields. */
static void consider(dctx *c, Dwarf_Die d, int ti)
{
    Dwarf_Off agg;
    Dwarf_Half tag;
    if (!strip_type(c, die_off(c, d), &agg, &tag) || !is_aggregate(tag)) return;
    Dwarf_Die ad;
    if (!die_at(c, agg, &ad)) return;
    Dwarf_Die ch = NULL;
    Dwarf_Error e = NULL;
    /* A definition has members; a declaration (or an empty struct, which
     * nothing we read is) has none. */
    bool complete = !die_has(c, ad, DW_AT_declaration) && dwarf_child(ad, &ch, &e) == DW_DLV_OK;
    drop_err(c, &e);
    if (ch) dwarf_dealloc_die(ch);
    dwarf_dealloc_die(ad);
    if (!complete) return;
    for (int id = 0; id < RBP_L_COUNT; id++)
        if (c->type_of_field[id] == ti) resolve_field(c, (rbp_field_id)id, agg);
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
 * whole scan (DIE budget spent). */
static bool scan_cu(dctx *c, Dwarf_Die cu, long *budget)
{
    Dwarf_Die d = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_child(cu, &d, &e);
    drop_err(c, &e);
    while (rc == DW_DLV_OK && c->pending > 0) {
        if (--*budget <= 0) {
            dwarf_dealloc_die(d);
            return false;
        }
        Dwarf_Half tag = die_tag(c, d);
        if (tag == DW_TAG_structure_type || tag == DW_TAG_union_type || tag == DW_TAG_typedef) {
            const char *name = die_name(c, d);
            int ti = name ? wanted_index(c, name) : -1;
            if (ti >= 0) consider(c, d, ti);
        }
        Dwarf_Die next = NULL;
        rc = dwarf_siblingof_b(c->dbg, d, 1, &next, &e);
        drop_err(c, &e);
        dwarf_dealloc_die(d);
        d = next;
    }
    if (rc == DW_DLV_OK && d) dwarf_dealloc_die(d);
    return true;
}

/* The "ruby_version" string constant exported by every libruby (version.c),
 * read from the file's own bytes via the symbol table. Best effort. */
static void read_ruby_version(const char *path, char *out, size_t outlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
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

int rbp_dwarf_layout(const char *elf_path, rbp_layout *out, char *err, size_t errlen)
{
    rbp_layout_clear(out);
    if (!elf_path) {
        rbp_set_err(err, errlen, "no file given");
        return -1;
    }
    /* Check readability ourselves: libdwarf reports a missing file as "no
     * DWARF", which would hide the real problem. */
    int fd = open(elf_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rbp_set_err(err, errlen, "cannot open %s: %s", elf_path, strerror(errno));
        return -1;
    }
    close(fd);

    static dctx zero;
    dctx *c = malloc(sizeof *c);
    if (!c) {
        rbp_set_err(err, errlen, "out of memory");
        return -1;
    }
    *c = zero;
    c->out = out;
    c->addr_size = 8;
    for (int id = 0; id < RBP_L_COUNT; id++) {
        const char *t = rbp_field_type((rbp_field_id)id);
        int ti = 0;
        while (ti < c->ntypes && strcmp(c->types[ti].name, t) != 0) ti++;
        if (ti == c->ntypes) c->types[c->ntypes++] = (wanted_type){t, false};
        c->type_of_field[id] = ti;
    }
    c->pending = c->ntypes;

    /* A buffer for the true path lets libdwarf follow .gnu_debuglink and
     * build-id links to separate debug files (e.g. Debian -dbgsym). */
    char true_path[4096];
    Dwarf_Error e = NULL;
    int rc = dwarf_init_path(elf_path, true_path, sizeof true_path, DW_DLC_READ, DW_GROUPNUMBER_ANY, NULL,
                             NULL, &c->dbg, NULL, 0, NULL, &e);
    if (rc != DW_DLV_OK) {
        if (rc == DW_DLV_ERROR)
            rbp_set_err(err, errlen, "cannot read DWARF from %s: %s", elf_path, e ? dwarf_errmsg(e) : "unknown error");
        else
            rbp_set_err(err, errlen, "%s has no DWARF debug info", elf_path);
        if (e) dwarf_dealloc_error(NULL, e);
        free(c);
        return -1;
    }

    long budget = MAX_TOP_DIES;
    int ncus = 0;
    bool any_cu = false;
    for (; ncus < MAX_CUS && c->pending > 0; ncus++) {
        Dwarf_Unsigned hdr_len = 0, typeoff = 0, next_off = 0;
        Dwarf_Half ver = 0, addr_size = 0, len_size = 0, ext_size = 0, cu_type = 0;
        Dwarf_Off abbrev = 0;
        Dwarf_Sig8 sig;
        rc = dwarf_next_cu_header_d(c->dbg, 1, &hdr_len, &ver, &abbrev, &addr_size, &len_size, &ext_size, &sig,
                                    &typeoff, &next_off, &cu_type, &e);
        if (rc != DW_DLV_OK) break; /* end of .debug_info, or a header we cannot read */
        any_cu = true;
        c->addr_size = addr_size == 4 || addr_size == 8 ? addr_size : 8;
        Dwarf_Die cu = NULL;
        if (dwarf_siblingof_b(c->dbg, NULL, 1, &cu, &e) != DW_DLV_OK) {
            drop_err(c, &e);
            continue;
        }
        bool go_on = scan_cu(c, cu, &budget);
        dwarf_dealloc_die(cu);
        if (!go_on) break;
    }
    drop_err(c, &e);
    dwarf_finish(c->dbg, &e);
    if (e) dwarf_dealloc_error(NULL, e);

    int ret = 0;
    if (!any_cu) {
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
    return 0;
}
