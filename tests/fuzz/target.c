/*
 * The replayed Rubies of the per-operation harnesses (target.h): loading
 * the images, attaching once, and what brackets each input.
 */
#include "target.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops.h"

#ifndef RBP_FUZZ_DATA
#define RBP_FUZZ_DATA "tests/fuzz/data"
#endif

static fuzz_target g_targets[TARGET_MAX];
static size_t g_n;

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static void load_one(const char *path)
{
    fuzz_target *t = &g_targets[g_n];
    const char *base = strrchr(path, '/');
    snprintf(t->name, sizeof t->name, "%s", base ? base + 1 : path);
    if (!img_load(&t->img, path)) abort();
    t->s = rbpeek_session_new();
    if (!t->s || rbpeek_session_use_reader(t->s, img_read, &t->img) != RBPEEK_OK ||
        rbpeek_session_use_lookup(t->s, img_lookup, &t->img) != RBPEEK_OK)
        abort();
    if (rbpeek_session_attach(t->s) != RBPEEK_OK) {
        fprintf(stderr, "fuzz: %s does not attach (%s): make it again with scripts/fuzz-record.sh\n", t->name,
                rbpeek_session_error(t->s));
        abort();
    }
    fuzz_image_heap(&t->img);
    if (rbpeek_snapshot_take(t->s, 0, &t->snap) != RBPEEK_OK) {
        fprintf(stderr, "fuzz: %s: no snapshot (%s)\n", t->name, rbpeek_session_error(t->s));
        abort();
    }
    if (fuzz_verbose())
        fprintf(stderr, "fuzz: target   %s: ruby %s, %s, %zu threads\n", t->name, rbpeek_session_ruby_version(t->s),
                rbpeek_session_layout_source(t->s), rbpeek_snapshot_thread_count(t->snap));
    /* what the first snapshot cached goes, as after every input */
    fuzz_end_run(t->s);
    rbpeek_session_invalidate(t->s);
    g_n++;
}

size_t targets_init(void)
{
    if (g_n) return g_n;
    const char *one = getenv("RBPEEK_FUZZ_IMAGE");
    if (one) {
        load_one(one);
        return g_n;
    }
    DIR *d = opendir(RBP_FUZZ_DATA);
    if (!d) {
        fprintf(stderr, "fuzz: no image directory %s\n", RBP_FUZZ_DATA);
        abort();
    }
    char *names[TARGET_MAX];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < TARGET_MAX) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "ruby", 4) == 0 && l > 7 && strcmp(e->d_name + l - 7, ".img.gz") == 0)
            names[n++] = strdup(e->d_name);
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_str);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", RBP_FUZZ_DATA, names[i]);
        load_one(path);
        free(names[i]);
    }
    if (!g_n) {
        fprintf(stderr, "fuzz: no ruby*.img.gz in %s\n", RBP_FUZZ_DATA);
        abort();
    }
    return g_n;
}

size_t targets_count(void) { return g_n; }
fuzz_target *target_get(size_t i) { return i < g_n ? &g_targets[i] : NULL; }
fuzz_target *target_pick(uint8_t sel) { return &g_targets[sel % g_n]; }

void target_begin(fuzz_target *t) { rbpeek_session_invalidate(t->s); }

void target_end(fuzz_target *t)
{
    fuzz_end_run(t->s);
    img_undo_all(&t->img);
    t->img.hook = NULL;
    t->img.hook_at = 0;
    t->img.reads = 0;
    t->img.hidden_sym = NULL;
    img_set_heap_window(&t->img, 0, 0);
    rbpeek_session_invalidate(t->s);
}

void target_track(fuzz_target *t, void (*op)(fuzz_target *t, void *ctx), void *ctx, img_focus *focus)
{
    target_begin(t);
    bool was = rbp_mem_set_direct(t->s->mem, true);
    if (!img_track_start(&t->img)) abort();
    op(t, ctx);
    if (!img_track_stop(&t->img, focus)) abort();
    rbp_mem_set_direct(t->s->mem, was);
    target_end(t);
}

int target_timed(int (*one)(const uint8_t *, size_t), const uint8_t *data, size_t size)
{
    static long repeat = -1;
    if (repeat < 0) repeat = getenv("RBPEEK_FUZZ_REPEAT") ? atol(getenv("RBPEEK_FUZZ_REPEAT")) : 0;
    if (repeat <= 0) return one(data, size);
    /* CPU time, which the load of a shared machine does not change much,
     * and wall-clock time */
    struct timespec a, b, ca, cb;
    clock_gettime(CLOCK_MONOTONIC, &a);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ca);
    for (long i = 0; i < repeat; i++) one(data, size);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cb);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "fuzz: %.3f ms of CPU a run (%.3f ms of wall clock)\n",
            ((cb.tv_sec - ca.tv_sec) * 1e3 + (cb.tv_nsec - ca.tv_nsec) / 1e6) / repeat,
            ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6) / repeat);
    return 0;
}
