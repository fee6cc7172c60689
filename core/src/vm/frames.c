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
#include "vm/robject.h"
#include "vm/symbolize.h"

#define VM_FRAME_MAGIC_MASK 0x7fff0001u
#define VM_FRAME_MAGIC_CFUNC 0x55550001u
#define MAX_STACK_BYTES ((uint64_t)1 << 30)

/* A frame being built: C frames get their location in a second pass. */
typedef struct pending {
    rbpeek_frame f;
    int is_ruby_loc; /* carries a location C frames may borrow */
} pending;

static const char *arena_str(rbp_arena *a, const char *s) { return s ? rbp_arena_strdup(a, s) : NULL; }

static bool emit(rbp_arena *a, pending *p, size_t *n, size_t max, int kind, const char *label, const char *path,
                 const char *abspath, int lineno, uint64_t iseq)
{
    if (*n >= max) return false;
    pending *e = &p[(*n)++];
    memset(e, 0, sizeof *e);
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

    uint8_t *raw = rbp_scratch_get(&s->walk_raw, (size_t)(nraw * cfp_size));
    out->room = &s->walk_cframes;
    out->frames = rbp_scratch_get(out->room, (size_t)nraw * sizeof *out->frames);
    if (!raw || !out->frames) {
        rbp_scratch_done(&s->walk_raw);
        rbp_cframes_free(out);
        return "out of memory";
    }
    const char *err = NULL;
    size_t got = rbp_mem_read_partial(s->mem, cfp, raw, (size_t)(nraw * cfp_size));
    if (got < nraw * cfp_size) {
        /* Keep what could be read: the innermost frames are the useful ones. */
        nraw = got / cfp_size;
        err = "part of its control frame array is unreadable";
        if (nraw == 0) { /* nothing to hand back: the array goes now, not with the caller */
            rbp_scratch_done(&s->walk_raw);
            rbp_cframes_free(out);
            return "its control frame array is unreadable";
        }
    }
    for (uint64_t i = 0; i < nraw; i++) {
        const uint8_t *f = raw + i * cfp_size;
        out->frames[i] = (rbp_cframe){rbp_field_extract(L, RBP_L_cfp_pc, f), rbp_field_extract(L, RBP_L_cfp_iseq, f),
                                      rbp_field_extract(L, RBP_L_cfp_self, f), rbp_field_extract(L, RBP_L_cfp_ep, f)};
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
    if (rbp_ver_ge(s, 3, 3)) return true;
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

const char *rbp_frames_walk_marked(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a,
                                   rbpeek_thread *out, size_t *raw_budget, rbp_stack_mark *mark)
{
    rbp_cframes cf;
    if (raw_budget && *raw_budget == 0) {
        out->truncated = 1;
        return "not walked: the snapshot's budget of control frames is spent (the result is partial)";
    }
    /* Read every frame even past max_frames' reported ones: frames Ruby does
     * not report (ifuncs, frames without a pc) do not count against it. */
    size_t max_raw = raw_budget ? *raw_budget : SIZE_MAX;
    const char *err = rbp_cframes_read(s, ec, max_raw, &cf);
    if (raw_budget) {
        *raw_budget -= cf.n;
        if (cf.n == max_raw && !err) {
            /* possibly more frames than the budget left: say the walk may be cut */
            out->truncated = 1;
            err = "cut: the snapshot's budget of control frames is spent (the result is partial)";
        }
    }
    if (mark) rbp_stack_mark_of(&cf, mark);
    if (cf.n == 0) {
        rbp_cframes_free(&cf); /* empty, but the caller's contract is to free: keep it whatever read does */
        return err;
    }
    size_t nraw = cf.n;
    pending *p = rbp_scratch_get(&s->walk_pending, (nraw + 1) * sizeof *p);   /* emit() fills each entry it uses */
    uint8_t *values = NULL;
    if (!p) {
        err = "out of memory";
        goto done;
    }

    /* The frames' environments (ep) live in the VM value stack below the
     * control frames; method entries and frame magic are read through them.
     * Fetch the span they cover in one read and pin it for this walk, rather
     * than page by page. */
    uint64_t ep_lo = UINT64_MAX, ep_hi = 0;
    for (size_t i = 0; i < nraw; i++) {
        uint64_t ep = cf.frames[i].ep;
        if (ep < cf.vm_stack + 16 || ep >= cf.cfp) continue; /* not in this stack's value area */
        if (ep < ep_lo) ep_lo = ep;
        if (ep > ep_hi) ep_hi = ep;
    }
    if (ep_hi) {
        uint64_t lo = ep_lo - 16, len = ep_hi + 8 - lo;
        values = rbp_scratch_get(&s->walk_values, (size_t)len);
        if (values && rbp_mem_read(s->mem, lo, values, (size_t)len)) rbp_mem_pin(s->mem, lo, values, (size_t)len);
    }

    size_t n = 0, limit = max_frames < nraw ? max_frames : nraw;
    size_t ep_budget = RBP_EP_HOPS_BUDGET(nraw);
    bool ep_cut = false;
    bool is34 = rbp_ver_ge(s, 3, 4), is40 = rbp_ver_ge(s, 4, 0);
    bool skip_next = false;
    size_t borrowing = 0; /* frames emitted since the last Ruby frame: they take the next one's location */
    for (size_t i = 0; i < nraw; i++) {
        uint64_t pc = cf.frames[i].pc, iseq = cf.frames[i].iseq, ep = cf.frames[i].ep;
        if (n >= limit) {
            out->truncated = 1;
            break;
        }
        if (iseq) {
            if (!pc) continue;
            const rbp_iseq_info *in = rbp_iseq_get(s, iseq);
            if (!in) continue; /* an ifunc or unreadable iseq: Ruby would not show it either */
            bool skip = is34 && skip_next;
            if (is34) skip_next = in->type == RBP_ISEQ_RESCUE || in->type == RBP_ISEQ_ENSURE;
            if (skip) continue;
            uint64_t owner = 0;
            rbp_cme cme;
            bool have_cme = false;
            if (is34) {
                uint64_t me = rbp_frame_method_entry(s, ep, &ep_budget);
                if (!ep_budget) { ep_cut = true; break; }   /* its label would lack its owner */
                have_cme = me && rbp_cme_read(s, me, &cme);
                if (have_cme) owner = cme.owner;
            }
            if (is40 && in->path && !strncmp(in->path, "<internal:", 10)) {
                /* vm_backtrace.c (4.0): an internal frame behaves like a C
                 * method; if frames newer than it wait for a location, they
                 * are discarded so that one internal frame stands for them. */
                if (borrowing) {
                    n -= borrowing;
                    borrowing = 0;
                }
                /* Its own location serves when no Ruby frame is older (the
                 * prelude); otherwise it takes its caller's below. */
                int lineno = rbp_iseq_lineno(s, in, pc);
                const char *path = arena_str(a, in->path), *abspath = arena_str(a, in->abspath);
                const char *label = have_cme ? rbp_cfunc_label(s, &cme) : rbp_iseq_frame_label(s, in, owner);
                if (!emit(a, p, &n, limit, RBPEEK_FRAME_CFUNC, label, path, abspath, lineno, 0)) break;
                borrowing++;
                continue;
            }
            if (have_cme && (in->builtin_attrs & RBP_BUILTIN_ATTR_C_TRACE)) {
                if (!emit(a, p, &n, limit, RBPEEK_FRAME_CFUNC, rbp_cfunc_label(s, &cme), NULL, NULL, 0, 0)) break;
                borrowing++;
                continue;
            }
            /* Copy iseq strings before computing the label: a cache clear
             * inside the label computation must not leave us dangling. */
            int lineno = rbp_iseq_lineno(s, in, pc);
            const char *path = arena_str(a, in->path), *abspath = arena_str(a, in->abspath);
            uint64_t iseq_addr = in->iseq;
            int first = in->first_lineno;
            const char *label = rbp_iseq_frame_label(s, in, owner);
            if (!emit(a, p, &n, limit, RBPEEK_FRAME_RUBY, label, path, abspath, lineno, iseq_addr)) break;
            p[n - 1].f.first_lineno = first;
            p[n - 1].f.self = cf.frames[i].self; /* for its locals (ruby bt --locals) */
            p[n - 1].f.ep = ep;
            borrowing = 0;
        } else {
            if (!rbp_cframe_is_cfunc(s, &cf.frames[i])) continue;
            rbp_cme cme;
            uint64_t me = rbp_frame_method_entry(s, ep, &ep_budget);
            if (!ep_budget) { ep_cut = true; break; }
            const char *label = me && rbp_cme_read(s, me, &cme) ? rbp_cfunc_label(s, &cme) : "<unknown C method>";
            if (!emit(a, p, &n, limit, RBPEEK_FRAME_CFUNC, label, NULL, NULL, 0, 0)) break;
            borrowing++;
        }
    }
    if (ep_cut && !err) {
        out->truncated = 1;
        err = "cut: the frames' environment chains are longer than a real stack's (a damaged stack?); "
              "the frames after this point are not shown";
    }

    /* C frames (and 3.4's c_trace, 4.0's internal frames) borrow the
     * location of the nearest older Ruby frame; without one a C frame has
     * none and an internal frame keeps its own. */
    const pending *older = NULL;
    for (size_t i = n; i-- > 0;) {
        if (p[i].is_ruby_loc) {
            older = &p[i];
        } else if (older) {
            p[i].f.path = older->f.path;
            p[i].f.absolute_path = older->f.absolute_path;
            p[i].f.lineno = older->f.lineno;
        }
    }
    rbpeek_frame *frames = n ? rbp_arena_alloc(a, n * sizeof *frames) : NULL;
    if (n && !frames) {
        err = "out of memory";
        goto done;
    }
    /* A NULL path stays NULL: Ruby reports nil for it, not "". */
    for (size_t i = 0; i < n; i++) frames[i] = p[i].f;
    out->frames = frames;
    out->nframes = n;
done:
    rbp_mem_pin(s->mem, 0, NULL, 0);
    rbp_scratch_done(&s->walk_values);
    rbp_scratch_done(&s->walk_pending);
    rbp_cframes_free(&cf);
    return err;
}
