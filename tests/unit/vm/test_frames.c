/*
 * Tests of the frame walker (frames.c) on a synthetic VM stack: which
 * control frames Ruby 4.0 reports where <internal:...> iseqs are involved,
 * against the same stack read as Ruby 3.4 reports it. The rules come from
 * ruby/ruby#13238 (4.0's vm_backtrace.c): an internal frame is reported
 * like a C method, at its caller's location; of the frames waiting for a
 * location when an internal frame is met, only the internal frame stays
 * (`[1].fetch_values(42)` shows Array#fetch_values, not Array#fetch, the
 * block, and Array#map! between them); an internal frame with no Ruby
 * frame below it keeps its own location.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base/arena.h"
#include "cu_main.h"
#include "fixture_image.h"
#include "rbpeek.h"
#include "context/context.h"
#include "vm/frames.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

enum {
    STACK = 0x100000, STACK_SIZE = 0x1000, /* the VM stack; control frames at its end */
    OBJS = 0x200000,                       /* iseqs, bodies, strings */
    CFP = 56,                              /* sizeof(rb_control_frame_t) */
    NFRAMES = 7,                           /* six frames and the dummy top frame */
};

static uint8_t *objs;
static uint64_t next_obj;

static uint64_t alloc_obj(size_t n)
{
    uint64_t a = next_obj;
    next_obj += (n + 15) & ~(size_t)15;
    return a;
}

static uint64_t string(const char *text)
{
    uint64_t a = alloc_obj(24 + strlen(text) + 1);
    put64(objs + (a - OBJS), RBP_T_STRING);
    put64(objs + (a - OBJS) + 16, strlen(text));
    memcpy(objs + (a - OBJS) + 24, text, strlen(text) + 1);
    return a;
}

/* An iseq of the given type, path and label whose only instruction is on
 * line `line`; returns the iseq and sets *pc to a pc inside it. */
static uint64_t iseq(int type, const char *path, const char *label, uint32_t line, uint64_t *pc)
{
    uint64_t enc = alloc_obj(32), insns = alloc_obj(16), body = alloc_obj(64), is = alloc_obj(40);
    uint8_t *b = objs + (body - OBJS);
    put32(b + 0, (uint32_t)type);
    put32(b + 4, 4);                       /* iseq_size */
    put64(b + 8, enc);                     /* iseq_encoded */
    put64(b + 16, string(path));           /* location.pathobj */
    put64(b + 24, string(label));          /* location.label */
    put64(b + 32, insns);                  /* insns_info.body */
    put32(b + 40, 1);                      /* insns_info.size: one entry, no index */
    put32(objs + (insns - OBJS), line);    /* iseq_insn_info_entry.line_no */
    put64(objs + (is - OBJS), RBP_T_IMEMO | ((uint64_t)RBP_IMEMO_ISEQ << RBP_FL_USHIFT));
    put64(objs + (is - OBJS) + 16, body);
    *pc = enc + 8; /* past the first instruction */
    return is;
}

static rbpeek_session *session(image *im, int major, int minor, const char *version)
{
    rbpeek_session *s = image_session(im, major, minor, version);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    rbp_layout *L = &s->layout;
    set_field(L, RBP_L_ec_vm_stack, 0, 8);
    set_field(L, RBP_L_ec_vm_stack_size, 8, 8);
    set_field(L, RBP_L_ec_cfp, 16, 8);
    set_field(L, RBP_L_cfp_size, 0, CFP);
    set_field(L, RBP_L_cfp_pc, 0, 8);
    set_field(L, RBP_L_cfp_iseq, 16, 8);
    set_field(L, RBP_L_cfp_self, 24, 8);
    set_field(L, RBP_L_cfp_ep, 32, 8);
    set_field(L, RBP_L_iseq_body, 16, 8);
    set_field(L, RBP_L_body_type, 0, 4);
    set_field(L, RBP_L_body_iseq_size, 4, 4);
    set_field(L, RBP_L_body_iseq_encoded, 8, 8);
    set_field(L, RBP_L_body_pathobj, 16, 8);
    set_field(L, RBP_L_body_label, 24, 8);
    set_field(L, RBP_L_body_insns_body, 32, 8);
    set_field(L, RBP_L_body_insns_size, 40, 4);
    set_field(L, RBP_L_insn_info_size, 0, 12);
    set_field(L, RBP_L_insn_info_line_no, 0, 4);
    set_field(L, RBP_L_rstring_len, 16, 8);
    set_field(L, RBP_L_rstring_heap_ptr, 24, 8);
    set_field(L, RBP_L_rstring_embed_ary, 24, 1);
    return s;
}

/* The stack, innermost first: a C method called from internal code, the
 * internal block that called it, a C method, the internal method that
 * called it (all four wait for a location), the script's <main>, and at the
 * bottom an internal frame with no Ruby frame below it. No frame has a
 * method entry, so C frames are "<unknown C method>" and internal frames
 * are labelled by their iseqs. */
static uint64_t build(image *im)
{
    uint8_t *stack = add_region(im, STACK, STACK_SIZE);
    objs = add_region(im, OBJS, 0x4000);
    next_obj = OBJS;
    uint64_t pcs[NFRAMES] = {0}, iseqs[NFRAMES] = {0};
    iseqs[1] = iseq(RBP_ISEQ_BLOCK, "<internal:array>", "fetch_values", 211, &pcs[1]);
    iseqs[3] = iseq(RBP_ISEQ_METHOD, "<internal:array>", "fetch_values", 211, &pcs[3]);
    iseqs[4] = iseq(RBP_ISEQ_MAIN, "t.rb", "<main>", 7, &pcs[4]);
    iseqs[5] = iseq(RBP_ISEQ_TOP, "<internal:gem_prelude>", "<top (required)>", 3, &pcs[5]);
    /* (3.4 labels a block by its parent: with none, "block in " and its own label) */
    /* one environment for all frames: ep[-2] no method entry, ep[0] VM_ENV_FLAG_LOCAL */
    uint64_t ep = STACK + 0x40;
    put64(stack + 0x40, 0x2);
    uint64_t cfp0 = STACK + STACK_SIZE - NFRAMES * CFP;
    for (int i = 0; i < NFRAMES; i++) {
        uint8_t *f = stack + (cfp0 - STACK) + (size_t)i * CFP;
        put64(f + 0, pcs[i]);
        put64(f + 16, iseqs[i]);
        put64(f + 32, ep);
    }
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), STACK);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, cfp0);
    return ec;
}

static void walk(rbpeek_session *s, uint64_t ec, rbp_arena *a, rbpeek_thread *t)
{
    memset(t, 0, sizeof *t);
    const char *err = rbp_frames_walk(s, ec, 100, a, t, NULL);
    CU_ASSERT_PTR_NULL(err);
}

/* The walk of a stack whose innermost frame was caught being pushed: it is
 * left out, and the walk says so. */
static void walk_half_pushed(rbpeek_session *s, uint64_t ec, rbp_arena *a, rbpeek_thread *t)
{
    memset(t, 0, sizeof *t);
    const char *err = rbp_frames_walk(s, ec, 100, a, t, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "being pushed"));
}

static void expect(const rbpeek_frame *f, int kind, const char *label, const char *path, int line)
{
    CU_ASSERT_EQUAL(f->kind, kind);
    CU_ASSERT_STRING_EQUAL(f->label, label);
    CU_ASSERT_STRING_EQUAL(f->path, path);
    CU_ASSERT_EQUAL(f->lineno, line);
}

static void test_internal_frames_40(void)
{
    image im = {0};
    uint64_t ec = build(&im);
    rbpeek_session *s = session(&im, 4, 0, "4.0.0");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk_half_pushed(s, ec, &a, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 3);
    /* the four newer frames collapse into the oldest internal one, at its caller's line */
    expect(&t.frames[0], RBPEEK_FRAME_CFUNC, "fetch_values", "t.rb", 7);
    expect(&t.frames[1], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 7);
    /* nothing below the prelude frame: it keeps its own location */
    expect(&t.frames[2], RBPEEK_FRAME_CFUNC, "<top (required)>", "<internal:gem_prelude>", 3);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

static void test_internal_frames_34(void)
{
    image im = {0};
    uint64_t ec = build(&im);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk_half_pushed(s, ec, &a, &t);
    /* 3.4 shows internal frames where they are; C frames take the location
     * of the next Ruby frame below them. The innermost C frame has no
     * method entry: a frame caught being pushed, left out (the older one
     * without one stays, as "<unknown C method>") */
    CU_ASSERT_EQUAL_FATAL(t.nframes, 5);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "block in fetch_values", "<internal:array>", 211);
    expect(&t.frames[1], RBPEEK_FRAME_CFUNC, "<unknown C method>", "<internal:array>", 211);
    expect(&t.frames[2], RBPEEK_FRAME_RUBY, "fetch_values", "<internal:array>", 211);
    expect(&t.frames[3], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 7);
    expect(&t.frames[4], RBPEEK_FRAME_RUBY, "<top (required)>", "<internal:gem_prelude>", 3);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* Issue #12, defect 1: an execution context whose control frames cannot be
 * read at all (its VM stack is not mapped) gives no frames and an error,
 * and keeps no frame array (it leaked 24 KiB per thread per command; the
 * ASan build's LeakSanitizer also sees the walk's side of it). */
static void test_unreadable_frames_keep_nothing(void)
{
    image im = {0};
    objs = add_region(&im, OBJS, 0x1000);
    next_obj = OBJS;
    uint64_t ec = alloc_obj(24), stack = 0x900000; /* nothing mapped there */
    put64(objs + (ec - OBJS), stack);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, stack + STACK_SIZE - 3 * CFP);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    rbp_cframes cf;
    const char *err = rbp_cframes_read(s, ec, SIZE_MAX, &cf);
    CU_ASSERT_PTR_NOT_NULL(err);
    CU_ASSERT_EQUAL(cf.n, 0);
    CU_ASSERT_PTR_NULL(cf.frames);
    rbp_cframes_free(&cf);

    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    CU_ASSERT_PTR_NOT_NULL(rbp_frames_walk(s, ec, 100, &a, &t, NULL));
    CU_ASSERT_EQUAL(t.nframes, 0);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* A damaged execution context claiming a 512 MiB VM stack, all of it
 * control frames, over unmapped memory after the innermost four: those four
 * are read, and the room the read takes grows with what was read, not with
 * the claim (a fuzzed image had each walk allocate 1.6 GB, 2 s an input). */
static void test_huge_claimed_stack(void)
{
    image im = {0};
    objs = add_region(&im, OBJS, 0x1000);
    next_obj = OBJS;
    uint64_t claimed = (uint64_t)CFP * ((512u << 20) / CFP), stack = 0x10000000;
    add_region(&im, stack, 4 * CFP);
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), stack);
    put64(objs + (ec - OBJS) + 8, claimed / 8);
    put64(objs + (ec - OBJS) + 16, stack); /* the current frame at the bottom: the whole claim is frames */
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    rbp_cframes cf;
    const char *err = rbp_cframes_read(s, ec, SIZE_MAX, &cf);
    CU_ASSERT_PTR_NOT_NULL(err);
    CU_ASSERT_EQUAL(cf.n, 4);
    CU_ASSERT(s->walk_cframes.cap <= ((size_t)2 << 20));
    CU_ASSERT(s->walk_raw.cap <= ((size_t)2 << 20));
    rbp_cframes_free(&cf);
    rbpeek_session_free(s);
    image_free(&im);
}

/* Garbage iseqs whose parent and local iseqs point at each other: 3.4's
 * label computation follows the local iseq of a block recursively, and
 * recursed without end (a stack overflow) on such a pair. The walk must
 * finish with some label for the frame, the loop seen where it closes. */
static void test_iseqs_pointing_at_each_other(void)
{
    image im = {0};
    uint8_t *stack = add_region(&im, STACK, STACK_SIZE);
    objs = add_region(&im, OBJS, 0x4000);
    next_obj = OBJS;
    uint64_t pc_a, pc_b;
    uint64_t a = iseq(RBP_ISEQ_BLOCK, "t.rb", "a", 1, &pc_a), b = iseq(RBP_ISEQ_BLOCK, "t.rb", "b", 2, &pc_b);
    uint64_t body_a = 0, body_b = 0;
    memcpy(&body_a, objs + (a - OBJS) + 16, 8);
    memcpy(&body_b, objs + (b - OBJS) + 16, 8);
    put64(objs + (body_a - OBJS) + 48, b), put64(objs + (body_a - OBJS) + 56, b); /* parent, local */
    put64(objs + (body_b - OBJS) + 48, a), put64(objs + (body_b - OBJS) + 56, a);
    uint64_t cfp0 = STACK + STACK_SIZE - 2 * CFP;
    put64(stack + 0x40, 0x2);
    put64(stack + (cfp0 - STACK), pc_a);
    put64(stack + (cfp0 - STACK) + 16, a);
    put64(stack + (cfp0 - STACK) + 32, STACK + 0x40);
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), STACK);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, cfp0);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    set_field(&s->layout, RBP_L_body_parent_iseq, 48, 8);
    set_field(&s->layout, RBP_L_body_local_iseq, 56, 8);
    rbp_arena ar;
    memset(&ar, 0, sizeof ar);
    rbpeek_thread t;
    walk(s, ec, &ar, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    /* the recursion guard sees the loop when b's local iseq is a again:
     * a's label is built on b's, and b's on its raw label */
    CU_ASSERT_STRING_EQUAL(t.frames[0].label, "block in block in b");
    rbp_arena_free(&ar);
    rbpeek_session_free(s);
    image_free(&im);
}

/* A snapshot's threads share one budget of control frames (threads x
 * frames is a pairwise walk): a walk that meets its end is cut, marked
 * truncated and says so; the next is not walked at all and says so. */
static void test_frame_budget(void)
{
    image im = {0};
    uint64_t ec = build(&im);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    size_t budget = 3; /* of the stack's six frames */
    const char *err = rbp_frames_walk(s, ec, 100, &a, &t, &budget);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "budget"));
    CU_ASSERT(t.truncated);
    CU_ASSERT_EQUAL(budget, 0);
    CU_ASSERT(t.nframes >= 1 && t.nframes <= 3);
    memset(&t, 0, sizeof t);
    err = rbp_frames_walk(s, ec, 100, &a, &t, &budget);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "not walked"));
    CU_ASSERT_EQUAL(t.nframes, 0);
    /* a budget that suffices changes nothing (the innermost C frame has no
     * method entry: the walk leaves it out as one being pushed) */
    budget = 1000;
    memset(&t, 0, sizeof t);
    err = rbp_frames_walk(s, ec, 100, &a, &t, &budget);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "being pushed"));
    CU_ASSERT_EQUAL(t.nframes, 5);
    CU_ASSERT_EQUAL(budget, 1000 - 6);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* Each frame follows its own chain of environments to its method entry
 * (frames x chain hops: a pairwise walk); a damaged stack whose every
 * frame has a chain near MAX_PARENT_HOPS long shares one budget for the
 * whole stack, is cut where it runs out, and says so, rather than show a
 * 3.4 label without its owner. */
static void test_environment_chains_share_a_budget(void)
{
    enum { NF = 32, CHAIN = 200 };
    image im = {0};
    uint8_t *stack = add_region(&im, STACK, STACK_SIZE);
    objs = add_region(&im, OBJS, 0x4000);
    next_obj = OBJS;
    uint64_t pc;
    uint64_t m = iseq(RBP_ISEQ_METHOD, "t.rb", "m", 1, &pc);
    /* CHAIN environments, each pointing at the next (ep[-1]), none local
     * but the last, none with a method entry */
    uint64_t envs = alloc_obj((size_t)CHAIN * 24) + 16;
    for (int k = 0; k < CHAIN; k++) {
        uint8_t *e = objs + (envs - OBJS) + (size_t)k * 24;
        put64(e - 8, k + 1 < CHAIN ? envs + (uint64_t)(k + 1) * 24 : 0);
        put64(e, k + 1 < CHAIN ? 0 : 0x2);
    }
    uint64_t cfp0 = STACK + STACK_SIZE - NF * CFP;
    for (int i = 0; i < NF; i++) {
        uint8_t *f = stack + (cfp0 - STACK) + (size_t)i * CFP;
        put64(f + 0, pc);
        put64(f + 16, m);
        put64(f + 32, envs);
    }
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), STACK);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, cfp0);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    memset(&t, 0, sizeof t);
    const char *err = rbp_frames_walk(s, ec, 100, &a, &t, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "environment chains"));
    CU_ASSERT(t.truncated);
    /* 16 hops a frame + 256: the fourth 200-hop chain runs out */
    CU_ASSERT_EQUAL(t.nframes, (size_t)RBP_EP_HOPS_BUDGET(NF) / CHAIN);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* The iseq cache is bounded (2^17 entries) and clears itself when full.
 * A 3.4 label computation holds the block's iseq while it looks up its
 * parents; a lookup that filled the cache freed that iseq under it (a
 * use-after-free the ASan build reports). The cache now keeps every entry
 * handed out during a label computation until it ends. */
static void test_label_survives_a_full_iseq_cache(void)
{
    enum { ISEQS = 0x1000000, NFILL = (1 << 17) - 1, STRIDE = 32 };
    image im = {0};
    uint8_t *stack = add_region(&im, STACK, STACK_SIZE);
    objs = add_region(&im, OBJS, 0x4000);
    next_obj = OBJS;
    uint8_t *fill = add_region(&im, ISEQS, (size_t)NFILL * STRIDE);
    uint64_t pc_m, pc_b;
    uint64_t m = iseq(RBP_ISEQ_METHOD, "t.rb", "m", 1, &pc_m), b = iseq(RBP_ISEQ_BLOCK, "t.rb", "b", 2, &pc_b);
    uint64_t body_b = 0, body_m = 0;
    memcpy(&body_b, objs + (b - OBJS) + 16, 8);
    memcpy(&body_m, objs + (m - OBJS) + 16, 8);
    put64(objs + (body_b - OBJS) + 48, m), put64(objs + (body_b - OBJS) + 56, m); /* parent, local */
    for (size_t i = 0; i < NFILL; i++) { /* iseqs that share m's body, to fill the cache */
        put64(fill + i * STRIDE, RBP_T_IMEMO | ((uint64_t)RBP_IMEMO_ISEQ << RBP_FL_USHIFT));
        put64(fill + i * STRIDE + 16, body_m);
    }
    uint64_t cfp0 = STACK + STACK_SIZE - 2 * CFP;
    put64(stack + 0x40, 0x2);
    put64(stack + (cfp0 - STACK), pc_b);
    put64(stack + (cfp0 - STACK) + 16, b);
    put64(stack + (cfp0 - STACK) + 32, STACK + 0x40);
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), STACK);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, cfp0);
    rbpeek_session *s = session(&im, 3, 4, "3.4.5");
    set_field(&s->layout, RBP_L_body_parent_iseq, 48, 8);
    set_field(&s->layout, RBP_L_body_local_iseq, 56, 8);
    for (size_t i = 0; i < NFILL; i++) CU_ASSERT_PTR_NOT_NULL_FATAL(rbp_iseq_get(s, ISEQS + i * STRIDE));
    /* the walk's lookup of b fills the cache; the label's lookup of m clears it */
    rbp_arena ar;
    memset(&ar, 0, sizeof ar);
    rbpeek_thread t;
    walk(s, ec, &ar, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    CU_ASSERT_STRING_EQUAL(t.frames[0].label, "block in m");
    rbp_arena_free(&ar);
    rbpeek_session_free(s);
    image_free(&im);
}

/* --- frames run or pushed by a JIT --------------------------------------- */

enum { JIT_SP = 8, JIT_BP = 40, JIT_RETURN = 48 }; /* members of the fixture's 56-byte control frame */

/* Two Ruby frames, m (line 5) called from <main> (line 9), each with an
 * environment of its own on the VM stack (ep, with __bp__ one word above
 * it, as a push leaves them); jit[i] is frame i's jit_return. */
static uint64_t build_jit(image *im, uint64_t jit0, uint64_t jit1, uint8_t **stack_out)
{
    uint8_t *stack = add_region(im, STACK, STACK_SIZE);
    objs = add_region(im, OBJS, 0x4000);
    next_obj = OBJS;
    uint64_t pcs[2], iseqs[2];
    iseqs[0] = iseq(RBP_ISEQ_METHOD, "t.rb", "m", 5, &pcs[0]);
    iseqs[1] = iseq(RBP_ISEQ_MAIN, "t.rb", "<main>", 9, &pcs[1]);
    uint64_t eps[2] = {STACK + 0x80, STACK + 0x40}, jit[2] = {jit0, jit1};
    uint64_t cfp0 = STACK + STACK_SIZE - 3 * CFP;
    for (int i = 0; i < 2; i++) {
        put64(stack + (eps[i] - STACK), 0x2);   /* VM_ENV_FLAG_LOCAL, no frame magic */
        uint8_t *f = stack + (cfp0 - STACK) + (size_t)i * CFP;
        put64(f + 0, pcs[i]);
        put64(f + JIT_SP, eps[i] + 8);
        put64(f + 16, iseqs[i]);
        put64(f + 32, eps[i]);
        put64(f + JIT_BP, eps[i] + 8);
        put64(f + JIT_RETURN, jit[i]);
    }
    uint64_t ec = alloc_obj(24);
    put64(objs + (ec - OBJS), STACK);
    put64(objs + (ec - OBJS) + 8, STACK_SIZE / 8);
    put64(objs + (ec - OBJS) + 16, cfp0);
    if (stack_out) *stack_out = stack + (cfp0 - STACK);
    return ec;
}

static rbpeek_session *jit_session(image *im, int major, int minor, const char *version)
{
    rbpeek_session *s = session(im, major, minor, version);
    set_field(&s->layout, RBP_L_cfp_sp, JIT_SP, 8);
    set_field(&s->layout, RBP_L_cfp_jit_return, JIT_RETURN, 8);
    return s;
}

/* The GVL's holder as Ruby before 3.0 records it (vm->gvl.owner): a thread
 * whose ec is holder_ec. */
static void gvl_held_by(rbpeek_session *s, uint64_t holder_ec)
{
    uint64_t vm = alloc_obj(16), th = alloc_obj(16);
    put64(objs + (vm - OBJS), th);
    put64(objs + (th - OBJS) + 8, holder_ec);
    s->vm = vm;
    set_field(&s->layout, RBP_L_vm_gvl_owner, 0, 8);
    set_field(&s->layout, RBP_L_th_ec, 8, 8);
}

/* YJIT does not write a frame's pc while its code runs the frame: the
 * innermost frame with jit_return set, on the thread that holds the GVL
 * (or where the holder is not known), has no known line; the older frame,
 * which called out with its pc saved, keeps its own. */
static void test_jit_running_frame_has_no_line(void)
{
    image im = {0};
    uint64_t ec = build_jit(&im, 0x7f0000001000, 0x7f0000002000, NULL);
    rbpeek_session *s = jit_session(&im, 3, 4, "3.4.5");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk(s, ec, &a, &t);   /* no GVL owner in the layout: not trusted */
    CU_ASSERT_EQUAL_FATAL(t.nframes, 2);
    CU_ASSERT_EQUAL(t.frames[0].lineno_unknown, 1);
    CU_ASSERT_EQUAL(t.frames[0].lineno, 0);
    CU_ASSERT_STRING_EQUAL(t.frames[0].label, "m");
    expect(&t.frames[1], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 9);
    CU_ASSERT_EQUAL(t.frames[1].lineno_unknown, 0);
    gvl_held_by(s, ec);    /* it runs */
    rbp_mem_refresh(s->mem);
    walk(s, ec, &a, &t);
    CU_ASSERT_EQUAL(t.frames[0].lineno_unknown, 1);
    gvl_held_by(s, ec + 0x1000);   /* another thread runs: this one left its JIT code through a call */
    rbp_mem_refresh(s->mem);
    walk(s, ec, &a, &t);
    CU_ASSERT_EQUAL(t.frames[0].lineno_unknown, 0);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "m", "t.rb", 5);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* Without jit_return on the innermost frame (the interpreter runs it; the
 * Ruby has no such member) every line is the pc's. */
static void test_interpreted_frame_keeps_its_line(void)
{
    image im = {0};
    uint64_t ec = build_jit(&im, 0, 0x7f0000002000, NULL);
    rbpeek_session *s = jit_session(&im, 3, 4, "3.4.5");
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk(s, ec, &a, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 2);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "m", "t.rb", 5);
    CU_ASSERT_EQUAL(t.frames[0].lineno_unknown, 0);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* 3.1's YJIT lowers ec->cfp before it writes the frame: caught between
 * the two, the innermost slot still holds an older frame's ep while
 * __bp__ is already the new frame's. It is left out, and said. */
static void test_half_pushed_frame_is_left_out(void)
{
    image im = {0};
    uint8_t *frames;
    uint64_t ec = build_jit(&im, 0, 0, &frames);
    rbpeek_session *s = jit_session(&im, 3, 1, "3.1.2");
    set_field(&s->layout, RBP_L_cfp_bp, JIT_BP, 8);
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk(s, ec, &a, &t);   /* pushed whole: both frames */
    CU_ASSERT_EQUAL_FATAL(t.nframes, 2);
    put64(frames + JIT_BP, STACK + 0xa8);   /* the new frame's __bp__, the old ep */
    rbp_mem_refresh(s->mem);
    walk_half_pushed(s, ec, &a, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 9);
    /* the slot of a C method's frame, its iseq written, its ep not yet:
     * no method entry there either */
    put64(frames + 16, 0);
    put64(frames + 0, 0);
    rbp_mem_refresh(s->mem);
    walk_half_pushed(s, ec, &a, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    /* 3.3+ has no __bp__; a C frame without a method entry is told all the same */
    rbpeek_session_free(s);
    s = jit_session(&im, 3, 4, "3.4.5");
    walk_half_pushed(s, ec, &a, &t);
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 9);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

/* 3.1's C YJIT runs a frame with pc 0 for long stretches: the innermost
 * frame with jit_return set whose environment says method or block is
 * shown, its line unknown, not dropped for its missing pc (its caller
 * would read as the innermost); without jit_return it is dropped as Ruby
 * drops it, and a frame with the C frame flag is never taken for one. */
static void test_jit_frame_without_pc_is_shown(void)
{
    image im = {0};
    uint8_t *frames;
    uint64_t ec = build_jit(&im, 0x7f0000001000, 0x7f0000002000, &frames);
    uint8_t *ep0 = frames - (STACK_SIZE - 3 * CFP) + 0x80;   /* the innermost frame's environment */
    put64(frames + 0, 0);                                       /* no pc */
    rbpeek_session *s = jit_session(&im, 3, 1, "3.1.2");
    set_field(&s->layout, RBP_L_cfp_bp, JIT_BP, 8);
    rbp_arena a;
    memset(&a, 0, sizeof a);
    rbpeek_thread t;
    walk(s, ec, &a, &t);   /* no frame magic: not a frame JIT code runs, dropped */
    CU_ASSERT_EQUAL_FATAL(t.nframes, 1);
    expect(&t.frames[0], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 9);
    for (int magic = 0; magic < 2; magic++) {
        put64(ep0, (magic ? 0x22220001u : 0x11110001u) | 0x2);
        rbp_mem_refresh(s->mem);
        walk(s, ec, &a, &t);
        CU_ASSERT_EQUAL_FATAL(t.nframes, 2);
        CU_ASSERT_STRING_EQUAL(t.frames[0].label, "m");
        CU_ASSERT_EQUAL(t.frames[0].lineno, 0);
        CU_ASSERT_EQUAL(t.frames[0].lineno_unknown, 1);
        expect(&t.frames[1], RBPEEK_FRAME_RUBY, "<main>", "t.rb", 9);
        CU_ASSERT_EQUAL(t.frames[1].lineno_unknown, 0);
    }
    put64(ep0, 0x11110001u | 0x80 | 0x2);   /* a C frame's flag */
    rbp_mem_refresh(s->mem);
    walk(s, ec, &a, &t);
    CU_ASSERT_EQUAL(t.nframes, 1);
    put64(ep0, 0x11110001u | 0x2);
    put64(frames + JIT_RETURN, 0);                      /* the interpreter's push */
    rbp_mem_refresh(s->mem);
    walk(s, ec, &a, &t);
    CU_ASSERT_EQUAL(t.nframes, 1);
    rbp_arena_free(&a);
    rbpeek_session_free(s);
    image_free(&im);
}

static const rbp_cu_test tests[] = {
    {"YJIT: the frame its code runs has no line; older frames keep theirs", test_jit_running_frame_has_no_line},
    {"an interpreted innermost frame keeps its line", test_interpreted_frame_keeps_its_line},
    {"a frame caught half pushed is left out, and said", test_half_pushed_frame_is_left_out},
    {"3.1's YJIT: a frame its code runs without a pc is shown, its line unknown", test_jit_frame_without_pc_is_shown},
    {"3.4: a label survives the iseq cache clearing itself", test_label_survives_a_full_iseq_cache},
    {"a snapshot's budget of control frames cuts walks and says so", test_frame_budget},
    {"3.4: the frames' environment chains share one budget", test_environment_chains_share_a_budget},
    {"3.4: iseqs whose parent and local iseqs point at each other", test_iseqs_pointing_at_each_other},
    {"unreadable control frames: an error, no frames, nothing kept", test_unreadable_frames_keep_nothing},
    {"a gigantic claimed VM stack over unmapped memory: what is read, room for that", test_huge_claimed_stack},
    {"4.0: internal frames report like C methods, one per run", test_internal_frames_40},
    {"3.4: the same stack shows every internal frame", test_internal_frames_34},
    {NULL, NULL},
};

RBP_CU_MAIN("frames", tests)
