/*
 * Verdicts and JSON for threads and locks (see locks.h and locks_model.h):
 * the waits-for graph over the analysed threads (an edge for a Mutex wait
 * to the Mutex's owner, and for a Thread#join without a timeout to its
 * target), its cycles (deadlocks), the waits no live thread can satisfy,
 * the threads stuck behind either, and the document that carries them with
 * every thread, Mutex and GVL. Schema: docs/threads-and-locks.md.
 */
#include <stdio.h>
#include <stdlib.h>

#include "locks/locks_model.h"
#include "locks/waitgraph.h"

static const char *const wait_kind_names[] = {
    "none", "mutex", "condvar", "queue", "sized_queue", "sized_queue_push", "join", "io", "select",
    "sleep", "mutex_sleep", "stop", "other", "dead",
};

static const char *const owner_state_names[] = {"none", "thread", "dead_fiber", "unknown"};

/* --- JSON ------------------------------------------------------------------------------- */

static void j_addr(rbp_strbuf *b, uint64_t v)
{
    if (v)
        rbp_sb_printf(b, "\"0x%llx\"", (unsigned long long)v);
    else
        rbp_sb_puts(b, "null");
}

static void j_idx(rbp_strbuf *b, long i)
{
    if (i >= 0)
        rbp_sb_printf(b, "%ld", i);
    else
        rbp_sb_puts(b, "null");
}

static const char *state_name(const lk_thread *t)
{
    switch (t->kind) {
    case W_DEAD: return "killed";
    case W_NONE: return "runnable";
    case W_MUTEX: return "blocked";
    case W_STOP: return "stopped";
    case W_SLEEP:
    case W_MUTEX_SLEEP:
    case W_OTHER: return "sleeping";
    default: return "waiting";
    }
}

static void j_thread(lk_ctx *c, rbp_strbuf *b, size_t i)
{
    const lk_thread *t = &c->th[i];
    rbp_sb_printf(b, "{\"index\": %zu, \"thread\": ", i);
    j_addr(b, t->th);
    rbp_sb_puts(b, ", \"value\": ");
    j_addr(b, t->t->thread_value);
    rbp_sb_printf(b, ", \"state\": \"%s\", \"sleep_forever\": %s, \"holds_gvl\": %s, \"wait\": ", state_name(t),
                  t->status == TH_STOPPED_FOREVER ? "true" : "false", t->gvl ? "true" : "false");
    if (t->kind == W_NONE || t->kind == W_DEAD) {
        rbp_sb_puts(b, "null");
    } else {
        rbp_sb_printf(b, "{\"kind\": \"%s\", \"method\": ", wait_kind_names[t->kind]);
        rbp_sb_json_str(b, t->method[0] ? t->method : NULL);
        rbp_sb_puts(b, ", \"object\": ");
        j_addr(b, t->object);
        rbp_sb_puts(b, ", \"class\": ");
        rbp_sb_json_str(b, t->object ? t->object_class : NULL);
        rbp_sb_puts(b, ", \"mutex\": ");
        j_idx(b, t->mutex);
        rbp_sb_puts(b, ", \"owner\": ");
        j_idx(b, t->mutex >= 0 && c->mx[t->mutex].owner_state == OWN_THREAD ? c->mx[t->mutex].owner : -1);
        rbp_sb_puts(b, ", \"monitor\": ");
        j_addr(b, t->monitor);
        rbp_sb_puts(b, ", \"cv_mutex\": ");
        j_addr(b, t->cv_mutex);
        rbp_sb_puts(b, ", \"target\": ");
        j_idx(b, t->target);
        rbp_sb_puts(b, ", \"fd\": ");
        j_idx(b, t->fd);
        rbp_sb_printf(b, ", \"timeout\": %s, \"confirmed\": %s, \"queue_length\": ",
                      t->timeout < 0 ? "null" : t->timeout ? "true" : "false",
                      t->confirmed < 0 ? "null" : t->confirmed ? "true" : "false");
        j_idx(b, t->qlen);
        rbp_sb_puts(b, ", \"queue_waiters\": ");
        j_idx(b, t->qwaiting);
        rbp_sb_puts(b, ", \"note\": ");
        rbp_sb_json_str(b, t->note[0] ? t->note : NULL);
        rbp_sb_puts(b, "}");
    }
    rbp_sb_puts(b, ", \"holds\": [");
    size_t nh = 0;
    for (size_t k = 0; k < c->nmx; k++) {
        if (c->mx[k].owner != (long)i || c->mx[k].owner_state != OWN_THREAD) continue;
        rbp_sb_printf(b, nh++ ? ", %zu" : "%zu", k);
    }
    rbp_sb_puts(b, "], \"error\": ");
    rbp_sb_json_str(b, t->t->error); /* the frame walk's own complaint, if any */
    rbp_sb_puts(b, "}");
}

static void j_mutex(lk_ctx *c, rbp_strbuf *b, size_t k)
{
    const lk_mutex *m = &c->mx[k];
    rbp_sb_printf(b, "{\"index\": %zu, \"object\": ", k);
    j_addr(b, m->value);
    rbp_sb_puts(b, ", \"object_from\": ");
    rbp_sb_json_str(b, m->value ? m->value_from : NULL);
    rbp_sb_puts(b, ", \"data\": ");
    j_addr(b, m->data);
    rbp_sb_printf(b, ", \"locked\": %s, \"owner_state\": \"%s\", \"owner\": ",
                  !m->owner_read ? "null" : m->owner_raw ? "true" : "false", owner_state_names[m->owner_state]);
    j_idx(b, m->owner);
    rbp_sb_puts(b, ", \"owner_fiber\": ");
    j_addr(b, rbp_has(c->L, RBP_L_mutex_fiber) ? m->owner_raw : 0);
    rbp_sb_puts(b, ", \"owner_fiber_current\": ");
    rbp_sb_puts(b, m->owner_fiber_current < 0 ? "null" : m->owner_fiber_current ? "true" : "false");
    rbp_sb_puts(b, ", \"listed_by\": ");
    j_idx(b, m->listed_by);
    rbp_sb_puts(b, ", \"waiters\": [");
    size_t nw = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->th[i].mutex == (long)k) rbp_sb_printf(b, nw++ ? ", %zu" : "%zu", i);
    rbp_sb_puts(b, "], \"queued\": ");
    j_idx(b, m->queued);
    rbp_sb_puts(b, ", \"monitor\": ");
    j_addr(b, m->monitor);
    rbp_sb_puts(b, ", \"monitor_count\": ");
    j_idx(b, m->monitor_count);
    rbp_sb_puts(b, "}");
}

/* --- the analysis ------------------------------------------------------------------------ */

/* The thread i waits for (forever) until thread *to acts: a Mutex owner, or
 * a join target. */
static bool wait_edge(const lk_ctx *c, size_t i, uint32_t *to)
{
    const lk_thread *t = &c->th[i];
    long dst = -1;
    if (t->kind == W_MUTEX && t->mutex >= 0 && c->mx[t->mutex].owner_state == OWN_THREAD)
        dst = c->mx[t->mutex].owner;
    else if (t->kind == W_JOIN && t->timeout == 0 && t->status == TH_STOPPED_FOREVER)
        dst = t->target;
    if (dst < 0) return false;
    *to = (uint32_t)dst;
    return true;
}

static bool is_orphan(const lk_ctx *c, size_t i)
{
    const lk_thread *t = &c->th[i];
    if (t->kind != W_MUTEX || t->mutex < 0) return false;
    owner_state os = c->mx[t->mutex].owner_state;
    return os == OWN_DEAD_FIBER || os == OWN_UNKNOWN;
}

static void j_edge(lk_ctx *c, rbp_strbuf *b, size_t i, uint32_t to)
{
    const lk_thread *t = &c->th[i];
    rbp_sb_printf(b, "{\"thread\": %zu, \"via\": \"%s\", \"object\": ", i, t->kind == W_MUTEX ? "mutex" : "join");
    j_addr(b, t->kind == W_MUTEX ? (t->mutex >= 0 ? c->mx[t->mutex].value : 0) : t->object);
    rbp_sb_puts(b, ", \"mutex\": ");
    j_idx(b, t->kind == W_MUTEX ? t->mutex : -1);
    rbp_sb_printf(b, ", \"waits_for\": %u}", to);
}

void rbp_locks_render(lk_ctx *c, rbp_strbuf *b, const gvl_info *gvl, size_t ngvl)
{
    rbp_sb_puts(b, "{\"ruby_version\": ");
    rbp_sb_json_str(b, c->s->ruby_version);

    rbp_sb_puts(b, ",\n \"gvl\": [");
    for (size_t g = 0; g < ngvl; g++) {
        rbp_sb_printf(b, "%s{\"ractor\": %d, \"known\": %s, \"owner\": ", g ? ", " : "", gvl[g].ractor_index,
                      gvl[g].known ? "true" : "false");
        j_idx(b, gvl[g].owner);
        rbp_sb_puts(b, ", \"owner_thread\": ");
        j_addr(b, gvl[g].owner_th);
        rbp_sb_puts(b, "}");
    }

    rbp_sb_puts(b, "],\n \"threads\": [");
    for (size_t i = 0; i < c->n; i++) {
        if (i) rbp_sb_puts(b, ",\n  ");
        j_thread(c, b, i);
    }
    rbp_sb_puts(b, "],\n \"mutexes\": [");
    for (size_t k = 0; k < c->nmx; k++) {
        if (k) rbp_sb_puts(b, ",\n  ");
        j_mutex(c, b, k);
    }
    rbp_sb_puts(b, "]");

    /* The waits-for graph and what it says. */
    rbp_wg_edge *edges = malloc((c->n ? c->n : 1) * sizeof *edges);
    bool *bad = calloc(c->n ? c->n : 1, sizeof *bad), *behind = calloc(c->n ? c->n : 1, sizeof *behind);
    size_t ne = 0;
    rbp_cycles cyc = {0};
    bool ok = edges && bad && behind;
    if (ok) {
        for (size_t i = 0; i < c->n; i++) {
            uint32_t to;
            if (wait_edge(c, i, &to)) edges[ne++] = (rbp_wg_edge){(uint32_t)i, to};
        }
        ok = rbp_wg_cycles(c->n, edges, ne, 0, 0, &cyc);
    }
    if (!ok) {
        b->oom = true;
    } else {
        rbp_sb_puts(b, ",\n \"deadlocks\": [");
        for (size_t k = 0; k < cyc.ncycles; k++) {
            rbp_sb_puts(b, k ? ",\n  {\"cycle\": [" : "{\"cycle\": [");
            for (size_t p = cyc.start[k]; p < cyc.start[k + 1]; p++) {
                uint32_t v = cyc.nodes[p], to = 0;
                bad[v] = true;
                wait_edge(c, v, &to);
                if (p > cyc.start[k]) rbp_sb_puts(b, ", ");
                j_edge(c, b, v, to);
            }
            rbp_sb_puts(b, "]}");
        }
        rbp_sb_printf(b, "],\n \"deadlocks_truncated\": %s,\n \"orphans\": [", cyc.truncated ? "true" : "false");
        size_t no = 0;
        for (size_t i = 0; i < c->n; i++) {
            if (!is_orphan(c, i)) continue;
            const lk_mutex *m = &c->mx[c->th[i].mutex];
            bad[i] = true;
            rbp_sb_printf(b, "%s{\"thread\": %zu, \"mutex\": %ld, \"object\": ", no++ ? ", " : "", i, c->th[i].mutex);
            j_addr(b, m->value);
            rbp_sb_puts(b, ", \"reason\": ");
            char why[200];
            if (m->owner_state == OWN_DEAD_FIBER)
                snprintf(why, sizeof why, "it is locked by fiber 0x%llx, which has finished: no live fiber can "
                         "unlock it", (unsigned long long)m->owner_raw);
            else
                snprintf(why, sizeof why, "its owner (0x%llx) is not a live thread's fiber or thread",
                         (unsigned long long)m->owner_raw);
            rbp_sb_json_str(b, why);
            rbp_sb_puts(b, ", \"owner_thread\": ");
            j_idx(b, m->owner);
            rbp_sb_puts(b, "}");
        }
        rbp_sb_puts(b, "],\n \"behind\": [");
        size_t nb = 0;
        if (rbp_wg_reaching(c->n, edges, ne, bad, behind)) {
            for (size_t i = 0; i < c->n; i++) {
                uint32_t to;
                if (!behind[i] || bad[i] || !wait_edge(c, i, &to)) continue;
                if (nb++) rbp_sb_puts(b, ", ");
                j_edge(c, b, i, to);
            }
        } else {
            b->oom = true;
        }
        rbp_sb_puts(b, "]");
    }
    rbp_cycles_free(&cyc);
    free(edges);
    free(bad);
    free(behind);

    rbp_sb_puts(b, ",\n \"notes\": [");
    if (c->notes.buf) rbp_sb_puts(b, c->notes.buf);
    rbp_sb_puts(b, "]}\n");
}
