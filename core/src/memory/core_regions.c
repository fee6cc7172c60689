/*
 * What an ELF core says of its process beside its memory: the regions it
 * maps (its NT_FILE mappings with their paths, and the parts of its PT_LOAD
 * segments that no file mapping covers: heap, stacks, [vdso]), sorted by
 * address, and its threads' registers (NT_PRSTATUS, in the unwinder's
 * order of the core's machine). The symbol lookup and
 * the native unwinder's modules and registers are built from them, as from
 * /proc/PID/maps and ptrace for a live process.
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "memory/core_file.h"
#include "memory/mem.h"

typedef struct region_list {
    rbp_region *r;
    size_t n, cap;
    bool failed;
} region_list;

static void push_region(region_list *l, uint64_t start, uint64_t end, uint64_t ofs, const char *path)
{
    if (l->failed || end <= start) return;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        rbp_region *r = realloc(l->r, cap * sizeof *r);
        if (!r) {
            l->failed = true;
            return;
        }
        l->r = r;
        l->cap = cap;
    }
    char *p = NULL;
    if (path && !(p = strdup(path))) {
        l->failed = true;
        return;
    }
    l->r[l->n++] = (rbp_region){start, end, ofs, p};
}

static int cmp_region(const void *a, const void *b)
{
    const rbp_region *x = a, *y = b;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* NT_FILE mappings (with their paths) plus the parts of PT_LOAD segments
 * that no file mapping covers (anonymous memory: heap, stacks, [vdso]),
 * sorted by address. */
size_t rbp_source_core_regions(const char *core_path, rbp_region **out)
{
    return rbp_source_core_regions_at(core_path, NULL, out);
}

size_t rbp_source_core_regions_at(const char *core_path, const char *sysroot, rbp_region **out)
{
    if (!out) return 0;
    *out = NULL;
    core *c = core_path ? rbp_core_open(core_path, sysroot, NULL, 0) : NULL;
    if (!c) return 0;
    region_list l = {0};
    for (size_t i = 0; i < c->nmaps; i++) {
        const core_fmap *m = &c->maps[i];
        push_region(&l, m->start, m->end, m->file_ofs, c->files[m->file].path);
    }
    for (size_t i = 0; i < c->nsegs; i++) {
        uint64_t a = c->segs[i].vaddr, b = a + c->segs[i].memsz;
        /* Maps are sorted and (in a sane core) disjoint: subtract each one
         * overlapping [a, b) in turn, emitting the gaps. */
        size_t lo = 0, hi = c->nmaps;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (c->maps[mid].end <= a) lo = mid + 1;
            else hi = mid;
        }
        for (size_t j = lo; j < c->nmaps && a < b && c->maps[j].start < b; j++) {
            const core_fmap *m = &c->maps[j];
            if (m->end <= a) continue;
            if (m->start > a) push_region(&l, a, m->start, 0, NULL);
            a = m->end;
        }
        if (a < b) push_region(&l, a, b, 0, NULL);
    }
    rbp_core_free(c);
    if (l.failed || l.n == 0) {
        for (size_t i = 0; i < l.n; i++) free(l.r[i].path);
        free(l.r);
        return 0;
    }
    qsort(l.r, l.n, sizeof *l.r, cmp_region);
    *out = l.r;
    return l.n;
}

/* The threads the core names (NT_PRSTATUS), each with its registers. */
size_t rbp_source_core_threads(const char *core_path, rbp_core_thread **out)
{
    if (!out) return 0;
    *out = NULL;
    core *c = core_path ? rbp_core_open(core_path, NULL, NULL, 0) : NULL;
    if (!c) return 0;
    size_t n = c->nthreads;
    rbp_core_thread *t = n ? calloc(n, sizeof *t) : NULL;
    for (size_t i = 0; t && i < n; i++) {
        t[i].tid = c->threads[i].tid;
        rbp_regset_from_prstatus(c->regset, c->threads[i].regs, t[i].regs);
        t[i].known = rbp_regset_all(c->regset);
    }
    rbp_core_free(c);
    if (!t) return 0;
    *out = t;
    return n;
}
