/*
 * What the per-operation harnesses share (fuzz_snapshot, fuzz_sample,
 * fuzz_objects, fuzz_heappage): the recorded Rubies they replay, each a
 * loaded image (image.h) with a session attached to it ONCE, at start.
 * Attach is fuzzed by fuzz_memimage, fuzz_core and fuzz_layout; here an
 * input pays only for the operation it tests: its patches are applied,
 * the session's page cache dropped, the operation run, then the caches an
 * operation fills (symbols, IDs, ELF images) freed and the patches undone,
 * so every input starts from the same state and leaves nothing allocated
 * (libFuzzer then skips its leak scan, which costs more than the run).
 *
 * A harness can restrict its patches to the words its operation reads on
 * the pristine image (target_track): the same mutation budget then lands
 * on what the operation looks at, not on the other 99% of the image.
 *
 * The images are every ruby*.img.gz of tests/fuzz/data/ (3.1 and 3.4), or
 * the one RBPEEK_FUZZ_IMAGE names; an input's first byte picks one.
 */
#ifndef RBP_FUZZ_TARGET_H
#define RBP_FUZZ_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "image.h"
#include "rbpeek.h"

#define TARGET_MAX 4

typedef struct fuzz_target {
    char name[32];              /* the image's file name */
    image img;
    rbpeek_session *s;
    /* The pristine snapshot: its threads and frames (iseqs, environments,
     * selfs) are what the harnesses aim at. */
    rbpeek_snapshot *snap;
} fuzz_target;

/* Loads the images and attaches a session to each; aborts when none
 * loads or one does not attach (a stale image: fuzz-record.sh). Returns
 * how many there are. */
size_t targets_init(void);
size_t targets_count(void);
fuzz_target *target_get(size_t i);
/* The target an input's selector byte picks. */
fuzz_target *target_pick(uint8_t sel);

/* Around one input: begin drops the page cache; end frees what the
 * operation cached, undoes the patches, clears the read hook and the heap
 * window, and drops the page cache again. */
void target_begin(fuzz_target *t);
void target_end(fuzz_target *t);

/* Runs op(t, ctx) on the pristine image with every read served directly
 * (no page cache) and tracked, and adds the words it read to focus. */
void target_track(fuzz_target *t, void (*op)(fuzz_target *t, void *ctx), void *ctx, img_focus *focus);

/* RBPEEK_FUZZ_REPEAT=N runs an input N times and prints the time of one
 * run (what an execution costs); else runs it once. */
int target_timed(int (*one)(const uint8_t *, size_t), const uint8_t *data, size_t size);

#endif
