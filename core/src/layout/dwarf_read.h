/*
 * What the DWARF reader's files share (layout_dwarf.c scans the compilation
 * units for the wanted types, dwarf_member.c resolves a field inside one,
 * dwarf_die.c reads DIEs, attributes and type chains through libdwarf):
 * libdwarf itself, the bounds on every walk over file-derived data, and the
 * scan's context.
 */
#ifndef RBP_LAYOUT_DWARF_READ_H
#define RBP_LAYOUT_DWARF_READ_H

#include <stdbool.h>

#include "base/walkguard.h"
#include "layout/layout.h"

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
    MAX_SKIP_DEPTH = 64,       /* nesting dw_die_next checks below a DIE */
    MAX_SKIP_CHECKS = 50000000, /* DIEs dw_die_next checks over the whole file */
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
    size_t skip_checks;        /* what is left of MAX_SKIP_CHECKS */
    rbp_layout *out;
} dctx;


/* --- dwarf_die.c: DIEs, attributes, types ------------------------------------ */

/* libdwarf allocates an error record for every failure; give it back at
 * once so a long scan over odd DWARF does not accumulate them. */
void dw_drop_err(dctx *c, Dwarf_Error *e);
/* Whether d lies past *last in .debug_info (and then *last = its offset):
 * siblings do, so a walk that checks it at each step cannot cycle, and
 * ends within the section whatever DW_AT_sibling says. */
bool dw_die_after(dctx *c, Dwarf_Die d, Dwarf_Off *last);
bool dw_die_at(dctx *c, Dwarf_Off off, Dwarf_Die *d);
/* The next sibling of d, as dwarf_siblingof_b gives it (DW_DLV_OK,
 * DW_DLV_NO_ENTRY, DW_DLV_ERROR), but only once it is known that libdwarf
 * can find it without looping; DW_DLV_ERROR when that cannot be shown.
 * Every walk over siblings steps with this, never with libdwarf directly. */
int dw_die_next(dctx *c, Dwarf_Die d, Dwarf_Die *next);
Dwarf_Half dw_die_tag(dctx *c, Dwarf_Die d);
const char *dw_die_name(dctx *c, Dwarf_Die d);
bool dw_die_has(dctx *c, Dwarf_Die d, Dwarf_Half at);
Dwarf_Off dw_die_off(dctx *c, Dwarf_Die d);
/* An integer-valued attribute, signed or not as its form says. */
bool dw_attr_int(dctx *c, Dwarf_Die d, Dwarf_Half at, long long *v);
/* A reference attribute (DW_AT_type...) as a global DIE offset. */
bool dw_attr_ref(dctx *c, Dwarf_Die d, Dwarf_Half at, Dwarf_Off *off);
/* Follows typedefs and qualifiers from the type at off to the underlying
 * type. Returns false on a broken chain or a qualified "void". */
bool dw_strip_type(dctx *c, Dwarf_Off off, Dwarf_Off *out, Dwarf_Half *tag_out);
/* sizeof the type at off, or -1 when DWARF does not say. */
long dw_type_size(dctx *c, Dwarf_Off off);

static inline bool dw_is_aggregate(Dwarf_Half tag)
{
    return tag == DW_TAG_structure_type || tag == DW_TAG_union_type;
}

static inline bool dw_is_qualifier(Dwarf_Half tag)
{
    return tag == DW_TAG_typedef || tag == DW_TAG_const_type || tag == DW_TAG_volatile_type ||
           tag == DW_TAG_restrict_type || tag == DW_TAG_atomic_type;
}

/* --- dwarf_member.c: fields -------------------------------------------------- */

/* Resolves the dotted path of one field inside the complete aggregate at
 * agg_off and records it in c->out. Unresolvable paths leave the field
 * absent. */
void dw_resolve_field(dctx *c, rbp_field_id id, Dwarf_Off agg_off);

#endif
