/*
 * Ruby stacks kept from one sample to the next (stack_keep.c): a thread
 * that has not run since an earlier sample has the stack that sample read.
 */
#ifndef RBP_VM_STACK_KEEP_H
#define RBP_VM_STACK_KEEP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "rbpeek.h"

#define RBP_STACK_KEEP_THREADS 256
#define RBP_STACK_KEEP_FRAMES 1024

typedef struct rbp_stack_keep rbp_stack_keep;

rbp_stack_keep *rbp_stack_keep_new(void);
void rbp_stack_keep_free(rbp_stack_keep *k);

/* What a sample does with a thread, given its stamp (its count of runs on
 * a CPU and its time there, read before anything of it is). */
typedef enum rbp_keep_verdict {
    RBP_KEEP_NEW,      /* not known under this stamp: walk it, and tell whether it sleeps (rbp_stack_keep_note) */
    RBP_KEEP_WALK,     /* slept under this stamp at a sample before: walk it and keep the walk (rbp_stack_keep_put) */
    RBP_KEEP_HIT,      /* its kept stack: copied into out */
} rbp_keep_verdict;

/* The verdict for thread th (kernel TID tid, running execution context
 * ec) stamped st; on RBP_KEEP_HIT, out's frames (in a, with their
 * strings), truncated flag, control-frame indices (*origin, when origin is
 * given) and *saved_line (when given) are those kept. A stamp that moved
 * drops what was kept. NULL k: always RBP_KEEP_NEW. */
rbp_keep_verdict rbp_stack_keep_get(rbp_stack_keep *k, uint64_t th, int64_t tid, uint64_t ec, const uint64_t st[2],
                                    rbp_arena *a, rbpeek_thread *out, uint32_t **origin, int32_t *saved_line);
/* After RBP_KEEP_NEW: the thread's stamp st, and whether it was asleep in
 * the kernel when asked after the stamp was read. */
void rbp_stack_keep_note(rbp_stack_keep *k, uint64_t th, int64_t tid, uint64_t ec, const uint64_t st[2],
                         bool asleep);
/* After RBP_KEEP_WALK: the walk t (whole: no error, not torn) to keep,
 * with its origin (t->nframes indices, or NULL) and saved line. */
void rbp_stack_keep_put(rbp_stack_keep *k, uint64_t th, const rbpeek_thread *t, const uint32_t *origin,
                        int32_t saved_line);
/* At the end of a sample: a thread not looked up during it is dropped. */
void rbp_stack_keep_sweep(rbp_stack_keep *k);
/* Stacks given from the keep so far (RBP_KEEP_HIT). */
uint64_t rbp_stack_keep_hits(const rbp_stack_keep *k);

#endif
