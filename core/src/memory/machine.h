/*
 * The target's architecture as its ELF machine (e_machine): the one list
 * of the machines rbpeek reads, their names, the debuggers' names for
 * them, and the machine an ELF header (of a core, a mapped image, a file)
 * says. Everything that depends on the target's architecture (struct
 * tables, registers, the unwinder) is a property of the target, found
 * from these, never of the machine rbpeek runs on. The session keeps the
 * target's machine and refuses one it does not read (context/machine.c).
 */
#ifndef RBP_MEMORY_MACHINE_H
#define RBP_MEMORY_MACHINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An ELF machine not yet known (EM_NONE): read as x86-64, as ever. */
#define RBP_MACHINE_UNKNOWN 0
/* The machine a layout without a "machine" line was made for: every
 * table and layout file before the line existed was x86-64's. */
#define RBP_MACHINE_DEFAULT 62 /* EM_X86_64 */

/* True when rbpeek reads targets of machine m: it has their struct
 * tables (the tables' "machine" line, layout.h), registers (regset.h)
 * and unwinder: x86-64 and aarch64. */
bool rbp_machine_read(uint16_t m);
/* The names of the machines rbpeek reads, for a refusal ("x86-64 and aarch64"). */
void rbp_machines_read(char *buf, size_t n);

/* How many low bits a user-space address of machine m may use: 47 on
 * x86-64 (4-level paging), 48 on aarch64 (Linux's default 48-bit VA); 47
 * for another. */
unsigned rbp_machine_user_bits(uint16_t m);

/* "x86-64", "aarch64", "i386", ... or NULL for a machine without a name here. */
const char *rbp_machine_name(uint16_t m);
/* The machine named name ("x86-64", "aarch64": a layout's "machine" line),
 * RBP_MACHINE_UNKNOWN when none. */
uint16_t rbp_machine_by_name(const char *name);

/* The machine a debugger names: gdb's architecture ("i386:x86-64",
 * "aarch64", "arm", "riscv:rv64", "powerpc:common64", "s390:64-bit"),
 * lldb's target triple ("x86_64-pc-linux-gnu", "aarch64-unknown-linux",
 * "arm64-..."). RBP_MACHINE_UNKNOWN for a name it does not know, which
 * then says nothing. */
uint16_t rbp_machine_from_debugger(const char *name);

/* The ELF machine of the header in hdr (n bytes, at least 20), in the
 * header's own byte order, whatever its class; false when it is no ELF
 * header. */
bool rbp_elf_header_machine(const void *hdr, size_t n, uint16_t *machine);
/* The same of the file at path (a core, an image); false when it cannot
 * be read or is no ELF file. */
bool rbp_file_machine(const char *path, uint16_t *machine);

#endif
