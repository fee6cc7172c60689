/*
 * Per thread, what it waits on and what it holds: the interpreter's own
 * records (th->locking_mutex, th->keeping_mutexes, th->join_list) and, for
 * the waits Ruby does not record on the thread (which Queue,
 * ConditionVariable or IO), the receivers of its innermost method frames,
 * confirmed against the object's own wait queue where it has one.
 */
#include "locks/collect.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vm/frames.h"
#include "vm/symbolize.h"

/* Reads the thread's innermost reported frames: receiver and method name. */
static void read_frames(lk_ctx *c, lk_thread *t)
{
    rbpeek_session *s = c->s;
    rbp_cframes cf;
    rbp_cframes_read(s, t->ec, MAX_RAW_FRAMES, &cf); /* a damaged stack just gives fewer frames */
    size_t ep_budget = RBP_EP_HOPS_BUDGET(cf.n);   /* spent: frames go unnamed, as a damaged one would */
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
            uint64_t me = rbp_frame_method_entry(s, ep, &ep_budget);
            const char *name = me && rbp_cme_read(s, me, &cme) ? rbp_id_name(s, cme.original_id) : NULL;
            if (name) snprintf(out->name, sizeof out->name, "%s", name);
        }
        t->nframes++;
    }
    rbp_cframes_free(&cf);
}

/* The class names of recv_kind, NULL where none is shown. */
static const char *const recv_class_names[] = {
    NULL, "Mutex", "Queue", "SizedQueue", "ConditionVariable", "Thread", "Monitor", "IO", NULL,
};

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
    return slot == f->self || rbp_is_nil(&c->s->rel, slot) ? 0 : 1;
}

/* Decides what a sleeping thread waits in from its innermost frames. */
static void classify_frames(lk_ctx *c, lk_thread *t)
{
    size_t depth = t->nframes < CLASSIFY_DEPTH ? t->nframes : CLASSIFY_DEPTH;
    for (size_t i = 0; i < depth; i++) {
        const lk_frame *f = &t->frames[i];
        if (!f->name[0]) continue;
        uint64_t data = 0;
        recv_kind rk = lk_receiver_kind(c, f->self, &data);
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
                    if (lk_receiver_kind(c, t->frames[i + 1].self, &cvdata) == RK_CONDVAR) {
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
        lk_receiver_kind(c, t->object, &data);
        if (!data || !lk_need(c, "which threads wait in a Queue", RBP_L_queue_waitq, RBP_L_sync_waiter_th)) break;
        uint64_t head = data + (uint64_t)rbp_off(L, t->kind == W_SQ_PUSH ? RBP_L_szqueue_pushq : RBP_L_queue_waitq);
        if (t->kind == W_SQ_PUSH && !rbp_has(L, RBP_L_szqueue_pushq)) break;
        t->confirmed = lk_waitq_has(c, head, t->th, &t->qwaiting);
        uint64_t que = 0, elems = 0;
        long len = 0;
        if (lk_read_u64_at(c, data, RBP_L_queue_que, &que) && rbp_array_info(c->s, que, &len, &elems)) t->qlen = len;
        break;
    }
    case W_CONDVAR:
        lk_receiver_kind(c, t->object, &data);
        if (data && lk_need(c, "which threads wait on a ConditionVariable", RBP_L_condvar_waitq, RBP_L_sync_waiter_th))
            t->confirmed = lk_waitq_has(c, data + (uint64_t)rbp_off(L, RBP_L_condvar_waitq), t->th, &t->qwaiting);
        break;
    case W_IO: {
        uint64_t fptr = 0, fd = 0;
        if (!lk_need(c, "an IO's file descriptor", RBP_L_rfile_fptr, RBP_L_io_fd)) break;
        if (lk_read_u64_at(c, t->object, RBP_L_rfile_fptr, &fptr) && fptr && lk_read_u64_at(c, fptr, RBP_L_io_fd, &fd))
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
void lk_walk_keeping(lk_ctx *c, size_t i)
{
    lk_thread *t = &c->th[i];
    uint64_t m = t->keeping;
    rbp_walkguard g = lk_guard(c);
    while (m && lk_list_step(c, &g, m, "a thread's list of held Mutexes")) {
        long k = lk_mutex_add(c, m);
        if (k < 0) return;
        if (c->mx[k].listed_by >= 0) { /* a Mutex listed twice: the lists loop or cross */
            lk_note(c, "a thread's list of held Mutexes was cut (it leads into a Mutex already listed): what "
                       "depends on it is partial");
            return;
        }
        c->mx[k].listed_by = (long)i;
        if (!lk_read_u64_at(c, m, RBP_L_mutex_next_mutex, &m)) return;
    }
}

/* th->join_list: the threads waiting in Thread#join for this one. */
void lk_walk_join_list(lk_ctx *c, size_t i)
{
    const rbp_layout *L = c->L;
    bool v3 = rbp_has(L, RBP_L_waiting_list_thread);
    rbp_field_id next_f = v3 ? RBP_L_waiting_list_next : RBP_L_thread_list_next;
    rbp_field_id th_f = v3 ? RBP_L_waiting_list_thread : RBP_L_thread_list_th;
    if (!rbp_has(L, next_f) || !rbp_has(L, th_f)) return;
    uint64_t node = 0;
    if (!lk_read_u64_at(c, c->th[i].th, RBP_L_th_join_list, &node)) return;
    rbp_walkguard g = lk_guard(c);
    while (node && lk_list_step(c, &g, node, "a thread's join list")) {
        uint64_t wth = 0;
        if (!lk_read_u64_at(c, node, th_f, &wth)) return;
        long w = lk_idx_get(&c->by_th, wth);
        if (w >= 0 && w != (long)i) c->th[w].join_waiter_of = (long)i;
        if (!lk_read_u64_at(c, node, next_f, &node)) return;
    }
}

void lk_read_thread(lk_ctx *c, size_t i)
{
    lk_thread *t = &c->th[i];
    t->th = t->t->thread_addr;
    t->status = t->t->status;
    t->ractor = t->t->ractor_addr;
    t->target = t->mutex = t->join_waiter_of = -1;
    t->fd = -1;
    t->confirmed = -1;
    t->qlen = t->qwaiting = -1;
    lk_read_u64_at(c, t->th, RBP_L_th_ec, &t->ec);
    lk_read_u64_at(c, t->ec, RBP_L_ec_fiber_ptr, &t->fiber);
    uint64_t lm = 0;
    if (lk_read_u64_at(c, t->th, RBP_L_th_locking_mutex, &lm) && rbp_is_heap_ptr(c->s, lm)) t->locking_mutex = lm;
    lk_read_u64_at(c, t->th, RBP_L_th_keeping_mutexes, &t->keeping);
    read_frames(c, t);
}

/* Classifies thread i's wait once every thread's facts are in. */
void lk_classify(lk_ctx *c, size_t i)
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
        t->mutex = lk_mutex_add(c, lk_mutex_data_of(c, t->locking_mutex));
        lk_mutex_set_value(c, t->mutex, t->locking_mutex, "locking_mutex");
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
        t->target = lk_idx_get(&c->by_value, t->object);
        if (c->have_join_lists) {
            t->confirmed = 0;
            snprintf(t->note, sizeof t->note, "in Thread#%s but not in the target's join list (about to wait, or "
                     "just woken)", t->method);
        }
    }
    describe_object(c, t);
}
