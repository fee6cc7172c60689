/*
 * Reading DWARF through libdwarf for the layout extractor: a DIE by offset,
 * its tag, name and attributes, references between DIEs, and type chains
 * (typedefs and qualifiers stripped, sizes of structs, arrays, pointers and
 * base types). Every libdwarf error record is given back at once, and every
 * chain is bounded.
 */
#include "layout/dwarf_read.h"

void dw_drop_err(dctx *c, Dwarf_Error *e)
{
    if (*e) {
        dwarf_dealloc_error(c->dbg, *e);
        *e = NULL;
    }
}

bool dw_die_after(dctx *c, Dwarf_Die d, Dwarf_Off *last)
{
    Dwarf_Off off = 0;
    Dwarf_Error e = NULL;
    bool ok = dwarf_dieoffset(d, &off, &e) == DW_DLV_OK && off > *last;
    dw_drop_err(c, &e);
    if (ok) *last = off;
    return ok;
}

bool dw_die_at(dctx *c, Dwarf_Off off, Dwarf_Die *d)
{
    Dwarf_Error e = NULL;
    if (dwarf_offdie_b(c->dbg, off, 1, d, &e) == DW_DLV_OK) return true;
    dw_drop_err(c, &e);
    return false;
}

/* Whether libdwarf can skip d's subtree without looping. To find the DIE
 * after one that has children but no DW_AT_sibling, libdwarf 20210528
 * reads on through the children, and jumps at each child's DW_AT_sibling
 * without checking that it points forward: a child whose DW_AT_sibling
 * points at itself turned one dwarf_siblingof_b call into an endless loop
 * (fuzz_dwarf, 2026-11-25; tests/unit/layout/data/
 * dwarf-nested-sibling-loop.elf). So the DIEs libdwarf would read are
 * looked at here first, the same way: a child with a DW_AT_sibling must
 * point forward and is not entered (libdwarf jumps over it), a child with
 * children and none is looked into in turn. The recursion goes through a
 * recursion guard (base/walkguard.h): MAX_SKIP_DEPTH levels below d, and
 * the DIEs looked at over the whole file drawn from c->skip_checks. */
static bool skip_is_safe(dctx *c, Dwarf_Die d, rbp_recguard *g)
{
    Dwarf_Half kids = 0;
    Dwarf_Error e = NULL;
    if (dwarf_die_abbrev_children_flag(d, &kids) != DW_DLV_OK) return false;
    if (!kids) return true;
    Dwarf_Off self = dw_die_off(c, d), sib;
    if (dw_die_has(c, d, DW_AT_sibling)) return dw_attr_ref(c, d, DW_AT_sibling, &sib) && sib > self;
    Dwarf_Die ch = NULL;
    int rc = dwarf_child(d, &ch, &e);
    dw_drop_err(c, &e);
    Dwarf_Off last = self;
    while (rc == DW_DLV_OK) {
        bool ok = dw_die_after(c, ch, &last) && rbp_rec_enter(g, last) == RBP_WALK_OK;
        if (ok) {
            ok = skip_is_safe(c, ch, g);
            rbp_rec_leave(g);
        }
        if (!ok) {
            dwarf_dealloc_die(ch);
            return false;
        }
        Dwarf_Die next = NULL;
        rc = dwarf_siblingof_b(c->dbg, ch, 1, &next, &e); /* safe: ch's own skip was just checked */
        dw_drop_err(c, &e);
        dwarf_dealloc_die(ch);
        ch = next;
    }
    return rc == DW_DLV_NO_ENTRY;
}

int dw_die_next(dctx *c, Dwarf_Die d, Dwarf_Die *next)
{
    *next = NULL;
    rbp_recguard g;
    rbp_recguard_init(&g, MAX_SKIP_DEPTH + 1, &c->skip_checks);
    if (rbp_rec_enter(&g, dw_die_off(c, d)) != RBP_WALK_OK || !skip_is_safe(c, d, &g)) return DW_DLV_ERROR;
    Dwarf_Error e = NULL;
    int rc = dwarf_siblingof_b(c->dbg, d, 1, next, &e);
    dw_drop_err(c, &e);
    return rc;
}

Dwarf_Half dw_die_tag(dctx *c, Dwarf_Die d)
{
    Dwarf_Half tag = 0;
    Dwarf_Error e = NULL;
    if (dwarf_tag(d, &tag, &e) != DW_DLV_OK) {
        dw_drop_err(c, &e);
        return 0;
    }
    return tag;
}

const char *dw_die_name(dctx *c, Dwarf_Die d)
{
    char *name = NULL;
    Dwarf_Error e = NULL;
    int rc = dwarf_diename(d, &name, &e);
    if (rc == DW_DLV_OK) return name;
    dw_drop_err(c, &e);
    return NULL;
}

bool dw_die_has(dctx *c, Dwarf_Die d, Dwarf_Half at)
{
    Dwarf_Bool has = 0;
    Dwarf_Error e = NULL;
    if (dwarf_hasattr(d, at, &has, &e) != DW_DLV_OK) {
        dw_drop_err(c, &e);
        return false;
    }
    return has != 0;
}

bool dw_attr_int(dctx *c, Dwarf_Die d, Dwarf_Half at, long long *v)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    if (dwarf_attr(d, at, &a, &e) != DW_DLV_OK) {
        dw_drop_err(c, &e);
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
    dw_drop_err(c, &e);
    dwarf_dealloc_attribute(a);
    return ok;
}

/* The global offset of the DIE an attribute (normally DW_AT_type) refers to.
 * Type-unit signatures (DW_FORM_ref_sig8) are not followed: GCC and Clang do
 * not use them for C unless asked, and a miss only makes a field absent. */
bool dw_attr_ref(dctx *c, Dwarf_Die d, Dwarf_Half at, Dwarf_Off *off)
{
    Dwarf_Attribute a = NULL;
    Dwarf_Error e = NULL;
    if (dwarf_attr(d, at, &a, &e) != DW_DLV_OK) {
        dw_drop_err(c, &e);
        return false;
    }
    bool ok = dwarf_global_formref(a, off, &e) == DW_DLV_OK;
    dw_drop_err(c, &e);
    dwarf_dealloc_attribute(a);
    return ok;
}

Dwarf_Off dw_die_off(dctx *c, Dwarf_Die d)
{
    Dwarf_Off off = 0;
    Dwarf_Error e = NULL;
    if (dwarf_dieoffset(d, &off, &e) != DW_DLV_OK) dw_drop_err(c, &e);
    return off;
}

bool dw_strip_type(dctx *c, Dwarf_Off off, Dwarf_Off *out, Dwarf_Half *tag_out)
{
    for (int hop = 0; hop < MAX_TYPE_CHAIN; hop++) {
        Dwarf_Die d;
        if (!dw_die_at(c, off, &d)) return false;
        Dwarf_Half tag = dw_die_tag(c, d);
        if (!dw_is_qualifier(tag)) {
            dwarf_dealloc_die(d);
            *out = off;
            *tag_out = tag;
            return true;
        }
        bool ok = dw_attr_ref(c, d, DW_AT_type, &off);
        dwarf_dealloc_die(d);
        if (!ok) return false;
    }
    return false;
}

static long dw_type_size_in(dctx *c, Dwarf_Off off, rbp_recguard *g);

/* Through a recursion guard (base/walkguard.h): MAX_TYPE_CHAIN levels, and
 * a type that is (through typedefs, qualifiers or array elements) its own
 * part is seen at once. */
static long type_size_at(dctx *c, Dwarf_Off off, rbp_recguard *g)
{
    if (rbp_rec_enter(g, off) != RBP_WALK_OK) return -1;
    long size = dw_type_size_in(c, off, g);
    rbp_rec_leave(g);
    return size;
}

long dw_type_size(dctx *c, Dwarf_Off off)
{
    rbp_recguard g;
    rbp_recguard_init(&g, MAX_TYPE_CHAIN + 1, NULL);
    return type_size_at(c, off, &g);
}

static long dw_type_size_in(dctx *c, Dwarf_Off off, rbp_recguard *g)
{
    Dwarf_Die d;
    if (!dw_die_at(c, off, &d)) return -1;
    long size = -1;
    long long v;
    Dwarf_Half tag = dw_die_tag(c, d);
    Dwarf_Off sub;
    if (dw_attr_int(c, d, DW_AT_byte_size, &v)) {
        size = (long)v;
    } else if (dw_is_qualifier(tag)) {
        if (dw_attr_ref(c, d, DW_AT_type, &sub)) size = type_size_at(c, sub, g);
    } else if (tag == DW_TAG_pointer_type || tag == DW_TAG_reference_type) {
        size = c->addr_size;
    } else if (tag == DW_TAG_array_type && dw_attr_ref(c, d, DW_AT_type, &sub)) {
        /* Element size times every dimension; a dimension without a bound
         * (a flexible array member) contributes nothing: sizeof is 0. */
        long elem = type_size_at(c, sub, g);
        if (elem >= 0) {
            long total = elem;
            Dwarf_Die ch = NULL;
            Dwarf_Error e = NULL;
            int rc = dwarf_child(d, &ch, &e);
            dw_drop_err(c, &e);
            Dwarf_Off last = 0;
            for (int i = 0; rc == DW_DLV_OK && i < MAX_CHILDREN && dw_die_after(c, ch, &last); i++) {
                if (dw_die_tag(c, ch) == DW_TAG_subrange_type) {
                    long long n = 0, lo = 0, hi;
                    if (dw_attr_int(c, ch, DW_AT_count, &n)) {
                    } else if (dw_attr_int(c, ch, DW_AT_upper_bound, &hi)) {
                        dw_attr_int(c, ch, DW_AT_lower_bound, &lo);
                        n = hi - lo + 1;
                    }
                    if (n < 0 || n > (1 << 24)) n = 0;
                    total *= (long)n;
                }
                Dwarf_Die next = NULL;
                rc = dw_die_next(c, ch, &next);
                dwarf_dealloc_die(ch);
                ch = next;
            }
            if (rc == DW_DLV_OK && ch) dwarf_dealloc_die(ch);   /* the loop stopped early */
            size = total;
        }
    }
    dwarf_dealloc_die(d);
    return size > (1L << 24) ? -1 : size;
}
