/*
 * The merge of a thread's machine frames with its Ruby frames (`ruby bt
 * --native`, docs/native.md has the picture):
 *
 *  - A VM invocation is a call of rb_vm_exec (vm_exec in vm.c, #defined to
 *    that name in every release from 2.7 on): C calls into Ruby (rb_yield,
 *    rb_funcall, a thread's start, the main script) push the Ruby frame to
 *    run with VM_FRAME_FLAG_FINISH in its environment flags, then call
 *    vm_exec, which runs it and every Ruby frame it calls until that one
 *    returns. So the control frames, innermost first, fall into segments
 *    each ending at a FINISH frame, and the k-th segment is run by the
 *    k-th rb_vm_exec of the machine stack, innermost first. (FINISH frames
 *    without a pc are not run by vm_exec: rb_vm_call_cfunc's frame around
 *    an extension's Init, 3.3's dummy frames around a load.)
 *  - A C method's Ruby frame is called from the VM (or from C through
 *    rb_funcall) as a call of its C function: its method entry holds that
 *    function's address, which is matched to the machine frame of the
 *    function that starts there (by its symbol, or where a stripped binary
 *    has none, by its FDE's entry in .eh_frame_hdr), among the frames
 *    between its segment's rb_vm_exec and the next inner one.
 *  - The segment's Ruby frames stand just above its rb_vm_exec; its C
 *    methods at their functions; both keep Ruby's order, since a segment's
 *    C method frames are its innermost.
 *
 * A machine frame of YJIT's code (the unwinder steps it, native/) runs
 * Ruby frames of its segment: the innermost, which names it, and those it
 * called by jumps. It stands where it is on the machine stack, its Ruby
 * frames just above rb_vm_exec as any segment's.
 *
 * When the counts do not agree (a thread caught between pushing a FINISH
 * frame and entering vm_exec, an rb_vm_exec inlined away),
 * nothing is guessed: the machine frames and the Ruby frames are given
 * apart, with the reason. When the machine stack is cut (its reason is
 * kept), the segments it reached are merged and the Ruby frames of the
 * older ones follow it. A C method whose function is not found (inlined,
 * or tail-called away) stands with its segment's Ruby frames, and the note
 * says so.
 *
 * Internal frames, hidden unless --native-all: frames in the Ruby image
 * (libruby, or the ruby executable of a static build) that are unnamed or
 * named by a file-local (static) symbol, or named vm_*, rb_vm_*, invoke_*:
 * the VM's call machinery between a Ruby frame and its native callee.
 * Whether a symbol is static is what keeps a stripped libruby (where only
 * the exported names are known) and one with its .symtab showing the same
 * frames.
 */
#include "vm/native_merge.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/frames.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

#define VM_FRAME_FLAG_FINISH 0x20u
#define NOTE_MAX 600

/* What the merge needs of each control frame. */
typedef struct cinfo {
    uint32_t segment;       /* FINISH entries strictly newer than it */
    bool entry;             /* a FINISH frame vm_exec runs: the end of its segment */
} cinfo;

static bool starts_with(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

/* rb_vm_exec, looked up once per session. */
static uint64_t vm_exec_addr(rbpeek_session *s)
{
    if (!s->vm_exec_looked_up) {
        const char *how;
        if (!rbp_symbol_lookup(s, "rb_vm_exec", &s->vm_exec_addr, &how)) s->vm_exec_addr = 0;
        s->vm_exec_looked_up = true;
    }
    return s->vm_exec_addr;
}

static bool is_vm_exec(rbpeek_session *s, const rbpeek_native_frame *f, const rbp_native_extra *x)
{
    uint64_t at = vm_exec_addr(s);
    if (at && x->lo == at) return true;
    return f->symbol && strcmp(f->symbol, "rb_vm_exec") == 0;
}

/* The C function of a C method's frame: method entry, definition,
 * body.cfunc.func. */
static uint64_t cfunc_of(rbpeek_session *s, uint64_t ep, size_t *budget)
{
    const rbp_layout *L = &s->layout;
    if (!rbp_has(L, RBP_L_mdef_cfunc_func)) return 0;
    uint64_t me = rbp_frame_method_entry(s, ep, budget), def = 0, fn = 0;
    if (!me || !rbp_mem_u64(s->mem, me + (uint64_t)rbp_off(L, RBP_L_me_def), &def) || !def) return 0;
    if (!rbp_mem_u64(s->mem, def + (uint64_t)rbp_off(L, RBP_L_mdef_cfunc_func), &fn)) return 0;
    return fn;
}

typedef struct builder {
    rbp_arena *a;
    rbpeek_stack_frame *f;
    size_t n, cap;
    const char *ruby_module;    /* the module rb_vm_exec lies in */
} builder;

/* Machine frame k; runs: the Ruby frame whose code it runs if it is JIT
 * code (NULL: not known). */
static void push_native(builder *b, rbpeek_session *s, const rbp_merge_input *in, size_t k, const rbpeek_frame *runs)
{
    const rbpeek_native_frame *nf = &in->native[k];
    if (in->extra[k].jit) {
        b->f[b->n++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_JIT, .native = nf, .ruby = runs};
        return;
    }
    bool internal = false;
    if (b->ruby_module && nf->module && strcmp(nf->module, b->ruby_module) == 0) {
        const char *sym = nf->symbol;
        internal = !sym || in->extra[k].local || starts_with(sym, "vm_") || starts_with(sym, "rb_vm_") ||
                   starts_with(sym, "invoke_");
    }
    (void)s;
    b->f[b->n++] = (rbpeek_stack_frame){.kind = RBPEEK_FRAME_NATIVE, .internal = internal, .native = nf};
}

static void push_ruby(builder *b, const rbpeek_frame *rf, const rbpeek_native_frame *at)
{
    b->f[b->n++] = (rbpeek_stack_frame){.kind = rf->kind, .ruby = rf, .native = at};
}

static void add_note(rbp_arena *a, const char **note, const char *fmt, const char *what)
{
    char buf[NOTE_MAX];
    snprintf(buf, sizeof buf, fmt, what);
    if (*note) {
        char both[2 * NOTE_MAX];
        snprintf(both, sizeof both, "%s; %s", *note, buf);
        *note = rbp_arena_strdup(a, both);
    } else {
        *note = rbp_arena_strdup(a, buf);
    }
}

/* Not merged: the machine frames, then the Ruby frames. */
static void apart(builder *b, rbpeek_session *s, const rbp_merge_input *in)
{
    for (size_t k = 0; k < in->nnative; k++) push_native(b, s, in, k, NULL);
    for (size_t i = 0; i < in->thread->nframes; i++) push_ruby(b, &in->thread->frames[i], NULL);
}

/* The merge's plan: the control frames' segments, the C functions of the
 * C method frames, the rb_vm_exec frames, and why they cannot be merged
 * (why[0] == '\0': they can). */
typedef struct merge_plan {
    cinfo *ci;              /* per control frame */
    size_t nraw, nseg;      /* control frames, segments (FINISH entries) */
    uint64_t *fn;           /* per Ruby frame: its C function, or 0 */
    bool *iseq;             /* per Ruby frame: whether its control frame has an iseq */
    size_t *entry, nentry;  /* the rb_vm_exec machine frames, innermost first */
    char why[NOTE_MAX];
} merge_plan;

/* The Ruby image: the module rb_vm_exec lies in, on this stack or not. */
static const char *ruby_module_of(rbpeek_session *s, const rbp_merge_input *in)
{
    for (size_t k = 0; k < in->nnative; k++)
        if (is_vm_exec(s, &in->native[k], &in->extra[k]) && in->native[k].module) return in->native[k].module;
    if (vm_exec_addr(s) && s->native) {
        rbpeek_native_frame f; /* not on this stack: where the function is */
        rbp_native_describe(s->native, vm_exec_addr(s), true, false, &f, NULL);
        return f.module;
    }
    return NULL;
}

/* The control frames' segments, into pl->ci. */
static void plan_segments(rbpeek_session *s, const rbp_cframes *cf, merge_plan *pl)
{
    for (size_t j = 0; j < pl->nraw; j++) {
        uint64_t flags = 0;
        pl->ci[j].segment = (uint32_t)pl->nseg;
        pl->ci[j].entry = cf->frames[j].iseq && cf->frames[j].pc && rbp_mem_u64(s->mem, cf->frames[j].ep, &flags) &&
                          (flags & VM_FRAME_FLAG_FINISH);
        if (pl->ci[j].entry) pl->nseg++;
    }
}

/* The C functions of the thread's C method frames (real ones: a 3.4
 * builtin or a 4.0 internal frame reported as a C method is an iseq run by
 * the VM like any Ruby frame), into pl->fn, and which frames have an iseq,
 * into pl->iseq. False when the Ruby frames
 * cannot be told apart by control frame (in->origin missing or not in
 * order). */
static bool plan_cfuncs(rbpeek_session *s, const rbp_merge_input *in, const rbp_cframes *cf, merge_plan *pl)
{
    const rbpeek_thread *t = in->thread;
    size_t ep_budget = RBP_EP_HOPS_BUDGET(pl->nraw);
    bool origin_ok = in->origin != NULL || t->nframes == 0;
    for (size_t i = 0; pl->fn && pl->iseq && origin_ok && i < t->nframes; i++) {
        uint32_t j = in->origin[i];
        if (j >= pl->nraw || (i && j < in->origin[i - 1])) {
            origin_ok = false;
            break;
        }
        pl->iseq[i] = cf->frames[j].iseq != 0;
        if (t->frames[i].kind == RBPEEK_FRAME_CFUNC && !cf->frames[j].iseq)
            pl->fn[i] = cfunc_of(s, cf->frames[j].ep, &ep_budget);
    }
    return origin_ok;
}

/* Why the machine and Ruby frames cannot be merged, into pl->why (empty:
 * they can). err: why the control frames could not be read, or NULL. */
static void plan_why(const rbp_merge_input *in, const char *err, bool origin_ok, merge_plan *pl)
{
    bool complete = !in->cut || !*in->cut;
    pl->why[0] = '\0';
    if (err && !pl->nraw)
        snprintf(pl->why, sizeof pl->why, "its control frames cannot be read (%s)", err);
    else if (!origin_ok)
        snprintf(pl->why, sizeof pl->why, "its Ruby frames cannot be told apart by control frame");
    else if (pl->nseg == 0 && in->thread->nframes)
        snprintf(pl->why, sizeof pl->why, "its Ruby stack has no VM entry frame");
    else if (pl->nentry > pl->nseg || (complete && pl->nentry != pl->nseg))
        snprintf(pl->why, sizeof pl->why,
                 "the machine stack has %zu VM invocation%s (rb_vm_exec), the Ruby stack %zu: the thread may "
                 "be entering or leaving one, or rb_vm_exec was inlined",
                 pl->nentry, pl->nentry == 1 ? "" : "s", pl->nseg);
}

/* The plan of the merge, from the thread's control frames. False when out
 * of memory. */
static bool plan_merge(rbpeek_session *s, rbp_arena *a, const rbp_merge_input *in, merge_plan *pl)
{
    const rbpeek_thread *t = in->thread;
    rbp_cframes cf;
    const char *err = rbp_cframes_read(s, in->ec, SIZE_MAX, &cf);
    pl->nraw = cf.n;
    pl->ci = pl->nraw ? rbp_arena_alloc(a, pl->nraw * sizeof *pl->ci) : NULL;
    if (pl->nraw && !pl->ci) {
        rbp_cframes_free(&cf);
        return false;
    }
    plan_segments(s, &cf, pl);
    pl->fn = t->nframes ? rbp_arena_alloc(a, t->nframes * sizeof *pl->fn) : NULL;
    pl->iseq = t->nframes ? rbp_arena_alloc(a, t->nframes * sizeof *pl->iseq) : NULL;
    bool origin_ok = plan_cfuncs(s, in, &cf, pl);
    pl->entry = rbp_arena_alloc(a, (in->nnative + 1) * sizeof *pl->entry);
    if (!pl->entry || (t->nframes && (!pl->fn || !pl->iseq))) {
        rbp_cframes_free(&cf);
        return false;
    }
    for (size_t k = 0; k < in->nnative; k++)
        if (is_vm_exec(s, &in->native[k], &in->extra[k])) pl->entry[pl->nentry++] = k;
    plan_why(in, err, origin_ok, pl);
    rbp_cframes_free(&cf);
    return true;
}

/* Segment j: its C methods at their functions, the machine frames down
 * to its rb_vm_exec, its other Ruby frames just above that, then
 * rb_vm_exec. *i, *k: the next Ruby and machine frame, moved past it. */
static void merge_segment(builder *b, rbpeek_session *s, const rbp_merge_input *in, const merge_plan *pl,
                          size_t j, size_t *i, size_t *k, rbpeek_native_stack *out)
{
    const rbpeek_thread *t = in->thread;
    size_t e = pl->entry[j];
    size_t seg_end = *i;
    while (seg_end < t->nframes && pl->ci[in->origin[seg_end]].segment == j) seg_end++;
    /* its real C methods, innermost first, at increasing native places */
    size_t c = *i;
    size_t from = *k;
    for (; c < seg_end && pl->fn[c]; c++) {
        size_t at = SIZE_MAX;
        for (size_t q = from; q < e && at == SIZE_MAX; q++)
            if (in->extra[q].lo == pl->fn[c]) at = q;
        if (at == SIZE_MAX) break;
        /* machine frames newer than it, then the C method at its function */
        for (; *k < at; (*k)++) push_native(b, s, in, *k, NULL);
        push_ruby(b, &t->frames[c], &in->native[at]);
        *k = at + 1;
        from = *k;
    }
    if (c < seg_end && pl->fn[c])
        add_note(b->a, &out->note, "%s: its C function was not found among the machine frames (inlined or "
                 "tail-called); it is shown with its caller", t->frames[c].label ? t->frames[c].label : "?");
    /* the machinery down to rb_vm_exec (with the JIT code that runs the
     * segment's innermost method with an iseq: its calls between Ruby
     * methods are jumps, so it runs them all from one machine frame; a
     * builtin Ruby reports as a C method, 3.4's Array#each under YJIT, is
     * such a method), the segment's other Ruby frames just above it, then
     * rb_vm_exec (merged only when the Ruby frames have their control
     * frames: pl->iseq is whole) */
    const rbpeek_frame *runs = NULL;
    for (size_t q = c; q < seg_end && !runs; q++)
        if (t->frames[q].kind == RBPEEK_FRAME_RUBY || pl->iseq[q]) runs = &t->frames[q];
    for (; *k < e; (*k)++) push_native(b, s, in, *k, runs);
    for (; c < seg_end; c++) push_ruby(b, &t->frames[c], NULL);
    push_native(b, s, in, (*k)++, NULL);
    *i = seg_end;
}

bool rbp_native_merge(rbpeek_session *s, rbp_arena *a, const rbp_merge_input *in, rbpeek_native_stack *out)
{
    const rbpeek_thread *t = in->thread;
    memset(out, 0, sizeof *out);
    out->native = in->native;
    out->nnative = in->nnative;
    out->cut = in->cut && *in->cut ? rbp_arena_strdup(a, in->cut) : NULL;
    builder b = {.a = a, .cap = in->nnative + t->nframes + 1};
    if (!(b.f = rbp_arena_alloc(a, b.cap * sizeof *b.f))) return false;
    b.ruby_module = ruby_module_of(s, in);
    merge_plan pl = {0};
    if (!plan_merge(s, a, in, &pl)) return false;
    if (pl.why[0] || !t->nframes) {
        apart(&b, s, in);
        out->frames = b.f;
        out->nframes = b.n;
        out->merged = t->nframes == 0 && !pl.why[0];
        if (pl.why[0]) add_note(a, &out->note, "not merged: %s", pl.why);
        return true;
    }
    /* Ruby frames by segment, each run by its rb_vm_exec. */
    size_t i = 0, k = 0;
    for (size_t j = 0; j < pl.nentry; j++) merge_segment(&b, s, in, &pl, j, &i, &k, out);
    for (; k < in->nnative; k++) push_native(&b, s, in, k, NULL);
    if (i < t->nframes) {
        /* the machine stack was cut before reaching these */
        for (; i < t->nframes; i++) push_ruby(&b, &t->frames[i], NULL);
        add_note(a, &out->note, "%s", "the machine stack is cut: the older Ruby frames follow it");
    }
    out->frames = b.f;
    out->nframes = b.n;
    out->merged = 1;
    return true;
}
