/*
 * The VM/thread locator: enumerates every Ruby thread of every ractor, in
 * the order Thread.list reports them, and reads the per-thread facts that
 * do not need a stack walk (name, status, native ids, execution context).
 */
#ifndef RBP_THREADS_H
#define RBP_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "context/context.h"

#define RBP_MAX_THREADS 100000

typedef struct rbp_thread_raw {
    uint64_t th;            /* rb_thread_t */
    uint64_t self;          /* Thread object */
    uint64_t ec;            /* current execution context (fiber-aware) */
    uint64_t ractor;
    int ractor_index;
    int is_main;
    int status;
    int to_kill;
    int64_t native_tid;     /* Ruby's own record, -1 if none (the snapshot puts the kernel's beside it) */
    uint64_t pthread_id;
    uint64_t name;          /* VALUE */
} rbp_thread_raw;

/* Collects the threads into a malloc'd array. On a broken list it returns
 * what it could read and sets *warning to a static description. */
rbpeek_status rbp_threads_collect(rbpeek_session *s, rbp_thread_raw **out, size_t *n, const char **warning);

/* Reads one thread's facts (th a rb_thread_t); ractor, ractor_index and
 * is_main are left for the list walk to set. */
void rbp_thread_read(rbpeek_session *s, uint64_t th, rbp_thread_raw *out);

/* The thread that holds each ractor's GVL (the running thread of its
 * scheduler), as Ruby records it: vm->gvl.owner before 3.0,
 * ractor->threads.gvl.owner in 3.0 and 3.1, ractor->threads.sched.running
 * from 3.2 (3.3+'s M:N scheduler included: a ractor runs one Ruby thread at
 * a time, on whichever native thread its nt names). */
typedef struct rbp_gvl_holder {
    uint64_t th;            /* rb_thread_t, 0 if the ractor's GVL is free */
    int64_t native_tid;     /* kernel TID of the native thread running it (kernel_tid.c); -1 if unknown */
    uint64_t pthread_id;
} rbp_gvl_holder;

/* Fills out[0..*n) with one entry per ractor (at most max). False when this
 * Ruby's layout names no GVL owner, a read failed, or there are more than
 * max ractors: the caller cannot know who may run Ruby code. */
bool rbp_gvl_holders(rbpeek_session *s, rbp_gvl_holder *out, size_t max, size_t *n);

/* Whether the thread whose current execution context is ec holds its
 * ractor's GVL (is the one that may be running Ruby code, or JIT code, right
 * now): 1 yes, 0 no, -1 not known (no GVL owner in this layout, a read
 * failed, more than 64 ractors). */
int rbp_ec_holds_gvl(rbpeek_session *s, uint64_t ec);

/* The threads waiting for a GVL, as Ruby's scheduler queues them: a thread
 * that asks for a held GVL links itself into a queue until it is handed
 * the GVL (thread_pthread.c: gvl_acquire_common's vm->gvl.waitq before 3.0,
 * the ractor's threads.gvl.waitq in 3.0 and 3.1; from 3.2 the ractor's
 * thread scheduler's readyq, M:N threads included). Whatever Ruby's status
 * says: a thread back from a blocking region (IO, an extension's work) or
 * from a sleep waits in the queue while its status is still "stopped".
 * Fills out[0..*n) with their rb_thread_t, at most max. False when this
 * Ruby's layout names no queue, or a queue loops, is cut or holds more
 * than max: the caller cannot tell the waiters. */
bool rbp_gvl_waiters(rbpeek_session *s, uint64_t *out, size_t max, size_t *n);

/* Allocations not yet in the heaps' counters: from 4.0 each Ractor counts
 * what it allocates in its newobj cache, one count per heap, and adds them
 * to the heap's total_allocated_objects at the next GC. Adds every Ractor's
 * counts to per_heap[0..nheaps) and returns true; true and nothing added
 * where the Ruby has no such counts (before 4.0); false when a Ractor or its
 * cache cannot be read, or a count is no count (the totals would be short). */
bool rbp_ractor_cache_counts(rbpeek_session *s, uint64_t *per_heap, size_t nheaps);

#endif
