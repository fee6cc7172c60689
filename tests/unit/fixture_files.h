/*
 * Scratch files for unit tests that write output files (folded stacks,
 * SVGs, speedscope JSON) and read them back: a path in ctest's tmp dir
 * ($RBPEEK_TEST_TMP, made if missing) unique to this test process, and
 * whole-file reads and writes.
 */
#ifndef RBP_FIXTURE_FILES_H
#define RBP_FIXTURE_FILES_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

/* "$RBPEEK_TEST_TMP/<prefix>-<pid>-<name>" into buf. */
static inline void tmp_path(char *buf, size_t cap, const char *prefix, const char *name)
{
    const char *dir = getenv("RBPEEK_TEST_TMP");
    if (!dir || !*dir) dir = "/tmp";
    mkdir(dir, 0755); /* ctest's tmp dir may not exist yet; its parent does */
    snprintf(buf, cap, "%s/%s-%d-%s", dir, prefix, (int)getpid(), name);
}

/* A file's whole contents, NUL-terminated, in a malloc'd buffer (NULL if it
 * cannot be read); its length in *len_out when that is not NULL. */
static inline char *slurp(const char *path, size_t *len_out)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0, got;
    char *buf = malloc(cap);
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (len + 1 == cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) free(buf);
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    if (len_out) *len_out = len;
    return buf;
}

/* Writes text to path, replacing it; false if it cannot. */
static inline bool spit(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f) return false;
    bool ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok;
}

#endif
