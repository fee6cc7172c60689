/*
 * Symbols of the ELF images mapped in a target, for when the debugger has
 * none to offer: the dynamic symbol tables (.dynsym) read from target
 * memory, or from the mapped file where memory lacks them (elf_symbols.c),
 * and the full .symtab of the Ruby images' files on disk (elf_symtab.c).
 * Both take the target's memory and its region list, nothing of Ruby.
 */
#ifndef RBP_ELF_SYMBOLS_H
#define RBP_ELF_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "memory/mem.h"

/* Per-image parse results, kept by the caller between lookups. */
typedef struct rbp_elfcache rbp_elfcache;

/* Finds name in the .dynsym of every ELF image among regions (an image is a
 * path with its region at file offset 0), reading mem first and the mapped
 * file on disk where mem lacks a piece. *cache holds the parse results (NULL
 * at first); it is rebuilt when mem or the regions change. */
bool rbp_elf_lookup(rbp_mem *mem, const rbp_region *regions, size_t nregions, rbp_elfcache **cache,
                    const char *name, uint64_t *addr);
/* Frees a cache (NULL is fine); the caller then sets its pointer to NULL. */
void rbp_elfcache_free(rbp_elfcache *c);

/* Finds name in the full .symtab of the files of the Ruby images among
 * regions (for hidden symbols such as ruby_current_vm_ptr in a source
 * build). A file that is not a regular file is said on warn (may be NULL). */
bool rbp_elf_symtab_lookup(const rbp_region *regions, size_t nregions, const char *name, uint64_t *addr,
                           const rbp_warnsink *warn);

#endif
