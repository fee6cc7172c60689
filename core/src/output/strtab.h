/*
 * A string table (strtab.c): distinct strings, each stored once and known
 * by a dense id in the order it was first added (0, 1, 2, ...). The pprof
 * writer's string table, and its keys of functions and of modules, are
 * such tables: pprof refers to every string by its index, and a dense id
 * in order of first use is also an index into the writer's own arrays.
 */
#ifndef RBP_OUTPUT_STRTAB_H
#define RBP_OUTPUT_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct rbp_strtab {
    char **strs;        /* id -> a NUL-terminated copy */
    size_t n, cap;
    uint32_t *slots;    /* open addressing by hash: id + 1, 0 empty; load at most 1/2 */
    size_t nslots;
} rbp_strtab;

/* The id of s[0..len) (which holds no NUL), added if new; -1 when out of memory. A zeroed
 * rbp_strtab is an empty table. */
int64_t rbp_strtab_add(rbp_strtab *t, const char *s, size_t len);
void rbp_strtab_free(rbp_strtab *t);

#endif
