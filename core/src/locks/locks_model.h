/*
 * The model shared by the threads-and-locks analysis (locks.c, which reads
 * the target and fills it in) and its verdicts and JSON rendering
 * (locks_json.c, which builds the waits-for graph and writes the document):
 * one record per thread, one per Mutex, one per GVL. Private to core/src.
 */
#ifndef RBP_LOCKS_MODEL_H
#define RBP_LOCKS_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/addrmap.h"
#include "base/strbuf.h"
#include "context/context.h"

#define LK_MAX_SCAN_FRAMES 64      /* reported frames whose receivers are examined */
#define LK_NAME_MAX 64

/* th->status values (enum rb_thread_status, the same 2.7 - 3.4). */
enum { TH_RUNNABLE = 0, TH_STOPPED = 1, TH_STOPPED_FOREVER = 2, TH_KILLED = 3 };

typedef enum wait_kind {
    W_NONE, W_MUTEX, W_CONDVAR, W_QUEUE, W_SQ_POP, W_SQ_PUSH, W_JOIN, W_IO, W_SELECT,
    W_SLEEP, W_MUTEX_SLEEP, W_STOP, W_OTHER, W_DEAD,
} wait_kind;

typedef enum recv_kind { RK_OTHER, RK_MUTEX, RK_QUEUE, RK_SZQUEUE, RK_CONDVAR, RK_THREAD, RK_MONITOR, RK_IO, RK_CLASS } recv_kind;

typedef enum owner_state { OWN_NONE, OWN_THREAD, OWN_DEAD_FIBER, OWN_UNKNOWN } owner_state;

typedef struct lk_frame {
    uint64_t self, ep;
    char name[LK_NAME_MAX];  /* the method's name, "" if not a method frame we classify */
    bool cfunc;
} lk_frame;

typedef struct lk_thread {
    const rbpeek_thread *t;
    uint64_t th, ec, fiber, ractor;
    int status;
    uint64_t locking_mutex;   /* Mutex VALUE it is blocked on, or 0 */
    uint64_t keeping;         /* first rb_mutex_t of th->keeping_mutexes */
    wait_kind kind;
    char method[LK_NAME_MAX];
    uint64_t object;          /* what it waits on (Mutex, Queue, CV, IO, Thread VALUE) */
    const char *object_class;
    uint64_t cv_mutex;        /* condvar: the Mutex it re-locks on wake-up */
    uint64_t monitor;         /* mutex wait through Monitor#enter */
    long target;              /* join: thread index, or -1 */
    long mutex;               /* mutex wait: index into the mutex table, or -1 */
    int fd;                   /* io: the file descriptor, or -1 */
    int timeout;              /* 1 the wait has a timeout, 0 it has none, -1 not applicable/unknown */
    int confirmed;            /* 1 found in the object's wait queue, 0 not found, -1 not checked */
    long qlen, qwaiting;      /* queue: items, and waiters Ruby counts; -1 unknown */
    long join_waiter_of;      /* join_list says this thread joins that one, or -1 */
    size_t sleep_frame;       /* sleep: its frame */
    char note[240];
    bool gvl;
    lk_frame frames[LK_MAX_SCAN_FRAMES];
    size_t nframes;
} lk_thread;

typedef struct lk_mutex {
    uint64_t data;            /* rb_mutex_t: the identity */
    uint64_t value;           /* the Mutex object, 0 until found */
    const char *value_from;   /* how the object was found */
    long listed_by;           /* thread whose keeping_mutexes lists it, or -1 */
    owner_state owner_state;
    long owner;               /* thread index, or -1 */
    uint64_t owner_raw;       /* owning fiber (3.x) or rb_thread_t (2.7) */
    int owner_fiber_current;  /* 3.x: 1 if the owner fiber is its thread's current one; -1 n/a */
    long queued;              /* entries in its wait queue, -1 unknown */
    uint64_t monitor;         /* the Monitor this Mutex belongs to, or 0 */
    long monitor_count;       /* that Monitor's entry count, or -1 */
    bool owner_read;          /* its owner field could be read */
} lk_mutex;

typedef struct lk_ctx {
    rbpeek_session *s;
    const rbp_layout *L;
    lk_thread *th;
    size_t n;
    rbp_addrmap by_th, by_value, by_data, type_names, waitqs;
    lk_mutex *mx;
    size_t nmx, capmx;
    rbp_strbuf notes;         /* what could not be told, each note NUL-terminated (lk_note) */
    size_t nnotes;
    bool have_join_lists;     /* the layout lets us read th->join_list */
    size_t list_budget;       /* list nodes every walk of this analysis may still read (collect.h) */
    size_t stack_budget;      /* VM stack words the Mutex search may still read */
} lk_ctx;

typedef struct gvl_info {
    uint64_t ractor;
    int ractor_index;
    bool known;
    uint64_t owner_th;
    long owner;
} gvl_info;

/* Writes the whole JSON document (threads, Mutexes, GVLs, and the
 * deadlocks, never-released waits and stuck threads of the waits-for
 * graph) into b; sets b->oom when memory runs out. */
void rbp_locks_render(lk_ctx *c, rbp_strbuf *b, const gvl_info *gvl, size_t ngvl);

#endif
