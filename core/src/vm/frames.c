/*
 * The frame walker: reads a thread's control frames and decides which of
 * them Thread#backtrace_locations would report, in which order and with
 * which location, following vm_backtrace.c for each version:
 *
 *  - Control frames are an array growing down from the end of the VM stack.
 *    The last one is a dummy; the walk covers [ec->cfp, end - 1 frame), which
 *    is all Ruby ever reports. The whole range is fetched in one read.
 *  - A frame with an iseq is reported only if it has a pc. A frame without
 *    one is a C method frame (before 3.3 Ruby also checks its frame magic).
 *  - A C frame reports the path and line of the nearest older reported Ruby
 *    frame, or nil/0 if there is none.
 *  - 3.4 reports a rescue/ensure frame in place of the method frame it runs
 *    in (the frame after it is skipped), and reports builtins marked
 *    c_trace as C frames.
 *  - 4.0 treats every frame of an <internal:...> iseq that way (labelled by
 *    its method, located at its caller: ruby/ruby#13238), and of a run of
 *    frames between two Ruby frames that contains internal ones keeps only
 *    the oldest internal frame: the newer frames of the run are dropped.
 *
 *  - The innermost frame, where JIT code runs it, has no known line: YJIT
 *    does not keep its pc up to date (stale_line below). Where it was
 *    caught half pushed by a JIT, it is left out and the walk says so
 *    (half_pushed below).
 *
 * A thread's ec is the execution context it is running now, so a thread
 * inside a Fiber or an external Enumerator shows that fiber's stack, as Ruby
 * does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"
#include "context/context.h"
#include "vm/frames.h"
#include "vm/instantiates.h"
#include "vm/robject.h"
#include "vm/symbolize.h"
#include "vm/threads.h"

#define VM_FRAME_MAGIC_MASK 0x7fff0001u
#define VM_FRAME_MAGIC_CFUNC 0x55550001u
#define VM_FRAME_MAGIC_METHOD 0x11110001u
#define MAX_STACK_BYTES ((uint64_t)1 << 30)
/* The first read of a thread's control frames: a default VM stack (1 MiB)
 * whole; each further read twice the one before. */
#define CFRAMES_FIRST_READ ((uint64_t)1 << 20)

/* A frame being built: C frames get their location in a second pass. */
typedef struct pending {
    rbpeek_frame f;
    int is_ruby_loc; /* carries a location C frames may borrow */
    uint32_t raw;    /* the control frame it comes from (innermost is 0) */
} pending;

static const char *arena_str(rbp_arena *a, const char *s) { return s ? rbp_arena_strdup(a, s) : NULL; }

static bool emit(rbp_arena *a, pending *p, size_t *n, size_t max, int kind, const char *label, const char *path,
                 const char *abspath, int lineno, uint64_t iseq, size_t raw)
{
    if (*n >= max) return false;
    pending *e = &p[(*n)++];
    memset(e, 0, sizeof *e);
    e->raw = (uint32_t)raw;
    e->f.kind = kind;
    e->f.label = arena_str(a, label ? label : "?");
    e->f.path = path ? arena_str(a, path) : NULL;
    e->f.absolute_path = arena_str(a, abspath);
    e->f.lineno = lineno;
    e->f.iseq = iseq;
    e->f.first_lineno = 0;
    e->f.self = e->f.ep = 0;
    e->is_ruby_loc = kind == RBPEEK_FRAME_RUBY;
    return e->f.label != NULL;
}

const char *rbp_cframes_read(rbpeek_session *s, uint64_t ec, size_t max, rbp_cframes *out)
{
    const rbp_layout *L = &s->layout;
    uint64_t vm_stack = 0, stack_size = 0, cfp = 0;
    *out = (rbp_cframes){0};
    if (!ec) return NULL; /* a thread that has not started: no frames */
    /* The three open the execution context in every version: one read
     * (one system call when the sampler reads a running target directly). */
    int32_t o[3] = {rbp_off(L, RBP_L_ec_vm_stack), rbp_off(L, RBP_L_ec_vm_stack_size), rbp_off(L, RBP_L_ec_cfp)};
    int32_t lo = o[0] < o[1] ? o[0] : o[1], hi = o[0] > o[1] ? o[0] : o[1];
    if (o[2] < lo) lo = o[2];
    if (o[2] > hi) hi = o[2];
    uint8_t head[64];
    if (lo >= 0 && hi + 8 - lo <= (int32_t)sizeof head && L->f[RBP_L_ec_vm_stack].size == 8 &&
        L->f[RBP_L_ec_vm_stack_size].size == 8 && L->f[RBP_L_ec_cfp].size == 8) {
        if (!rbp_mem_read(s->mem, ec + (uint64_t)lo, head, (size_t)(hi + 8 - lo)))
            return "its execution context is unreadable";
        memcpy(&vm_stack, head + (o[0] - lo), 8);
        memcpy(&stack_size, head + (o[1] - lo), 8);
        memcpy(&cfp, head + (o[2] - lo), 8);
    } else if (!rbp_read_field(s, ec, RBP_L_ec_vm_stack, &vm_stack) ||
               !rbp_read_field(s, ec, RBP_L_ec_vm_stack_size, &stack_size) ||
               !rbp_read_field(s, ec, RBP_L_ec_cfp, &cfp)) {
        return "its execution context is unreadable";
    }
    if (!vm_stack) return NULL;
    uint64_t cfp_size = (uint64_t)L->f[RBP_L_cfp_size].size;
    if (stack_size == 0 || stack_size * 8 > MAX_STACK_BYTES) return "its VM stack size is implausible";
    uint64_t end = vm_stack + stack_size * 8;
    if (end < vm_stack + cfp_size) return "its VM stack is too small to hold a frame";
    uint64_t sentinel = end - cfp_size;
    if (cfp > sentinel) return NULL; /* no frames pushed yet */
    if (cfp < vm_stack || (sentinel - cfp) % cfp_size != 0) return "its current frame pointer lies outside its VM stack";
    uint64_t nraw = (sentinel - cfp) / cfp_size;
    if (nraw > max) nraw = max;
    if (nraw == 0) return NULL;

    /* Read in pieces, the room growing only with what was read: the size
     * comes from the target, and a damaged one can claim a gigabyte of
     * stack over unmapped memory (a fuzzed image had each walk allocate
     * 1.6 GB, 2 s an input). A real stack (1 MiB by default) is one read. */
    uint64_t piece = CFRAMES_FIRST_READ / cfp_size ? CFRAMES_FIRST_READ / cfp_size : 1;
    out->room = &s->walk_cframes;
    const char *err = NULL;
    uint64_t n = 0;
    while (n < nraw) {
        uint64_t want = nraw - n < piece ? nraw - n : piece;
        uint8_t *raw = rbp_scratch_get(&s->walk_raw, (size_t)(want * cfp_size));
        rbp_cframe *frames = rbp_scratch_grow(out->room, (size_t)(n + want) * sizeof *frames);
        if (!raw || !frames) {
            rbp_scratch_done(&s->walk_raw);
            rbp_cframes_free(out);
            return "out of memory";
        }
        out->frames = frames;
        size_t got = rbp_mem_read_partial(s->mem, cfp + n * cfp_size, raw, (size_t)(want * cfp_size));
        uint64_t k = got / cfp_size;
        for (uint64_t i = 0; i < k; i++) {
            const uint8_t *f = raw + i * cfp_size;
            frames[n + i] = (rbp_cframe){rbp_field_extract(L, RBP_L_cfp_pc, f), rbp_field_extract(L, RBP_L_cfp_iseq, f),
                                         rbp_field_extract(L, RBP_L_cfp_self, f), rbp_field_extract(L, RBP_L_cfp_ep, f)};
        }
        if (n == 0 && k > 0) {
            out->top_sp = rbp_field_extract(L, RBP_L_cfp_sp, raw);
            out->top_bp = rbp_field_extract(L, RBP_L_cfp_bp, raw);
            out->top_jit_return = rbp_field_extract(L, RBP_L_cfp_jit_return, raw);
        }
        n += k;
        if (k < want) {
            /* Keep what could be read: the innermost frames are the useful ones. */
            err = "part of its control frame array is unreadable";
            break;
        }
        piece *= 2;
    }
    nraw = n;
    if (nraw == 0) { /* nothing to hand back: the array goes now, not with the caller */
        rbp_scratch_done(&s->walk_raw);
        rbp_cframes_free(out);
        return "its control frame array is unreadable";
    }
    rbp_scratch_done(&s->walk_raw);
    out->n = (size_t)nraw;
    out->vm_stack = vm_stack;
    out->cfp = cfp;
    return err;
}

void rbp_cframes_free(rbp_cframes *cf)
{
    if (cf->room) rbp_scratch_done(cf->room);
    *cf = (rbp_cframes){0};
}

bool rbp_cframe_is_cfunc(rbpeek_session *s, const rbp_cframe *f)
{
    if (f->iseq) return false;
    if (!s->rel.frames.cfunc_by_magic) return true;
    uint64_t flags = 0;
    return rbp_mem_u64(s->mem, f->ep, &flags) && (flags & VM_FRAME_MAGIC_MASK) == VM_FRAME_MAGIC_CFUNC;
}

void rbp_stack_mark_of(const rbp_cframes *cf, rbp_stack_mark *m)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a over the words */
    for (size_t i = 0; i < cf->n; i++) {
        uint64_t w[2] = {cf->frames[i].iseq, i ? cf->frames[i].pc : 0};
        for (int k = 0; k < 2; k++) h = (h ^ w[k]) * 1099511628211ull;
    }
    m->cfp = cf->cfp;
    m->nframes = cf->n;
    m->hash = h;
}

const char *rbp_frames_walk(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a, rbpeek_thread *out,
                            size_t *raw_budget)
{
    return rbp_frames_walk_marked(s, ec, max_frames, a, out, raw_budget, NULL);
}

/* --- the walk ---------------------------------------------------------------- */

/* One walk's state: the frames emitted so far and what the rules carry
 * from one control frame to the next. */
typedef struct walk {
    rbpeek_session *s;
    const rbp_frame_rules *R;
    rbp_arena *a;
    pending *p;
    size_t n, limit;
    size_t ep_budget;   /* environment-chain hops left for the frames' method entries */
    bool ep_cut;        /* a chain spent them: the walk stops there */
    bool skip_next;     /* the next Ruby frame is folded into a rescue/ensure frame */
    size_t borrowing;   /* frames emitted since the last Ruby frame: they take the next one's location */
    size_t raw;         /* the control frame being read (innermost 0) */
    const rbp_cframes *cf;
    uint64_t ec;
    const char *half_pushed;   /* why the innermost control frame was left out, or NULL */
    int32_t saved_line;        /* rbp_frames_walk_origin's *saved_line */
} walk;

enum { W_NEXT, W_STOP };

static bool stale_line(walk *w);

/* The frames' environments (ep) live in the VM value stack below the
 * control frames; method entries and frame magic are read through them.
 * Fetch the span they cover in one read and pin it for this walk, rather
 * than page by page. */
static void pin_values(rbpeek_session *s, const rbp_cframes *cf)
{
    uint64_t ep_lo = UINT64_MAX, ep_hi = 0;
    for (size_t i = 0; i < cf->n; i++) {
        uint64_t ep = cf->frames[i].ep;
        if (ep < cf->vm_stack + 16 || ep >= cf->cfp) continue; /* not in this stack's value area */
        if (ep < ep_lo) ep_lo = ep;
        if (ep > ep_hi) ep_hi = ep;
    }
    if (!ep_hi) return;
    uint64_t lo = ep_lo - 16, len = ep_hi + 8 - lo;
    uint8_t *values = rbp_scratch_get(&s->walk_values, (size_t)len);
    if (values && rbp_mem_read(s->mem, lo, values, (size_t)len)) rbp_mem_pin(s->mem, lo, values, (size_t)len);
}

/* 3.4: a rescue/ensure frame is reported in place of the method frame it
 * runs in, which comes next. Whether in is such a folded frame. */
static bool folded_into_rescue(walk *w, const rbp_iseq_info *in)
{
    if (!w->R->fold_rescue_frames) return false;
    bool skip = w->skip_next;
    w->skip_next = in->type == RBP_ISEQ_RESCUE || in->type == RBP_ISEQ_ENSURE;
    return skip;
}

/* A frame's method entry, where the rules ask for it (3.4: its owner
 * qualifies the label, and it says whether a builtin is c_trace). *have
 * is false without one. W_STOP when the environment chains are spent. */
static int frame_cme(walk *w, uint64_t ep, bool wanted, rbp_cme *cme, bool *have)
{
    *have = false;
    if (!wanted) return W_NEXT;
    uint64_t me = rbp_frame_method_entry(w->s, ep, &w->ep_budget);
    if (!w->ep_budget) {   /* its label would lack its owner */
        w->ep_cut = true;
        return W_STOP;
    }
    *have = me && rbp_cme_read(w->s, me, cme);
    return W_NEXT;
}

/* A frame that reports as a C method and borrows the next Ruby frame's
 * location (path NULL), or keeps its own where none is older. */
static int emit_cfunc(walk *w, const char *label, const char *path, const char *abspath, int lineno)
{
    if (!emit(w->a, w->p, &w->n, w->limit, RBPEEK_FRAME_CFUNC, label, path, abspath, lineno, 0, w->raw)) return W_STOP;
    w->borrowing++;
    return W_NEXT;
}

/* 4.0 (vm_backtrace.c, ruby/ruby#13238): an <internal:...> frame behaves
 * like a C method; frames newer than it that wait for a location are
 * discarded, so that one internal frame stands for them. Its own location
 * serves when no Ruby frame is older (the prelude). */
static int internal_frame(walk *w, const rbp_iseq_info *in, uint64_t pc, const rbp_cme *cme, uint64_t owner)
{
    if (w->borrowing) {
        w->n -= w->borrowing;
        w->borrowing = 0;
    }
    bool unknown = !pc || stale_line(w);
    int lineno = unknown ? 0 : rbp_iseq_lineno(w->s, in, pc);
    const char *path = arena_str(w->a, in->path), *abspath = arena_str(w->a, in->abspath);
    const char *label = cme ? rbp_cfunc_label(w->s, cme) : rbp_iseq_frame_label(w->s, in, owner);
    int r = emit_cfunc(w, label, path, abspath, lineno);
    if (r != W_STOP) w->p[w->n - 1].f.lineno_unknown = unknown;
    if (r != W_STOP && unknown && pc && w->n == 1) w->saved_line = rbp_iseq_lineno(w->s, in, pc);
    return r;
}

/* 4.0: whether in is such an internal frame. */
static bool internal_as_cfunc(const walk *w, const rbp_iseq_info *in)
{
    return w->R->internal_as_cfunc && in->path && !strncmp(in->path, "<internal:", 10);
}

/* 3.4: a builtin marked c_trace is reported as the C method it stands for
 * (it needs its method entry to be named). */
static bool c_trace_builtin(const walk *w, const rbp_iseq_info *in, bool have_cme)
{
    return have_cme && w->R->c_trace_builtins && (in->builtin_attrs & RBP_BUILTIN_ATTR_C_TRACE);
}

/* Whether a Ruby frame's method entry is read: 3.4's qualified labels and
 * c_trace builtins need it. */
static bool wants_cme(const walk *w) { return w->R->qualified_labels || w->R->c_trace_builtins; }

/* --- the innermost frame: run, or being pushed, by a JIT --------------------
 *
 * YJIT does not keep a frame's pc up to date while its machine code runs
 * the frame: it writes the pc only where something may look at it (before a
 * call that may raise, allocate, or call back: jit_save_pc), and on leaving
 * to the interpreter. A frame it runs has cfp->jit_return set (by the JIT
 * code that called it, or by the entry prologue when the interpreter
 * entered it), and only the innermost frame can be running: every older
 * one called out, its pc saved. Ruby's own rb_profile_frames reports line
 * 0 for the innermost frame when jit_return is set (vm_backtrace.c, since
 * ruby/ruby#8415). Narrower here: the thread must also hold its GVL, since
 * a thread parked in Queue#pop, sleep or a blocking region, or waiting for
 * the GVL, left its JIT code through such a call (or a side exit to the
 * interpreter, which writes the pc too), so its pc is exact; 3.3's
 * Queue#pop is a Ruby builtin whose frame is the innermost while it waits.
 * Where the GVL's holder cannot be read, the line is not trusted. */
static bool stale_line(walk *w)
{
    if (w->raw != 0 || !w->cf->top_jit_return) return false;
    return rbp_ec_holds_gvl(w->s, w->ec) != 0;
}

#define HALF_PUSHED "the innermost control frame was being pushed when it was read (3.1's YJIT lowers " \
                    "ec->cfp before it writes the frame): left out"

/* Whether ep lies in the thread's VM value stack (not moved to the heap). */
static bool ep_on_stack(const walk *w, uint64_t ep)
{
    return ep >= w->cf->vm_stack + 16 && ep < w->cf->cfp && ep % 8 == 0;
}

/* Whether the innermost control frame was caught half pushed. 3.1's C YJIT
 * (yjit_codegen.c: gen_send_cfunc, gen_send_iseq) lowers ec->cfp first and
 * writes the frame's members after it, so for a few instructions the slot
 * holds what an earlier frame left there; the interpreter, and YJIT from
 * 3.3 on, write the frame before they publish it. Told by:
 *  - before 3.3, __bp__: every push writes it as the sp at the push, and
 *    ep one word below it (vm_push_frame; YJIT the same), and ep changes
 *    only when the environment moves to the heap;
 *  - a frame with an iseq whose environment's flags say C method, or
 *    whose environment's method entry runs another iseq: the new frame's
 *    environment, written over the old one's;
 *  - a frame Ruby reports as a C method's without a method entry
 *    (c_frame: it would print as "<unknown C method>").
 * A slot whose old members all still agree with each other is not told
 * apart: it reads as the frame that used it last (docs/sampling.md). */
static bool half_pushed(walk *w, const rbp_cframe *f)
{
    const rbp_cframes *cf = w->cf;
    bool bad = false;
    if (cf->top_bp && ep_on_stack(w, f->ep) && f->ep + 8 != cf->top_bp) bad = true;
    uint64_t flags = 0;
    if (!bad && f->iseq && ep_on_stack(w, f->ep) && rbp_mem_u64(w->s->mem, f->ep, &flags)) {
        if ((flags & VM_FRAME_MAGIC_MASK) == VM_FRAME_MAGIC_CFUNC) bad = true;
        if ((flags & VM_FRAME_MAGIC_MASK) == VM_FRAME_MAGIC_METHOD) {
            rbp_cme cme;
            uint64_t me = rbp_frame_method_entry(w->s, f->ep, &w->ep_budget);
            bad = me && rbp_cme_read(w->s, me, &cme) && cme.def_type == 0 && cme.iseqptr && cme.iseqptr != f->iseq;
        }
    }
    if (bad) w->half_pushed = HALF_PUSHED;
    return bad;
}

#define VM_FRAME_MAGIC_BLOCK 0x22220001u
#define VM_FRAME_FLAG_CFRAME 0x0080u

/* Whether f, an innermost frame with an iseq and no pc, is a method's or a
 * block's that JIT code runs (jit_return set; the interpreter's pushes
 * clear it). 3.1's C YJIT runs such frames with pc 0 for long stretches
 * (measured: 1,077 of 1,800 samples of a JIT loop on Debian's ruby3.1):
 * Ruby's rule (no pc, not shown) would drop the frame that is running
 * and show its caller as the innermost. Shown, its line unknown. A frame
 * whose slot still holds another frame's members was told by half_pushed
 * before. */
static bool jit_frame_without_pc(walk *w, const rbp_cframe *f)
{
    uint64_t flags = 0;
    if (w->raw != 0 || !w->cf->top_jit_return || !rbp_mem_u64(w->s->mem, f->ep, &flags)) return false;
    uint32_t magic = (uint32_t)flags & VM_FRAME_MAGIC_MASK;
    return (magic == VM_FRAME_MAGIC_METHOD || magic == VM_FRAME_MAGIC_BLOCK) && !(flags & VM_FRAME_FLAG_CFRAME);
}

/* A control frame with an iseq. */
static int ruby_frame(walk *w, const rbp_cframe *f)
{
    bool no_pc = !f->pc;
    if (no_pc && !jit_frame_without_pc(w, f)) return W_NEXT;
    const rbp_iseq_info *in = rbp_iseq_get(w->s, f->iseq);
    if (!in) return W_NEXT; /* an ifunc or unreadable iseq: Ruby would not show it either */
    if (folded_into_rescue(w, in)) return W_NEXT;
    rbp_cme cme;
    bool have_cme;
    if (frame_cme(w, f->ep, wants_cme(w), &cme, &have_cme) == W_STOP) return W_STOP;
    uint64_t owner = have_cme && w->R->qualified_labels ? cme.owner : 0;
    if (internal_as_cfunc(w, in)) return internal_frame(w, in, f->pc, have_cme ? &cme : NULL, owner);
    if (c_trace_builtin(w, in, have_cme)) return emit_cfunc(w, rbp_cfunc_label(w->s, &cme), NULL, NULL, 0);
    /* Copy iseq strings before computing the label: a cache clear inside
     * the label computation must not leave us dangling. */
    bool unknown = no_pc || stale_line(w);
    int lineno = unknown ? 0 : rbp_iseq_lineno(w->s, in, f->pc);
    const char *path = arena_str(w->a, in->path), *abspath = arena_str(w->a, in->abspath);
    uint64_t iseq_addr = in->iseq;
    int first = in->first_lineno;
    const char *label = rbp_iseq_frame_label(w->s, in, owner);
    if (!emit(w->a, w->p, &w->n, w->limit, RBPEEK_FRAME_RUBY, label, path, abspath, lineno, iseq_addr, w->raw)) return W_STOP;
    rbpeek_frame *e = &w->p[w->n - 1].f;
    e->first_lineno = first;
    e->lineno_unknown = unknown;
    if (unknown && !no_pc && w->n == 1) w->saved_line = rbp_iseq_lineno(w->s, in, f->pc);
    e->self = f->self; /* for its locals (ruby bt --locals) */
    e->ep = f->ep;
    w->borrowing = 0;
    return W_NEXT;
}

/* A control frame without an iseq: a C method's, if it is one. */
static int c_frame(walk *w, const rbp_cframe *f)
{
    if (!rbp_cframe_is_cfunc(w->s, f)) return W_NEXT;
    rbp_cme cme;
    bool have_cme;
    if (frame_cme(w, f->ep, true, &cme, &have_cme) == W_STOP) return W_STOP;
    if (!have_cme && w->raw == 0) {   /* no method entry yet: being pushed */
        w->half_pushed = HALF_PUSHED;
        return W_NEXT;
    }
    int r = emit_cfunc(w, have_cme ? rbp_cfunc_label(w->s, &cme) : "<unknown C method>", NULL, NULL, 0);
    /* The innermost frame only: the allocation site's (profile/alloc_sites.c).
     * On every C frame it cost a sampled walk 3% more instructions. */
    if (r != W_STOP && have_cme && w->n == 1) w->p[0].f.instantiates = rbp_cfunc_instantiates(w->s, &cme, f->self);
    return r;
}

/* C frames (and 3.4's c_trace, 4.0's internal frames) borrow the location
 * of the nearest older Ruby frame; without one a C frame has none and an
 * internal frame keeps its own. */
static void borrow_locations(pending *p, size_t n)
{
    const pending *older = NULL;
    for (size_t i = n; i-- > 0;) {
        if (p[i].is_ruby_loc) {
            older = &p[i];
        } else if (older) {
            p[i].f.path = older->f.path;
            p[i].f.absolute_path = older->f.absolute_path;
            p[i].f.lineno = older->f.lineno;
            p[i].f.lineno_unknown = older->f.lineno_unknown;
        }
    }
}

/* Reads the control frames, with the snapshot's budget of them. */
static const char *read_budgeted(rbpeek_session *s, uint64_t ec, rbpeek_thread *out, size_t *raw_budget,
                                 rbp_cframes *cf)
{
    /* Read every frame even past max_frames' reported ones: frames Ruby does
     * not report (ifuncs, frames without a pc) do not count against it. */
    size_t max_raw = raw_budget ? *raw_budget : SIZE_MAX;
    const char *err = rbp_cframes_read(s, ec, max_raw, cf);
    if (raw_budget) {
        *raw_budget -= cf->n;
        if (cf->n == max_raw && !err) {
            /* possibly more frames than the budget left: say the walk may be cut */
            out->truncated = 1;
            err = "cut: the snapshot's budget of control frames is spent (the result is partial)";
        }
    }
    return err;
}

const char *rbp_frames_walk_marked(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a,
                                   rbpeek_thread *out, size_t *raw_budget, rbp_stack_mark *mark)
{
    return rbp_frames_walk_origin(s, ec, max_frames, a, out, raw_budget, mark, NULL, NULL);
}

const char *rbp_frames_walk_origin(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a,
                                   rbpeek_thread *out, size_t *raw_budget, rbp_stack_mark *mark, uint32_t **origin,
                                   int32_t *saved_line)
{
    if (origin) *origin = NULL;
    if (saved_line) *saved_line = 0;
    rbp_cframes cf;
    if (raw_budget && *raw_budget == 0) {
        out->truncated = 1;
        return "not walked: the snapshot's budget of control frames is spent (the result is partial)";
    }
    const char *err = read_budgeted(s, ec, out, raw_budget, &cf);
    if (mark) rbp_stack_mark_of(&cf, mark);
    if (cf.n == 0) {
        rbp_cframes_free(&cf); /* empty, but the caller's contract is to free: keep it whatever read does */
        return err;
    }
    size_t nraw = cf.n;
    walk w = {.s = s, .R = &s->rel.frames, .a = a, .limit = max_frames < nraw ? max_frames : nraw,
              .ep_budget = RBP_EP_HOPS_BUDGET(nraw), .cf = &cf, .ec = ec};
    w.p = rbp_scratch_get(&s->walk_pending, (nraw + 1) * sizeof *w.p);   /* emit() fills each entry it uses */
    if (!w.p) {
        err = "out of memory";
        goto done;
    }
    pin_values(s, &cf);
    for (size_t i = 0; i < nraw; i++) {
        if (w.n >= w.limit) {
            out->truncated = 1;
            break;
        }
        const rbp_cframe *f = &cf.frames[i];
        w.raw = i;
        if (i == 0 && half_pushed(&w, f)) continue;
        if ((f->iseq ? ruby_frame(&w, f) : c_frame(&w, f)) == W_STOP) break;
    }
    if (w.half_pushed && !err) err = w.half_pushed;
    if (w.ep_cut && !err) {
        out->truncated = 1;
        err = "cut: the frames' environment chains are longer than a real stack's (a damaged stack?); "
              "the frames after this point are not shown";
    }
    borrow_locations(w.p, w.n);
    rbpeek_frame *frames = w.n ? rbp_arena_alloc(a, w.n * sizeof *frames) : NULL;
    if (w.n && !frames) {
        err = "out of memory";
        goto done;
    }
    /* A NULL path stays NULL: Ruby reports nil for it, not "". */
    for (size_t i = 0; i < w.n; i++) frames[i] = w.p[i].f;
    out->frames = frames;
    out->nframes = w.n;
    if (saved_line) *saved_line = w.saved_line;
    if (origin && w.n && (*origin = rbp_arena_alloc(a, w.n * sizeof **origin)))
        for (size_t i = 0; i < w.n; i++) (*origin)[i] = w.p[i].raw;
done:
    rbp_mem_pin(s->mem, 0, NULL, 0);
    rbp_scratch_done(&s->walk_values);
    rbp_scratch_done(&s->walk_pending);
    rbp_cframes_free(&cf);
    return err;
}
