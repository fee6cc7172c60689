/*
 * What the files that collect the threads-and-locks model from the target
 * share (collect.c, sync.c, waits.c, locks.c): the bounds on what is read,
 * the few fixed layouts, small helpers, and the readers each file lends the
 * next. The model itself, which the verdicts (locks_json.c) read too, is
 * locks_model.h.
 */
#ifndef RBP_LOCKS_COLLECT_H
#define RBP_LOCKS_COLLECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addrmap.h"
#include "base/walkguard.h"
#include "context/context.h"
#include "locks/locks_model.h"
#include "vm/robject.h"

#define MAX_RAW_FRAMES 512      /* control frames read per thread */
#define CLASSIFY_DEPTH 3        /* innermost frames that can say what a thread waits in */
#define MAX_LIST 100000         /* bound on every list walk */
#define MAX_STACK_WORDS 65536   /* bound on the VM stack words scanned per thread */
/* Bounds on the whole analysis, whatever the number of threads: the walks
 * are pairwise (every thread's join list and held Mutexes, every wait
 * queue; every thread's stack for Mutex objects), so per-list bounds alone
 * would let n damaged lists cost n * MAX_LIST reads. A real process needs
 * a small fraction of each; when one runs out the analysis says it was cut. */
#define LK_LIST_BUDGET 1000000
#define LK_STACK_WORDS_BUDGET (UINT64_C(4) << 20)

enum { FIBER_TERMINATED = 3 };

/* struct rb_monitor of ext/monitor/monitor.c, identical from 2.7 to 3.4:
 * { long count; VALUE owner; VALUE mutex; }. It lives in an extension, not
 * in libruby's DWARF, so its (trivial) layout is fixed here and every value
 * read from it is validated. */
#define MONITOR_COUNT_OFF 0
#define MONITOR_MUTEX_OFF 16

/* --- collect.c: small helpers ---------------------------------------------------- */

/* Thread and Mutex indexes are kept in addrmaps as index + 1. */
static inline void *lk_idx_val(size_t i) { return (void *)(uintptr_t)(i + 1); }
static inline long lk_idx_get(const rbp_addrmap *m, uint64_t key)
{
    void *v = key ? rbp_addrmap_get(m, key) : NULL;
    return v ? (long)((uintptr_t)v - 1) : -1;
}

static inline bool lk_read_u64_at(lk_ctx *c, uint64_t base, rbp_field_id id, uint64_t *out)
{
    *out = 0;
    return base && rbp_read_field(c->s, base, id, out);
}

/* Adds a note (once) to the document's list of what could not be told. */
void lk_note(lk_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A step of a walk over a target list (keeping_mutexes, a join list, a
 * wait queue): what the shared guard says, and when it says stop, a note
 * that what (e.g. "a thread's join list") was cut and the result is
 * partial. The guard is made with lk_guard, which draws on the analysis'
 * list budget. */
static inline rbp_walkguard lk_guard(lk_ctx *c) { return rbp_walkguard_start(MAX_LIST, &c->list_budget); }
bool lk_list_step(lk_ctx *c, rbp_walkguard *g, uint64_t node, const char *what);
/* True if the layout has every listed field (b may be RBP_L_COUNT);
 * otherwise notes what is unknown on this Ruby and why. */
bool lk_need(lk_ctx *c, const char *what, rbp_field_id a, rbp_field_id b);

/* --- sync.c: synchronization objects ------------------------------------------- */

/* What kind of object a frame's receiver is; *data is its C struct (rb_mutex_t,
 * the queue, the Monitor...) for typed data. */
recv_kind lk_receiver_kind(lk_ctx *c, uint64_t v, uint64_t *data);
/* The Mutex object's rb_mutex_t, or 0 if v is not a Mutex. */
uint64_t lk_mutex_data_of(lk_ctx *c, uint64_t v);
/* Does the wait queue at head hold a sync_waiter for thread th? Also gives
 * the number of waiters. Returns 1/0, or -1 if the list could not be walked. */
int lk_waitq_has(lk_ctx *c, uint64_t head, uint64_t th, long *count);
void lk_waitq_free(void *p);
/* The Mutex table: adds (or finds) the Mutex whose rb_mutex_t is data and
 * returns its index, -1 when out of memory; records its object once found
 * (from says how); reads its owner. */
long lk_mutex_add(lk_ctx *c, uint64_t data);
void lk_mutex_set_value(lk_ctx *c, long i, uint64_t value, const char *from);
void lk_mutex_read_owner(lk_ctx *c, lk_mutex *m);

/* --- waits.c: per thread ------------------------------------------------------------ */

void lk_read_thread(lk_ctx *c, size_t i);
void lk_walk_keeping(lk_ctx *c, size_t i);
void lk_walk_join_list(lk_ctx *c, size_t i);
void lk_classify(lk_ctx *c, size_t i);

#endif
