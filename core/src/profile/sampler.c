/*
 * The sampler's fast path (rbpeek_profile_add_snapshot): one snapshot, taken
 * while the debugger holds the target stopped, becomes one profile stack per
 * selected thread. Doing this in C keeps the Python side of `ruby sample` at
 * a handful of calls per sample, however deep the stacks are.
 *
 * Each frame becomes an entry of the profile's frame table (its kind,
 * label, path, line and first line), root first (a snapshot lists frames
 * innermost first). A thread whose walk reported an error is skipped
 * rather than recorded: its stack may be torn (a thread caught mid-push) and
 * a half stack would put samples under the wrong parent in a flamegraph.
 *
 * "On CPU" is decided from two sources. Ruby's own status says whether the
 * thread is runnable at all (not in sleep, Queue#pop, join...). That is not
 * enough: a runnable thread may be blocked in a read() outside the GVL, or
 * waiting for the GVL itself. For a live process the kernel knows better:
 * /proc/PID/task/TID/syscall shows the system call a stopped thread was in
 * when it was stopped, or -1 when it was running user code (the ptrace stop
 * itself leaves every thread in state 't', so /proc/.../stat cannot tell).
 * A thread counts as on CPU when both agree.
 *
 * Both need a thread's kernel TID, which Ruby keeps only from 3.1 on; for
 * older Rubies the caller fills it in first with rbpeek_snapshot_resolve_tids
 * (threads.c).
 */
#include "profile/sampler.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "context/context.h"
#include "profile/profile.h"

void rbp_sample_scratch_free(rbp_sample_scratch *s)
{
    rbp_sb_free(&s->text);
    free(s->frames);
    free(s->ids);
    free(s->offsets);
    s->frames = NULL;
    s->ids = NULL;
    s->offsets = NULL;
    s->cap = 0;
    rbp_task_files_close(&s->files);
}

static bool scratch_reserve(rbp_sample_scratch *s, size_t n)
{
    if (n <= s->cap) return true;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    rbp_frame_desc *nf = realloc(s->frames, cap * sizeof *nf);
    if (!nf) return false;
    s->frames = nf;
    uint32_t *ni = realloc(s->ids, cap * sizeof *ni);
    if (!ni) return false;
    s->ids = ni;
    size_t *no = realloc(s->offsets, cap * sizeof *no);
    if (!no) return false;
    s->offsets = no;
    s->cap = cap;
    return true;
}

int64_t rbp_sample_thread_tid(const rbpeek_thread *t, const rbpeek_sample_options *opt)
{
    if (t->native_tid > 0) return t->native_tid;
    if (opt && opt->tid_map && t->pthread_id) {
        for (size_t i = 0; i < opt->tid_map_pairs; i++)
            if (opt->tid_map[2 * i] == t->pthread_id) return (int64_t)opt->tid_map[2 * i + 1];
    }
    return -1;
}

/* Whether the thread counts as on CPU, given the system call it is in
 * (rbp_thread_syscall's answer, or -2 when nobody asked the kernel). */
static bool on_cpu_given(const rbpeek_thread *t, const rbpeek_sample_options *opt, long syscall, bool *unknown)
{
    *unknown = false;
    if (t->status != RBPEEK_THREAD_RUNNABLE) return false;
    if (!opt || opt->pid <= 0) return true;
    if (syscall == -2) {
        *unknown = true;
        return true;
    }
    return syscall == -1;
}

bool rbp_sample_on_cpu(const rbpeek_thread *t, const rbpeek_sample_options *opt, bool *unknown)
{
    long sc = -2;
    if (t->status == RBPEEK_THREAD_RUNNABLE && opt && opt->pid > 0)
        sc = rbp_thread_syscall(NULL, opt->pid, rbp_sample_thread_tid(t, opt));
    return on_cpu_given(t, opt, sc, unknown);
}

static bool selected(const rbpeek_thread *t, const rbpeek_sample_options *opt)
{
    if (!opt) return true;
    if (opt->only_tid > 0 || opt->only_pthread) {
        bool match = (opt->only_tid > 0 && rbp_sample_thread_tid(t, opt) == opt->only_tid) ||
                     (opt->only_pthread && t->pthread_id == opt->only_pthread);
        if (!match) return false;
    }
    return true;
}

static void thread_frame_name(rbp_strbuf *text, const rbpeek_thread *t)
{
    /* The kernel's TID (the snapshot's), fixed for the thread's life: a
     * name from tid_map could change when the map is refreshed, splitting
     * one thread's samples in two. */
    int64_t tid = t->native_tid;
    if (t->name && *t->name) {
        rbp_sb_puts(text, "Thread \"");
        rbp_sb_puts(text, t->name);
        rbp_sb_puts(text, "\"");
    } else {
        rbp_sb_puts(text, t->is_main ? "Thread main" : "Thread");
    }
    if (tid > 0) rbp_sb_printf(text, " (tid %lld)", (long long)tid);
    else if (!t->is_main && !(t->name && *t->name))
        rbp_sb_printf(text, " 0x%llx", (unsigned long long)t->thread_addr);
}

static const char *base_name(const char *path)
{
    const char *slash = path ? strrchr(path, '/') : NULL;
    return slash ? slash + 1 : path;
}

/* A machine frame in a profile: one frame per function (all its pcs as
 * one), named by its symbol and module, "park_nogvl (native_ext.so)", or
 * where no symbol names it by its module and the function's offset,
 * "libruby.so.3.1+0x18cd50"; a pc in no module (anonymous memory, a gap
 * between modules: code rbpeek does not know) is "[code in no module]",
 * never a neighbour's nor one frame per pc. Its label goes to the scratch
 * text. */
static rbp_frame_desc native_desc(rbp_sample_scratch *s, size_t k, int32_t kind, const rbpeek_native_frame *n)
{
    uint64_t fn = n->function ? n->function : n->pc;
    s->offsets[k] = s->text.len;
    if (n->symbol)
        rbp_sb_printf(&s->text, "%s (%s)", n->symbol, n->module ? base_name(n->module) : "?");
    else if (n->module)
        rbp_sb_printf(&s->text, "%s+0x%llx", base_name(n->module),
                      (unsigned long long)(n->module_offset - (n->pc - fn)));
    else { /* code in no file and no JIT region known: one frame, not one per pc */
        rbp_sb_puts(&s->text, "[code in no module]");
        fn = 0;
    }
    rbp_sb_putn(&s->text, "", 1);
    return (rbp_frame_desc){.kind = kind, .module = n->module, .pc = fn, .symbol = n->symbol,
                            .native_file = n->file, .native_line = n->line};
}

/* A machine frame of JIT code in a profile: one frame per Ruby method it
 * runs, whatever its pc, "[JIT] label (path)", or "[JIT]" where the method
 * is not known; never a module's. Its label goes to the scratch text. */
static rbp_frame_desc jit_desc(rbp_sample_scratch *s, size_t k, const rbpeek_frame *runs)
{
    s->offsets[k] = s->text.len;
    rbp_sb_puts(&s->text, "[JIT]");
    if (runs && runs->label) {
        rbp_sb_printf(&s->text, " %s", runs->label);
        if (runs->path) rbp_sb_printf(&s->text, " (%s)", runs->path);
    }
    rbp_sb_putn(&s->text, "", 1);
    return (rbp_frame_desc){.kind = RBPEEK_FRAME_JIT};
}

/* The Ruby frame f (innermost first in its stack), at its C function's
 * frame n if given. */
static rbp_frame_desc ruby_desc(const rbpeek_frame *f, const rbpeek_native_frame *n)
{
    rbp_frame_desc d = {.kind = f->kind, .label = f->label, .path = f->path, .line = f->lineno,
                        .first_line = f->first_lineno};
    if (n) {
        d.module = n->module;
        d.pc = n->function ? n->function : n->pc;
        d.symbol = n->symbol;
    }
    return d;
}

rbp_sample_fate rbp_sample_add_stack(rbpeek_profile *p, const rbpeek_thread *t, const rbpeek_native_stack *ns,
                                     const rbpeek_sample_options *opt, rbp_sample_scratch *s,
                                     bool *tid_unknown, int32_t *gc, bool *unmerged)
{
    *tid_unknown = false;
    *gc = RBPEEK_GC_NONE;
    *unmerged = false;
    if (!selected(t, opt)) return RBP_SAMPLE_FILTERED;
    /* The kernel is asked once per runnable thread: for its state (every
     * thread is tallied, kept or not) and for on_cpu. */
    int64_t tid = rbp_sample_thread_tid(t, opt);
    int pid = opt ? opt->pid : 0;
    long sc = rbp_thread_state_asks_kernel(t) && pid > 0 ? rbp_thread_syscall(&s->files, pid, tid) : -2;
    rbpeek_thread_state state = rbp_thread_state_of(t, &s->gvl, sc);
    size_t slot = SIZE_MAX;   /* a killed thread is not tallied, nor its stack counted as recorded */
    if (t->status != RBPEEK_THREAD_KILLED && !rbp_tally_add(p, pid, t, tid, state, &slot)) return RBP_SAMPLE_NOMEM;
    if (opt && opt->on_cpu && !on_cpu_given(t, opt, sc, tid_unknown)) return RBP_SAMPLE_FILTERED;
    if (opt && opt->drop_idle && state == RBPEEK_STATE_BLOCKED) return RBP_SAMPLE_FILTERED;
    if (t->error) return RBP_SAMPLE_FAILED;
    if (t->nframes == 0 || !t->frames) return RBP_SAMPLE_EMPTY;
    /* Not merged, its machine and Ruby frames cannot be nested: the Ruby
     * frames alone, as without --native (counted). */
    if (ns && !ns->merged) {
        *unmerged = true;
        ns = NULL;
    }

    bool per_thread = opt && opt->per_thread;
    bool root = opt && opt->root_frame && *opt->root_frame;
    const char *gc_label = ns ? NULL : rbpeek_gc_phase_label(t->gc);
    /* A wait for the GVL names itself, on top of the line that waits (a
     * thread back from IO, or handing the GVL over): waiting never reads
     * as the work of the method it waits in. */
    bool gvl_wait = state == RBPEEK_STATE_GVL_WAIT;
    size_t n = (ns ? ns->nframes : t->nframes + (gc_label ? 1 : 0)) + (gvl_wait ? 1 : 0) + (per_thread ? 1 : 0) +
               (root ? 1 : 0);
    if (!scratch_reserve(s, n)) return RBP_SAMPLE_NOMEM;
    s->text.len = 0;
    size_t k = 0;
    if (root) {
        s->offsets[k] = SIZE_MAX;
        s->frames[k++] = (rbp_frame_desc){.kind = RBP_PF_PROCESS, .label = opt->root_frame};
    }
    if (per_thread) {
        s->offsets[k] = 0;
        thread_frame_name(&s->text, t);
        rbp_sb_putn(&s->text, "", 1);
        s->frames[k++] = (rbp_frame_desc){.kind = RBP_PF_THREAD};
    }
    if (ns) {
        for (size_t i = ns->nframes; i-- > 0;) {   /* innermost first -> root first */
            const rbpeek_stack_frame *f = &ns->frames[i];
            if (f->internal) continue;
            s->offsets[k] = SIZE_MAX;
            if (f->kind == RBPEEK_FRAME_JIT) {
                s->frames[k] = jit_desc(s, k, f->ruby);
                k++;
            } else if (f->ruby) {
                s->frames[k++] = ruby_desc(f->ruby, f->native);
            } else if (f->native) {
                s->frames[k] = native_desc(s, k, RBPEEK_FRAME_NATIVE, f->native);
                k++;
            } else {
                s->frames[k++] = (rbp_frame_desc){.kind = RBPEEK_FRAME_GC, .label = f->label};
                *gc = t->gc;
            }
        }
    } else {
        for (size_t i = t->nframes; i-- > 0;) {   /* innermost first -> root first */
            s->offsets[k] = SIZE_MAX;
            s->frames[k++] = ruby_desc(&t->frames[i], NULL);   /* the snapshot's frame kinds are the profile's */
        }
        if (gc_label) { /* the GC at work, on the line that allocated */
            s->offsets[k] = SIZE_MAX;
            s->frames[k++] = (rbp_frame_desc){.kind = RBPEEK_FRAME_GC, .label = gc_label};
            *gc = t->gc;
        }
    }
    if (gvl_wait) {
        s->offsets[k] = SIZE_MAX;
        s->frames[k++] = (rbp_frame_desc){.kind = RBPEEK_FRAME_GVL, .label = rbpeek_gvl_wait_label()};
    }
    if (s->text.oom) {
        /* strbuf's failure is sticky; start the next sample afresh. */
        rbp_sb_free(&s->text);
        return RBP_SAMPLE_NOMEM;
    }
    /* the labels in text, now that it has stopped growing */
    for (size_t i = 0; i < k; i++)
        if (s->offsets[i] != SIZE_MAX) s->frames[i].label = s->text.buf + s->offsets[i];
    if (k == 0) return RBP_SAMPLE_EMPTY;
    if (rbp_profile_add_frames(p, s->frames, k, 1, s->ids) != RBPEEK_OK) return RBP_SAMPLE_NOMEM;
    rbp_tally_recorded(p, slot, state);
    return RBP_SAMPLE_ADDED;
}

rbp_sample_fate rbp_sample_add_thread(rbpeek_profile *p, const rbpeek_thread *t,
                                      const rbpeek_sample_options *opt, rbp_sample_scratch *s, bool *tid_unknown)
{
    int32_t gc;
    bool unmerged;
    return rbp_sample_add_stack(p, t, NULL, opt, s, tid_unknown, &gc, &unmerged);
}

rbpeek_status rbpeek_profile_add_snapshot(rbpeek_profile *p, const rbpeek_snapshot *snap,
                                          const rbpeek_sample_options *opt, rbpeek_sample_result *result)
{
    rbp_sample_scratch s = {0};
    rbpeek_status st = rbp_sample_add_snapshot(p, snap, opt, result, &s);
    rbp_sample_scratch_free(&s);
    return st;
}

rbpeek_status rbp_sample_add_snapshot(rbpeek_profile *p, const rbpeek_snapshot *snap,
                                      const rbpeek_sample_options *opt, rbpeek_sample_result *result,
                                      rbp_sample_scratch *s)
{
    rbpeek_sample_result r = {0};
    if (result) *result = r;
    if (!p) return RBPEEK_ERR_ARG;
    if (!snap) return rbp_profile_fail(p, RBPEEK_ERR_ARG, "add_snapshot: no snapshot");
    rbpeek_status st = RBPEEK_OK;
    size_t n = rbpeek_snapshot_thread_count(snap);
    for (size_t i = 0; i < n; i++) {
        const rbpeek_thread *t = rbpeek_snapshot_thread(snap, i);
        if (!t) continue;
        bool unknown = false, unmerged = false;
        int32_t gc = RBPEEK_GC_NONE;
        switch (rbp_sample_add_stack(p, t, rbpeek_snapshot_native(snap, i), opt, s, &unknown, &gc, &unmerged)) {
        case RBP_SAMPLE_ADDED:
            r.added++;
            if (gc > 0 && gc < 5) r.gc[gc]++;
            if (unmerged && !r.unmerged++) {
                const rbpeek_native_stack *ns = rbpeek_snapshot_native(snap, i);
                r.unmerged_note = ns ? ns->note : NULL;
            }
            break;
        case RBP_SAMPLE_FAILED: r.failed++; break;
        case RBP_SAMPLE_FILTERED: r.filtered++; break;
        case RBP_SAMPLE_EMPTY: r.empty++; break;
        case RBP_SAMPLE_NOMEM:
            st = rbp_profile_fail(p, RBPEEK_ERR_NOMEM, "add_snapshot: out of memory");
            break;
        }
        if (unknown) r.tid_unknown++;
        if (st != RBPEEK_OK) break;
    }
    if (result) *result = r;
    return st;
}

