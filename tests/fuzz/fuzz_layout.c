/*
 * fuzz_layout: hostile layout files (`--layout FILE`). The input is the
 * file; rbpeek parses it, then attaches with it to the recorded image of a
 * real Ruby (image.h) and walks, so a table that parses but does not fit
 * (fields past their struct, bitfields past their unit, frame members past
 * the frame) must be refused before any reader uses it. The first line may
 * be "#ops N" to pick the operations (ops.h); the default is a snapshot
 * with its renderings and the locks. A census or dump walks 2 of the
 * recorded heap's 53 page bodies (the heap window, image.h).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "image.h"
#include "layout/layout.h"
#include "ops.h"

#ifndef RBP_FUZZ_DATA
#define RBP_FUZZ_DATA "tests/fuzz/data"
#endif

static image g_img;
static rbpeek_session *g_s;     /* reused, as in fuzz_memimage.c */
static int g_fd = -1;
static char g_path[64];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *path = getenv("RBPEEK_FUZZ_IMAGE");
    if (!path) path = RBP_FUZZ_DATA "/ruby3.1.img.gz";
    if (!img_load(&g_img, path)) abort();
    g_fd = memfd_create("fuzz_layout", 0);
    if (g_fd < 0) abort();
    snprintf(g_path, sizeof g_path, "/proc/self/fd/%d", g_fd);
    g_s = rbpeek_session_new();
    if (!g_s || rbpeek_session_use_reader(g_s, img_read, &g_img) != RBPEEK_OK ||
        rbpeek_session_use_lookup(g_s, img_lookup, &g_img) != RBPEEK_OK ||
        rbpeek_session_set_layout_file(g_s, g_path) != RBPEEK_OK)
        abort();
    /* A census or dump ("#ops") walks 2 of the heap's page bodies (the
     * heap window, image.h): enough to meet every decoder's fields. */
    fuzz_image_heap(&g_img);
    fuzz_window_img = &g_img;
    img_set_heap_window(&g_img, 0, 2);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The parser on its own, and its output parsed again. */
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    rbp_layout *l = malloc(sizeof *l);
    char err[256];
    if (l && rbp_layout_parse(l, text, err, sizeof err) == 0) {
        char *again = rbp_layout_format(l, "fuzz");
        if (again && rbp_layout_parse(l, again, err, sizeof err) != 0) abort(); /* its own output must parse */
        free(again);
    }
    free(l);
    unsigned ops = OP_RENDER_TEXT | OP_RENDER_JSON | OP_LOCKS;
    if (strncmp(text, "#ops ", 5) == 0) ops = (unsigned)strtoul(text + 5, NULL, 0) & OP_ALL;
    free(text);

    /* Through the API, on a real Ruby's memory. */
    if (ftruncate(g_fd, 0) != 0 || pwrite(g_fd, data, size, 0) != (ssize_t)size) abort();
    if (fuzz_attach(g_s)) fuzz_run_ops(g_s, ops, 0, 0, 0);
    fuzz_end_run(g_s);
    return 0;
}
