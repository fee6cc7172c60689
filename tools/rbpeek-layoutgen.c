/*
 * rbpeek-layoutgen: writes an rbpeek layout file from the DWARF of a Ruby
 * build, and checks layout files. The built-in tables (layouts/NAME.layout) are
 * made with it by scripts/gen-layouts.sh; users can make one for their own
 * Ruby build on a machine that has its debug info and pass it to a debugger
 * elsewhere with --layout FILE.
 *
 *   rbpeek-layoutgen ELF [--ruby-version X.Y.Z] [-o FILE] [-v]
 *   rbpeek-layoutgen --check FILE
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "layout/layout.h"
#include "layout/layout_dwarf.h"

static void usage(FILE *to)
{
    fprintf(to,
            "usage: rbpeek-layoutgen ELF_WITH_DWARF [--ruby-version X.Y.Z] [-o FILE] [-v]\n"
            "       rbpeek-layoutgen --check FILE\n"
            "\n"
            "Extracts the struct layout rbpeek needs from the DWARF of a Ruby build\n"
            "(libruby.so.X.Y.Z, or the ruby binary of a static build) and prints it,\n"
            "or writes it to FILE. The version defaults to the ruby_version string\n"
            "found in the ELF file. --check parses a layout file and reports what it\n"
            "holds. -v reports the field count and extraction time on stderr.\n");
}

/* Reads a whole (small) text file; NULL with errno set on failure. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            if (cap > (64u << 20)) { /* no layout file is this big */
                free(buf);
                buf = NULL;
                errno = EFBIG;
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    if (buf) buf[n] = '\0';
    fclose(f);
    return buf;
}

static int count_fields(const rbp_layout *l)
{
    int n = 0;
    for (int i = 0; i < RBP_L_COUNT; i++) n += rbp_has(l, (rbp_field_id)i);
    return n;
}

static int check(const char *path)
{
    char *text = slurp(path);
    if (!text) {
        fprintf(stderr, "rbpeek-layoutgen: cannot read %s: %s\n", path, strerror(errno));
        return 1;
    }
    rbp_layout l;
    char err[256];
    int rc = rbp_layout_parse(&l, text, err, sizeof err);
    free(text);
    if (rc != 0) {
        fprintf(stderr, "rbpeek-layoutgen: %s: %s\n", path, err);
        return 1;
    }
    printf("%s: ruby %s, %d of %d fields\n", path, l.ruby_version[0] ? l.ruby_version : "(unspecified)",
           count_fields(&l), (int)RBP_L_COUNT);
    if (!rbp_has(&l, RBP_L_cfp_size))
        fprintf(stderr, "rbpeek-layoutgen: warning: %s lacks cfp_size; backtraces will not work with it\n", path);
    return 0;
}

int main(int argc, char **argv)
{
    const char *elf = NULL, *version = NULL, *outpath = NULL, *check_path = NULL;
    bool verbose = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "-v") == 0) {
            verbose = true;
        } else if ((strcmp(a, "--ruby-version") == 0 || strcmp(a, "-o") == 0 || strcmp(a, "--check") == 0)) {
            if (i + 1 >= argc) {
                fprintf(stderr, "rbpeek-layoutgen: %s needs an argument\n", a);
                return 2;
            }
            const char *v = argv[++i];
            if (a[1] == 'o') outpath = v;
            else if (a[2] == 'r') version = v;
            else check_path = v;
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, "rbpeek-layoutgen: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else if (!elf) {
            elf = a;
        } else {
            fprintf(stderr, "rbpeek-layoutgen: more than one ELF file given\n");
            return 2;
        }
    }
    if (check_path) return check(check_path);
    if (!elf) {
        usage(stderr);
        return 2;
    }
    if (version && strlen(version) >= sizeof ((rbp_layout *)0)->ruby_version) {
        fprintf(stderr, "rbpeek-layoutgen: version string too long\n");
        return 2;
    }

    rbp_layout l;
    char err[512];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = rbp_dwarf_layout(elf, &l, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0) {
        fprintf(stderr, "rbpeek-layoutgen: %s\n", err);
        return 1;
    }
    if (version) {
        if (l.ruby_version[0] && strcmp(l.ruby_version, version) != 0)
            fprintf(stderr, "rbpeek-layoutgen: warning: %s says it is ruby %s, not %s\n", elf, l.ruby_version,
                    version);
        snprintf(l.ruby_version, sizeof l.ruby_version, "%s", version);
    } else if (!l.ruby_version[0]) {
        fprintf(stderr, "rbpeek-layoutgen: cannot tell the Ruby version of %s; give --ruby-version\n", elf);
        return 1;
    }
    if (verbose)
        fprintf(stderr, "rbpeek-layoutgen: %s: %d of %d fields in %.1f ms\n", elf, count_fields(&l),
                (int)RBP_L_COUNT, (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);

    char comment[1200];
    snprintf(comment, sizeof comment, "generated by rbpeek-layoutgen from %s", elf);
    char *text = rbp_layout_format(&l, comment);
    if (!text) {
        fprintf(stderr, "rbpeek-layoutgen: out of memory\n");
        return 1;
    }
    FILE *f = outpath ? fopen(outpath, "w") : stdout;
    if (!f) {
        fprintf(stderr, "rbpeek-layoutgen: cannot write %s: %s\n", outpath, strerror(errno));
        free(text);
        return 1;
    }
    bool ok = fputs(text, f) >= 0;
    if (outpath) ok = fclose(f) == 0 && ok;
    else ok = fflush(f) == 0 && ok;
    free(text);
    if (!ok) {
        fprintf(stderr, "rbpeek-layoutgen: write error on %s\n", outpath ? outpath : "stdout");
        return 1;
    }
    return 0;
}
