/*
 * Reading back a pprof file that rbpeek wrote, for unit tests of the
 * writer and of what samples put in it: gunzip, unpack with protobuf-c's
 * generated code (the writer's own .proto, so the test reads what pprof
 * reads), and look up its tables by id.
 */
#ifndef RBP_FIXTURE_PPROF_H
#define RBP_FIXTURE_PPROF_H

#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "output/pprof.pb-c.h"

typedef Perftools__Profiles__Profile Prof;

/* The file at path, gunzipped and unpacked (NULL on any failure); free
 * with perftools__profiles__profile__free_unpacked. */
static inline Prof *read_pprof(const char *path)
{
    gzFile gz = gzopen(path, "rb");
    if (!gz) return NULL;
    size_t cap = 1 << 16, len = 0;
    unsigned char *buf = malloc(cap);
    int n;
    while (buf && (n = gzread(gz, buf + len, (unsigned)(cap - len))) > 0) {
        len += (size_t)n;
        if (len == cap) buf = realloc(buf, cap *= 2);
    }
    gzclose(gz);
    if (!buf) return NULL;
    Prof *p = perftools__profiles__profile__unpack(NULL, len, buf);
    free(buf);
    return p;
}

/* The string table's entry i, or a marker a test's comparison fails on. */
static inline const char *pprof_str(const Prof *p, int64_t i)
{
    return i >= 0 && (size_t)i < p->n_string_table ? p->string_table[i] : "(out of range)";
}

static inline const Perftools__Profiles__Location *pprof_location(const Prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_location; i++)
        if (p->location[i]->id == id) return p->location[i];
    return NULL;
}

static inline const Perftools__Profiles__Function *pprof_function(const Prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_function; i++)
        if (p->function[i]->id == id) return p->function[i];
    return NULL;
}

static inline const Perftools__Profiles__Mapping *pprof_mapping(const Prof *p, uint64_t id)
{
    for (size_t i = 0; i < p->n_mapping; i++)
        if (p->mapping[i]->id == id) return p->mapping[i];
    return NULL;
}

#endif
