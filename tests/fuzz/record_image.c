/*
 * record_image: makes the memory image the fuzz harnesses replay (image.h)
 * from a core file of a real Ruby. It runs every operation of ops.h once
 * through a recording reader wrapped around the core, the way a debugger's
 * reader callback would serve them, and keeps exactly the pages that run
 * touched, and the answers of every symbol lookup. With HEAP_PAGES, heap
 * pages beyond the first HEAP_PAGES whole-page reads are refused (as
 * unreadable) while recording; the default keeps them all, because a
 * replay of a partial heap is not faithful (tests/fuzz/README.md).
 *
 *   record_image CORE OUT.img [HEAP_PAGES]
 *
 * scripts/fuzz-record.sh makes the committed image with it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "context/context.h"
#include "image.h"
#include "memory/mem.h"
#include "ops.h"

#define BIG_READ (16 * 1024)  /* the page cache's bypass size: whole heap pages */

typedef struct recorder {
    rbp_source src;
    rbpeek_session *side;       /* the core opened normally, to answer lookups */
    image img;
    bool heap_phase;            /* census and dump: whole-page reads are limited */
    size_t heap_limit;
    uint64_t (*allowed)[2], (*blocked)[2];
    size_t nallowed, nblocked;
} recorder;

static bool have_page(const recorder *r, uint64_t pa)
{
    for (size_t i = r->img.npages; i-- > 0;)
        if (r->img.pages[i].addr == pa) return true;
    return false;
}

static bool in_ranges(uint64_t (*r)[2], size_t n, uint64_t addr);
static bool is_blocked(const recorder *r, uint64_t addr) { return in_ranges(r->blocked, r->nblocked, addr); }

static void record_pages(recorder *r, uint64_t addr, size_t len)
{
    uint8_t buf[IMG_PAGE];
    for (uint64_t pa = addr & ~(uint64_t)(IMG_PAGE - 1); pa < addr + len; pa += IMG_PAGE) {
        if (have_page(r, pa) || is_blocked(r, pa)) continue;
        long got = r->src.read(r->src.ctx, pa, buf, IMG_PAGE);
        if (got > 0 && !img_add_page(&r->img, pa, buf, (uint32_t)got)) {
            fprintf(stderr, "record_image: out of memory\n");
            exit(1);
        }
    }
}

static bool in_ranges(uint64_t (*r)[2], size_t n, uint64_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addr >= r[i][0] && addr < r[i][1]) return true;
    return false;
}

static void add_range(uint64_t (**r)[2], size_t *n, uint64_t addr, size_t len)
{
    uint64_t (*b)[2] = realloc(*r, (*n + 1) * sizeof *b);
    if (!b) exit(1);
    *r = b;
    b[*n][0] = addr;
    b[(*n)++][1] = addr + len;
}

static long rec_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    recorder *r = ctx;
    if (is_blocked(r, addr)) return -1;
    if (r->heap_phase && len >= BIG_READ && !in_ranges(r->allowed, r->nallowed, addr)) {
        /* The first heap_limit whole pages read are kept, every later
         * operation sees the same ones, the others are unreadable. */
        if (r->nallowed < r->heap_limit) add_range(&r->allowed, &r->nallowed, addr, len);
        else {
            add_range(&r->blocked, &r->nblocked, addr, len);
            return -1;
        }
    }
    long got = r->src.read(r->src.ctx, addr, buf, len);
    if (got > 0) record_pages(r, addr, (size_t)got);
    return got;
}

static int rec_lookup(void *ctx, const char *name, uint64_t *addr)
{
    recorder *r = ctx;
    uint64_t a = 0;
    bool found = rbp_symbol_lookup(r->side, name, &a, NULL);
    bool seen = false;
    for (size_t i = 0; i < r->img.nsyms; i++) seen |= strcmp(r->img.syms[i].name, name) == 0;
    if (!seen) img_add_sym(&r->img, name, found ? a : 0);
    if (found) {
        /* The lookup is a pointer into memory the reader will be asked for. */
        *addr = a;
        return 0;
    }
    return 1;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: record_image CORE OUT.img [HEAP_PAGES]\n");
        return 2;
    }
    recorder r = {.heap_limit = argc > 3 ? strtoul(argv[3], NULL, 10) : (size_t)-1};
    char err[256];
    if (!rbp_source_core(argv[1], &r.src, err, sizeof err)) {
        fprintf(stderr, "record_image: %s\n", err);
        return 1;
    }
    r.side = rbpeek_session_new();
    if (rbpeek_session_use_core(r.side, argv[1]) != RBPEEK_OK || rbpeek_session_attach(r.side) != RBPEEK_OK) {
        fprintf(stderr, "record_image: %s\n", rbpeek_session_error(r.side));
        return 1;
    }
    rbpeek_session *s = rbpeek_session_new();
    rbpeek_session_use_reader(s, rec_read, &r);
    rbpeek_session_use_lookup(s, rec_lookup, &r);
    if (rbpeek_session_attach(s) != RBPEEK_OK) {
        fprintf(stderr, "record_image: attach through the recorder: %s\n", rbpeek_session_error(s));
        return 1;
    }
    /* Stacks are read whole too (the frame walker pins a thread's used VM
     * stack): only the heap's page reads are limited. */
    fuzz_run_ops(s, OP_ALL & ~(OP_CENSUS | OP_DUMP), 0, 0, -1);
    r.heap_phase = true;
    fuzz_run_ops(s, OP_CENSUS | OP_DUMP, 0, 0, -1);
    /* What the replay must reproduce: the recorded run's own answers. */
    rbpeek_snapshot *snap = NULL;
    if (rbpeek_snapshot_take(s, 0, &snap) != RBPEEK_OK) {
        fprintf(stderr, "record_image: snapshot: %s\n", rbpeek_session_error(s));
        return 1;
    }
    size_t frames = 0;
    for (size_t i = 0; i < rbpeek_snapshot_thread_count(snap); i++) frames += rbpeek_snapshot_thread(snap, i)->nframes;
    rbpeek_census *c = NULL;
    rbpeek_census_summary sum = {0};
    if (rbpeek_heap_census(s, &c) == RBPEEK_OK) rbpeek_census_get_summary(c, &sum);
    else fprintf(stderr, "record_image: census: %s\n", rbpeek_session_error(s));
    /* Debian's ruby3.1 is stripped: attach found ruby_global_symbols by a
     * scan of libruby's data, which under the sanitizers costs more than
     * all the rest of a run. The image answers the lookup with what the
     * scan found; fuzz_memimage hides that answer again for the inputs that
     * ask (byte 1, bit 2), so the scan is fuzzed too. */
    for (size_t i = 0; i < r.img.nsyms; i++)
        if (strcmp(r.img.syms[i].name, "ruby_global_symbols") == 0 && !r.img.syms[i].addr)
            r.img.syms[i].addr = s->global_symbols;
    img_finish(&r.img);
    if (!img_save(&r.img, argv[2])) {
        fprintf(stderr, "record_image: cannot write %s\n", argv[2]);
        return 1;
    }
    printf("%s: ruby %s, %zu threads, %zu frames, census %llu live objects on %llu pages; %zu pages, %zu symbols\n",
           argv[2], rbpeek_session_ruby_version(s), rbpeek_snapshot_thread_count(snap), frames,
           (unsigned long long)sum.live, (unsigned long long)sum.pages, r.img.npages, r.img.nsyms);
    rbpeek_census_free(c);
    rbpeek_snapshot_free(snap);
    rbpeek_session_free(s);
    rbpeek_session_free(r.side);
    img_free(&r.img);
    free(r.blocked);
    free(r.allowed);
    if (r.src.close) r.src.close(r.src.ctx);
    return 0;
}
