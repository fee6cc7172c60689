/*
 * Native stacks merged with Ruby frames (native_merge.c), and how a
 * snapshot gets them (native_stack.c): registers, the unwinder, the merge.
 */
#ifndef RBP_VM_NATIVE_MERGE_H
#define RBP_VM_NATIVE_MERGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "context/context.h"
#include "native/native.h"

/* What the merge is given for one thread. */
typedef struct rbp_merge_input {
    const rbpeek_thread *thread;        /* its Ruby frames, innermost first */
    const uint32_t *origin;             /* per Ruby frame: its control frame (frames.c) */
    uint64_t ec;                        /* the execution context they were read from */
    const rbpeek_native_frame *native;  /* the machine frames, innermost first (in the arena) */
    const rbp_native_extra *extra;      /* and what else is known of each */
    size_t nnative;
    const char *cut;                    /* "" when the machine stack was unwound to its end */
} rbp_merge_input;

/* Fills out (frames allocated in a) with in's frames merged: each Ruby
 * frame of a VM invocation just above the native frame of that invocation
 * (rb_vm_exec), each C method's frame at its C function's native frame.
 * When the Ruby stack's VM entries (control frames flagged FINISH) and the
 * native stack's do not pair up, nothing is guessed: out->merged is 0 and
 * out->note says why. Never fails but for memory: false then. */
bool rbp_native_merge(rbpeek_session *s, rbp_arena *a, const rbp_merge_input *in, rbpeek_native_stack *out);

/* native_jit.c: YJIT's code regions that the control frames of ec point
 * into (their jit_return), added to the session's and given to the
 * unwinder; forgotten when the regions change. */
void rbp_native_jit_find(rbpeek_session *s, uint64_t ec);
void rbp_native_jit_forget(rbpeek_session *s);

/* native_stack.c: makes (or refreshes) the session's unwinder. */
rbpeek_status rbp_native_ready(rbpeek_session *s);

/* A thread's registers, from the session's source (a debugger's
 * callback, a core's notes, a ptrace stop of this thread's caller); the
 * mask of those known, 0 (why set) when none. */
rbp_regmask rbp_native_thread_regs(rbpeek_session *s, int64_t tid, uint64_t regs[RBP_REGS_MAX], char *why,
                                   size_t whylen);

/* Where a sampler's threads' registers come from (the tracer: ptrace and
 * /proc), thread by thread. begin gives thread t's registers (a mask of
 * those known; 0, why set, for none): held, t is stopped by the caller
 * (the GVL holder); else the source may give what it can read without
 * stopping the thread (attempt 0) or stop it (attempt 1). end follows the
 * unwind (cut: it ended before the stack's end; for a held thread, whose
 * unwind always stands, it follows begin, with cut false): true when it stands (the
 * thread did not run meanwhile, or was stopped; the source lets a thread it
 * stopped go), false to try again (the source may also want to when an
 * unwind from the few registers it could read was cut). */
typedef struct rbp_native_source {
    rbp_regmask (*begin)(void *ctx, const rbpeek_thread *t, bool held, int attempt, uint64_t regs[RBP_REGS_MAX],
                         char *why, size_t whylen);
    bool (*end)(void *ctx, const rbpeek_thread *t, bool held, int attempt, bool cut);
    /* Optional (NULL, or cache NULL: every thread unwound at every sample):
     * for a thread not held that the source would read without stopping
     * it, its key and stamp, the proof that it has not run since an earlier
     * stamp (false: none). Asked before begin: the frames of an unwind
     * that stood from registers begin read from a sleep (RBP_NATIVE_PEEKED)
     * are kept in cache under the stamp, and while a later stamp is the
     * same (the thread never ran meanwhile) they are used instead of
     * begin, an unwind and end. */
    bool (*stamp)(void *ctx, const rbpeek_thread *t, int64_t *key, uint64_t stamp[2]);
    rbp_frame_cache *cache;
    void *ctx;
    uint32_t flags;                     /* RBPEEK_NATIVE_LINES */
} rbp_native_source;

/* In begin's answer, beside the registers': they were read while the
 * thread slept in the kernel, not stopped (its stack stays as it is while
 * it sleeps). */
#define RBP_NATIVE_PEEKED ((rbp_regmask)1 << 63)

/* A sampled thread's native stack from src, merged with t's frames into
 * out (in a; strings borrowed from the unwinder: the snapshot must be
 * freed before the session's regions change). */
bool rbp_native_stack_sampled(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                              uint64_t ec, const rbp_native_source *src, bool held, rbpeek_native_stack *out);

/* A held thread's machine stack copied while it is stopped, to be unwound
 * after it is resumed (rbp_native_stack_hold, rbp_native_stack_held). */
typedef struct rbp_native_held {
    uint64_t regs[RBP_REGS_MAX];
    rbp_regmask known;
    uint64_t lo;                        /* the copy of [lo, lo + len): from below the */
    size_t len;                         /* stack pointer to the top of its mapping; */
    uint8_t *stack;                     /* NULL: none (unwound at once) */
} rbp_native_held;

/* For a thread the sampler holds stopped (the GVL holder): its registers
 * from src and a copy of its used machine stack (h->stack), so that the
 * unwind, the larger part of the work, waits until it runs again. When no
 * copy can be made (its stack's mapping unknown, or deeper than a copy is
 * worth), it is unwound and merged into out at once. False only when out
 * of memory. */
bool rbp_native_stack_hold(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                           uint64_t ec, const rbp_native_source *src, rbp_native_held *h,
                           rbpeek_native_stack *out);
/* After the thread was resumed: h's copy unwound (reads of the stack come
 * from the copy) and merged with t's frames into out; h's copy is freed.
 * Also frees it when out is NULL (a sample given up). */
bool rbp_native_stack_held(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                           uint64_t ec, uint32_t flags, rbp_native_held *h, rbpeek_native_stack *out);

/* One thread's native stack, unwound from its registers (tid) and merged
 * with t's frames, into out (allocated in a). */
bool rbp_native_stack_build(rbpeek_session *s, rbp_arena *a, const rbpeek_thread *t, const uint32_t *origin,
                            uint64_t ec, int64_t tid, uint32_t flags, rbpeek_native_stack *out);

#endif
