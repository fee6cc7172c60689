/*
 * rbpeek public API, part two: profiles, their writers, and the sampler
 * (`ruby sample`). Included by rbpeek.h, which callers include; the
 * conventions are rbpeek.h's.
 */
#ifndef RBPEEK_PROFILE_H
#define RBPEEK_PROFILE_H

#include "rbpeek.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------------------
 * Profile: aggregated stack samples (from `ruby sample`) and their writers:
 * folded stacks, a self-contained SVG flamegraph, and speedscope JSON.
 * A profile is not tied to a session and keeps its own error message.
 * Writers accept the path "-" for standard output; read_folded accepts "-"
 * for standard input.
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_profile rbpeek_profile;

RBPEEK_API rbpeek_profile *rbpeek_profile_new(void);
RBPEEK_API void rbpeek_profile_free(rbpeek_profile *p);

/* The last error (or warning, e.g. skipped lines) of this profile, or "". */
RBPEEK_API const char *rbpeek_profile_error(const rbpeek_profile *p);

/* Adds count samples of one stack. frames are root (outermost) first; each
 * is a display string, by convention "label (path:line)". Identical stacks
 * are merged. count 0 is accepted and adds nothing; nframes must be > 0. */
RBPEEK_API rbpeek_status rbpeek_profile_add_stack(rbpeek_profile *p, const char *const *frames,
                                       size_t nframes, uint64_t count);

/* Free-form facts shown in titles: "ruby_version", "pid", "rate_hz",
 * "samples", "title"; and "unit", what one count of the profile is (plural,
 * "stacks": ruby sample's count is one thread's stack at a sample, and a
 * sample of a process records as many as it has busy threads), which the
 * SVG's boxes and subtitle then say in place of "samples". Setting a key
 * again replaces its value. */
RBPEEK_API rbpeek_status rbpeek_profile_set_meta(rbpeek_profile *p, const char *key, const char *value);
/* The value of a meta key, or NULL. */
RBPEEK_API const char *rbpeek_profile_meta(const rbpeek_profile *p, const char *key);

/* Total samples added, and the number of distinct stacks. */
RBPEEK_API uint64_t rbpeek_profile_total(const rbpeek_profile *p);
RBPEEK_API uint64_t rbpeek_profile_stack_count(const rbpeek_profile *p);

/* A text table of the n hottest frames (n = 0: all). by_self nonzero ranks by
 * self samples (the frame is the leaf), else by total samples (stacks that
 * contain the frame; a recursive frame counts once per stack). *out is a
 * malloc'd string to be released with rbpeek_free (or free). */
RBPEEK_API rbpeek_status rbpeek_profile_top(const rbpeek_profile *p, int by_self, size_t n, char **out);

/* One row of rbpeek_profile_frame_counts. */
typedef struct rbpeek_frame_count {
    const char *name;   /* the frame's display name, "label (path:line)"; by method "label (path)" */
    uint64_t self;      /* samples whose innermost frame it is */
    uint64_t total;     /* stacks it is on (a recursive frame once per stack) */
} rbpeek_frame_count;

/* Every frame's self and total samples, as the top-N table counts them, for
 * a caller that keeps its own counts (rbpeek top adds one period to the
 * next). by_method nonzero merges the lines of a method into one row,
 * "label (path)". Rows come in name order; *rows (one malloc'd block, the
 * names in it) is released with rbpeek_free. */
RBPEEK_API rbpeek_status rbpeek_profile_frame_counts(const rbpeek_profile *p, int by_method,
                                                     rbpeek_frame_count **rows, size_t *n);

typedef struct rbpeek_svg_options {
    int width;              /* image width in px; <= 0: 1200 */
    double min_width_px;    /* omit frames narrower than this; < 0: keep all; 0: 0.1,
                             * raised if need be to keep to 30,000 boxes */
    const char *title;      /* NULL: meta "title", else "Flame Graph" */
    int inverted;           /* nonzero: icicle graph, root at the top */
    /* > 0: each box's tooltip adds its share's interval (rbpeek_share_interval
     * at ci_z of its share of the root, out of ci_samples: the effective number
     * of samples, as `ruby allocs --sites` has it) */
    double ci_samples;
    double ci_z;
} rbpeek_svg_options;

/* Folded stacks ("a;b;c 12", root first, one line per distinct stack, sorted).
 * ';' in a frame becomes ':' and line breaks become spaces. */
RBPEEK_API rbpeek_status rbpeek_profile_write_folded(const rbpeek_profile *p, const char *path);
/* An interactive SVG flamegraph (click to zoom, search, tooltips). opt may be NULL. */
RBPEEK_API rbpeek_status rbpeek_profile_write_svg(const rbpeek_profile *p, const char *path,
                                       const rbpeek_svg_options *opt);
/* speedscope's file format (https://www.speedscope.app/file-format-schema.json). */
RBPEEK_API rbpeek_status rbpeek_profile_write_speedscope(const rbpeek_profile *p, const char *path);

/* pprof's profile.proto, gzip'd: what `go tool pprof`, Pyroscope, Parca and
 * Cloud Profiler read. Two sample types: [samples, count] and [cpu or wall,
 * nanoseconds] (count x period_ns); period_type [cpu or wall, nanoseconds];
 * one location per frame name, one function per (label, file), split from
 * "label (path:line)" names as the speedscope writer does; the meta "title"
 * as a comment. opt may be NULL (wall, 10 ms period, no times). */
typedef struct rbpeek_pprof_options {
    uint64_t period_ns;         /* time one sample stands for (the sampling
                                 * interval); 0: 10,000,000 (100 Hz) */
    int on_cpu;                 /* nonzero: samples of on-CPU threads ("cpu"),
                                 * else of every thread ("wall") */
    int64_t time_nanos;         /* start of sampling, ns since the epoch (0: unknown) */
    int64_t duration_nanos;     /* how long it sampled (0: unknown) */
} rbpeek_pprof_options;
RBPEEK_API rbpeek_status rbpeek_profile_write_pprof(const rbpeek_profile *p, const char *path,
                                                    const rbpeek_pprof_options *opt);

/* Adds the stacks of a folded file ("a;b;c 123": the count follows the LAST
 * space, frames may contain spaces). Malformed lines are skipped and counted;
 * the call fails only if the file cannot be read, or if it had lines and
 * none of them was valid. */
RBPEEK_API rbpeek_status rbpeek_profile_read_folded(rbpeek_profile *p, const char *path);
/* Malformed lines skipped by read_folded so far. */
RBPEEK_API uint64_t rbpeek_profile_skipped_lines(const rbpeek_profile *p);

/* ---------------------------------------------------------------------------
 * Sampling: the fast path of `ruby sample`. The debugger stops the target,
 * the caller takes a snapshot, and this turns every selected thread's stack
 * into one profile stack, so the caller does O(1) work per sample whatever
 * the depth of the stacks. Frame names are "label (path:line)" ("label
 * (path)" without a line, "label" without a path), root first.
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_sample_options {
    int per_thread;             /* nonzero: a root frame naming the thread,
                                 * 'Thread "NAME" (tid N)' / 'Thread main (tid N)'
                                 * (the TID where Ruby keeps it: 3.1 and later) */
    int on_cpu;                 /* nonzero: keep only threads on a CPU: Ruby status
                                 * RUNNABLE and, when pid > 0, the kernel reports the
                                 * thread outside any system call (/proc/PID/task/TID/
                                 * syscall reads "-1 ..." or "running"), i.e. not
                                 * blocked in sleep, I/O or a wait for the GVL */
    int64_t only_tid;           /* > 0: only the thread with this kernel TID */
    uint64_t only_pthread;      /* nonzero: only the thread with this pthread_t */
    int pid;                    /* > 0: the target is this live process (for on_cpu) */
    const uint64_t *tid_map;    /* optional (pthread_t, TID) pairs, for Rubies that
                                 * keep no TID (before 3.1) */
    size_t tid_map_pairs;
    int drop_idle;              /* nonzero: leave out threads in the BLOCKED state
                                 * (rbpeek_thread_state), as py-spy leaves idle
                                 * threads out; they are still counted in the
                                 * profile's thread tallies */
    const char *root_frame;     /* non-NULL: a root frame above every stack (and
                                 * above per_thread's), naming the process:
                                 * "COMMAND (pid N)" */
} rbpeek_sample_options;

/* What one call did with the snapshot's threads. */
typedef struct rbpeek_sample_result {
    uint32_t added;             /* stacks added (count 1 each) */
    uint32_t failed;            /* threads whose walk failed (torn read...): skipped */
    uint32_t filtered;          /* threads left out by only_* or on_cpu */
    uint32_t empty;             /* threads with no Ruby frames */
    uint32_t tid_unknown;       /* on_cpu with pid: threads whose TID was not known,
                                 * judged by Ruby's status alone */
    uint32_t gc[5];             /* stacks added with the GC at work on top, by rbpeek_gc_phase
                                 * ([0] unused) */
    uint32_t unmerged;          /* native stacks whose Ruby frames could not be placed: added
                                 * with their Ruby frames alone */
    const char *unmerged_note;  /* the first such stack's note (why), or NULL; valid while the
                                 * snapshot is */
} rbpeek_sample_result;

/* Adds the stacks of snap's threads to p, as opt selects (opt may be NULL:
 * every thread, no thread frame), each with the GC's frame on top when the
 * GC runs on it ("[GC: marking]"...), and, for a snapshot with native
 * stacks (rbpeek_snapshot_take_native), each as its native stack merged
 * with its Ruby frames, the VM's internal frames left out; a stack that
 * could not be merged is added with its Ruby frames alone (counted).
 * result may be NULL. Fails only on bad
 * arguments or out of memory; a thread whose walk failed is counted and
 * skipped. */
RBPEEK_API rbpeek_status rbpeek_profile_add_snapshot(rbpeek_profile *p, const rbpeek_snapshot *snap,
                                                     const rbpeek_sample_options *opt,
                                                     rbpeek_sample_result *result);

/* What a thread was doing at a sample (docs/sampling.md, "Thread states"):
 * RUNNING holds its ractor's GVL; GVL_WAIT is runnable for Ruby without it
 * (or back from a blocking region, on a futex, to run again); BLOCKED is
 * asleep for Ruby (sleep, Mutex, Queue, ConditionVariable, join,
 * Thread.stop) or in a blocking region (IO); GC is the GVL holder while the
 * process collects garbage. Without the holder (through a debugger) the
 * kernel decides for a runnable thread: futex GVL_WAIT, another system
 * call BLOCKED, user code RUNNING. */
typedef enum rbpeek_thread_state {
    RBPEEK_STATE_RUNNING = 0,
    RBPEEK_STATE_GVL_WAIT = 1,
    RBPEEK_STATE_BLOCKED = 2,
    RBPEEK_STATE_GC = 3,
} rbpeek_thread_state;
#define RBPEEK_THREAD_STATES 4

/* Every thread a profile's samples saw (kept or left out), with how many
 * samples found it in each state. */
typedef struct rbpeek_thread_tally {
    int64_t pid;                /* the sample options' pid (0 if none) */
    int64_t tid;                /* the kernel's TID, -1 if unknown */
    const char *name;           /* the thread's last name seen, "" if none (the profile's) */
    int32_t is_main;
    uint64_t samples;           /* samples that saw the thread */
    uint64_t states[RBPEEK_THREAD_STATES]; /* by rbpeek_thread_state */
    /* Of those, by state, the samples whose stack the profile recorded:
     * what the folded file and the flamegraph count (a blocked thread is
     * seen but not recorded when idle threads are dropped; a failed walk
     * is not recorded). The summaries' shares are of these. */
    uint64_t recorded[RBPEEK_THREAD_STATES];
} rbpeek_thread_tally;

RBPEEK_API size_t rbpeek_profile_thread_count(const rbpeek_profile *p);
/* The i-th thread seen, in the order first seen; RBPEEK_ERR_ARG past the end. */
RBPEEK_API rbpeek_status rbpeek_profile_thread_tally(const rbpeek_profile *p, size_t i, rbpeek_thread_tally *out);

/* Adds every stack and thread tally of src to dst (frames matched by what
 * they are, not by id): how the profiles of several processes, each
 * sampled by its own tracer, become one. Meta data is not copied. */
RBPEEK_API rbpeek_status rbpeek_profile_merge(rbpeek_profile *dst, const rbpeek_profile *src);

/* Kernel TIDs of snap's threads as (pthread_t, TID) pairs. Rubies before 3.1
 * keep only a thread's pthread_t, and a debugger may not be able to tell a
 * thread's pthread_t either (lldb 16 shows no fs_base), so the TID is read
 * from glibc's struct pthread (a pthread_t is its address). Its offset is
 * found on the main thread's struct and confirmed on the others; every
 * value must be a real TID of the process: one of known_tids (e.g. the
 * debugger's thread list, which works on cores), or when nknown is 0, a
 * thread in /proc/PID/task of a live pid. Threads whose TID Ruby keeps are
 * passed through. Writes at most max_pairs pairs; *npairs says how many.
 * Fails with RBPEEK_ERR_NOT_FOUND when a TID is needed and no offset fits. */
RBPEEK_API rbpeek_status rbpeek_snapshot_resolve_tids(rbpeek_session *s, const rbpeek_snapshot *snap,
                                                      const int64_t *known_tids, size_t nknown, int pid,
                                                      uint64_t *pairs, size_t max_pairs, size_t *npairs);

/* The sampler's timer: a helper thread that sends process pid the signal
 * signo at a CLOCK_MONOTONIC moment, so that a debugger waiting in its
 * "continue" sees the target stop then. Arm it before resuming the target;
 * disarm it once the debugger reports a stop: it returns 1 (and the moment)
 * if the signal was sent, and no signal is sent after it returns. The
 * signal goes through a pidfd, so it never reaches a process that reused
 * the pid. new returns NULL (errno set) if pid does not exist. */
typedef struct rbpeek_kicker rbpeek_kicker;
RBPEEK_API rbpeek_kicker *rbpeek_kicker_new(int pid, int signo);
RBPEEK_API void rbpeek_kicker_arm(rbpeek_kicker *k, uint64_t deadline_ns);
RBPEEK_API int rbpeek_kicker_disarm(rbpeek_kicker *k, uint64_t *fired_ns);
/* CLOCK_MONOTONIC now, in nanoseconds: the clock of deadlines. */
RBPEEK_API uint64_t rbpeek_kicker_now(void);
RBPEEK_API void rbpeek_kicker_free(rbpeek_kicker *k);

/* The sample times, one rule for the tracer and the loop through the
 * debugger: the target's run from each resume to the next sample is
 * exponential (a Poisson process over the time it runs, so that the
 * samples see its time averages however each stop disturbs it), of a mean
 * shortened by the samples' mean cost so far, so that the rate holds.
 * next returns the CLOCK_MONOTONIC deadline of the next sample of a target
 * resumed at resumed_ns whose last sample fired at fired_ns (0: none yet).
 * new returns NULL when interval_s is not above 0 or memory is out; seed 0
 * picks a fixed one. */
typedef struct rbpeek_schedule rbpeek_schedule;
RBPEEK_API rbpeek_schedule *rbpeek_schedule_new(double interval_s, uint64_t seed);
RBPEEK_API uint64_t rbpeek_schedule_next(rbpeek_schedule *s, uint64_t fired_ns, uint64_t resumed_ns);
RBPEEK_API void rbpeek_schedule_free(rbpeek_schedule *s);

/* ---------------------------------------------------------------------------
 * The sampler as the target's tracer: `ruby sample`'s fast path for a live
 * local process (tracer.c). The debugger detaches first; rbpeek_trace_start
 * then traces every thread of opt->pid from a thread of its own (ptrace
 * PTRACE_SEIZE) and runs the whole loop: let the target run until the next
 * sample time (rbpeek_schedule's rule, of mean interval_s), stop every thread
 * (PTRACE_INTERRUPT), take a snapshot with s and add it to p as
 * rbpeek_profile_add_snapshot does with opt, resume. The caller must not use
 * s or p until rbpeek_trace_wait says it has ended. It ends after
 * max_samples, after duration_s, on rbpeek_trace_cancel, when the target
 * exits or calls exec(), or when it receives a signal marked in
 * stop_signals (the signals the debugger would stop for). It then lets go of
 * the target, for the debugger to attach to again: running, or after a fault
 * stopped (a group stop) with the signal pending; a signal that was sent to
 * it is for the caller to send again once the debugger has attached (see
 * signal_pending). Signals marked
 * in pass_signals are delivered to the target as they arrive, the others
 * discarded (as a debugger's "handle SIG nopass" does).
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_trace rbpeek_trace;

typedef enum rbpeek_trace_end {
    RBPEEK_TRACE_RUNNING = 0,   /* not ended yet */
    RBPEEK_TRACE_DONE = 1,      /* max_samples or duration_s reached */
    RBPEEK_TRACE_CANCELLED = 2, /* rbpeek_trace_cancel */
    RBPEEK_TRACE_EXITED = 3,    /* the target exited: exit_code, or killed by signal */
    RBPEEK_TRACE_SIGNAL = 4,    /* signal arrived (a stop signal, or a job-control stop) */
    RBPEEK_TRACE_EXEC = 5,      /* the target called exec() */
    RBPEEK_TRACE_FAILED = 6     /* message says why */
} rbpeek_trace_end;

typedef struct rbpeek_trace_config {
    double interval_s;          /* mean time between samples */
    uint64_t max_samples;       /* 0: no limit */
    double duration_s;          /* 0: no limit */
    int max_frames;             /* 0: whole stacks */
    uint64_t seed;              /* of the sample schedule; 0: from the clock */
    unsigned char stop_signals[65]; /* [signo] nonzero: end sampling on it */
    unsigned char pass_signals[65]; /* [signo] nonzero: deliver it to the target */
    int stop_mode;              /* rbpeek_stop_mode */
    int native;                 /* nonzero: each stack with its native frames (--native; docs/native.md);
                                 * refused with RBPEEK_STOP_NONE: an unwind needs a thread that stays put */
    struct rbpeek_alloc_sites *alloc_sites; /* non-NULL (`ruby allocs --sites`): each sample goes to it
                                 * (rbpeek_alloc_sites_add_snapshot) instead of the profile as it is; only
                                 * the stopped GVL holders are unwound; needs native */
} rbpeek_trace_config;

/* What a sample stops (docs/sampling.md, "What a sample stops"). */
typedef enum rbpeek_stop_mode {
    /* Only the thread holding each ractor's GVL: a thread without it cannot
     * change its Ruby stack, so the others are read while they stay parked,
     * exactly. Every thread when the GVL is free or its holder unknown. */
    RBPEEK_STOP_GVL = 0,
    RBPEEK_STOP_ALL = 1,        /* every thread, every sample */
    /* Nothing: stacks are read while the target runs
     * (rbpeek_snapshot_take_running); torn ones are dropped and counted. */
    RBPEEK_STOP_NONE = 2,
} rbpeek_stop_mode;

typedef struct rbpeek_trace_stats {
    uint64_t samples;           /* stops made */
    uint64_t failed_samples;    /* stops where no snapshot could be taken */
    uint64_t failed_threads;    /* thread walks that failed (torn stacks): skipped */
    uint64_t filtered;          /* threads left out by opt */
    uint64_t tid_unknown;       /* on_cpu: threads judged by Ruby's status alone */
    uint64_t not_stopped;       /* threads that did not stop in time (sampled anyway) */
    double elapsed_s;           /* since the start of the loop */
    double stop_s, walk_s, resume_s; /* summed over the samples */
    int end;                    /* rbpeek_trace_end */
    int signal;                 /* SIGNAL: which; EXITED: the killing signal, or 0 */
    int exit_code;              /* EXITED by exit(): its status */
    int signal_pending;         /* SIGNAL: 1 = left pending in the stopped target (a
                                 * fault, or a job-control stop); 0 = taken from the
                                 * target: send it again once the debugger is back */
    char message[256];          /* FAILED: why; otherwise the last walk error, if any */
    uint64_t added_threads;     /* stacks added to the profile */
    uint64_t torn_threads;      /* STOP_NONE: stacks that changed while read, dropped */
    uint64_t full_stops;        /* samples that stopped every thread */
    uint64_t threads_stopped;   /* summed over the samples */
    double held_s;              /* summed time some thread of the target was held stopped */
    uint64_t retried_threads;   /* stacks walked again because they changed while read (torn ones included) */
    /* --native: how the threads' registers were had, summed over the samples */
    uint64_t native_held;       /* stopped for the sample already (the GVL holder, or every thread) */
    uint64_t native_peeked;     /* parked in a system call: its stack and instruction pointers read from
                                 * /proc, the thread left running (it did not run meanwhile) */
    uint64_t native_stopped;    /* stopped for its unwind alone, then resumed */
    uint64_t native_none;       /* none to be had (no TID, did not stop in time) */
    uint64_t native_unmerged;   /* native stacks added with their Ruby frames alone (not merged) */
    uint64_t gc[5];             /* stacks added with the GC at work on top, by rbpeek_gc_phase */
    /* The GVL holders as each sample found them (the GC runs on one): on a
     * CPU when asked to stop, so stopped at the sampled moment, a draw from
     * their CPU time; or preempted, and stopped where the scheduler took
     * them off their CPU, which is no such draw (tracer.c). The GC's share
     * of the CPU time is cpu_gc / cpu_samples. */
    uint64_t cpu_samples;       /* holders stopped while on a CPU */
    uint64_t cpu_gc;            /* ... with the GC at work on them */
    uint64_t cpu_waited;        /* holders that had been waiting for a CPU */
    uint64_t gvl_free;          /* allocation sites: samples at which every GVL was free (counted in
                                 * samples; nothing stopped: no thread was allocating) */
    uint64_t native_reused;     /* --native: stacks of threads parked since the sample before, whose
                                 * schedstat showed they had not run: that sample's machine frames
                                 * reused (not in native_peeked) */
    /* held_s runs from the stop's request: a thread on a CPU runs on until
     * it stops (50-150 us), one preempted until it gets a CPU again. This
     * runs from the moment the sampler had seen every stop it asked for:
     * the target was held stopped at least this long, at most held_s. */
    double held_seen_s;
    char unmerged_note[200];    /* the first native stack not merged: why (its note), or "" */
    uint64_t ruby_reused;       /* Ruby stacks of threads asleep since an earlier sample, whose schedstat
                                 * showed they had not run: that sample's walk reused */
} rbpeek_trace_stats;

/* Starts tracing and sampling; returns once every thread is traced (or
 * with an error on s, e.g. no permission to trace). */
RBPEEK_API rbpeek_status rbpeek_trace_start(rbpeek_session *s, rbpeek_profile *p, const rbpeek_sample_options *opt,
                                            const rbpeek_trace_config *cfg, rbpeek_trace **out);
/* Waits up to timeout_ms (0: not at all) for the end; 1 once ended. */
RBPEEK_API int rbpeek_trace_wait(rbpeek_trace *t, int timeout_ms);
RBPEEK_API void rbpeek_trace_cancel(rbpeek_trace *t);
/* Counts so far (end stays RBPEEK_TRACE_RUNNING until it has ended). */
RBPEEK_API void rbpeek_trace_get_stats(rbpeek_trace *t, rbpeek_trace_stats *out);
/* Cancels if still running, waits for the target to be let go, frees. */
RBPEEK_API void rbpeek_trace_free(rbpeek_trace *t);

/* ---------------------------------------------------------------------------
 * Allocation sites from allocator samples (`ruby allocs --sites`,
 * docs/allocations.md; alloc_sites.c). A sample whose native stack, between
 * its leaf and its first Ruby frame, is in the object allocator (or in a GC
 * step the allocator started) was taken at an allocation site: its Ruby
 * stack is added to the profile, its innermost Ruby frame counted as the
 * site. The other samples are counted and dropped. The GC's own counters
 * give the exact total, which the sites' shares then divide.
 * ------------------------------------------------------------------------- */

typedef struct rbpeek_alloc_sites rbpeek_alloc_sites;

RBPEEK_API rbpeek_alloc_sites *rbpeek_alloc_sites_new(void);
RBPEEK_API void rbpeek_alloc_sites_free(rbpeek_alloc_sites *a);

typedef struct rbpeek_alloc_sites_stats {
    uint64_t stacks;            /* native stacks looked at (threads with machine frames) */
    uint64_t allocator;         /* ... in the allocator, or a GC step under it: kept */
    uint64_t allocator_gc;      /* ... of which the GC was at work */
    uint64_t gc_elsewhere;      /* the GC at work, the allocator not below it (GC.start, malloc's GC) */
    uint64_t unmerged;          /* stacks whose Ruby frames could not be placed: not judged */
    uint64_t no_native;         /* threads with no machine frames (not the GVL holder, or not unwound) */
    uint64_t sites;             /* distinct sites (path, line, label) */
    uint64_t not_run;           /* live: the thread had not run since its previous sample (it waited
                                 * for a CPU): dropped, as it would repeat that sample */
    uint64_t typed;             /* kept samples whose site's frame says what class it allocates
                                 * (Class#new and the like: rbpeek_frame.instantiates) */
} rbpeek_alloc_sites_stats;

RBPEEK_API void rbpeek_alloc_sites_get_stats(const rbpeek_alloc_sites *a, rbpeek_alloc_sites_stats *out);

/* Judges each thread of snap (taken with native stacks) that opt selects:
 * an allocator sample's Ruby stack is added to p (count 1, root first, with
 * opt's thread frame) and its site counted. result may be NULL. Fails only
 * on bad arguments or out of memory. */
RBPEEK_API rbpeek_status rbpeek_alloc_sites_add_snapshot(rbpeek_alloc_sites *a, rbpeek_profile *p,
                                                         const rbpeek_snapshot *snap,
                                                         const rbpeek_sample_options *opt,
                                                         rbpeek_sample_result *result);

/* The sites of p (the profile a was given) as JSON, most samples first:
 * {"batches": B, "batched": N, "sites": [{"label", "path", "lineno", "kind",
 * "samples", "types", "batch_samples"}]}; a site is a stack's innermost Ruby
 * frame (a C method's: its caller's path and line); types: [{"class":
 * address, "samples"}] of its samples whose frame said the class it
 * allocates, most first (at most 64). batch_samples: the site's samples in
 * each of B consecutive batches of the first N kept samples in the order
 * they were taken (B: up to 20, of at least 10 samples each; 0 with fewer
 * than 20), from which their dispersion is measured (samples of one GC step
 * are not independent: docs/allocations.md). *out is malloc'd (rbpeek_free). */
RBPEEK_API rbpeek_status rbpeek_alloc_sites_json(const rbpeek_alloc_sites *a, const rbpeek_profile *p, char **out);

/* Wilson's score interval of a share: k of n samples (n may be an
 * effective number, k = share * n, neither need be whole), at the normal
 * quantile z (1.645: 90%); lo and hi in [0, 1]. n <= 0 gives [0, 1]. The
 * one place this interval is computed: `ruby allocs --sites`' text and JSON
 * and the sampling summary's GC share ask it through the binding, the SVG's
 * tooltips here (rbpeek_svg_options.ci_samples). */
RBPEEK_API void rbpeek_share_interval(double k, double n, double z, double *lo, double *hi);

/* Whether a native frame's symbol is one of the object allocator's
 * functions (the exported rb_*newobj_of family, and where .symtab names
 * them the static ones: newobj_of, newobj_slowpath_*...). */
RBPEEK_API int rbpeek_alloc_sites_is_allocator(const char *symbol);

/* Scales p's counts so that they sum to about total (each stack's count
 * times total / the profile's total, rounded; a stack is never scaled to
 * 0): the profile then counts estimated allocations, for its writers. A
 * total past 2^63 - 1 (no real count; a negative one through an unsigned
 * binding) is taken as 2^63 - 1, so that no sum wraps. */
RBPEEK_API rbpeek_status rbpeek_profile_scale_to(rbpeek_profile *p, uint64_t total);

#ifdef __cplusplus
}
#endif
#endif /* RBPEEK_PROFILE_H */
