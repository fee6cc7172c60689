/*
 * fuzz_snapshot: `ruby bt` on hostile memory, one operation per input and
 * nothing else: a session attached once to each recorded Ruby (target.h)
 * takes a snapshot of its threads after the input's patches, and renders
 * it as the plugins do (text, JSON), as `ruby locks` does, and as the
 * sampler's profile_add_snapshot does. The patches land on the words the
 * snapshot and those renderings read on the pristine image (thread and
 * ractor lists, execution contexts, control frames, VM stacks, iseqs and
 * their line tables, method entries, labels and paths: some 1,900 of the
 * 3.1 image's 523,000 words), so every mutation changes something the
 * walk looks at. Every JSON document must read strictly (jsoncheck.h).
 *
 * Input, a 2-byte header then 12-byte patches (image.c's format, each
 * word taken from those the operations read):
 *   byte 0  bits 0-1 the image (target.h), bits 2-3 the frame limit (none,
 *           1, 7, 64), bit 4 text, bit 5 JSON, bit 6 locks, bit 7 the
 *           sampler's profile_add_snapshot
 *   byte 1  bit 0 a second snapshot after an invalidation (the caches
 *           kept across it); bit 1 render one thread only (byte 1 >> 2)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsoncheck.h"
#include "ops.h"
#include "target.h"

static img_focus g_focus[TARGET_MAX];

static void run(fuzz_target *t, unsigned b0, unsigned b1)
{
    static const size_t limits[4] = {0, 1, 7, 64};
    size_t max_frames = limits[(b0 >> 2) & 3];
    rbpeek_session *s = t->s;
    rbpeek_snapshot *snap = NULL;
    char *out = NULL;
    rbpeek_status st = rbpeek_snapshot_take(s, max_frames, &snap);
    if (st != RBPEEK_OK) {
        if (rbpeek_session_error(s)[0] == '\0') abort(); /* a refusal must say why */
        fuzz_say(s, "snapshot", st, "");
        return;
    }
    fuzz_touch_snapshot(snap);
    if (fuzz_verbose()) {
        char what[64];
        snprintf(what, sizeof what, "%zu threads", rbpeek_snapshot_thread_count(snap));
        fuzz_say(s, "snapshot", st, what);
    }
    long one = (b1 & 2) ? (long)(b1 >> 2) % (long)(rbpeek_snapshot_thread_count(snap) + 1) : -1;
    if ((b0 & 0x10) && rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_TEXT, one, &out) == RBPEEK_OK) rbpeek_free(out);
    out = NULL;
    if ((b0 & 0x20) && rbpeek_snapshot_render(s, snap, RBPEEK_FORMAT_JSON, one, &out) == RBPEEK_OK) {
        json_check("ruby bt --json", out);
        rbpeek_free(out);
    }
    out = NULL;
    if ((b0 & 0x40) && rbpeek_locks_render_json(s, snap, &out) == RBPEEK_OK) {
        json_check("ruby locks --json", out);
        rbpeek_free(out);
    }
    out = NULL;
    if (b0 & 0x80) {
        rbpeek_profile *p = rbpeek_profile_new();
        rbpeek_sample_options opt = {.per_thread = 1};
        if (p) rbpeek_profile_add_snapshot(p, snap, &opt, NULL);
        rbpeek_profile_free(p);
    }
    rbpeek_snapshot_free(snap);
    if (b1 & 1) {
        rbpeek_session_invalidate(s);
        if (rbpeek_snapshot_take(s, max_frames, &snap) == RBPEEK_OK) {
            fuzz_touch_snapshot(snap);
            rbpeek_snapshot_free(snap);
        }
    }
}

static void track_op(fuzz_target *t, void *ctx)
{
    (void)ctx;
    run(t, 0xf0, 1);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    size_t n = targets_init();
    for (size_t i = 0; i < n; i++) {
        target_track(target_get(i), track_op, NULL, &g_focus[i]);
        if (fuzz_verbose())
            fprintf(stderr, "fuzz: focus    %s: %zu words read (%zu pointers)\n", target_get(i)->name,
                    g_focus[i].nwords, g_focus[i].nptrs);
    }
    return 0;
}

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    fuzz_target *t = target_pick(data[0] & 3);
    target_begin(t);
    img_apply_patches_in(&t->img, data + 2, size - 2, &g_focus[(data[0] & 3) % targets_count()]);
    run(t, data[0], data[1]);
    target_end(t);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target_timed(one_input, data, size); }
