/*
 * The frame walker's internal interface: reading a thread's raw control
 * frames, and the walk (frames.c) that turns them into the frames Ruby
 * reports, which the snapshot (snapshot.c) runs for each thread. Other
 * modules (locks/) look at the raw frames directly, e.g. for a blocking
 * call's receiver. One reader means one set of stack-bound checks.
 */
#ifndef RBP_FRAMES_H
#define RBP_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "context/context.h"

/* One control frame, as stored. */
typedef struct rbp_cframe {
    uint64_t pc, iseq, self, ep;
} rbp_cframe;

typedef struct rbp_cframes {
    rbp_cframe *frames;   /* innermost first; in the session's scratch room */
    size_t n;
    uint64_t vm_stack;    /* the VM stack's start ... */
    uint64_t cfp;         /* ... and the current frame: values live in between */
    rbp_scratch *room;    /* where frames lives */
    /* The innermost frame's members that say whether a JIT runs it or is
     * pushing it (frames.c): 0 where the release has none. */
    uint64_t top_sp, top_bp, top_jit_return;
} rbp_cframes;

/* Reads at most max control frames of the execution context ec in one read,
 * after checking the VM stack's bounds. Returns NULL on success (possibly
 * with n == 0: a thread with no frames yet), or why it could not; on a
 * partly unreadable frame array the readable innermost frames are kept and
 * the reason is still returned. The frames live in the session's scratch
 * room: one rbp_cframes at a time, ended with rbp_cframes_free. */
const char *rbp_cframes_read(rbpeek_session *s, uint64_t ec, size_t max, rbp_cframes *out);
void rbp_cframes_free(rbp_cframes *cf);

/* A frame without an iseq that Ruby reports as a C method frame (before
 * 3.3 Ruby also checks the frame magic; from 3.3 every such frame is one). */
bool rbp_cframe_is_cfunc(rbpeek_session *s, const rbp_cframe *f);

/* Walks the execution context ec: fills out->frames (at most max_frames,
 * allocated in a) with what Thread#backtrace_locations would report.
 * Returns NULL, or why the walk stopped early (the frames read so far are
 * kept). raw_budget, when given, is the number of control frames that the
 * walks sharing it (a snapshot's threads) may still read; the walk takes
 * what it reads from it, and when it runs out the walk is cut, marked
 * truncated and says so. */
const char *rbp_frames_walk(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a, rbpeek_thread *out,
                            size_t *raw_budget);

/* A stack's change markers, for walking a running thread (snapshot.c): its
 * current frame pointer, the number of control frames, and a hash of the
 * iseq and saved pc of each (the innermost frame's iseq only: the VM writes
 * the running frame's pc back on every instruction). */
typedef struct rbp_stack_mark {
    uint64_t cfp, nframes, hash;
} rbp_stack_mark;

void rbp_stack_mark_of(const rbp_cframes *cf, rbp_stack_mark *m);

/* rbp_frames_walk, also giving the markers of the control frames it read. */
const char *rbp_frames_walk_marked(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a,
                                   rbpeek_thread *out, size_t *raw_budget, rbp_stack_mark *mark);

/* rbp_frames_walk_marked, also giving (in a) for each frame reported the
 * index of the control frame it comes from among those rbp_cframes_read
 * reads (innermost 0): the native merge (native_merge.c) places frames
 * by their control frames' flags. *origin is NULL when no frame is.
 * *saved_line (when given): where the first frame's line is not known
 * because JIT code runs it (lineno_unknown), the line of the pc the VM
 * holds for it, else 0. That pc is exact only where the JIT saved it, as
 * YJIT does before every call that may allocate (allocation sites:
 * profile/alloc_sites.c); elsewhere it is stale. */
const char *rbp_frames_walk_origin(rbpeek_session *s, uint64_t ec, size_t max_frames, rbp_arena *a,
                                   rbpeek_thread *out, size_t *raw_budget, rbp_stack_mark *mark, uint32_t **origin,
                                   int32_t *saved_line);

#endif
