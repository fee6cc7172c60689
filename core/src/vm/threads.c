/*
 * Thread enumeration (see threads.h). Before 3.0 the VM keeps one list of
 * living threads; from 3.0 the VM keeps a list of ractors and each ractor a
 * list of its threads. Both are ccan-style circular lists whose node sits
 * inside the element, so each step is "read next, subtract the node offset".
 * Every step goes through the shared walk guard (base/walkguard.h): a
 * list that loops anywhere, not only onto itself or its head, is cut where
 * the loop is found, as is one longer than its limit; and a thread met a
 * second time (a node pointing into another ractor's list) ends the list
 * it was met in, so no thread is listed twice. Each cut sets the warning.
 */
#include "vm/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/addrmap.h"
#include "base/walkguard.h"
#include "vm/kernel_tid.h"
#include "vm/robject.h"

#define MAX_RACTORS 10000
/* A newobj cache's count is reset at every GC; no Ruby allocates 2^40
 * objects between two. */
#define MAX_CACHE_COUNT (UINT64_C(1) << 40)

typedef struct list_walk {
    uint64_t head, cur;
    int32_t node_off;
    rbp_walkguard guard;
} list_walk;

static list_walk list_start(uint64_t head, int32_t node_off, size_t limit)
{
    return (list_walk){.head = head, .node_off = node_off, .guard = rbp_walkguard_start(limit, NULL)};
}

/* Returns the next element of a circular list, or 0 at the end / on damage. */
static uint64_t list_next(rbpeek_session *s, list_walk *w, const char **warning)
{
    uint64_t next = 0;
    uint64_t from = w->cur ? w->cur + (uint64_t)w->node_off : w->head;
    if (!rbp_mem_u64(s->mem, from, &next)) {
        *warning = "a thread list node is unreadable; the list is cut there";
        return 0;
    }
    if (next == w->head) return 0;
    if (!next) {
        *warning = "a thread list holds a null link; the list is cut there";
        return 0;
    }
    switch (rbp_walkguard_step(&w->guard, next)) {
    case RBP_WALK_OK:
        break;
    case RBP_WALK_CYCLE:
        *warning = "a thread list loops without returning to its head; the list is cut there";
        return 0;
    default:
        *warning = "a thread list is implausibly long; the list is cut there";
        return 0;
    }
    w->cur = next - (uint64_t)w->node_off;
    return w->cur;
}

/* A walk over the VM's ractors (3.0+), at most limit of them. */
static list_walk ractor_walk(rbpeek_session *s, size_t limit)
{
    const rbp_layout *L = &s->layout;
    return list_start(s->vm + (uint64_t)rbp_off(L, RBP_L_vm_ractor_set), rbp_off(L, RBP_L_ractor_vmlr_node), limit);
}

void rbp_thread_read(rbpeek_session *s, uint64_t th, rbp_thread_raw *t)
{
    const rbp_layout *L = &s->layout;
    uint64_t v = 0;
    memset(t, 0, sizeof *t);
    t->th = th;
    t->native_tid = -1;
    if (rbp_read_field(s, th, RBP_L_th_self, &v)) t->self = v;
    if (rbp_read_field(s, th, RBP_L_th_ec, &v)) t->ec = v;
    if (rbp_read_field(s, th, RBP_L_th_status, &v)) t->status = (int)v;
    if (rbp_read_field(s, th, RBP_L_th_to_kill, &v)) t->to_kill = (int)v;
    if (rbp_read_field(s, th, RBP_L_th_name, &v)) t->name = v;
    if (rbp_read_field(s, th, RBP_L_th_ractor, &v)) t->ractor = v;
    if (rbp_has(L, RBP_L_th_nt)) { /* 3.3+: native thread struct */
        uint64_t nt = 0;
        if (rbp_read_field(s, th, RBP_L_th_nt, &nt) && nt) {
            if (rbp_read_field(s, nt, RBP_L_nt_tid, &v) && (int32_t)v > 0) t->native_tid = (int32_t)v;
            if (rbp_read_field(s, nt, RBP_L_nt_thread_id, &v)) t->pthread_id = v;
        }
    } else {
        if (rbp_read_field(s, th, RBP_L_th_tid, &v) && (int32_t)v > 0) t->native_tid = (int32_t)v;
        if (rbp_read_field(s, th, RBP_L_th_thread_id, &v)) t->pthread_id = v;
    }
}

#define SCAN_THREADS 64   /* lists up to this long are checked for a loop by a scan */

static bool push(rbp_thread_raw **arr, size_t *n, size_t *cap, const rbp_thread_raw *t)
{
    if (*n == *cap) {
        size_t nc = *cap ? *cap * 2 : 16;
        rbp_thread_raw *na = realloc(*arr, nc * sizeof *na);
        if (!na) return false;
        *arr = na;
        *cap = nc;
    }
    (*arr)[(*n)++] = *t;
    return true;
}

static void walk_thread_list(rbpeek_session *s, uint64_t head, int32_t node_off, uint64_t ractor, int ractor_index,
                             uint64_t main_th, rbp_addrmap *seen, rbp_thread_raw **arr, size_t *n, size_t *cap,
                             const char **warning)
{
    list_walk w = list_start(head, node_off, RBP_MAX_THREADS);
    uint64_t th;
    while ((th = list_next(s, &w, warning)) != 0) {
        if (*n >= RBP_MAX_THREADS) {
            *warning = "more threads than rbpeek lists; the list is cut there";
            return;
        }
        /* A short list is checked by a scan of what it listed; a long one
         * gets a hash set, built once it is long (a sample lists every
         * thread, and a set's table would be an allocation each time). */
        bool dup = false, oom = false;
        if (*n < SCAN_THREADS) {
            for (size_t i = 0; i < *n && !dup; i++) dup = (*arr)[i].th == th;
        } else {
            if (!seen->len) /* the list just grew long: the set takes what it listed */
                for (size_t i = 0; i < *n && !oom; i++) oom = !rbp_addrmap_put(seen, (*arr)[i].th, (void *)1);
            dup = rbp_addrmap_get(seen, th) != NULL;
            oom = oom || (!dup && !rbp_addrmap_put(seen, th, (void *)1));
        }
        if (dup) {
            *warning = "a thread list leads into a thread already listed; the list is cut there";
            return;
        }
        if (oom) {
            *warning = "out of memory while listing threads";
            return;
        }
        rbp_thread_raw t;
        rbp_thread_read(s, th, &t);
        if (!t.ractor) t.ractor = ractor;
        t.ractor_index = ractor_index;
        t.is_main = th == main_th;
        if (!push(arr, n, cap, &t)) {
            *warning = "out of memory while listing threads";
            return;
        }
    }
}

rbpeek_status rbp_threads_collect(rbpeek_session *s, rbp_thread_raw **out, size_t *n, const char **warning)
{
    const rbp_layout *L = &s->layout;
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    *warning = NULL;
    uint64_t main_th = 0;
    rbp_addrmap seen; /* every thread listed so far, across ractors */
    rbp_addrmap_init(&seen, (size_t)RBP_MAX_THREADS * 2, NULL);

    if (rbp_has(L, RBP_L_vm_ractor_set)) {
        rbp_read_field(s, s->vm, RBP_L_vm_ractor_main_thread, &main_th);
        list_walk rw = ractor_walk(s, MAX_RACTORS);
        uint64_t r;
        int index = 0;
        while ((r = list_next(s, &rw, warning)) != 0) {
            walk_thread_list(s, r + (uint64_t)rbp_off(L, RBP_L_ractor_threads_set), rbp_off(L, RBP_L_th_lt_node), r,
                             index++, main_th, &seen, out, n, &cap, warning);
        }
    } else {
        rbp_read_field(s, s->vm, RBP_L_vm_main_thread, &main_th);
        walk_thread_list(s, s->vm + (uint64_t)rbp_off(L, RBP_L_vm_living_threads), rbp_off(L, RBP_L_th_vmlt_node), 0,
                         0, main_th, &seen, out, n, &cap, warning);
    }
    rbp_addrmap_destroy(&seen);
    if (*n == 0)
        return rbp_fail(s, RBPEEK_ERR_CORRUPT, "the Ruby VM at 0x%llx lists no threads%s%s",
                        (unsigned long long)s->vm, *warning ? ": " : "", *warning ? *warning : "");
    return RBPEEK_OK;
}

/* --- who holds the GVL ------------------------------------------------------ */

static void holder_ids(rbpeek_session *s, uint64_t th, rbp_gvl_holder *h)
{
    uint64_t v = 0;
    h->th = th;
    h->native_tid = -1;
    h->pthread_id = 0;
    if (!th) return;
    if (rbp_has(&s->layout, RBP_L_th_nt)) { /* 3.3+: under M:N the native thread may change */
        uint64_t nt = 0;
        if (rbp_read_field(s, th, RBP_L_th_nt, &nt) && nt) {
            if (rbp_read_field(s, nt, RBP_L_nt_tid, &v) && (int32_t)v > 0) h->native_tid = (int32_t)v;
            if (rbp_read_field(s, nt, RBP_L_nt_thread_id, &v)) h->pthread_id = v;
        }
    } else {
        if (rbp_read_field(s, th, RBP_L_th_tid, &v) && (int32_t)v > 0) h->native_tid = (int32_t)v;
        if (rbp_read_field(s, th, RBP_L_th_thread_id, &v)) h->pthread_id = v;
    }
    h->native_tid = rbp_kernel_tid(s, h->pthread_id, h->native_tid);
}

/* The rb_thread_t holding each ractor's GVL (0 where it is free), as
 * rbp_gvl_holders says. */
static bool gvl_owners(rbpeek_session *s, uint64_t *out, size_t max, size_t *n)
{
    const rbp_layout *L = &s->layout;
    *n = 0;
    if (!rbp_has(L, RBP_L_vm_ractor_set)) {
        if (!rbp_has(L, RBP_L_vm_gvl_owner) || max < 1 || !rbp_read_field(s, s->vm, RBP_L_vm_gvl_owner, &out[0]))
            return false;
        *n = 1;
        return true;
    }
    rbp_field_id field;
    if (rbp_has(L, RBP_L_ractor_sched_running)) field = RBP_L_ractor_sched_running;       /* 3.2+ */
    else if (rbp_has(L, RBP_L_ractor_gvl_owner)) field = RBP_L_ractor_gvl_owner;         /* 3.0, 3.1 */
    else return false;
    const char *warning = NULL;
    list_walk rw = ractor_walk(s, max + 1);
    uint64_t r;
    while ((r = list_next(s, &rw, &warning)) != 0) {
        if (*n >= max || !rbp_read_field(s, r, field, &out[*n])) return false;
        (*n)++;
    }
    return !warning && *n > 0;
}

bool rbp_gvl_holders(rbpeek_session *s, rbp_gvl_holder *out, size_t max, size_t *n)
{
    uint64_t th[64];
    size_t k = 0;
    *n = 0;
    if (!gvl_owners(s, th, max < 64 ? max : 64, &k)) return false;
    for (size_t i = 0; i < k; i++) holder_ids(s, th[i], &out[i]);
    *n = k;
    return true;
}

int rbp_ec_holds_gvl(rbpeek_session *s, uint64_t ec)
{
    uint64_t th[64];
    size_t k = 0;
    if (!ec || !gvl_owners(s, th, 64, &k)) return -1;
    for (size_t i = 0; i < k; i++) {
        uint64_t its = 0;
        if (!th[i]) continue;
        if (!rbp_read_field(s, th[i], RBP_L_th_ec, &its)) return -1;
        if (its == ec) return 1;
    }
    return 0;
}

/* One queue of GVL waiters: a ccan list whose nodes sit at node_off in
 * each waiting rb_thread_t. False when it loops, is cut or is longer than
 * the room left in out. */
static bool queue_waiters(rbpeek_session *s, uint64_t head, int32_t node_off, uint64_t *out, size_t max, size_t *n)
{
    const char *warning = NULL;
    list_walk w = list_start(head, node_off, max + 1);
    uint64_t th;
    while ((th = list_next(s, &w, &warning)) != 0) {
        if (*n >= max) return false;
        out[(*n)++] = th;
    }
    return !warning;
}

bool rbp_gvl_waiters(rbpeek_session *s, uint64_t *out, size_t max, size_t *n)
{
    const rbp_layout *L = &s->layout;
    *n = 0;
    if (!rbp_has(L, RBP_L_vm_ractor_set)) {
        if (!rbp_has(L, RBP_L_vm_gvl_waitq) || !rbp_has(L, RBP_L_th_gvl_node)) return false;
        return queue_waiters(s, s->vm + (uint64_t)rbp_off(L, RBP_L_vm_gvl_waitq), rbp_off(L, RBP_L_th_gvl_node), out,
                             max, n);
    }
    rbp_field_id queue, node;
    if (rbp_has(L, RBP_L_ractor_sched_readyq) && rbp_has(L, RBP_L_th_readyq_node)) {   /* 3.2+ */
        queue = RBP_L_ractor_sched_readyq;
        node = RBP_L_th_readyq_node;
    } else if (rbp_has(L, RBP_L_ractor_gvl_waitq) && rbp_has(L, RBP_L_th_gvl_node)) {  /* 3.0, 3.1 */
        queue = RBP_L_ractor_gvl_waitq;
        node = RBP_L_th_gvl_node;
    } else {
        return false;
    }
    const char *warning = NULL;
    list_walk rw = ractor_walk(s, MAX_RACTORS);
    uint64_t r;
    while ((r = list_next(s, &rw, &warning)) != 0)
        if (!queue_waiters(s, r + (uint64_t)rbp_off(L, queue), rbp_off(L, node), out, max, n)) return false;
    return !warning;
}

bool rbp_ractor_cache_counts(rbpeek_session *s, uint64_t *per_heap, size_t nheaps)
{
    const rbp_layout *L = &s->layout;
    if (!rbp_has(L, RBP_L_newobj_heap_cache_allocated)) return true;
    if (!rbp_has(L, RBP_L_vm_ractor_set) || !rbp_has(L, RBP_L_ractor_newobj_cache) ||
        !rbp_has(L, RBP_L_newobj_cache_heap_caches) || L->f[RBP_L_newobj_heap_cache_size].size <= 0)
        return false;
    uint64_t stride = (uint64_t)L->f[RBP_L_newobj_heap_cache_size].size;
    int32_t all = L->f[RBP_L_newobj_cache_heap_caches].size;
    size_t n = all > 0 ? (size_t)((uint64_t)all / stride) : 0;
    if (n < nheaps) nheaps = n;
    const char *warning = NULL;
    list_walk rw = ractor_walk(s, MAX_RACTORS);
    uint64_t r;
    while ((r = list_next(s, &rw, &warning)) != 0) {
        uint64_t cache = 0;
        if (!rbp_read_field(s, r, RBP_L_ractor_newobj_cache, &cache)) return false;
        if (!cache) continue; /* a Ractor that has not allocated yet */
        uint64_t caches = cache + (uint64_t)rbp_off(L, RBP_L_newobj_cache_heap_caches);
        for (size_t i = 0; i < nheaps; i++) {
            uint64_t c = 0;
            if (!rbp_read_field(s, caches + i * stride, RBP_L_newobj_heap_cache_allocated, &c) || c > MAX_CACHE_COUNT)
                return false;
            per_heap[i] += c;
        }
    }
    return !warning;
}
