/*
 * Struct layouts: where each member listed in layout_fields.def lives, for
 * one Ruby build. A layout comes from DWARF (layout_dwarf.c), from a layout
 * file (--layout FILE) or from a built-in table generated from our own Ruby
 * builds (layouts/ in the source tree). All three meet here, in one struct
 * and one text format, so the decoders never care where a layout came from.
 */
#ifndef RBP_LAYOUT_H
#define RBP_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/machine.h"

typedef enum rbp_field_id {
#define RBP_FIELD(id, type, member) RBP_L_##id,
#define RBP_SIZE(id, type) RBP_L_##id,
#include "layout/layout_fields.def"
#undef RBP_FIELD
#undef RBP_SIZE
    RBP_L_COUNT
} rbp_field_id;

/* One member. offset < 0 means "absent in this Ruby". For RBP_SIZE entries
 * only size is meaningful. Bitfields have bit_size > 0: the value is
 * bit_size bits starting at bit bit_offset of the little-endian word that
 * starts at byte offset. */
typedef struct rbp_field {
    int32_t offset;
    int32_t size;
    int16_t bit_offset;
    int16_t bit_size;
} rbp_field;

/* A layout names where groups of its members came from ("facts
 * ruby_3_1_7.rs", "line 3.1"), so `ruby info` can say it; src[id] is the
 * group of member id, 0 when the file named none. */
#define RBP_LAYOUT_MAX_SOURCES 6
/* Members whose place depends on how Ruby was configured (rb_thread_t.name
 * follows a jmp_buf whose size depends on the setjmp flavour) carry one
 * alternative placement each; attach settles which one the target uses. */
#define RBP_LAYOUT_MAX_ALTS 8

typedef struct rbp_layout_alt {
    rbp_field_id id;
    rbp_field f;
} rbp_layout_alt;

typedef struct rbp_layout {
    char ruby_version[32];   /* the version the layout was made for, or "" */
    uint16_t machine;        /* the ELF machine it was made for (memory/machine.h): a
                              * "machine NAME" line, the DWARF file's header; x86-64
                              * (RBP_MACHINE_DEFAULT) for a file without the line */
    rbp_field f[RBP_L_COUNT];
    char sources[RBP_LAYOUT_MAX_SOURCES][64];   /* sources[0] is "" */
    uint8_t nsources;
    uint8_t src[RBP_L_COUNT];
    rbp_layout_alt alt[RBP_LAYOUT_MAX_ALTS];
    uint8_t nalt;
} rbp_layout;

/* Field metadata from layout_fields.def. */
const char *rbp_field_name(rbp_field_id id);     /* e.g. "cfp_pc" */
const char *rbp_field_type(rbp_field_id id);     /* e.g. "rb_control_frame_struct" */
const char *rbp_field_member(rbp_field_id id);   /* e.g. "pc", NULL for RBP_SIZE */
bool rbp_field_is_size(rbp_field_id id);
/* Looks a field up by its name; returns RBP_L_COUNT when unknown. */
rbp_field_id rbp_field_by_name(const char *name);

/* Marks every field absent; the machine is x86-64's until said. */
void rbp_layout_clear(rbp_layout *l);

static inline bool rbp_has(const rbp_layout *l, rbp_field_id id)
{
    return l->f[id].offset >= 0;
}
static inline int32_t rbp_off(const rbp_layout *l, rbp_field_id id)
{
    return l->f[id].offset;
}

/* Checks that every member can be read where the layout puts it, whichever
 * source the layout came from (a table, DWARF, --layout): a bitfield's bits
 * lie inside its storage unit (1, 2, 4 or 8 bytes), and a member lies
 * inside its struct wherever the member list gives that struct's size
 * (RBP_SIZE), e.g. every control-frame member within cfp_size, so the
 * readers that copy a struct and extract members from the copy stay inside
 * it. Alternative placements are checked too. Returns false with one line
 * naming the first member that does not fit in why. */
bool rbp_layout_check(const rbp_layout *l, char *why, size_t n);

/* Extracts a bitfield (or a plain integer field up to 8 bytes) from the
 * bytes of the containing struct, given as base (at least offset+8 bytes or
 * offset+size bytes must be readable). */
uint64_t rbp_field_extract(const rbp_layout *l, rbp_field_id id, const uint8_t *base);

/* Text format, one field per line: "<name> <offset> <size> [<bit_offset> <bit_size>]",
 * plus a "ruby <version>" line, a "machine <name>" line (x86-64 when
 * absent; written only for another), "source <words>" lines that open a group of
 * members from one source, and "alt <field> <offset> <size> [...]" lines
 * that give a member's alternative placement; '#' starts a comment. Unknown names are
 * ignored (a newer file on an older rbpeek). Returns 0 on success, else -1
 * with a message in err. */
int rbp_layout_parse(rbp_layout *out, const char *text, char *err, size_t errlen);
/* Returns a malloc'd text rendering, or NULL on allocation failure. */
char *rbp_layout_format(const rbp_layout *l, const char *comment);

/* Built-in tables (generated at build time from the layouts directory). */
size_t rbp_builtin_layout_count(void);
const char *rbp_builtin_layout_version(size_t i);
const char *rbp_builtin_layout_text(size_t i);
/* The ELF machine table i was made for (its "machine" line, else x86-64). */
uint16_t rbp_builtin_layout_machine(size_t i);
/* Finds the built-in table of machine for version: the exact one, else
 * the nearest patch release of the same major.minor (*exact set to
 * false). Returns the index or -1 (no table of that machine). */
long rbp_builtin_layout_find(const char *version, uint16_t machine, bool *exact);

#endif
