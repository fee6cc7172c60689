/*
 * The sampler's per-thread step, shared by sampler.c and its unit tests:
 * one rbpeek_thread (as a snapshot holds it, or as a test builds it by hand)
 * becomes one profile stack, or is left out for a stated reason.
 */
#ifndef RBP_SAMPLER_H
#define RBP_SAMPLER_H

#include "rbpeek.h"
#include "base/strbuf.h"
#include "profile/profile.h"
#include "profile/schedstat.h"
#include "profile/thread_state.h"

/* What happened to one thread. */
typedef enum rbp_sample_fate {
    RBP_SAMPLE_ADDED = 0,
    RBP_SAMPLE_FAILED,      /* its walk failed: the stack may be torn, so it is skipped */
    RBP_SAMPLE_FILTERED,    /* left out by only_tid/only_pthread, on_cpu or drop_idle */
    RBP_SAMPLE_EMPTY,       /* no Ruby frames (a thread not started, or between calls) */
    RBP_SAMPLE_NOMEM,
} rbp_sample_fate;

/* Reusable buffers, so a sample does not malloc per frame. */
typedef struct rbp_sample_scratch {
    rbp_strbuf text;        /* the thread root frame's name, native frames' labels */
    size_t *offsets;        /* where each frame's label starts in text (SIZE_MAX: none) */
    rbp_frame_desc *frames; /* root first; strings borrowed from the snapshot */
    uint32_t *ids;          /* the profile's ids of frames */
    size_t cap;             /* entries of frames and ids */
    rbp_gvl_view gvl;       /* who held the GVL at this sample (the tracer sets it) */
    rbp_task_files files;   /* the threads' /proc files, kept open from sample to sample */
} rbp_sample_scratch;

void rbp_sample_scratch_free(rbp_sample_scratch *s);

/* The kernel TID of a thread: its native_tid, else looked up by pthread_t
 * in opt->tid_map; -1 when unknown. */
int64_t rbp_sample_thread_tid(const rbpeek_thread *t, const rbpeek_sample_options *opt);

/* Whether the thread counts as on CPU (see rbpeek.h, on_cpu). *unknown is
 * set when the kernel could not be asked and Ruby's status alone decided. */
bool rbp_sample_on_cpu(const rbpeek_thread *t, const rbpeek_sample_options *opt, bool *unknown);

/* rbpeek_profile_add_snapshot with the caller's scratch, which a caller
 * adding sample after sample (the tracer) keeps, so that a warm sample
 * allocates nothing here. */
rbpeek_status rbp_sample_add_snapshot(rbpeek_profile *p, const rbpeek_snapshot *snap,
                                      const rbpeek_sample_options *opt, rbpeek_sample_result *result,
                                      rbp_sample_scratch *scratch);

/* Adds t's stack to p (count 1) unless it is filtered out or failed: its
 * native stack ns merged with its frames when given (and merged), else
 * its Ruby frames; the GC's frame on top when the GC runs on it. *gc gets
 * the GC phase of the stack added (RBPEEK_GC_NONE: none), *unmerged
 * whether ns could not be used. */
rbp_sample_fate rbp_sample_add_stack(rbpeek_profile *p, const rbpeek_thread *t, const rbpeek_native_stack *ns,
                                     const rbpeek_sample_options *opt, rbp_sample_scratch *scratch,
                                     bool *tid_unknown, int32_t *gc, bool *unmerged);
/* The same for t's Ruby frames alone. */
rbp_sample_fate rbp_sample_add_thread(rbpeek_profile *p, const rbpeek_thread *t,
                                      const rbpeek_sample_options *opt, rbp_sample_scratch *scratch,
                                      bool *tid_unknown);

#endif
