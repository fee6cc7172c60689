/*
 * The kernel's thread id of a Ruby thread (kernel_tid.c). Ruby's own record
 * is not enough: Ruby before 3.1 keeps none, and 3.1 and 3.2 keep the
 * parent's in a forked child's main thread (the thread that called fork()
 * keeps its rb_native_thread as it was), so a worker of a pre-forking
 * server says it is its master. The TID the kernel gave a native thread is
 * what glibc keeps in its thread descriptor (struct pthread's tid field, at
 * the offset glibc publishes for libthread_db as _thread_db_pthread_tid),
 * and it counts only once the kernel's own list of the target's threads
 * has it: /proc/PID/task for a live process read directly, else the list
 * the caller gave (a debugger's threads, a core's NT_PRSTATUS notes).
 */
#ifndef RBP_KERNEL_TID_H
#define RBP_KERNEL_TID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "context/context.h"

/* The kernel TID of the native thread whose pthread_t is pthread_id, which
 * Ruby says is ruby_tid (-1: Ruby keeps none): glibc's descriptor's value
 * when the kernel lists it; else Ruby's value when the kernel lists it (or
 * when there is no list to ask); else -1, never a TID the target does not
 * have. */
int64_t rbp_kernel_tid(rbpeek_session *s, uint64_t pthread_id, int64_t ruby_tid);

/* Finds the descriptor's tid offset when glibc does not publish it: among
 * the words of the main thread's descriptor (main_pthread) that hold a TID
 * the kernel lists, the one under which most other threads' descriptors
 * (others[0..n)) also hold distinct listed TIDs. Does nothing once an
 * offset is known; tried again at most every few calls. */
void rbp_kernel_tid_calibrate(rbpeek_session *s, uint64_t main_pthread, const uint64_t *others, size_t n);

/* Whether tid is one of the target's threads, as the kernel says (see the
 * top); true when there is nothing to ask. */
bool rbp_kernel_tid_listed(rbpeek_session *s, int64_t tid);

/* The caller's list of the target's TIDs (rbpeek_session_set_kernel_tids):
 * replaces the one before; n 0 drops it. False on OOM. */
bool rbp_kernel_tids_set(rbpeek_session *s, const int64_t *tids, size_t n);

/* rbpeek_snapshot_resolve_tids on the snapshot's threads[0..n): the
 * (pthread_t, TID) pairs of those whose TID is known, checked against
 * known_tids when given (nknown > 0), else against the live pid's list. */
rbpeek_status rbp_kernel_tid_pairs(rbpeek_session *s, const rbpeek_thread *threads, size_t n,
                                   const int64_t *known_tids, size_t nknown, int pid, uint64_t *pairs,
                                   size_t max_pairs, size_t *npairs);

/* Frees what the session holds for these (session.c, at close). */
void rbp_kernel_tids_free(rbpeek_session *s);

#endif
