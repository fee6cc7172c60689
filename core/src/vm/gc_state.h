/*
 * Whether the GC is at work and in which phase, read from the objspace
 * (gc.c's rb_objspace_t, reached from the VM): flags.during_gc and
 * flags.mode, the enum gc_mode none/marking/sweeping/compacting. One
 * reader for `ruby gc` (heap/gc_stat.c) and for the frames that name the
 * GC in stacks, `[GC: marking]`... (native stacks and `ruby sample`).
 */
#ifndef RBP_VM_GC_STATE_H
#define RBP_VM_GC_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "context/context.h"

/* gc.c's enum gc_mode (2.7 has no compacting mode: its compaction is a
 * separate GC.compact, which marks and sweeps like any GC). */
enum { RBP_GC_MODE_NONE = 0, RBP_GC_MODE_MARKING = 1, RBP_GC_MODE_SWEEPING = 2, RBP_GC_MODE_COMPACTING = 3 };

typedef struct rbp_gc_state {
    uint64_t objspace;
    uint64_t during_gc;     /* flags.during_gc: a GC step is running now */
    uint64_t mode;          /* flags.mode: RBP_GC_MODE_*; between the steps of an incremental
                             * marking or a lazy sweep it stays marking or sweeping */
} rbp_gc_state;

/* True when the layout places the objspace and its two flags. */
bool rbp_gc_state_known(rbpeek_session *s);
/* Reads the objspace pointer (checked to lie in the heap) and the flags;
 * false when one cannot be read or the layout lacks them. */
bool rbp_gc_state_read(rbpeek_session *s, rbp_gc_state *out);

/* The thread the GC runs on, when it runs (during_gc): the GVL holder of
 * a single-ractor VM, whose thread triggered it. Returns its rb_thread_t,
 * or 0 when the GC is not running or the thread cannot be told (several
 * ractors, or the holder cannot be read). */
uint64_t rbp_gc_thread(rbpeek_session *s, const rbp_gc_state *g);

/* RBPEEK_GC_* (rbpeek.h) for a running GC's phase. */
int32_t rbp_gc_phase(const rbp_gc_state *g);

#endif
