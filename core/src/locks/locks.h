/*
 * Threads and locks: for every Ruby thread of a snapshot, what it is
 * waiting on (a Mutex and who owns it, a Queue, a ConditionVariable, a
 * Thread#join and its target, an IO and its fd, a sleep, Thread.stop),
 * which Mutexes it holds and whether it holds the GVL; then the waits-for
 * graph over Mutex and join waits, its cycles (deadlocks), the threads
 * waiting on what no live thread can release (a Mutex whose owning fiber
 * has finished), and the threads stuck behind either.
 *
 * Facts come from the interpreter's own records where it keeps them
 * (th->locking_mutex, th->keeping_mutexes, th->join_list, each Mutex's
 * owner and wait queue, the GVL owner) and, for waits Ruby does not record
 * on the thread (which Queue, ConditionVariable or IO), from the receiver
 * of the thread's innermost blocking method frame, confirmed against that
 * object's own wait queue where it has one. The result is rendered as JSON
 * (schema in docs/threads-and-locks.md); the debugger plugins turn it into
 * text, since only they know the debugger's thread numbers.
 */
#ifndef RBP_LOCKS_H
#define RBP_LOCKS_H

#include "context/context.h"

/* Analyses the threads of snap (taken from s and not invalidated since) and
 * returns a malloc'd JSON document in *out. */
rbpeek_status rbp_locks_json(rbpeek_session *s, const rbpeek_snapshot *snap, char **out);

#endif
