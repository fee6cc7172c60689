/*
 * Threads and locks (see locks.h), the collection: runs the per-thread
 * reads (waits.c) and the Mutex owners (sync.c), finds the objects of held
 * Mutexes that no wait names (frame receivers, Monitors, a scan of the VM
 * stacks) and each ractor's GVL owner, and hands the model to
 * locks_json.c, which turns it into verdicts and JSON.
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

#include <stdlib.h>

#include "locks/collect.h"

/* --- GVL ---------------------------------------------------------------------------------- */

static bool read_gvl(lk_ctx *c, uint64_t ractor, gvl_info *g)
{
    const rbp_layout *L = c->L;
    g->known = false;
    g->owner = -1;
    g->owner_th = 0;
    if (rbp_has(L, RBP_L_ractor_sched_running)) /* 3.3+ */
        g->known = ractor && lk_read_u64_at(c, ractor, RBP_L_ractor_sched_running, &g->owner_th);
    else if (rbp_has(L, RBP_L_ractor_gvl_owner)) /* 3.0 - 3.2 */
        g->known = ractor && lk_read_u64_at(c, ractor, RBP_L_ractor_gvl_owner, &g->owner_th);
    else if (rbp_has(L, RBP_L_vm_gvl_owner)) /* < 3.0 */
        g->known = lk_read_u64_at(c, c->s->vm, RBP_L_vm_gvl_owner, &g->owner_th);
    if (!g->known) {
        lk_note(c, "the GVL owner: unknown on Ruby %s (its struct layout has no GVL owner field, or it is unreadable)",
                c->s->ruby_version);
        return false;
    }
    g->owner = lk_idx_get(&c->by_th, g->owner_th);
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
        if (!lk_read_u64_at(c, t->ec, RBP_L_ec_vm_stack, &vm_stack) || !lk_read_u64_at(c, t->ec, RBP_L_ec_cfp, &cfp) ||
            !lk_read_u64_at(c, cfp, RBP_L_cfp_sp, &sp) || sp <= vm_stack)
            continue;
        uint64_t nwords = (sp - vm_stack) / 8;
        if (nwords > MAX_STACK_WORDS) nwords = MAX_STACK_WORDS;
        if (nwords > c->stack_budget) {
            nwords = c->stack_budget;
            lk_note(c, "the search of the VM stacks for Mutex objects was cut (its read budget is spent): some "
                       "held Mutexes may be shown by address only");
        }
        c->stack_budget -= nwords;
        nwords = rbp_mem_read_partial(c->s->mem, vm_stack, words, (size_t)(nwords * 8)) / 8;
        for (uint64_t w = 0; w < nwords && unresolved; w++) {
            uint64_t v = words[w];
            if (!rbp_is_heap_ptr(c->s, v)) continue;
            long k = lk_idx_get(&c->by_data, lk_mutex_data_of(c, v));
            if (k >= 0 && !c->mx[k].value) {
                lk_mutex_set_value(c, k, v, "stack");
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
            recv_kind rk = lk_receiver_kind(c, v, &data);
            if (rk == RK_MUTEX) {
                lk_mutex_set_value(c, lk_idx_get(&c->by_data, data), v, "frame");
            } else if (rk == RK_MONITOR && data) {
                uint64_t mv = 0, count = 0;
                if (!rbp_mem_u64(c->s->mem, data + MONITOR_MUTEX_OFF, &mv)) continue;
                long k = lk_idx_get(&c->by_data, lk_mutex_data_of(c, mv));
                if (k < 0) continue;
                lk_mutex_set_value(c, k, mv, "monitor");
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
    lk_ctx c = {.s = s, .L = &s->layout, .n = rbpeek_snapshot_thread_count(snap), .list_budget = LK_LIST_BUDGET,
                .stack_budget = LK_STACK_WORDS_BUDGET};
    rbp_addrmap_init(&c.by_th, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.by_value, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.by_data, SIZE_MAX, NULL);
    rbp_addrmap_init(&c.type_names, SIZE_MAX, free);
    rbp_addrmap_init(&c.waitqs, SIZE_MAX, lk_waitq_free);
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
        rbp_addrmap_put(&c.by_th, c.th[i].t->thread_addr, lk_idx_val(i));
        rbp_addrmap_put(&c.by_value, c.th[i].t->thread_value, lk_idx_val(i));
    }
    lk_need(&c, "which Mutex a thread is blocked on", RBP_L_th_locking_mutex, RBP_L_typeddata_data);
    lk_need(&c, "which Mutexes a thread holds", RBP_L_th_keeping_mutexes, RBP_L_mutex_next_mutex);
    c.have_join_lists = lk_need(&c, "which threads wait in Thread#join", RBP_L_th_join_list, RBP_L_COUNT) &&
                        ((rbp_has(c.L, RBP_L_waiting_list_next) && rbp_has(c.L, RBP_L_waiting_list_thread)) ||
                         (rbp_has(c.L, RBP_L_thread_list_next) && rbp_has(c.L, RBP_L_thread_list_th)));
    for (size_t i = 0; i < c.n; i++) lk_read_thread(&c, i);
    for (size_t i = 0; i < c.n; i++) lk_walk_keeping(&c, i);
    for (size_t i = 0; i < c.n; i++) lk_walk_join_list(&c, i);
    for (size_t i = 0; i < c.n; i++) lk_classify(&c, i);
    for (size_t k = 0; k < c.nmx; k++) lk_mutex_read_owner(&c, &c.mx[k]);
    match_receivers(&c);
    scan_stacks_for_mutexes(&c);
    for (size_t k = 0; k < c.nmx; k++)
        if (!c.mx[k].value)
            lk_note(&c, "a held Mutex whose object no Ruby stack references is shown by its rb_mutex_t (\"data\") "
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
