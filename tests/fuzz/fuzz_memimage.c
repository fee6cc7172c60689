/*
 * fuzz_memimage: hostile target memory. The recorded image of a real Ruby
 * (image.h) is served through the reader and lookup callbacks, as gdb and
 * lldb serve a process; the input patches its words (pointers, lengths,
 * flags, list links, missing pages) and picks the operations to run.
 *
 * Input: byte 0 = operation mask (ops.h), byte 1 = frame limit selector
 * (bits 0-1) and whether ruby_global_symbols must be found by a scan as in
 * the stripped Ruby recorded (bit 2: slow), then 12-byte patches (image.c). The image is RBPEEK_FUZZ_IMAGE, else
 * image.img.gz beside the seed corpus (tests/fuzz/data/).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "image.h"
#include "ops.h"

#ifndef RBP_FUZZ_DATA
#define RBP_FUZZ_DATA "tests/fuzz/data"
#endif

static image g_img;
/* One session for every input, attached again each time (attach drops
 * every cache): what a plugin does between commands, and a fresh session's
 * 4 MiB page cache would cost more page faults than the readers cost. */
static rbpeek_session *g_s;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("RBPEEK_FUZZ_IMAGE");
    if (!path) path = RBP_FUZZ_DATA "/ruby3.1.img.gz";
    if (!img_load(&g_img, path)) abort();
    g_s = rbpeek_session_new();
    if (!g_s || rbpeek_session_use_reader(g_s, img_read, &g_img) != RBPEEK_OK ||
        rbpeek_session_use_lookup(g_s, img_lookup, &g_img) != RBPEEK_OK)
        abort();
    return 0;
}

static int one_input(const uint8_t *data, size_t size);

/* RBPEEK_FUZZ_REPEAT=N runs each input N times and prints the time of one
 * run: what an operation costs, to keep executions fast. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static long repeat = -1;
    if (repeat < 0) repeat = getenv("RBPEEK_FUZZ_REPEAT") ? atol(getenv("RBPEEK_FUZZ_REPEAT")) : 0;
    if (repeat <= 0) return one_input(data, size);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < repeat; i++) one_input(data, size);
    clock_gettime(CLOCK_MONOTONIC, &b);
    fprintf(stderr, "fuzz: %.3f ms a run\n", ((b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6) / repeat);
    return 0;
}

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    static const size_t limits[4] = {0, 1, 7, 64};
    unsigned ops = data[0];
    size_t max_frames = limits[data[1] & 3];
    g_img.hidden_sym = (data[1] & 4) ? "ruby_global_symbols" : NULL;
    img_apply_patches(&g_img, data + 2, size - 2);
    if (fuzz_attach(g_s)) fuzz_run_ops(g_s, ops, max_frames);
    fuzz_end_run(g_s);
    img_undo_all(&g_img);
    return 0;
}
