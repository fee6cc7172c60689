/*
 * Threads and locks (see locks.h): reads, per thread, what the interpreter
 * records about its waits and holdings, classifies the rest from the
 * receivers of its innermost frames, and finds each Mutex's owner and each
 * ractor's GVL owner. locks_json.c turns the result into verdicts and JSON.
 *
 * Version differences handled here:
 *  - A Mutex's owner is a thread before 3.0 (mutex->th) and a fiber from 3.0
 *    (mutex->fiber; its thread is fiber->cont.saved_ec.thread_ptr). A fiber
 *    can finish while owning a Mutex, which nobody can then unlock.
 *  - A thread's join waiters are an rb_thread_list_t before 3.0 and an
 *    rb_waiting_list from 3.0.
 *  - The GVL owner is vm->gvl.owner before 3.0, the ractor's
 *    threads.gvl.owner in 3.0-3.2 and its threads.sched.running from 3.3.
 *  - Queue#pop and SizedQueue#pop/push are C methods before 3.2 and
 *    <internal:thread_sync> Ruby methods after; either way the frame's self
 *    is the queue.
 *  - Typed data may be embedded in the object from 3.3 (typed_flag & 2).
 *
 * Everything read from the target is bounded (list walks, frame counts,
 * stack scans) and checked; a damaged structure yields "unknown", never a
 * crash or a loop.
 */
#include "locks/locks.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "locks/locks_model.h"
#include "vm/frames.h"
#include "vm/robject.h"
#include "vm/symbolize.h"

#define MAX_RAW_FRAMES 512      /* control frames read per thread */
#define CLASSIFY_DEPTH 3        /* innermost frames that can say what a thread waits in */
#define MAX_LIST 100000         /* bound on every list walk */
#define MAX_STACK_WORDS 65536   /* bound on the VM stack words scanned per thread */

enum { FIBER_TERMINATED = 3 };

/* struct rb_monitor of ext/monitor/monitor.c, identical from 2.7 to 3.4:
 * { long count; VALUE owner; VALUE mutex; }. It lives in an extension, not
 * in libruby's DWARF, so its (trivial) layout is fixed here and every value
 * read from it is validated. */
#define MONITOR_COUNT_OFF 0
#define MONITOR_MUTEX_OFF 16

/* --- small helpers ------------------------------------------------------------ */

static void *idx_val(size_t i) { return (void *)(uintptr_t)(i + 1); }
static long idx_get(const rbp_addrmap *m, uint64_t key)
{
    void *v = key ? rbp_addrmap_get(m, key) : NULL;
    return v ? (long)((uintptr_t)v - 1) : -1;
}

static void note(lk_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(lk_ctx *c, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* the same note once only */
    if (c->notes.buf && strstr(c->notes.buf, buf)) return;
    if (c->nnotes++) rbp_sb_puts(&c->notes, ", ");
    rbp_sb_json_str(&c->notes, buf);
}

/* True if the layout has every listed field; otherwise notes what is
 * unknown on this Ruby and why. */
static bool need(lk_ctx *c, const char *what, rbp_field_id a, rbp_field_id b)
{
    rbp_field_id missing = !rbp_has(c->L, a) ? a : (b != RBP_L_COUNT && !rbp_has(c->L, b)) ? b : RBP_L_COUNT;
    if (missing == RBP_L_COUNT) return true;
    note(c, "%s: unknown on Ruby %s (its struct layout has no %s.%s)", what, c->s->ruby_version,
         rbp_field_type(missing), rbp_field_member(missing));
    return false;
}

static bool read_u64_at(lk_ctx *c, uint64_t base, rbp_field_id id, uint64_t *out)
{
    *out = 0;
    return base && rbp_read_field(c->s, base, id, out);
}

/* For a T_DATA object with typed data: its rb_data_type_t's name (e.g.
 * "mutex", "queue", "VM/thread") and the address of its C struct. */
static const char *typed_data(lk_ctx *c, uint64_t v, uint64_t *data)
{
    if (rbp_obj_type(c->s, v) != RBP_T_DATA) return NULL;
    uint64_t type = 0, flag = 0;
    if (!read_u64_at(c, v, RBP_L_typeddata_type, &type) || !read_u64_at(c, v, RBP_L_typeddata_typed_flag, &flag))
        return NULL;
    if (!type || flag < 1 || flag > 3) return NULL; /* an untyped RData, or garbage */
    const char *name = rbp_addrmap_get(&c->type_names, type);
    if (!name) {
        uint64_t str = 0;
        char buf[LK_NAME_MAX];
        if (!read_u64_at(c, type, RBP_L_data_type_name, &str) || !str ||
            !rbp_mem_cstr(c->s->mem, str, buf, sizeof buf))
            return NULL;
        char *copy = strdup(buf);
        if (!copy || !rbp_addrmap_put(&c->type_names, type, copy)) return NULL;
        name = copy;
    }
    if (data) {
        if (flag & 2) /* 3.3+: embedded, the struct starts where the data pointer would be */
            *data = v + (uint64_t)rbp_off(c->L, RBP_L_typeddata_data);
        else if (!read_u64_at(c, v, RBP_L_typeddata_data, data))
            *data = 0;
    }
    return name;
}

static recv_kind receiver_kind(lk_ctx *c, uint64_t v, uint64_t *data)
{
    *data = 0;
    int t = rbp_obj_type(c->s, v);
    if (t == RBP_T_FILE) return RK_IO;
    if (t == RBP_T_CLASS || t == RBP_T_MODULE) return RK_CLASS;
    if (t != RBP_T_DATA) return RK_OTHER;
    const char *name = typed_data(c, v, data);
    if (!name) return RK_OTHER;
    if (!strcmp(name, "mutex")) return RK_MUTEX;
    if (!strcmp(name, "queue")) return RK_QUEUE;
    if (!strcmp(name, "sized_queue")) return RK_SZQUEUE;
    if (!strcmp(name, "condvar")) return RK_CONDVAR;
    if (!strcmp(name, "VM/thread")) return RK_THREAD;
    if (!strcmp(name, "monitor")) return RK_MONITOR;
    return RK_OTHER;
}

static const char *const recv_class_names[] = {
    NULL, "Mutex", "Queue", "SizedQueue", "ConditionVariable", "Thread", "Monitor", "IO", NULL,
};

/* The Mutex object's rb_mutex_t, or 0 if v is not a Mutex. */
static uint64_t mutex_data_of(lk_ctx *c, uint64_t v)
{
    uint64_t data = 0;
    return receiver_kind(c, v, &data) == RK_MUTEX ? data : 0;
}

/* The threads in one wait queue (a ccan list of on-stack sync_waiters),
 * walked once per analysis: many threads waiting on one Queue would
 * otherwise re-walk it each, reading every waiter's stack page again. */
typedef struct waitq {
    bool ok;            /* the list could be walked to its end */
    size_t n;
    uint64_t *ths;
} waitq;

static void waitq_free(void *p)
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
    while (cur != head) {
        uint64_t wth = 0;
        if (!cur || q->n >= MAX_LIST || !rbp_mem_u64(c->s->mem, cur - node_off + th_off, &wth)) return q;
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

/* Does the wait queue at head hold a sync_waiter for thread th? Also gives
 * the number of waiters. Returns 1/0, or -1 if the list could not be walked. */
static int waitq_has(lk_ctx *c, uint64_t head, uint64_t th, long *count)
{
    const waitq *q = waitq_get(c, head);
    if (count) *count = q && q->ok ? (long)q->n : -1;
    if (!q || !q->ok) return -1;
    for (size_t i = 0; i < q->n; i++)
        if (th && q->ths[i] == th) return 1;
    return 0;
}

/* --- mutex table ------------------------------------------------------------------ */

static long mutex_add(lk_ctx *c, uint64_t data)
{
    long i = idx_get(&c->by_data, data);
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
    if (!rbp_addrmap_put(&c->by_data, data, idx_val(c->nmx))) return -1;
    return (long)c->nmx++;
}

static void mutex_set_value(lk_ctx *c, long i, uint64_t value, const char *from)
{
    if (i >= 0 && !c->mx[i].value) {
        c->mx[i].value = value;
        c->mx[i].value_from = from;
    }
}

/* Reads who owns the Mutex and how many wait in its queue. */
static void mutex_read_owner(lk_ctx *c, lk_mutex *m)
{
    rbpeek_session *s = c->s;
    uint64_t raw = 0;
    if (rbp_has(c->L, RBP_L_mutex_fiber)) { /* 3.0+: a fiber owns it */
        if (!read_u64_at(c, m->data, RBP_L_mutex_fiber, &raw)) return;
        m->owner_read = true;
        m->owner_raw = raw;
        if (!raw) return;
        uint64_t th = 0, st = 0;
        bool have_th = rbp_has(c->L, RBP_L_fiber_saved_ec) && rbp_has(c->L, RBP_L_ec_thread_ptr) &&
                       rbp_mem_u64(s->mem, raw + (uint64_t)rbp_off(c->L, RBP_L_fiber_saved_ec) +
                                               (uint64_t)rbp_off(c->L, RBP_L_ec_thread_ptr), &th);
        long idx = have_th ? idx_get(&c->by_th, th) : -1;
        if (idx < 0 && !have_th) idx = m->listed_by; /* no fiber layout: trust keeping_mutexes */
        m->owner = idx;
        if (read_u64_at(c, raw, RBP_L_fiber_status, &st) && st == FIBER_TERMINATED)
            m->owner_state = OWN_DEAD_FIBER;
        else
            m->owner_state = idx >= 0 ? OWN_THREAD : OWN_UNKNOWN;
        if (idx >= 0 && c->th[idx].fiber) m->owner_fiber_current = c->th[idx].fiber == raw;
    } else if (rbp_has(c->L, RBP_L_mutex_th)) { /* 2.7: a thread owns it */
        if (!read_u64_at(c, m->data, RBP_L_mutex_th, &raw)) return;
        m->owner_read = true;
        m->owner_raw = raw;
        if (!raw) return;
        m->owner = idx_get(&c->by_th, raw);
        m->owner_state = m->owner >= 0 ? OWN_THREAD : OWN_UNKNOWN;
    } else if (m->listed_by >= 0) {
        need(c, "a Mutex's owner fiber", RBP_L_mutex_fiber, RBP_L_COUNT);
        m->owner = m->listed_by;
        m->owner_state = OWN_THREAD;
    }
    if (rbp_has(c->L, RBP_L_mutex_waitq))
        waitq_has(c, m->data + (uint64_t)rbp_off(c->L, RBP_L_mutex_waitq), 0, &m->queued);
}

/* --- per thread ---------------------------------------------------------------------- */

/* Reads the thread's innermost reported frames: receiver and method name. */
static void read_frames(lk_ctx *c, lk_thread *t)
{
    rbpeek_session *s = c->s;
    rbp_cframes cf;
    rbp_cframes_read(s, t->ec, MAX_RAW_FRAMES, &cf); /* a damaged stack just gives fewer frames */
    for (size_t i = 0; i < cf.n && t->nframes < LK_MAX_SCAN_FRAMES; i++) {
        uint64_t pc = cf.frames[i].pc, iseq = cf.frames[i].iseq, ep = cf.frames[i].ep, self = cf.frames[i].self;
        lk_frame *out = &t->frames[t->nframes];
        memset(out, 0, sizeof *out);
        out->self = self;
        out->ep = ep;
        bool named = false;
        if (iseq) {
            if (!pc) continue;
            const rbp_iseq_info *in = rbp_iseq_get(s, iseq);
            if (!in) continue;
            /* Only the body of a core method written in Ruby (<internal:...>,
             * e.g. Queue#pop from 3.2) says what the thread waits in; the
             * method entry of a block frame names its enclosing method. */
            named = in->type == RBP_ISEQ_METHOD && in->path && !strncmp(in->path, "<internal:", 10);
        } else {
            if (!rbp_cframe_is_cfunc(s, &cf.frames[i])) continue;
            out->cfunc = named = true;
        }
        if (named) {
            rbp_cme cme;
            uint64_t me = rbp_frame_method_entry(s, ep);
            const char *name = me && rbp_cme_read(s, me, &cme) ? rbp_id_name(s, cme.original_id) : NULL;
            if (name) snprintf(out->name, sizeof out->name, "%s", name);
        }
        t->nframes++;
    }
    rbp_cframes_free(&cf);
}

static bool name_in(const char *name, const char *const *set)
{
    for (; *set; set++)
        if (!strcmp(name, *set)) return true;
    return false;
}

static const char *const LOCK_NAMES[] = {"lock", "synchronize", NULL};
static const char *const MONITOR_ENTER_NAMES[] = {"enter", "synchronize", "mon_enter", "mon_synchronize", NULL};
static const char *const POP_NAMES[] = {"pop", "shift", "deq", NULL};
static const char *const PUSH_NAMES[] = {"push", "<<", "enq", NULL};
static const char *const JOIN_NAMES[] = {"join", "value", NULL};
static const char *const IO_NAMES[] = {
    "read", "readpartial", "sysread", "gets", "readline", "readlines", "each_line", "each", "getc", "getbyte",
    "readchar", "readbyte", "read_nonblock", "wait_readable", "wait", "wait_writable", "write", "syswrite",
    "print", "puts", "printf", "<<", "accept", "recv", "recvfrom", "connect", "each_char", "each_byte", NULL,
};

static void set_wait(lk_thread *t, wait_kind k, const char *method, uint64_t object, recv_kind rk)
{
    t->kind = k;
    snprintf(t->method, sizeof t->method, "%s", method ? method : "");
    t->object = object;
    t->object_class = rk < sizeof recv_class_names / sizeof *recv_class_names ? recv_class_names[rk] : NULL;
}

/* Whether Kernel#sleep was given a duration. A C method's arguments sit on
 * the VM stack just below its frame's three environment slots, above the
 * receiver, so without an argument ep[-3] is the receiver itself (the same
 * from 2.7 to 3.4). sleep(nil) also sleeps for ever (3.3+). Returns 1 for a
 * duration, 0 for none, -1 if unreadable. */
static int sleep_has_duration(lk_ctx *c, const lk_frame *f)
{
    uint64_t slot = 0;
    if (!f->ep || !rbp_mem_u64(c->s->mem, f->ep - 24, &slot)) return -1;
    return slot == f->self || slot == rbp_qnil(c->s) ? 0 : 1;
}

/* Decides what a sleeping thread waits in from its innermost frames. */
static void classify_frames(lk_ctx *c, lk_thread *t)
{
    size_t depth = t->nframes < CLASSIFY_DEPTH ? t->nframes : CLASSIFY_DEPTH;
    for (size_t i = 0; i < depth; i++) {
        const lk_frame *f = &t->frames[i];
        if (!f->name[0]) continue;
        uint64_t data = 0;
        recv_kind rk = receiver_kind(c, f->self, &data);
        switch (rk) {
        case RK_MUTEX:
            if (name_in(f->name, LOCK_NAMES)) {
                set_wait(t, W_MUTEX, f->name, f->self, rk);
                return;
            }
            if (!strcmp(f->name, "sleep")) {
                /* Mutex#sleep called by ConditionVariable#wait, or on its own. */
                if (i + 1 < t->nframes && !strcmp(t->frames[i + 1].name, "wait")) {
                    uint64_t cvdata = 0;
                    if (receiver_kind(c, t->frames[i + 1].self, &cvdata) == RK_CONDVAR) {
                        set_wait(t, W_CONDVAR, "wait", t->frames[i + 1].self, RK_CONDVAR);
                        t->cv_mutex = f->self;
                        return;
                    }
                }
                set_wait(t, W_MUTEX_SLEEP, f->name, f->self, rk);
                return;
            }
            break;
        case RK_MONITOR:
            if (name_in(f->name, MONITOR_ENTER_NAMES)) {
                set_wait(t, W_MUTEX, f->name, f->self, rk);
                t->monitor = f->self;
                return;
            }
            break;
        case RK_QUEUE:
        case RK_SZQUEUE:
            if (name_in(f->name, POP_NAMES)) {
                set_wait(t, rk == RK_QUEUE ? W_QUEUE : W_SQ_POP, f->name, f->self, rk);
                return;
            }
            if (rk == RK_SZQUEUE && name_in(f->name, PUSH_NAMES)) {
                set_wait(t, W_SQ_PUSH, f->name, f->self, rk);
                return;
            }
            break;
        case RK_CONDVAR:
            if (!strcmp(f->name, "wait")) {
                set_wait(t, W_CONDVAR, f->name, f->self, rk);
                return;
            }
            break;
        case RK_THREAD:
            if (name_in(f->name, JOIN_NAMES)) {
                set_wait(t, W_JOIN, f->name, f->self, rk);
                return;
            }
            break;
        case RK_IO:
            if (f->cfunc && name_in(f->name, IO_NAMES)) {
                set_wait(t, W_IO, f->name, f->self, rk);
                return;
            }
            break;
        case RK_CLASS:
            if (!strcmp(f->name, "stop")) {
                set_wait(t, W_STOP, f->name, 0, RK_OTHER);
                return;
            }
            if (!strcmp(f->name, "select")) {
                set_wait(t, W_SELECT, f->name, 0, RK_OTHER);
                return;
            }
            break;
        default:
            break;
        }
        if (f->cfunc && !strcmp(f->name, "sleep")) { /* Kernel#sleep */
            set_wait(t, W_SLEEP, f->name, 0, RK_OTHER);
            t->sleep_frame = i;
            return;
        }
    }
    set_wait(t, W_OTHER, t->nframes && t->frames[0].name[0] ? t->frames[0].name : "", 0, RK_OTHER);
}

/* Fills in what the classified wait's object knows: the queue's wait list
 * and size, the IO's fd. */
static void describe_object(lk_ctx *c, lk_thread *t)
{
    const rbp_layout *L = c->L;
    uint64_t data = 0;
    switch (t->kind) {
    case W_QUEUE:
    case W_SQ_POP:
    case W_SQ_PUSH: {
        receiver_kind(c, t->object, &data);
        if (!data || !need(c, "which threads wait in a Queue", RBP_L_queue_waitq, RBP_L_sync_waiter_th)) break;
        uint64_t head = data + (uint64_t)rbp_off(L, t->kind == W_SQ_PUSH ? RBP_L_szqueue_pushq : RBP_L_queue_waitq);
        if (t->kind == W_SQ_PUSH && !rbp_has(L, RBP_L_szqueue_pushq)) break;
        t->confirmed = waitq_has(c, head, t->th, &t->qwaiting);
        uint64_t que = 0, elems = 0;
        long len = 0;
        if (read_u64_at(c, data, RBP_L_queue_que, &que) && rbp_array_info(c->s, que, &len, &elems)) t->qlen = len;
        break;
    }
    case W_CONDVAR:
        receiver_kind(c, t->object, &data);
        if (data && need(c, "which threads wait on a ConditionVariable", RBP_L_condvar_waitq, RBP_L_sync_waiter_th))
            t->confirmed = waitq_has(c, data + (uint64_t)rbp_off(L, RBP_L_condvar_waitq), t->th, &t->qwaiting);
        break;
    case W_IO: {
        uint64_t fptr = 0, fd = 0;
        if (!need(c, "an IO's file descriptor", RBP_L_rfile_fptr, RBP_L_io_fd)) break;
        if (read_u64_at(c, t->object, RBP_L_rfile_fptr, &fptr) && fptr && read_u64_at(c, fptr, RBP_L_io_fd, &fd))
            t->fd = (int)(int32_t)fd;
        else if (!fptr)
            snprintf(t->note, sizeof t->note, "the IO is closed or not yet opened (no rb_io_t)");
        break;
    }
    default:
        break;
    }
}

/* th->keeping_mutexes: the rb_mutex_t of every Mutex the thread holds. */
static void walk_keeping(lk_ctx *c, size_t i)
{
    lk_thread *t = &c->th[i];
    uint64_t m = t->keeping;
    for (size_t n = 0; m && n < MAX_LIST; n++) {
        long k = mutex_add(c, m);
        if (k < 0) return;
        if (c->mx[k].listed_by >= 0) return; /* a loop: the list is damaged */
        c->mx[k].listed_by = (long)i;
        if (!read_u64_at(c, m, RBP_L_mutex_next_mutex, &m)) return;
    }
}

/* th->join_list: the threads waiting in Thread#join for this one. */
static void walk_join_list(lk_ctx *c, size_t i)
{
    const rbp_layout *L = c->L;
    bool v3 = rbp_has(L, RBP_L_waiting_list_thread);
    rbp_field_id next_f = v3 ? RBP_L_waiting_list_next : RBP_L_thread_list_next;
    rbp_field_id th_f = v3 ? RBP_L_waiting_list_thread : RBP_L_thread_list_th;
    if (!rbp_has(L, next_f) || !rbp_has(L, th_f)) return;
    uint64_t node = 0;
    if (!read_u64_at(c, c->th[i].th, RBP_L_th_join_list, &node)) return;
    for (size_t n = 0; node && n < MAX_LIST; n++) {
        uint64_t wth = 0;
        if (!read_u64_at(c, node, th_f, &wth)) return;
        long w = idx_get(&c->by_th, wth);
        if (w >= 0 && w != (long)i) c->th[w].join_waiter_of = (long)i;
        if (!read_u64_at(c, node, next_f, &node)) return;
    }
}

static void read_thread(lk_ctx *c, size_t i)
{
    lk_thread *t = &c->th[i];
    t->th = t->t->thread_addr;
    t->status = t->t->status;
    t->ractor = t->t->ractor_addr;
    t->target = t->mutex = t->join_waiter_of = -1;
    t->fd = -1;
    t->confirmed = -1;
    t->qlen = t->qwaiting = -1;
    read_u64_at(c, t->th, RBP_L_th_ec, &t->ec);
    read_u64_at(c, t->ec, RBP_L_ec_fiber_ptr, &t->fiber);
    uint64_t lm = 0;
    if (read_u64_at(c, t->th, RBP_L_th_locking_mutex, &lm) && rbp_is_heap_ptr(c->s, lm)) t->locking_mutex = lm;
    read_u64_at(c, t->th, RBP_L_th_keeping_mutexes, &t->keeping);
    read_frames(c, t);
}

/* Classifies thread i's wait once every thread's facts are in. */
static void classify(lk_ctx *c, size_t i)
{
    lk_thread *t = &c->th[i];
    if (t->status == TH_KILLED) {
        t->kind = W_DEAD;
        return;
    }
    if (t->status == TH_RUNNABLE && !t->locking_mutex) {
        t->kind = W_NONE;
        return;
    }
    classify_frames(c, t);
    /* TH_STOPPED is a wait with a timeout, or a blocking call (IO), or a
     * plain Kernel#sleep, which Ruby does not mark "forever" even without a
     * duration (its deadlock check ignores such sleeps). */
    if (t->kind == W_IO || t->kind == W_SELECT || t->kind == W_OTHER)
        t->timeout = -1;
    else if (t->kind == W_SLEEP)
        t->timeout = sleep_has_duration(c, &t->frames[t->sleep_frame]);
    else
        t->timeout = t->status == TH_STOPPED;
    if (t->locking_mutex) {
        /* Ruby's own record wins: the thread is blocked locking this Mutex. */
        uint64_t monitor = t->kind == W_MUTEX ? t->monitor : 0;
        if (t->kind != W_MUTEX || t->object != t->locking_mutex) {
            const char *method = t->kind == W_MUTEX ? t->method : "lock";
            char m[LK_NAME_MAX];
            snprintf(m, sizeof m, "%s", method);
            set_wait(t, W_MUTEX, m, t->locking_mutex, RK_MUTEX);
        }
        t->monitor = monitor;
        t->timeout = 0; /* Mutex#lock has no timeout */
        t->mutex = mutex_add(c, mutex_data_of(c, t->locking_mutex));
        mutex_set_value(c, t->mutex, t->locking_mutex, "locking_mutex");
        t->confirmed = -1;
    } else if (t->kind == W_MUTEX) {
        /* A lock frame but no locking_mutex: about to sleep, or just woken. */
        snprintf(t->note, sizeof t->note, "in %s but not recorded as blocked on a Mutex (about to block, or "
                 "just woken)", t->method);
        t->kind = W_OTHER;
        t->object = 0;
        t->monitor = 0;
    }
    if (t->join_waiter_of >= 0) {
        /* Ruby's join list says whom it joins, whatever the frames say. */
        if (t->kind != W_JOIN) set_wait(t, W_JOIN, "join", c->th[t->join_waiter_of].t->thread_value, RK_THREAD);
        t->target = t->join_waiter_of;
        t->confirmed = 1;
    } else if (t->kind == W_JOIN) {
        t->target = idx_get(&c->by_value, t->object);
        if (c->have_join_lists) {
            t->confirmed = 0;
            snprintf(t->note, sizeof t->note, "in Thread#%s but not in the target's join list (about to wait, or "
                     "just woken)", t->method);
        }
    }
    describe_object(c, t);
}

/* --- GVL ---------------------------------------------------------------------------------- */

static bool read_gvl(lk_ctx *c, uint64_t ractor, gvl_info *g)
{
    const rbp_layout *L = c->L;
    g->known = false;
    g->owner = -1;
    g->owner_th = 0;
    if (rbp_has(L, RBP_L_ractor_sched_running)) /* 3.3+ */
        g->known = ractor && read_u64_at(c, ractor, RBP_L_ractor_sched_running, &g->owner_th);
    else if (rbp_has(L, RBP_L_ractor_gvl_owner)) /* 3.0 - 3.2 */
        g->known = ractor && read_u64_at(c, ractor, RBP_L_ractor_gvl_owner, &g->owner_th);
    else if (rbp_has(L, RBP_L_vm_gvl_owner)) /* < 3.0 */
        g->known = read_u64_at(c, c->s->vm, RBP_L_vm_gvl_owner, &g->owner_th);
    if (!g->known) {
        note(c, "the GVL owner: unknown on Ruby %s (its struct layout has no GVL owner field, or it is unreadable)",
             c->s->ruby_version);
        return false;
    }
    g->owner = idx_get(&c->by_th, g->owner_th);
    return true;
}

/* --- VM stack scan for Mutex objects -------------------------------------------------- */

/* Held Mutexes nobody waits on and no frame names have no known object yet:
 * look for a reference to them on the VM stacks (locals, receivers). */
static void scan_stacks_for_mutexes(lk_ctx *c)
{
    size_t unresolved = 0;
    for (size_t k = 0; k < c->nmx; k++)
        if (!c->mx[k].value) unresolved++;
    if (!unresolved || !rbp_has(c->L, RBP_L_cfp_sp)) return;
    uint64_t *words = malloc(MAX_STACK_WORDS * sizeof *words);
    if (!words) return;
    for (size_t i = 0; i < c->n && unresolved; i++) {
        uint64_t vm_stack = 0, cfp = 0, sp = 0;
        lk_thread *t = &c->th[i];
        if (!read_u64_at(c, t->ec, RBP_L_ec_vm_stack, &vm_stack) || !read_u64_at(c, t->ec, RBP_L_ec_cfp, &cfp) ||
            !read_u64_at(c, cfp, RBP_L_cfp_sp, &sp) || sp <= vm_stack)
            continue;
        uint64_t nwords = (sp - vm_stack) / 8;
        if (nwords > MAX_STACK_WORDS) nwords = MAX_STACK_WORDS;
        nwords = rbp_mem_read_partial(c->s->mem, vm_stack, words, (size_t)(nwords * 8)) / 8;
        for (uint64_t w = 0; w < nwords && unresolved; w++) {
            uint64_t v = words[w];
            if (!rbp_is_heap_ptr(c->s, v)) continue;
            long k = idx_get(&c->by_data, mutex_data_of(c, v));
            if (k >= 0 && !c->mx[k].value) {
                mutex_set_value(c, k, v, "stack");
                unresolved--;
            }
        }
    }
    free(words);
}

/* Frame receivers name Mutex objects (synchronize, lock, sleep) and
 * Monitors (whose inner Mutex and entry count we read). */
static void match_receivers(lk_ctx *c)
{
    for (size_t i = 0; i < c->n; i++) {
        lk_thread *t = &c->th[i];
        for (size_t f = 0; f < t->nframes; f++) {
            uint64_t v = t->frames[f].self, data = 0;
            recv_kind rk = receiver_kind(c, v, &data);
            if (rk == RK_MUTEX) {
                mutex_set_value(c, idx_get(&c->by_data, data), v, "frame");
            } else if (rk == RK_MONITOR && data) {
                uint64_t mv = 0, count = 0;
                if (!rbp_mem_u64(c->s->mem, data + MONITOR_MUTEX_OFF, &mv)) continue;
                long k = idx_get(&c->by_data, mutex_data_of(c, mv));
                if (k < 0) continue;
                mutex_set_value(c, k, mv, "monitor");
                c->mx[k].monitor = v;
                if (rbp_mem_u64(c->s->mem, data + MONITOR_COUNT_OFF, &count) && (int64_t)count >= 0 &&
                    count < (UINT64_C(1) << 40))
                    c->mx[k].monitor_count = (long)count;
            }
        }
    }
}

rbpeek_status rbp_locks_json(rbpeek_session *s, const rbpeek_snapshot *snap, char **out)
{
    *out = NULL;
    lk_ctx c = {.s = s, .L = &s->layout, .n = rbpeek_snapshot_thread_count(snap)};
    rbp_addrmap_init(&c.by_th, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.by_value, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.by_data, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.type_names, SIZE_MAX, free);
    rbp_addrmap_init(&c.waitqs, SIZE_MAX, waitq_free);
    rbp_sb_init(&c.notes);
    rbpeek_status st = RBPEEK_OK;
    c.th = calloc(c.n ? c.n : 1, sizeof *c.th);
    gvl_info *gvl = calloc(c.n ? c.n : 1, sizeof *gvl);
    size_t ngvl = 0;
    rbp_strbuf b;
    rbp_sb_init(&b);
    if (!c.th || !gvl) {
        st = rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < c.n; i++) {
        c.th[i].t = rbpeek_snapshot_thread(snap, i);
        rbp_addrmap_put(&c.by_th, c.th[i].t->thread_addr, idx_val(i));
        rbp_addrmap_put(&c.by_value, c.th[i].t->thread_value, idx_val(i));
    }
    need(&c, "which Mutex a thread is blocked on", RBP_L_th_locking_mutex, RBP_L_typeddata_data);
    need(&c, "which Mutexes a thread holds", RBP_L_th_keeping_mutexes, RBP_L_mutex_next_mutex);
    c.have_join_lists = need(&c, "which threads wait in Thread#join", RBP_L_th_join_list, RBP_L_COUNT) &&
                        ((rbp_has(c.L, RBP_L_waiting_list_next) && rbp_has(c.L, RBP_L_waiting_list_thread)) ||
                         (rbp_has(c.L, RBP_L_thread_list_next) && rbp_has(c.L, RBP_L_thread_list_th)));
    for (size_t i = 0; i < c.n; i++) read_thread(&c, i);
    for (size_t i = 0; i < c.n; i++) walk_keeping(&c, i);
    for (size_t i = 0; i < c.n; i++) walk_join_list(&c, i);
    for (size_t i = 0; i < c.n; i++) classify(&c, i);
    for (size_t k = 0; k < c.nmx; k++) mutex_read_owner(&c, &c.mx[k]);
    match_receivers(&c);
    scan_stacks_for_mutexes(&c);
    for (size_t k = 0; k < c.nmx; k++)
        if (!c.mx[k].value)
            note(&c, "a held Mutex whose object no Ruby stack references is shown by its rb_mutex_t (\"data\") "
                     "address only");

    /* One GVL per ractor (per VM before 3.0). */
    for (size_t i = 0; i < c.n; i++) {
        bool seen = false;
        for (size_t g = 0; g < ngvl; g++) seen |= gvl[g].ractor == c.th[i].ractor;
        if (seen) continue;
        gvl[ngvl].ractor = c.th[i].ractor;
        gvl[ngvl].ractor_index = c.th[i].t->ractor_index;
        if (read_gvl(&c, c.th[i].ractor, &gvl[ngvl]) && gvl[ngvl].owner >= 0) c.th[gvl[ngvl].owner].gvl = true;
        ngvl++;
    }

    rbp_locks_render(&c, &b, gvl, ngvl);
    if (c.notes.oom) b.oom = true;
    *out = rbp_sb_take(&b);
    if (!*out) st = rbp_fail(s, RBPEEK_ERR_NOMEM, "out of memory");
done:
    rbp_sb_free(&b);
    rbp_sb_free(&c.notes);
    rbp_addrmap_destroy(&c.by_th);
    rbp_addrmap_destroy(&c.by_value);
    rbp_addrmap_destroy(&c.by_data);
    rbp_addrmap_destroy(&c.type_names);
    rbp_addrmap_destroy(&c.waitqs);
    free(c.mx);
    free(c.th);
    free(gvl);
    return st;
}

rbpeek_status rbpeek_locks_render_json(rbpeek_session *s, const rbpeek_snapshot *snap, char **out)
{
    if (!s || !snap || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "locks: missing argument");
    *out = NULL;
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "not attached to a Ruby process");
    return rbp_locks_json(s, snap, out);
}
