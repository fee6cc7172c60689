/*
 * The operations a fuzz run drives through rbpeek's public API, the way the
 * gdb and lldb plugins do: attach, snapshot, render (text and JSON), the
 * sampler's profile_add_snapshot, threads and locks, session describe, the
 * GC's counters (`ruby gc`) and allocation counts (`ruby allocs`), heap
 * census and its rendering, heap dump, a second snapshot after an
 * invalidation, every frame's locals (`bt --locals`, `frame`), values
 * printed as `ruby p` prints them, and `ruby page` of a heap address. The recorder runs them all (so the image holds every page
 * any of them touches); a fuzz input picks a subset with a bit mask.
 * Header-only: the recorder and every harness include it once.
 */
#ifndef RBP_FUZZ_OPS_H
#define RBP_FUZZ_OPS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "context/context.h"
#include "heap/heap.h"
#include "image.h"
#include "jsoncheck.h"
#include "memory/elf_symbols.h"
#include "rbpeek.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

enum {
    OP_RENDER_TEXT = 1 << 0,
    OP_RENDER_JSON = 1 << 1,
    OP_LOCKS = 1 << 2,
    OP_PROFILE = 1 << 3,
    OP_DESCRIBE = 1 << 4,   /* and the other session-wide readers: `ruby gc`, `ruby allocs` */
    OP_CENSUS = 1 << 5,
    OP_DUMP = 1 << 6,
    OP_RETAKE = 1 << 7,
    OP_LOCALS = 1 << 8,     /* rbpeek_thread_locals per thread, rbpeek_frame_locals of its top Ruby frame */
    OP_INSPECT = 1 << 9,    /* rbpeek_value_inspect of each Thread object and frame self, and of the input's
                             * value; rbpeek_page_render (`ruby page`) of the Thread object and of that value */
    OP_ALL = 0x3ff,
};

/* Reads every string a snapshot hands out, so a dangling or unterminated
 * one is caught by ASan here and not only by a writer that skips it. */
static inline size_t fuzz_touch_snapshot(const rbpeek_snapshot *snap)
{
    size_t sum = 0;
    size_t n = rbpeek_snapshot_thread_count(snap);
    for (size_t i = 0; i < n; i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        if (t->name) sum += strlen(t->name);
        if (t->error) sum += strlen(t->error);
        for (size_t k = 0; k < t->nframes; k++) {
            const rbpeek_frame *f = &t->frames[k];
            sum += strlen(f->label);
            if (f->path) sum += strlen(f->path);
            if (f->absolute_path) sum += strlen(f->absolute_path);
        }
    }
    return sum;
}

/* RBPEEK_FUZZ_VERBOSE=1 prints what each operation got (to check that a
 * replay reproduces the recording, or to read a crash's input). */
static inline int fuzz_verbose(void)
{
    static int v = -1;
    if (v < 0) v = getenv("RBPEEK_FUZZ_VERBOSE") != NULL;
    return v;
}

static inline void fuzz_say(rbpeek_session *s, const char *op, rbpeek_status st, const char *what)
{
    if (fuzz_verbose())
        fprintf(stderr, "fuzz: %-8s %s%s%s\n", op, st == RBPEEK_OK ? "ok " : rbpeek_status_name(st),
                st == RBPEEK_OK ? what : ": ", st == RBPEEK_OK ? "" : rbpeek_session_error(s));
}

/* Attaches; a failure must come with its one-line message. */
static inline int fuzz_attach(rbpeek_session *s)
{
    rbpeek_status st = rbpeek_session_attach(s);
    fuzz_say(s, "attach", st, rbpeek_session_layout_source(s));
    if (st != RBPEEK_OK && rbpeek_session_error(s)[0] == '\0') abort();
    return st == RBPEEK_OK;
}

/* `ruby p VALUE`, in text with the raw header and in JSON. */
static inline rbpeek_status fuzz_inspect(rbpeek_session *s, uint64_t value, int32_t depth)
{
    rbpeek_inspect_options opt = {.depth = depth, .max_length = 16, .raw = 1};
    char *out = NULL;
    rbpeek_status st = rbpeek_value_inspect(s, value, &opt, RBPEEK_FORMAT_TEXT, &out);
    if (st == RBPEEK_OK && fuzz_verbose()) fprintf(stderr, "fuzz: inspect  %.400s\n", out);
    if (st == RBPEEK_OK) rbpeek_free(out);
    else if (rbpeek_session_error(s)[0] == '\0') abort(); /* a refusal must say why */
    out = NULL;
    opt.raw = 0;
    if (rbpeek_value_inspect(s, value, &opt, RBPEEK_FORMAT_JSON, &out) == RBPEEK_OK) rbpeek_free(out);
    return st;
}

/* `ruby heap --dump PATH` into a file in memory, every line of which must
 * then read as strict JSON (jsoncheck.h); what the writer wrote before an
 * error too, but for an unfinished last line. */
static inline rbpeek_status fuzz_heap_dump(rbpeek_session *s, rbpeek_heap_dump_stats *ds)
{
    static int fd = -2;
    static char path[40];
    if (fd == -2) {
        fd = (int)syscall(SYS_memfd_create, "rbpeek-fuzz-dump", 0);
        if (fd >= 0) snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    }
    if (fd < 0) return rbpeek_heap_dump(s, "/dev/null", ds);
    rbpeek_status st = rbpeek_heap_dump(s, path, ds);
    struct stat sb;
    if (fstat(fd, &sb) == 0 && sb.st_size > 0) {
        void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m != MAP_FAILED) {
            if (fuzz_verbose()) fprintf(stderr, "fuzz: dumped   %.*s\n", (int)(sb.st_size < 600 ? sb.st_size : 600), (char *)m);
            json_check_lines("ruby heap --dump", m, (size_t)sb.st_size, st == RBPEEK_OK);
            munmap(m, (size_t)sb.st_size);
        }
    }
    if (ftruncate(fd, 0) != 0) abort(); /* a next dump that fails to open must not find this one */
    return st;
}

/* The image whose heap window (image.h) bounds the census and the dump, or
 * NULL: `ruby page` reads one page body whole too, and is let through. */
static image *fuzz_window_img;

/* `ruby page ADDR`: the heap page holding addr, in text and JSON. */
static inline rbpeek_status fuzz_page(rbpeek_session *s, uint64_t addr)
{
    char *out = NULL;
    size_t win = fuzz_window_img ? fuzz_window_img->win_n : 0;
    if (fuzz_window_img) fuzz_window_img->win_n = 0;
    rbpeek_status st = rbpeek_page_render(s, addr, RBPEEK_FORMAT_TEXT, &out);
    if (st == RBPEEK_OK) rbpeek_free(out);
    else if (rbpeek_session_error(s)[0] == '\0') abort();
    out = NULL;
    if (rbpeek_page_render(s, addr, RBPEEK_FORMAT_JSON, &out) == RBPEEK_OK) rbpeek_free(out);
    if (fuzz_window_img) fuzz_window_img->win_n = win;
    return st;
}

/* `bt --locals` (one pass per thread) and `frame N` (its top Ruby frame). */
static inline void fuzz_locals(rbpeek_session *s, const rbpeek_thread *t)
{
    rbpeek_inspect_options opt = {.depth = 2, .max_length = 8};
    char *out = NULL;
    rbpeek_status st = rbpeek_thread_locals(s, t, &opt, &out);
    fuzz_say(s, "locals", st, "");
    if (st == RBPEEK_OK) rbpeek_free(out);
    out = NULL;
    for (size_t k = 0; k < t->nframes; k++) {
        if (!t->frames[k].iseq) continue;
        if (rbpeek_frame_locals(s, &t->frames[k], &opt, &out) == RBPEEK_OK) rbpeek_free(out);
        break;
    }
}

/* Runs the selected operations on an attached session. OP_LOCALS and
 * OP_INSPECT look at one thread, thread % the thread count (each costs a
 * heap open: every thread of every input would be 40 of them), or at
 * every thread when thread is -1; value, when not 0, is printed too.
 * Failures are expected (that is what the input is for) and only end that
 * operation. */
static inline void fuzz_run_ops(rbpeek_session *s, unsigned ops, size_t max_frames, uint64_t value, int thread)
{
    rbpeek_snapshot *snap = NULL;
    char *out = NULL;
    char what[96];
    rbpeek_status st = rbpeek_snapshot_take(s, max_frames, &snap);
    if (st == RBPEEK_OK) {
        size_t frames = 0;
        for (size_t i = 0; i < rbpeek_snapshot_thread_count(snap); i++) frames += rbpeek_snapshot_thread(snap, i)->nframes;
        snprintf(what, sizeof what, "%zu threads, %zu frames", rbpeek_snapshot_thread_count(snap), frames);
        fuzz_say(s, "snapshot", st, what);
        fuzz_touch_snapshot(snap);
        if ((ops & OP_RENDER_TEXT) && rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_TEXT, -1, &out) == RBPEEK_OK) {
            rbpeek_free(out);
            out = NULL;
        }
        if ((ops & OP_RENDER_JSON) && rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_JSON, 0, &out) == RBPEEK_OK) {
            rbpeek_free(out);
            out = NULL;
        }
        if ((ops & OP_LOCKS) && (st = rbpeek_locks_render_json(s, snap, &out)) == RBPEEK_OK) {
            snprintf(what, sizeof what, "%zu bytes of JSON", strlen(out));
            fuzz_say(s, "locks", st, what);
            rbpeek_free(out);
            out = NULL;
        } else if (ops & OP_LOCKS) {
            fuzz_say(s, "locks", st, "");
        }
        if (ops & OP_PROFILE) {
            rbpeek_profile *p = rbpeek_profile_new();
            rbpeek_sample_options opt = {.per_thread = 1};
            if (p) rbpeek_profile_add_snapshot(p, snap, &opt, NULL);
            rbpeek_profile_free(p);
        }
        size_t nt = rbpeek_snapshot_thread_count(snap);
        for (size_t i = 0; (ops & (OP_LOCALS | OP_INSPECT)) && i < nt; i++) {
            if (thread >= 0 && i != (size_t)thread % nt) continue;
            const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
            if (ops & OP_LOCALS) fuzz_locals(s, t);
            if (ops & OP_INSPECT) {
                fuzz_say(s, "p thread", fuzz_inspect(s, t->thread_value, 1), "");
                if (t->nframes) fuzz_say(s, "p self", fuzz_inspect(s, t->frames[0].self, 2), "");
                fuzz_say(s, "page", fuzz_page(s, t->thread_value), "");
            }
        }
        rbpeek_snapshot_free(snap);
    } else {
        fuzz_say(s, "snapshot", st, "");
    }
    if ((ops & OP_DESCRIBE) && rbpeek_session_describe(s, &out) == RBPEEK_OK) {
        rbpeek_free(out);
        out = NULL;
    }
    if (ops & OP_DESCRIBE) {
        st = rbpeek_gc_render(s, RBPEEK_FORMAT_JSON, &out);
        fuzz_say(s, "gc", st, "");
        if (st == RBPEEK_OK) rbpeek_free(out);
        out = NULL;
        if (rbpeek_gc_render(s, RBPEEK_FORMAT_TEXT, &out) == RBPEEK_OK) rbpeek_free(out);
        out = NULL;
        rbpeek_alloc_counts ac;
        st = rbpeek_alloc_counts_read(s, &ac);
        snprintf(what, sizeof what, "%llu allocated", (unsigned long long)ac.total);
        fuzz_say(s, "allocs", st, st == RBPEEK_OK ? what : "");
    }
    if (ops & OP_CENSUS) {
        rbpeek_census *c = NULL;
        st = rbpeek_heap_census(s, &c);
        if (st == RBPEEK_OK) {
            rbpeek_census_summary sum;
            rbpeek_census_get_summary(c, &sum);
            snprintf(what, sizeof what, "%llu live objects on %llu pages", (unsigned long long)sum.live,
                     (unsigned long long)sum.pages);
        }
        fuzz_say(s, "census", st, what);
        if (st == RBPEEK_OK) {
            if (rbpeek_census_render(c, RBPEEK_FORMAT_JSON, 0, 1, &out) == RBPEEK_OK) rbpeek_free(out);
            out = NULL;
            if (rbpeek_census_render(c, RBPEEK_FORMAT_TEXT, 5, 0, &out) == RBPEEK_OK) rbpeek_free(out);
            out = NULL;
        }
        rbpeek_census_free(c);
    }
    if (ops & OP_DUMP) {
        rbpeek_heap_dump_stats ds = {0};
        st = fuzz_heap_dump(s, &ds);
        snprintf(what, sizeof what, "%llu objects", (unsigned long long)ds.objects);
        fuzz_say(s, "dump", st, what);
    }
    if ((ops & OP_INSPECT) && value) {
        snprintf(what, sizeof what, "0x%llx", (unsigned long long)value);
        st = fuzz_inspect(s, value, 3);
        fuzz_say(s, "p", st, what);
        fuzz_page(s, value);
    }
    if (ops & OP_RETAKE) {
        rbpeek_session_invalidate(s);
        if (rbpeek_snapshot_take(s, max_frames, &snap) == RBPEEK_OK) {
            fuzz_touch_snapshot(snap);
            rbpeek_snapshot_free(snap);
        }
    }
}

/* Drops the caches a reused session keeps until its next attach (as
 * attach itself does), so that an input leaves nothing allocated: libFuzzer
 * then skips its per-input leak scan, which costs more than the run, and
 * LeakSanitizer still sees every block an input really leaks. */
static inline void fuzz_end_run(rbpeek_session *s)
{
    rbp_symcache_free(s->symcache);
    s->symcache = NULL;
    rbp_idcache_free(s->idcache);
    s->idcache = NULL;
    rbp_elfcache_free(s->elfcache);
    s->elfcache = NULL;
}

/* The heap window (image.h): the page bodies of the attached session's
 * heap, as the walk reads them. */
static inline void fuzz_find_heap(rbpeek_session *s, image *img)
{
    rbp_heap h;
    if (rbp_heap_open(s, &h) != RBPEEK_OK) return;
    free(img->heap_bodies);
    img->heap_bodies = malloc((h.npages ? h.npages : 1) * sizeof *img->heap_bodies);
    img->nheap_bodies = 0;
    for (size_t i = 0; img->heap_bodies && i < h.npages; i++)
        img->heap_bodies[img->nheap_bodies++] = h.pages[i].start & ~(uint64_t)(h.page_align - 1);
    img->heap_body_len = h.page_align;
    rbp_heap_close(&h);
}

/* The same from a session of its own on the pristine image. */
static inline void fuzz_image_heap(image *img)
{
    rbpeek_session *s = rbpeek_session_new();
    if (s && rbpeek_session_use_reader(s, img_read, img) == RBPEEK_OK &&
        rbpeek_session_use_lookup(s, img_lookup, img) == RBPEEK_OK && rbpeek_session_attach(s) == RBPEEK_OK)
        fuzz_find_heap(s, img);
    if (fuzz_verbose())
        fprintf(stderr, "fuzz: heap     %s%zu page bodies of %u bytes%s%s\n", img->nheap_bodies ? "ok " : "",
                img->nheap_bodies, img->heap_body_len, img->nheap_bodies ? "" : ": ",
                img->nheap_bodies ? "" : rbpeek_session_error(s));
    rbpeek_session_free(s);
}

#endif
