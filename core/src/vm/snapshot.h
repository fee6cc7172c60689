/*
 * The snapshot's internal entry for the sampler (snapshot.c; the public
 * rbpeek_snapshot_* API is in rbpeek.h): a snapshot of a target of which
 * only some threads are stopped.
 */
#ifndef RBP_SNAPSHOT_H
#define RBP_SNAPSHOT_H

#include <stddef.h>
#include <stdint.h>

#include "context/context.h"
#include "vm/native_merge.h"
#include "vm/stack_keep.h"

/* What a stop callback of rbp_snapshot_take_split did: stopped the threads
 * in held[0..*nheld), or every thread; negative: failed (nothing stopped). */
#define RBP_SPLIT_HELD 0
#define RBP_SPLIT_ALL 1

/* How rbp_snapshot_take_split takes its snapshot (each member below). */
typedef struct rbp_snapshot_split {
    const uint64_t *held;       /* the stopped threads' rb_thread_t, *nheld of them; NULL: every thread stopped */
    const size_t *nheld;
    int (*stop)(void *ctx);     /* optional: stops the target once the thread list is read */
    void (*release)(void *ctx); /* optional: resumes it; called exactly once */
    void *ctx;
    const rbp_native_source *native; /* optional: native stacks too, registers from here */
    /* Optional: the Ruby stacks of threads not held, kept from sample to
     * sample (stack_keep.c) with the caller's proof that a thread has not
     * run: stamp gives its runs on a CPU and its time there now (false:
     * none), asleep whether it sleeps in the kernel now. */
    rbp_stack_keep *keep;
    bool (*stamp)(void *ctx, int64_t tid, uint64_t st[2]);
    bool (*asleep)(void *ctx, int64_t tid);
} rbp_snapshot_split;

/* Walks the threads whose rb_thread_t is in held[0..*nheld) (stopped, each
 * holding its ractor's GVL) as rbpeek_snapshot_take does, together with the
 * thread list; then calls release(ctx), for the caller to resume them; then
 * walks the other threads as rbpeek_snapshot_take_running does (each checked
 * against a direct read of its stack's markers; torn ones marked). With
 * held NULL every thread is stopped: all are walked, then release is
 * called; with nheld 0 none is (--nonblocking). Parked
 * threads cannot change their stacks while a held thread keeps the GVL, so
 * the pages read before release (the caller's prefetch) show them as they
 * were at the stop; the check catches one that took the GVL after release
 * and changed its stack before it was read. release is called exactly once,
 * also on failure.
 *
 * stop (optional): the caller stops the target only once the thread list
 * is read (from pages it read while the target ran: reading the list is
 * most of what a stopped holder would otherwise wait for), by calling
 * stop(ctx) then, which fills held[0..*nheld) and returns RBP_SPLIT_HELD;
 * or RBP_SPLIT_ALL if it stopped every thread (the list is read again, and
 * all are walked as stopped), or a negative value to give up. The held
 * threads' own facts and stacks are read strictly (rbp_mem_set_strict):
 * from pages read after the caller's rbp_mem_fence.
 *
 * native (optional): each thread's native stack too (rbpeek_snapshot_native),
 * registers from native: the held threads' registers and used machine
 * stacks copied before release and unwound from the copies after it (a
 * stack deeper than a copy is worth is unwound before), the others'
 * after their walk. */
rbpeek_status rbp_snapshot_take_split(rbpeek_session *s, size_t max_frames, const rbp_snapshot_split *how,
                                      rbpeek_snapshot **out);

/* Thread index's saved line (rbp_frames_walk_origin), read while the
 * thread was stopped: 0 where its first frame's line is known, or was not
 * walked, or the snapshot keeps no control frames (only native ones do). */
int32_t rbp_snapshot_saved_line(const rbpeek_snapshot *snap, size_t index);

#endif
