/*
 * The synchronization objects of the threads-and-locks collection: what a
 * frame's receiver is (Mutex, Queue, SizedQueue, ConditionVariable,
 * Monitor, Thread, IO, by its typed data's name), the wait queues of
 * Mutexes, Queues and ConditionVariables (each walked once per analysis),
 * and the table of Mutexes seen, with each one's object and owner. A
 * Mutex's owner is a thread before 3.0 (mutex->th), a fiber from 3.0
 * (mutex->fiber), which can finish while owning it, and from 4.0 the
 * serial of the locking execution context, with its thread beside it.
 */
#include "locks/collect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/rdata.h"

/* For a T_DATA object with typed data: its rb_data_type_t's name (e.g.
 * "mutex", "queue", "VM/thread") and the address of its C struct. */
static const char *typed_data(lk_ctx *c, uint64_t v, uint64_t *data)
{
    uint64_t type = 0, ptr = 0;
    if (!rbp_typed_data(c->s, v, &type, &ptr)) return NULL;
    const char *name = rbp_addrmap_get(&c->type_names, type);
    if (!name) {
        uint64_t str = 0;
        char buf[LK_NAME_MAX];
        if (!lk_read_u64_at(c, type, RBP_L_data_type_name, &str) || !str ||
            !rbp_mem_cstr(c->s->mem, str, buf, sizeof buf))
            return NULL;
        char *copy = strdup(buf);
        if (!copy || !rbp_addrmap_put(&c->type_names, type, copy)) return NULL;
        name = copy;
    }
    if (data) *data = ptr;
    return name;
}

recv_kind lk_receiver_kind(lk_ctx *c, uint64_t v, uint64_t *data)
{
    *data = 0;
    int t = rbp_obj_type(c->s, v);
    if (t == RBP_T_FILE) return RK_IO;
    if (t == RBP_T_CLASS || t == RBP_T_MODULE) return RK_CLASS;
    if (t != RBP_T_DATA) return RK_OTHER;
    const char *name = typed_data(c, v, data);
    if (!name) return RK_OTHER;
    if (!strcmp(name, "mutex")) return RK_MUTEX;
    /* thread_sync.c names them by class since its 2025 rewrite of the
     * data types (compaction support); before, "queue" and "sized_queue" */
    if (!strcmp(name, "queue") || !strcmp(name, "Thread::Queue")) return RK_QUEUE;
    if (!strcmp(name, "sized_queue") || !strcmp(name, "Thread::SizedQueue")) return RK_SZQUEUE;
    if (!strcmp(name, "condvar")) return RK_CONDVAR;
    if (!strcmp(name, "VM/thread")) return RK_THREAD;
    if (!strcmp(name, "monitor")) return RK_MONITOR;
    return RK_OTHER;
}

uint64_t lk_mutex_data_of(lk_ctx *c, uint64_t v)
{
    uint64_t data = 0;
    return lk_receiver_kind(c, v, &data) == RK_MUTEX ? data : 0;
}

/* The threads in one wait queue (a ccan list of on-stack sync_waiters),
 * walked once per analysis: many threads waiting on one Queue would
 * otherwise re-walk it each, reading every waiter's stack page again. */
typedef struct waitq {
    bool ok;            /* the list could be walked to its end */
    size_t n;
    uint64_t *ths;
} waitq;

void lk_waitq_free(void *p)
{
    waitq *q = p;
    free(q->ths);
    free(q);
}

static const waitq *waitq_get(lk_ctx *c, uint64_t head)
{
    waitq *q = rbp_addrmap_get(&c->waitqs, head);
    if (q) return q;
    q = calloc(1, sizeof *q);
    if (!q || !rbp_addrmap_put(&c->waitqs, head, q)) return NULL; /* put frees q on failure */
    if (!rbp_has(c->L, RBP_L_sync_waiter_node) || !rbp_has(c->L, RBP_L_sync_waiter_th)) return q;
    uint64_t node_off = (uint64_t)rbp_off(c->L, RBP_L_sync_waiter_node);
    uint64_t th_off = (uint64_t)rbp_off(c->L, RBP_L_sync_waiter_th);
    uint64_t cur = 0;
    size_t cap = 0;
    if (!rbp_mem_u64(c->s->mem, head, &cur)) return q; /* head->n.next */
    rbp_walkguard g = lk_guard(c);
    while (cur != head) {
        uint64_t wth = 0;
        if (!cur || !lk_list_step(c, &g, cur, "a wait queue") ||
            !rbp_mem_u64(c->s->mem, cur - node_off + th_off, &wth))
            return q;
        if (q->n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            uint64_t *nt = realloc(q->ths, nc * sizeof *nt);
            if (!nt) return q;
            q->ths = nt;
            cap = nc;
        }
        q->ths[q->n++] = wth;
        if (!rbp_mem_u64(c->s->mem, cur, &cur)) return q;
    }
    q->ok = true;
    return q;
}

int lk_waitq_has(lk_ctx *c, uint64_t head, uint64_t th, long *count)
{
    const waitq *q = waitq_get(c, head);
    if (count) *count = q && q->ok ? (long)q->n : -1;
    if (!q || !q->ok) return -1;
    for (size_t i = 0; i < q->n; i++)
        if (th && q->ths[i] == th) return 1;
    return 0;
}

/* --- mutex table ------------------------------------------------------------------ */

long lk_mutex_add(lk_ctx *c, uint64_t data)
{
    long i = lk_idx_get(&c->by_data, data);
    if (i >= 0 || !data) return i;
    if (c->nmx == c->capmx) {
        size_t nc = c->capmx ? c->capmx * 2 : 16;
        lk_mutex *nm = realloc(c->mx, nc * sizeof *nm);
        if (!nm) return -1;
        c->mx = nm;
        c->capmx = nc;
    }
    lk_mutex *m = &c->mx[c->nmx];
    memset(m, 0, sizeof *m);
    m->data = data;
    m->listed_by = m->owner = -1;
    m->owner_fiber_current = -1;
    m->queued = m->monitor_count = -1;
    if (!rbp_addrmap_put(&c->by_data, data, lk_idx_val(c->nmx))) return -1;
    return (long)c->nmx++;
}

void lk_mutex_set_value(lk_ctx *c, long i, uint64_t value, const char *from)
{
    if (i >= 0 && !c->mx[i].value) {
        c->mx[i].value = value;
        c->mx[i].value_from = from;
    }
}

/* Reads who owns the Mutex and how many wait in its queue. */
void lk_mutex_read_owner(lk_ctx *c, lk_mutex *m)
{
    rbpeek_session *s = c->s;
    uint64_t raw = 0;
    if (rbp_has(c->L, RBP_L_mutex_ec_serial)) { /* 4.0+: the locking ec's serial owns it */
        uint64_t serial = 0, th = 0, cur_ec = 0, cur_serial = 0;
        if (!lk_read_u64_at(c, m->data, RBP_L_mutex_ec_serial, &serial)) return;
        m->owner_read = true;
        if (!serial) return; /* unlocked: th keeps the last owner, which unlock leaves */
        if (!lk_read_u64_at(c, m->data, RBP_L_mutex_th, &th)) return;
        m->owner_raw = th;
        m->owner = lk_idx_get(&c->by_th, th);
        m->owner_state = m->owner >= 0 ? OWN_THREAD : OWN_UNKNOWN;
        /* The ec is a fiber's; the thread's current ec having that serial
         * means its running fiber holds it, any other serial another fiber
         * of that thread (running or finished: a serial can't tell). */
        if (m->owner >= 0 && lk_read_u64_at(c, th, RBP_L_th_ec, &cur_ec) &&
            lk_read_u64_at(c, cur_ec, RBP_L_ec_serial, &cur_serial))
            m->owner_fiber_current = cur_serial == serial;
    } else if (rbp_has(c->L, RBP_L_mutex_fiber)) { /* 3.0 - 3.4: a fiber owns it */
        if (!lk_read_u64_at(c, m->data, RBP_L_mutex_fiber, &raw)) return;
        m->owner_read = true;
        m->owner_raw = raw;
        if (!raw) return;
        uint64_t th = 0, st = 0;
        bool have_th = rbp_has(c->L, RBP_L_fiber_saved_ec) && rbp_has(c->L, RBP_L_ec_thread_ptr) &&
                       rbp_mem_u64(s->mem, raw + (uint64_t)rbp_off(c->L, RBP_L_fiber_saved_ec) +
                                               (uint64_t)rbp_off(c->L, RBP_L_ec_thread_ptr), &th);
        long idx = have_th ? lk_idx_get(&c->by_th, th) : -1;
        if (idx < 0 && !have_th) idx = m->listed_by; /* no fiber layout: trust keeping_mutexes */
        m->owner = idx;
        if (lk_read_u64_at(c, raw, RBP_L_fiber_status, &st) && st == FIBER_TERMINATED)
            m->owner_state = OWN_DEAD_FIBER;
        else
            m->owner_state = idx >= 0 ? OWN_THREAD : OWN_UNKNOWN;
        if (idx >= 0 && c->th[idx].fiber) m->owner_fiber_current = c->th[idx].fiber == raw;
    } else if (rbp_has(c->L, RBP_L_mutex_th)) { /* 2.7: a thread owns it */
        if (!lk_read_u64_at(c, m->data, RBP_L_mutex_th, &raw)) return;
        m->owner_read = true;
        m->owner_raw = raw;
        if (!raw) return;
        m->owner = lk_idx_get(&c->by_th, raw);
        m->owner_state = m->owner >= 0 ? OWN_THREAD : OWN_UNKNOWN;
    } else if (m->listed_by >= 0) {
        lk_need(c, "a Mutex's owner fiber", RBP_L_mutex_fiber, RBP_L_COUNT);
        m->owner = m->listed_by;
        m->owner_state = OWN_THREAD;
    }
    if (rbp_has(c->L, RBP_L_mutex_waitq))
        lk_waitq_has(c, m->data + (uint64_t)rbp_off(c->L, RBP_L_mutex_waitq), 0, &m->queued);
}
