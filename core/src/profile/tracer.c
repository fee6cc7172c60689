/*
 * The sampler as the target's own tracer (rbpeek_trace_*): `ruby sample`'s
 * fast path for a live local process.
 *
 * Stopping and resuming a target through gdb or lldb costs 0.4-1.2 ms per
 * sample (their bookkeeping: thread lists, registers, breakpoints, events,
 * lldb-server round trips; docs/sampling-cost.md), which is most of a sample's
 * cost and more than a profiler may take. So the debugger detaches for the
 * duration of the command, and this module traces the process instead, from
 * a thread of its own, with nothing but what a sample needs: each sample is
 * one PTRACE_INTERRUPT and one wait per thread, the walk (the same calls as
 * `ruby bt`), and one PTRACE_CONT per thread. The whole loop runs in C; the
 * caller only waits for it to end (rbpeek_trace_wait) and shows progress.
 *
 * Why a thread of its own: ptrace requests must come from the tracing
 * thread, and waitpid(-1, __WNOTHREAD) on a fresh thread sees only its own
 * tracees, never the debugger's children (lldb-server, a shell).
 *
 * PTRACE_SEIZE and PTRACE_INTERRUPT, not PTRACE_ATTACH and SIGSTOP: no
 * signal is ever sent, so none can be blocked by the target, none is left
 * pending if the debugger dies, and the target's own signals are untouched.
 * New threads are traced from their first instruction (PTRACE_O_TRACECLONE)
 * and sampled like the rest; forked children are not traced.
 *
 * The tracing thread sleeps in waitpid() while the target runs. For a stop
 * it polls waitpid(WNOHANG) a moment (STOP_SPIN_NS) before it sleeps: a
 * thread on another CPU stops within 50-150 us, and waking an idle virtual
 * CPU to report it would add tens of microseconds to the holder's stop
 * (docs/sampling-cost.md). Deadlines (the next sample; the bound on a
 * stop) wake it with a POSIX timer that sends it, and only it, a real-time
 * signal with an empty handler (an unused one, whose handler is restored
 * afterwards), which interrupts the wait. The host's SIGCHLD action gets
 * SA_NOCLDSTOP meanwhile: every stop would otherwise send the host a
 * SIGCHLD and wake one of its threads, which delayed the holder's sample
 * by about 50 us (tr_quiet_sigchld). Events are handled as they come:
 * a signal the debugger would pass on is delivered at once; one it would
 * stop for (stop_signals) ends sampling, and is kept for the debugger (see
 * tr_detach_all): a fault is queued again with the process held in a group
 * stop, a signal someone sent is left to the caller to send again once the
 * debugger has attached. The target's exit and exec() end sampling too.
 * Each sample's walk starts with one batched read of the pages the last
 * walk used (rbp_mem_prefetch): in GVL mode before the stop, with the
 * thread list read from it, and only the holder's own pages read again
 * once it is stopped (rbp_mem_fence; see trace_stop.c).
 *
 * Every wait is bounded: a thread that does not stop within STOP_TIMEOUT_NS
 * (uninterruptible sleep in the kernel, so not running Ruby code either) is
 * counted and the sample taken without it.
 *
 * What a sample stops (cfg.stop_mode; docs/sampling.md):
 *  - RBPEEK_STOP_GVL (default): only the thread holding each ractor's GVL.
 *    A Ruby thread changes its Ruby stack (and the VM's thread lists, and
 *    the GC moves or frees objects) only while it holds its ractor's GVL,
 *    so once every holder is stopped, the others can be read where they
 *    stand (each checked against its markers), while they stay parked in
 *    the kernel. The holder waits only for its own facts and walk. The holders are
 *    read (a few uncached words) while the target runs, stopped, and read
 *    again once stopped: only if every ractor's GVL is then held by a
 *    stopped thread is the sample taken that way (a holder stopped holding
 *    the GVL cannot hand it on). Otherwise (the GVL changed hands meanwhile:
 *    a few rounds; nobody holds it, so anyone may take it; the holder's TID
 *    is unknown) every thread is stopped, as in STOP_ALL, and counted.
 *  - RBPEEK_STOP_ALL: every thread, every sample.
 *  - RBPEEK_STOP_NONE (--nonblocking): nothing; the stacks are read while the
 *    target runs, each checked against change markers read before and after
 *    it (rbpeek_snapshot_take_running); a torn one is dropped and counted.
 */
#define _GNU_SOURCE
#include "profile/tracer.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#include "context/context.h"
#include "memory/mem.h"
#include "profile/helper_thread.h"
#include "vm/snapshot.h"
#include "vm/threads.h"


/* -- one sample ------------------------------------------------------------- */

/* The split walk's release: the held threads are walked, resume them. */
static void release_held(void *ctx)
{
    struct rbpeek_trace *t = ctx;
    t->released = true;
    /* Sampling ended while threads were held (a signal the debugger stops
     * for reached one, the target is exiting): tr_detach_all lets every
     * thread go, and it alone keeps that signal for the debugger. Resuming
     * here would deliver it to the target now, and the debugger would then
     * find a process already handling it. */
    if (t->end != RBPEEK_TRACE_RUNNING) return;
    t->resume_from = rbp_now_ns();
    tr_resume_all(t);
    t->resume_to = rbp_now_ns();
    t->released = true;
}

/* Who held the GVL at this sample, for the thread states: the holders
 * stopped alone (GVL mode), else as the target's memory says (every thread
 * stopped; or, running, as it is now). */
static void gvl_view(struct rbpeek_trace *t, rbp_gvl_view *v)
{
    memset(v, 0, sizeof *v);
    if (t->nheld > 0 && t->nheld <= RBP_GVL_VIEW_MAX) {
        v->known = true;
        v->n = t->nheld;
        memcpy(v->th, t->held_th, t->nheld * sizeof *v->th);
        return;
    }
    rbp_gvl_holder h[RBP_GVL_VIEW_MAX];
    size_t n = 0;
    if (!rbp_gvl_holders(t->session, h, RBP_GVL_VIEW_MAX, &n)) return;
    v->known = true;
    v->n = n;
    for (size_t i = 0; i < n; i++) v->th[i] = h[i].th;
}

/* On a CPU: the GC's share of the CPU time. The samples are taken at
 * random moments of wall time, and a thread that was on a CPU at such a
 * moment stops where it runs (within microseconds of its PTRACE_INTERRUPT):
 * those samples are a uniform draw from its CPU time, whatever else the
 * machine runs. A thread that was preempted stops where the scheduler took
 * it off its CPU, and that place is no such draw: preemption takes effect
 * on the way back from the kernel, so where a thread makes system calls
 * (Ruby 3.1's GC reads the process's CPU clock around every step, outside
 * its flag; 3.3's inside it) it is found more often than it spends time.
 * Measured on Debian's 3.1, load 40, 2,000 samples: the holders found on
 * a CPU were in the GC 40.3% of the time when the program's own events
 * said 40.1% at the same moments; those preempted, 37.0% for 41.0%.
 * docs/sampling.md, "The GC's share of the CPU time". */
static void count_on_cpu(struct rbpeek_trace *t, const rbpeek_snapshot *snap)
{
    pid_t tids[MAX_HOLDERS];
    size_t n = 0;
    if (t->nheld > 0 && !t->cur.full) {
        for (size_t i = 0; i < t->cur.ntids && n < MAX_HOLDERS; i++) tids[n++] = t->cur.tids[i];
    } else {
        rbp_gvl_holder h[MAX_HOLDERS];
        size_t nh = 0;
        if (!rbp_gvl_holders(t->session, h, MAX_HOLDERS, &nh)) return;
        for (size_t i = 0; i < nh; i++)
            if (h[i].th && h[i].native_tid > 0) tids[n++] = (pid_t)h[i].native_tid;
    }
    for (size_t k = 0; k < n; k++) {
        int on = tr_was_on_cpu(t, tids[k]);
        if (on < 0) continue;
        if (!on) {
            t->stats.cpu_waited++;
            continue;
        }
        t->stats.cpu_samples++;
        for (size_t i = 0, nt = rbpeek_snapshot_thread_count(snap); i < nt; i++) {
            const rbpeek_thread *th = rbpeek_snapshot_thread(snap, i);
            if (th && th->native_tid == tids[k] && th->gc != RBPEEK_GC_NONE) t->stats.cpu_gc++;
        }
    }
}

/* A sample at which every GVL was free (allocation sites): counted, nothing
 * taken. True: sampling goes on. */
static bool count_gvl_free(struct rbpeek_trace *t)
{
    pthread_mutex_lock(&t->lock);
    t->stats.samples++;
    t->stats.gvl_free++;
    pthread_mutex_unlock(&t->lock);
    return true;
}

/* One sample, after tr_prepare(): stops what it needs (now, or in GVL mode
 * from the walk, once the thread list is read: tr_stop_cb), walks, resumes.
 * running: nothing is stopped (STOP_NONE). With t->nheld, only the GVL
 * holders are stopped: they are walked and resumed first, the rest walked
 * after (rbp_snapshot_take_split). False if sampling ended meanwhile. */
static bool take_sample(struct rbpeek_trace *t, bool running)
{
    rbpeek_snapshot *snap = NULL;
    rbpeek_sample_result res = {0};
    if (!t->cur.deferred && !t->cur.skip) {
        tr_stop_now(t);
        if (t->end != RBPEEK_TRACE_RUNNING) return false;
        if (t->cur.skip) release_held(t);
    }
    if (t->cur.skip) return count_gvl_free(t);   /* allocation sites, every GVL free: nobody allocates */
    if (!t->cur.deferred && !t->cur.fresh) {
        rbp_mem_invalidate(t->session->mem); /* what rbpeek_session_invalidate does: session.c is above us */
        /* The pages the last walk used, in one batch (a running target's
         * walk checks what it read against direct reads: snapshot.c). */
        rbp_mem_prefetch(t->session->mem);
    }
    size_t max = (size_t)(t->cfg.max_frames > 0 ? t->cfg.max_frames : 0);
    /* Every thread stopped (held NULL), none (running: nheld 0), or the
     * GVL holders; either way the target is resumed as soon as the stacks
     * that need it stopped are walked, before the rest of the work. */
    bool some = t->cur.deferred || running || t->cur.to_holders;
    rbp_snapshot_split how = {.held = some ? t->held_th : NULL, .nheld = &t->nheld,
                              .stop = t->cur.deferred ? tr_stop_cb : NULL, .release = release_held, .ctx = t,
                              .native = t->cfg.native ? &t->nat : NULL};
    tr_keep_split(t, &how);
    rbpeek_status took = rbp_snapshot_take_split(t->session, max, &how, &snap);
    tr_native_sample_done(t);   /* whatever the take did: threads it found no more are dropped */
    tr_keep_sample_done(t);
    if (t->end != RBPEEK_TRACE_RUNNING && took != RBPEEK_OK) return false;
    if (took != RBPEEK_OK && t->cur.skip) return count_gvl_free(t);   /* the GVL was let go before the stop */
    if (took != RBPEEK_OK) {
        pthread_mutex_lock(&t->lock);
        t->stats.samples++;
        t->stats.failed_samples++;
        snprintf(t->stats.message, sizeof t->stats.message, "%.*s", (int)sizeof t->stats.message - 1, t->session->error);
        pthread_mutex_unlock(&t->lock);
        return true;
    }
    gvl_view(t, &t->add_scratch.gvl);
    rbpeek_status st = t->cfg.alloc_sites
                           ? rbpeek_alloc_sites_add_snapshot(t->cfg.alloc_sites, t->profile, snap, &t->opt, &res)
                           : rbp_sample_add_snapshot(t->profile, snap, &t->opt, &res, &t->add_scratch);
    uint64_t torn = 0, retried = 0;
    for (size_t i = 0, n = rbpeek_snapshot_thread_count(snap); i < n; i++) {
        const rbpeek_thread *th = rbpeek_snapshot_thread(snap, i);
        if (th && th->torn) torn++;
        if (th && th->retried) retried++;
    }
    pthread_mutex_lock(&t->lock);
    if (!running) count_on_cpu(t, snap);
    t->stats.samples++;
    if (st != RBPEEK_OK) {
        snprintf(t->stats.message, sizeof t->stats.message, "%s", rbpeek_profile_error(t->profile));
        t->end = RBPEEK_TRACE_FAILED;
    }
    t->stats.added_threads += res.added;
    t->stats.native_unmerged += res.unmerged;
    if (res.unmerged_note && !t->stats.unmerged_note[0])
        snprintf(t->stats.unmerged_note, sizeof t->stats.unmerged_note, "%s", res.unmerged_note);
    for (int k = 1; k < 5; k++) t->stats.gc[k] += res.gc[k];
    t->stats.torn_threads += torn;
    t->stats.retried_threads += retried;
    t->stats.failed_threads += res.failed - (torn < res.failed ? torn : res.failed);
    t->stats.filtered += res.filtered;
    t->stats.tid_unknown += res.tid_unknown;
    pthread_mutex_unlock(&t->lock);
    rbpeek_snapshot_free(snap);
    return true;
}

/* -- the loop ---------------------------------------------------------------- */

static void finish(struct rbpeek_trace *t, int end)
{
    pthread_mutex_lock(&t->lock);
    t->stats.end = end;
    t->started = t->ended = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);
}

static void *tracer_main(void *arg)
{
    struct rbpeek_trace *t = arg;
    /* Deadlines are a few hundred microseconds apart at high rates. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    tr_quiet_sigchld(t);
    if (!tr_setup_wakeup(t) || !tr_seize_all(t)) {
        tr_detach_all(t);
        tr_teardown_wakeup(t);
        tr_restore_sigchld(t);
        finish(t, RBPEEK_TRACE_FAILED);
        return NULL;
    }
    tr_aside_init(t);
    pthread_mutex_lock(&t->lock);
    t->started = true;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->lock);

    const uint64_t t0 = rbp_now_ns();
    const uint64_t until = t->cfg.duration_s > 0 ? t0 + (uint64_t)(t->cfg.duration_s * 1e9) : 0;
    uint64_t fire = rbp_schedule_next(&t->schedule, 0, t0);
    while (t->end == RBPEEK_TRACE_RUNNING) {
        if (t->cfg.max_samples && t->stats.samples >= t->cfg.max_samples) {
            t->end = RBPEEK_TRACE_DONE;
            break;
        }
        if (atomic_load(&t->cancel)) {
            t->end = RBPEEK_TRACE_CANCELLED;
            break;
        }
        uint64_t now = rbp_now_ns();
        if (until && now >= until) {
            t->end = RBPEEK_TRACE_DONE;
            break;
        }
        tr_run_until(t, until && fire > until ? until : fire);
        if (t->end != RBPEEK_TRACE_RUNNING || atomic_load(&t->cancel) || (until && rbp_now_ns() >= until)) continue;

        uint64_t a = rbp_now_ns();
        for (size_t i = 0; i < t->ntr; i++) t->tr[i].cpu_known = false;   /* asked anew for this sample */
        t->released = false;
        tr_prepare(t);
        if (!take_sample(t, t->cfg.stop_mode == RBPEEK_STOP_NONE)) {
            if (!t->released) release_held(t);
            break;
        }
        uint64_t walked = rbp_now_ns();
        uint64_t b = t->cur.stopped_at ? t->cur.stopped_at : a, held_from = t->cur.held_from;
        if (!t->released) release_held(t);
        /* The target runs again from its resume (nothing was stopped:
         * from now); a deadline the walk after the resume overran fires at once. */
        fire = rbp_schedule_next(&t->schedule, a, t->released && t->resume_to >= a ? t->resume_to : rbp_now_ns());
        /* walk: before and after the release; resume: the release */
        uint64_t resume_ns = t->resume_to - t->resume_from;
        uint64_t done = walked > t->resume_to ? walked : t->resume_to;
        uint64_t walk_ns = done - b - resume_ns;
        pthread_mutex_lock(&t->lock);
        if (held_from) t->stats.held_s += (double)(t->last_cont - held_from) * 1e-9;
        if (held_from && t->cur.stopped_at && t->last_cont > t->cur.stopped_at)
            t->stats.held_seen_s += (double)(t->last_cont - t->cur.stopped_at) * 1e-9;
        t->stats.full_stops += t->cur.full;
        t->stats.threads_stopped += t->cur.nstopped;
        t->stats.not_stopped += t->cur.late;
        t->stats.stop_s += (double)(b - a) * 1e-9;
        t->stats.walk_s += (double)walk_ns * 1e-9;
        t->stats.resume_s += (double)resume_ns * 1e-9;
        t->stats.elapsed_s = (double)(done - t0) * 1e-9;
        pthread_mutex_unlock(&t->lock);
    }
    int end = t->end;
    tr_native_done(t);
    tr_keep_done(t);
    tr_detach_all(t);
    tr_teardown_wakeup(t);
    tr_restore_sigchld(t);
    pthread_mutex_lock(&t->lock);
    t->stats.elapsed_s = (double)(rbp_now_ns() - t0) * 1e-9;
    pthread_mutex_unlock(&t->lock);
    finish(t, end);
    return NULL;
}

/* -- the API ----------------------------------------------------------------- */

rbpeek_status rbpeek_trace_start(rbpeek_session *s, rbpeek_profile *p, const rbpeek_sample_options *opt,
                                 const rbpeek_trace_config *cfg, rbpeek_trace **out)
{
    if (!s || !p || !cfg || !out) return RBPEEK_ERR_ARG;
    *out = NULL;
    if (!opt || opt->pid <= 0 || !(cfg->interval_s > 0)) return RBPEEK_ERR_ARG;
    if (cfg->native && cfg->stop_mode == RBPEEK_STOP_NONE)
        return rbp_fail(s, RBPEEK_ERR_ARG, "--native needs the threads stopped: a stack cannot be unwound while "
                                           "its thread runs (drop --nonblocking)");
    if (cfg->alloc_sites && !cfg->native)
        return rbp_fail(s, RBPEEK_ERR_ARG, "allocation sites are judged from native stacks: set native");
    struct rbpeek_trace *t = calloc(1, sizeof *t);
    if (!t) return RBPEEK_ERR_NOMEM;
    t->session = s;
    t->profile = p;
    t->opt = *opt;
    t->opt.tid_map = NULL;      /* a snapshot's TIDs are the kernel's (vm/kernel_tid.c) */
    t->opt.tid_map_pairs = 0;
    t->cfg = *cfg;
    t->pid = opt->pid;
    rbp_schedule_init(&t->schedule, cfg->interval_s, cfg->seed ? cfg->seed : (rbp_now_ns() | 1u));
    tr_native_init(t);
    tr_keep_init(t);
    pthread_mutex_init(&t->lock, NULL);
    pthread_cond_init(&t->cond, NULL);

    int rc = rbp_helper_thread_start(&t->thread, tracer_main, t);
    if (rc != 0) {
        pthread_cond_destroy(&t->cond);
        pthread_mutex_destroy(&t->lock);
        tr_native_done(t);
        tr_keep_done(t);
        free(t);
        return rbp_fail(s, RBPEEK_ERR_NOMEM, "cannot start the sampling thread: %s", strerror(rc));
    }
    pthread_mutex_lock(&t->lock);
    while (!t->started) pthread_cond_wait(&t->cond, &t->lock);
    bool failed = t->ended && t->stats.end == RBPEEK_TRACE_FAILED;
    pthread_mutex_unlock(&t->lock);
    if (failed) {
        char msg[sizeof t->stats.message];
        memcpy(msg, t->stats.message, sizeof msg);
        rbpeek_trace_free(t);
        return rbp_fail(s, RBPEEK_ERR_IO, "%s", msg);
    }
    *out = t;
    return RBPEEK_OK;
}

int rbpeek_trace_wait(rbpeek_trace *t, int timeout_ms)
{
    if (!t) return 1;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t ns = (uint64_t)ts.tv_nsec + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000u;
    ts.tv_sec += (time_t)(ns / 1000000000u);
    ts.tv_nsec = (long)(ns % 1000000000u);
    pthread_mutex_lock(&t->lock);
    while (!t->ended && timeout_ms != 0) {
        if (pthread_cond_timedwait(&t->cond, &t->lock, &ts) == ETIMEDOUT) break;
    }
    bool ended = t->ended;
    pthread_mutex_unlock(&t->lock);
    return ended ? 1 : 0;
}

void rbpeek_trace_cancel(rbpeek_trace *t)
{
    if (!t) return;
    atomic_store(&t->cancel, 1);
    /* Wake it if it sleeps until a far sample time. */
    pthread_mutex_lock(&t->lock);
    if (!t->ended && t->wake_sig) pthread_kill(t->thread, t->wake_sig);
    pthread_mutex_unlock(&t->lock);
}

void rbpeek_trace_get_stats(rbpeek_trace *t, rbpeek_trace_stats *out)
{
    if (!t || !out) return;
    pthread_mutex_lock(&t->lock);
    *out = t->stats;
    if (!t->ended) out->end = RBPEEK_TRACE_RUNNING;
    pthread_mutex_unlock(&t->lock);
}

void rbpeek_trace_free(rbpeek_trace *t)
{
    if (!t) return;
    rbpeek_trace_cancel(t);
    pthread_join(t->thread, NULL);   /* it detaches from the target before it returns */
    tr_wait_untraced(t->pid, t->self_tid, 1000);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->lock);
    free(t->tr);
    rbp_sample_scratch_free(&t->add_scratch);
    tr_native_done(t);   /* the tracing thread's, unless it never ran */
    tr_keep_done(t);
    free(t);
}
