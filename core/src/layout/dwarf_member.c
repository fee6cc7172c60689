/*
 * Resolving one field of layout_fields.def inside a struct or union found in
 * the DWARF: walking its member path (through anonymous structs and unions,
 * and nested members such as "ractor.set"), and taking the member's byte offset
 * (constant or DWARF 2 expression), size, and bit position for bitfields in
 * any DWARF flavour (DW_AT_bit_offset or DW_AT_data_bit_offset).
 */
#include "layout/dwarf_read.h"

#include <stdlib.h>
#include <string.h>


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
        dw_drop_err(c, &e);
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
    dw_drop_err(c, &e);
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
    hit->has_type = dw_attr_ref(c, m, DW_AT_type, &hit->type_off);
    hit->type_bytes = hit->has_type ? dw_type_size(c, hit->type_off) : -1;
    hit->bit_size = 0;
    hit->bit_pos = base_bits + bytes * 8;
    long long bsize;
    if (!dw_attr_int(c, m, DW_AT_bit_size, &bsize)) return true;
    if (bsize <= 0 || bsize > 64) return false;
    hit->bit_size = (long)bsize;
    long long dbo, bo, unit;
    if (dw_attr_int(c, m, DW_AT_data_bit_offset, &dbo)) {
        /* DWARF 4/5: bits from the start of the containing struct. */
        if (dbo < 0 || dbo > (1LL << 27)) return false;
        hit->bit_pos = base_bits + (long)dbo;
    } else if (dw_attr_int(c, m, DW_AT_bit_offset, &bo)) {
        /* DWARF 2/3: bits from the most significant bit of a storage unit of
         * DW_AT_byte_size bytes at the member location. On a little-endian
         * target that is unit_bits - bit_offset - bit_size from the least
         * significant bit. It may be negative when the field spills past the
         * unit; the arithmetic below still lands on the right bit. */
        if (!dw_attr_int(c, m, DW_AT_byte_size, &unit)) unit = hit->type_bytes;
        if (unit <= 0 || unit > 16) return false;
        long lsb = (long)(unit * 8 - bo - bsize);
        hit->bit_pos = base_bits + bytes * 8 + lsb;
        if (hit->bit_pos < 0) return false;
    }
    return true;
}

static bool find_member_in(dctx *c, Dwarf_Off agg_off, const char *name, long base_bits, rbp_recguard *g,
                           member_hit *hit, long *budget);

/* Searches the struct/union at agg_off for a member called name, descending
 * through unnamed struct/union members, MAX_ANON_DEPTH deep. base_bits is
 * where that aggregate starts in the outermost one. *budget (MAX_CHILDREN
 * from the caller) bounds the members looked at over the whole search, not
 * per level: a hostile file whose anonymous members all name the same
 * struct would otherwise make the levels multiply (MAX_CHILDREN to the
 * 8th). As in scan_cu (layout_dwarf.c), a sibling must lie past the DIE
 * before it. The descent goes through a recursion guard (base/walkguard.h):
 * MAX_ANON_DEPTH levels, and an anonymous member whose type is an
 * aggregate being searched further up (itself) is a loop, seen at once. */
static bool find_member(dctx *c, Dwarf_Off agg_off, const char *name, long base_bits, rbp_recguard *g,
                        member_hit *hit, long *budget)
{
    if (rbp_rec_enter(g, agg_off) != RBP_WALK_OK) return false;
    bool found = find_member_in(c, agg_off, name, base_bits, g, hit, budget);
    rbp_rec_leave(g);
    return found;
}

static bool find_member_in(dctx *c, Dwarf_Off agg_off, const char *name, long base_bits, rbp_recguard *g,
                           member_hit *hit, long *budget)
{
    Dwarf_Die agg;
    if (!dw_die_at(c, agg_off, &agg)) return false;
    Dwarf_Die ch = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_child(agg, &ch, &e);
    dw_drop_err(c, &e);
    dwarf_dealloc_die(agg);
    bool found = false;
    Dwarf_Off last = 0;
    while (rc == DW_DLV_OK && !found && --*budget > 0 && dw_die_after(c, ch, &last)) {
        if (dw_die_tag(c, ch) == DW_TAG_member) {
            const char *mname = dw_die_name(c, ch);
            if (mname && strcmp(mname, name) == 0) {
                found = member_info(c, ch, base_bits, hit);
            } else if (!mname) {
                /* An anonymous struct/union member: its members are ours. */
                member_hit anon;
                Dwarf_Off inner;
                Dwarf_Half tag;
                if (member_info(c, ch, base_bits, &anon) && anon.has_type && anon.bit_size == 0 &&
                    dw_strip_type(c, anon.type_off, &inner, &tag) && dw_is_aggregate(tag))
                    found = find_member(c, inner, name, anon.bit_pos, g, hit, budget);
            }
        }
        if (found) break;
        Dwarf_Die next = NULL;
        rc = dw_die_next(c, ch, &next);
        dwarf_dealloc_die(ch);
        ch = next;
    }
    if (rc == DW_DLV_OK && ch) dwarf_dealloc_die(ch);
    return found;
}

void dw_resolve_field(dctx *c, rbp_field_id id, Dwarf_Off agg_off)
{
    const char *path = rbp_field_member(id);
    rbp_field *f = &c->out->f[id];
    if (!path) {
        long size = dw_type_size(c, agg_off);
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
        long budget = MAX_CHILDREN;
        rbp_recguard g;
        rbp_recguard_init(&g, MAX_ANON_DEPTH + 1, NULL);
        if (!find_member(c, cur, parts[i], base_bits, &g, &hit, &budget)) return;
        if (i + 1 == nparts) break;
        /* Descend: the member must itself be a complete struct or union. */
        Dwarf_Half tag;
        Dwarf_Die d;
        if (hit.bit_size || !hit.has_type || !dw_strip_type(c, hit.type_off, &cur, &tag) || !dw_is_aggregate(tag))
            return;
        if (!dw_die_at(c, cur, &d)) return;
        bool decl = dw_die_has(c, d, DW_AT_declaration);
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
