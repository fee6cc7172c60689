/*
 * fuzz_objects: `ruby p` and `bt --locals` over objects built from the
 * input (objbuild.h) in heap pages of their own inside a replayed Ruby
 * (target.h): every type the printer decodes, in every form, nested and
 * pointing at one another, then damaged by patches on the words the
 * builder wrote. One object (or any reference) is printed as `ruby p`
 * prints it, in text with the raw header and in JSON; with bit 7, a frame
 * of the recorded stacks gets an environment whose locals are built
 * objects and is printed as `bt --locals` prints it. No snapshot, no
 * census: an input costs what printing its objects costs. Every JSON
 * document must read strictly (jsoncheck.h).
 *
 * Input:
 *   byte 0  bits 0-1 the image, bits 2-4 --depth (0-7), bits 5-6
 *           --max-length (1, 3, 16, 100), bit 7 also the locals
 *   byte 1  what is printed: object byte1 % count (< 0x80), else the
 *           reference byte1 (objbuild.h: classes, real objects, Symbols)
 *   byte 2  bits 0-5 how many records (0: as many as the input holds),
 *           bit 6 text with the raw header, bit 7 JSON (else text): one
 *           print an input, as each costs a heap open
 *   byte 3  how many 12-byte patches end the input (image.c's format, on
 *           the words the builder wrote)
 *   then 16-byte records (objbuild.h), then the patches. The whole input
 *   is also the byte stream records take element lists and bytes from.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jsoncheck.h"
#include "objbuild.h"
#include "ops.h"
#include "target.h"

static ob_world g_world[TARGET_MAX];

/* Bytes of text a value prints here: every printer and its cut are reached
 * within it, and an input then costs at most what 64 KiB cost, not the
 * 64 MiB (and 16 MiB of locals) a user's command may print: the grown
 * corpus of nested containers had fallen to 50 inputs a second. */
#define FUZZ_MAX_BYTES (64 << 10)

static void print_value(rbpeek_session *s, uint64_t v, int32_t depth, uint64_t max_len, uint8_t how)
{
    rbpeek_inspect_options opt = {.depth = depth, .max_length = max_len, .raw = (how >> 6) & 1,
                                  .max_bytes = FUZZ_MAX_BYTES};
    rbpeek_format fmt = (how & 0x80) ? RBPEEK_FORMAT_JSON : RBPEEK_FORMAT_TEXT;
    char *out = NULL;
    rbpeek_status st = rbpeek_value_inspect(s, v, &opt, fmt, &out);
    if (st != RBPEEK_OK && rbpeek_session_error(s)[0] == '\0') abort(); /* a refusal must say why */
    if (fuzz_verbose()) fprintf(stderr, "fuzz: p        %s\n", st == RBPEEK_OK ? out : rbpeek_session_error(s));
    if (st == RBPEEK_OK && fmt == RBPEEK_FORMAT_JSON) json_check("ruby p --json", out);
    if (st == RBPEEK_OK) rbpeek_free(out);
}

static int one_input(const uint8_t *data, size_t size)
{
    if (size < 4) return 0;
    static const uint64_t LENS[4] = {1, 3, 16, 100};
    size_t k = (data[0] & 3) % targets_count();
    ob_world *w = &g_world[k];
    fuzz_target *t = w->t;
    if (!t) return 0;
    size_t npatch = data[3], body = size - 4;
    if (npatch * 12 > body) npatch = body / 12;
    size_t nrec = (body - npatch * 12) / OB_REC;
    if ((data[2] & 0x3f) && (size_t)(data[2] & 0x3f) < nrec) nrec = data[2] & 0x3f;
    target_begin(t);
    ob_build b;
    ob_build_objects(&b, w, data + 4, nrec, data, size);
    /* every write before the first read: the session caches what it reads */
    uint64_t ep = (data[0] & 0x80) && b.nobj ? ob_build_env(&b, (uint16_t)(data[1] * 7), data[2]) : 0;
    img_apply_patches_in(&t->img, data + size - npatch * 12, npatch * 12, &b.written);
    if (b.nobj) {
        uint64_t v = data[1] < 0x80 ? b.obj[data[1] % b.nobj] : ob_ref(&b, data[1]);
        print_value(t->s, v, (data[0] >> 2) & 7, LENS[(data[0] >> 5) & 3], data[2]);
        if (ep) {
            rbpeek_frame f = {.label = "", .kind = RBPEEK_FRAME_RUBY, .iseq = w->frame_iseq, .self = v, .ep = ep};
            rbpeek_inspect_options opt = {.depth = (data[0] >> 2) & 7, .max_length = LENS[(data[0] >> 5) & 3],
                                          .max_bytes = FUZZ_MAX_BYTES};
            char *out = NULL;
            rbpeek_status st = rbpeek_frame_locals(t->s, &f, &opt, &out);
            if (fuzz_verbose()) fprintf(stderr, "fuzz: locals   %s\n", st == RBPEEK_OK ? out : rbpeek_session_error(t->s));
            if (st == RBPEEK_OK) json_check("bt --locals", out);
            if (st == RBPEEK_OK) rbpeek_free(out);
        }
    }
    ob_build_end(&b);
    target_end(t);
    return 0;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    size_t n = targets_init();
    for (size_t i = 0; i < n; i++)
        if (!ob_world_init(&g_world[i], target_get(i))) abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) { return target_timed(one_input, data, size); }
