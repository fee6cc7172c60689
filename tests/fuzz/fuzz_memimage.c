/*
 * fuzz_memimage: hostile target memory. The recorded image of a real Ruby
 * (image.h) is served through the reader and lookup callbacks, as gdb and
 * lldb serve a process; the input patches its words (pointers, lengths,
 * flags, list links, missing pages) and picks the operations to run.
 *
 * Input, an 8-byte header then 12-byte patches (image.c):
 *   byte 0    operations (ops.h, bits 0-7)
 *   byte 1    bits 0-1 frame limit (none, 1, 7, 64); bits 3-4 operations
 *             OP_LOCALS, OP_INSPECT; bits 2, 5, 6 and 7 all set: find
 *             ruby_global_symbols by a scan, as the stripped Ruby recorded
 *             needs (one input in 16: it costs 5 attaches)
 *   byte 2    the heap window's first page body (mod the heap's pages)
 *   byte 3    bit 0: the window's size (1 or 2 bodies), 0xff the whole
 *             heap; bits 2-7 the thread OP_LOCALS and OP_INSPECT look at
 *   bytes 4-7 a value to print (OP_INSPECT): u32 w, the image's word
 *             ptr_words[w % n] (top bit set) or word w % nwords; 0: none
 * The heap window (image.h) bounds what the census and the dump walk, the
 * cost of which grows with the heap (the whole recorded heap: some 0.1 s
 * and 0.6 s under the sanitizers; a window of 1 or 2 of its 53 pages some
 * 10 ms); every object stays readable by address. The image is
 * RBPEEK_FUZZ_IMAGE, else ruby3.1.img.gz beside the seed corpus
 * (tests/fuzz/data/).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    fuzz_image_heap(&g_img);
    fuzz_window_img = &g_img;
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
    if (size < 8) return 0;
    static const size_t limits[4] = {0, 1, 7, 64};
    unsigned ops = data[0] | (unsigned)((data[1] >> 3) & 3) << 8;
    size_t max_frames = limits[data[1] & 3];
    g_img.hidden_sym = (data[1] & 0xe4) == 0xe4 ? "ruby_global_symbols" : NULL;
    img_set_heap_window(&g_img, data[2], data[3] == 0xff ? 0 : 1 + (data[3] & 1));
    uint32_t sel;
    memcpy(&sel, data + 4, 4);
    size_t nw = img_nwords(&g_img);
    uint64_t value = 0;
    if (sel && (sel & 0x80000000u) && g_img.nptr_words) value = img_get_word(&g_img, g_img.ptr_words[(sel & 0x7fffffffu) % g_img.nptr_words]);
    else if (sel && nw) value = img_get_word(&g_img, sel % nw);
    img_apply_patches(&g_img, data + 8, size - 8);
    if (fuzz_attach(g_s)) fuzz_run_ops(g_s, ops, max_frames, value, data[3] >> 2);
    fuzz_end_run(g_s);
    img_undo_all(&g_img);
    return 0;
}
