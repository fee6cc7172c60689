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

/* Walks the threads whose rb_thread_t is in held[0..nheld) (stopped, each
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
 * also on failure. */
rbpeek_status rbp_snapshot_take_split(rbpeek_session *s, size_t max_frames, const uint64_t *held, size_t nheld,
                                      void (*release)(void *), void *ctx, rbpeek_snapshot **out);

#endif
