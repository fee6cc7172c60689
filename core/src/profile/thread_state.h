/*
 * Thread states in samples (rbpeek_thread_state): what one thread was
 * doing when a sample stopped it, and the profile's tally of them per
 * thread (rbpeek_thread_tally), which the summary of `ruby sample` and
 * `rbpeek top` turn into shares of running, GVL wait, blocked and GC.
 */
#ifndef RBP_THREAD_STATE_H
#define RBP_THREAD_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rbpeek.h"
#include "profile/schedstat.h"

#define RBP_GVL_VIEW_MAX 8

/* Who held the GVL at the sample, as the caller knows it (the tracer reads
 * it from the stopped target; a caller that does not know leaves known
 * false, and the kernel alone decides). Whether the GC runs is the
 * snapshot's word on each thread (rbpeek_thread.gc, vm/gc_state.c). */
typedef struct rbp_gvl_view {
    bool known;
    size_t n;
    uint64_t th[RBP_GVL_VIEW_MAX];  /* rb_thread_t of each ractor's holder */
} rbp_gvl_view;

/* The system call a thread of a live process is blocked in, as
 * /proc/PID/task/TID/syscall says: its number; -1 running user code (or on
 * a CPU); -2 cannot tell (no such thread, no permission, no pid). */
long rbp_thread_syscall(rbp_task_files *c, int pid, int64_t tid);

/* Whether t's state needs the kernel's word (rbp_thread_syscall). */
bool rbp_thread_state_asks_kernel(const rbpeek_thread *t);

/* The state of thread t (tid its kernel TID or -1; syscall as
 * rbp_thread_syscall gave it for t, or -2). */
rbpeek_thread_state rbp_thread_state_of(const rbpeek_thread *t, const rbp_gvl_view *gvl, long syscall);

/* Whether t (of process pid, kernel TID tid) is BLOCKED: a thread that is
 * not runnable, which needs no view of the GVL (the kernel is asked when
 * Ruby's status leaves it open). For work a blocked thread would not need
 * when idle threads are dropped (its native stack). */
bool rbp_thread_state_blocked(rbp_task_files *c, const rbpeek_thread *t, int pid, int64_t tid);

/* Counts one sample of thread t in state st in p's tally (pid: the
 * process); *slot is its entry for rbp_tally_recorded (SIZE_MAX past the
 * tally's cap). False when out of memory. */
bool rbp_tally_add(rbpeek_profile *p, int64_t pid, const rbpeek_thread *t, int64_t tid, rbpeek_thread_state st,
                   size_t *slot);

/* Counts the sample just tallied in slot, in state st, as recorded: its
 * stack went into the profile. */
void rbp_tally_recorded(rbpeek_profile *p, size_t slot, rbpeek_thread_state st);

/* Adds src's tally to dst's (rbpeek_profile_merge). */
rbpeek_status rbp_tally_merge(rbpeek_profile *dst, const rbpeek_profile *src);

#endif
