/*
 * Function ranges from a module's .eh_frame_hdr, for the unwinder's
 * symbolizer (unwind_dwfl.c) where no symbol names a function: the static
 * functions of a stripped libruby. Part of librbpeek-unwind.so; reads the
 * ELF file libdwfl opened, through libelf only.
 */
#ifndef RBP_NATIVE_DWFL_EH_FRAME_HDR_H
#define RBP_NATIVE_DWFL_EH_FRAME_HDR_H

#include <gelf.h>
#include <stdint.h>

/* The function that holds at (an address in the target) in the module
 * whose ELF is e, loaded bias bytes from its link-time addresses: *lo its
 * first address, *hi the next function's (the last one's end is not in the
 * table: then at + 1 at least). Leaves both alone when the module has no
 * search table rbpeek reads, or at is before its first function. */
void rbp_eh_frame_hdr_function(Elf *e, uint64_t bias, uint64_t at, uint64_t *lo, uint64_t *hi);

#endif
