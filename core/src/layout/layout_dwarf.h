/*
 * A layout from DWARF: every field of layout_fields.def, found in the debug
 * information of an ELF file (or of the file its .gnu_debuglink names).
 */
#ifndef RBP_LAYOUT_DWARF_H
#define RBP_LAYOUT_DWARF_H

#include <stddef.h>

#include "base/target_file.h"
#include "layout/layout.h"

/* Extracts the layout from the DWARF of elf_path. Returns 0 on success; -1
 * (message in err) when the file has no DWARF or lacks the core structs;
 * RBP_NOT_REGULAR (base/target_file.h; message in err) when elf_path is
 * not a regular file, which is never opened then (a path a core names may
 * be a FIFO or a device). */
int rbp_dwarf_layout(const char *elf_path, rbp_layout *out, char *err, size_t errlen);

#endif
