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
#include <string.h>

#include "base/json.h"
#include "locks/locks_model.h"
#include "locks/waitgraph.h"

static const char *const wait_kind_names[] = {
    "none", "mutex", "condvar", "queue", "sized_queue", "sized_queue_push", "join", "io", "select",
    "sleep", "mutex_sleep", "stop", "other", "dead",
};

static const char *const owner_state_names[] = {"none", "thread", "dead_fiber", "unknown"};

/* --- JSON ------------------------------------------------------------------------------- */

static void j_addr(rbp_json *j, const char *key, uint64_t v)
{
    rbp_json_key(j, key);
    if (v) rbp_json_hex(j, v);
    else rbp_json_null(j);
}

static void j_idx(rbp_json *j, const char *key, long i)
{
    rbp_json_key(j, key);
    if (i >= 0) rbp_json_i64(j, i);
    else rbp_json_null(j);
}

/* true, false, or null for "unknown" (< 0). */
static void j_tri(rbp_json *j, const char *key, int v)
{
    rbp_json_key(j, key);
    if (v < 0) rbp_json_null(j);
    else rbp_json_bool(j, v != 0);
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

static void j_thread(lk_ctx *c, rbp_json *j, size_t i)
{
    const lk_thread *t = &c->th[i];
    rbp_json_object(j);
    rbp_json_ku64(j, "index", i);
    j_addr(j, "thread", t->th);
    j_addr(j, "value", t->t->thread_value);
    rbp_json_kstr(j, "state", state_name(t));
    rbp_json_kbool(j, "sleep_forever", t->status == TH_STOPPED_FOREVER);
    rbp_json_kbool(j, "holds_gvl", t->gvl);
    rbp_json_key(j, "wait");
    if (t->kind == W_NONE || t->kind == W_DEAD) {
        rbp_json_null(j);
    } else {
        rbp_json_object(j);
        rbp_json_kstr(j, "kind", wait_kind_names[t->kind]);
        rbp_json_kstr(j, "method", t->method[0] ? t->method : NULL);
        j_addr(j, "object", t->object);
        rbp_json_kstr(j, "class", t->object ? t->object_class : NULL);
        j_idx(j, "mutex", t->mutex);
        j_idx(j, "owner", t->mutex >= 0 && c->mx[t->mutex].owner_state == OWN_THREAD ? c->mx[t->mutex].owner : -1);
        j_addr(j, "monitor", t->monitor);
        j_addr(j, "cv_mutex", t->cv_mutex);
        j_idx(j, "target", t->target);
        j_idx(j, "fd", t->fd);
        j_tri(j, "timeout", t->timeout);
        j_tri(j, "confirmed", t->confirmed);
        j_idx(j, "queue_length", t->qlen);
        j_idx(j, "queue_waiters", t->qwaiting);
        rbp_json_kstr(j, "note", t->note[0] ? t->note : NULL);
        rbp_json_object_end(j);
    }
    rbp_json_key(j, "holds");
    rbp_json_array(j);
    for (size_t k = 0; k < c->nmx; k++)
        if (c->mx[k].owner == (long)i && c->mx[k].owner_state == OWN_THREAD) rbp_json_u64(j, k);
    rbp_json_array_end(j);
    rbp_json_kstr(j, "error", t->t->error); /* the frame walk's own complaint, if any */
    rbp_json_object_end(j);
}

static void j_mutex(lk_ctx *c, rbp_json *j, size_t k)
{
    const lk_mutex *m = &c->mx[k];
    rbp_json_object(j);
    rbp_json_ku64(j, "index", k);
    j_addr(j, "object", m->value);
    rbp_json_kstr(j, "object_from", m->value ? m->value_from : NULL);
    j_addr(j, "data", m->data);
    j_tri(j, "locked", !m->owner_read ? -1 : m->owner_raw != 0);
    rbp_json_kstr(j, "owner_state", owner_state_names[m->owner_state]);
    j_idx(j, "owner", m->owner);
    j_addr(j, "owner_fiber", rbp_has(c->L, RBP_L_mutex_fiber) ? m->owner_raw : 0);
    j_tri(j, "owner_fiber_current", m->owner_fiber_current);
    j_idx(j, "listed_by", m->listed_by);
    rbp_json_key(j, "waiters");
    rbp_json_array(j);
    for (size_t i = 0; i < c->n; i++)
        if (c->th[i].mutex == (long)k) rbp_json_u64(j, i);
    rbp_json_array_end(j);
    j_idx(j, "queued", m->queued);
    j_addr(j, "monitor", m->monitor);
    j_idx(j, "monitor_count", m->monitor_count);
    rbp_json_object_end(j);
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

static void j_edge(lk_ctx *c, rbp_json *j, size_t i, uint32_t to)
{
    const lk_thread *t = &c->th[i];
    rbp_json_object(j);
    rbp_json_ku64(j, "thread", i);
    rbp_json_kstr(j, "via", t->kind == W_MUTEX ? "mutex" : "join");
    j_addr(j, "object", t->kind == W_MUTEX ? (t->mutex >= 0 ? c->mx[t->mutex].value : 0) : t->object);
    j_idx(j, "mutex", t->kind == W_MUTEX ? t->mutex : -1);
    rbp_json_ku64(j, "waits_for", to);
    rbp_json_object_end(j);
}

/* The waits-for graph and the threads it marks: those in a cycle or an
 * orphan's wait (bad), and those that reach one (behind). */
typedef struct lk_graph {
    rbp_wg_edge *edges;
    size_t ne;
    bool *bad, *behind;
    rbp_cycles cyc;
} lk_graph;

static void j_gvls(rbp_json *j, const gvl_info *gvl, size_t ngvl)
{
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "gvl");
    rbp_json_array(j);
    for (size_t g = 0; g < ngvl; g++) {
        rbp_json_object(j);
        rbp_json_ki64(j, "ractor", gvl[g].ractor_index);
        rbp_json_kbool(j, "known", gvl[g].known);
        j_idx(j, "owner", gvl[g].owner);
        j_addr(j, "owner_thread", gvl[g].owner_th);
        rbp_json_object_end(j);
    }
    rbp_json_array_end(j);
}

/* "threads" and "mutexes", one per line. */
static void j_threads_mutexes(lk_ctx *c, rbp_json *j)
{
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "threads");
    rbp_json_array(j);
    for (size_t i = 0; i < c->n; i++) {
        if (i) rbp_json_ws(j, "\n  ");
        j_thread(c, j, i);
    }
    rbp_json_array_end(j);
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "mutexes");
    rbp_json_array(j);
    for (size_t k = 0; k < c->nmx; k++) {
        if (k) rbp_json_ws(j, "\n  ");
        j_mutex(c, j, k);
    }
    rbp_json_array_end(j);
}

/* The graph's edges and cycles; false when out of memory. */
static bool lk_graph_build(const lk_ctx *c, lk_graph *g)
{
    g->edges = malloc((c->n ? c->n : 1) * sizeof *g->edges);
    g->bad = calloc(c->n ? c->n : 1, sizeof *g->bad);
    g->behind = calloc(c->n ? c->n : 1, sizeof *g->behind);
    if (!g->edges || !g->bad || !g->behind) return false;
    for (size_t i = 0; i < c->n; i++) {
        uint32_t to;
        if (wait_edge(c, i, &to)) g->edges[g->ne++] = (rbp_wg_edge){(uint32_t)i, to};
    }
    return rbp_wg_cycles(c->n, g->edges, g->ne, 0, 0, &g->cyc);
}

static void lk_graph_free(lk_graph *g)
{
    rbp_cycles_free(&g->cyc);
    free(g->edges);
    free(g->bad);
    free(g->behind);
}

/* "deadlocks": each cycle's edges, its threads marked bad. */
static void j_deadlocks(lk_ctx *c, rbp_json *j, lk_graph *g)
{
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "deadlocks");
    rbp_json_array(j);
    for (size_t k = 0; k < g->cyc.ncycles; k++) {
        if (k) rbp_json_ws(j, "\n  ");
        rbp_json_object(j);
        rbp_json_key(j, "cycle");
        rbp_json_array(j);
        for (size_t p = g->cyc.start[k]; p < g->cyc.start[k + 1]; p++) {
            uint32_t v = g->cyc.nodes[p], to = 0;
            g->bad[v] = true;
            wait_edge(c, v, &to);
            j_edge(c, j, v, to);
        }
        rbp_json_array_end(j);
        rbp_json_object_end(j);
    }
    rbp_json_array_end(j);
    rbp_json_ws(j, "\n ");
    rbp_json_kbool(j, "deadlocks_truncated", g->cyc.truncated);
}

/* "orphans": the waits on a Mutex no live thread can unlock, and why; the
 * waiting threads marked bad. */
static void j_orphans(lk_ctx *c, rbp_json *j, lk_graph *g)
{
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "orphans");
    rbp_json_array(j);
    for (size_t i = 0; i < c->n; i++) {
        if (!is_orphan(c, i)) continue;
        const lk_mutex *m = &c->mx[c->th[i].mutex];
        g->bad[i] = true;
        rbp_json_object(j);
        rbp_json_ku64(j, "thread", i);
        rbp_json_ki64(j, "mutex", c->th[i].mutex);
        j_addr(j, "object", m->value);
        char why[200];
        if (m->owner_state == OWN_DEAD_FIBER)
            snprintf(why, sizeof why, "it is locked by fiber 0x%llx, which has finished: no live fiber can "
                     "unlock it", (unsigned long long)m->owner_raw);
        else
            snprintf(why, sizeof why, "its owner (0x%llx) is not a live thread's fiber or thread",
                     (unsigned long long)m->owner_raw);
        rbp_json_kstr(j, "reason", why);
        j_idx(j, "owner_thread", m->owner);
        rbp_json_object_end(j);
    }
    rbp_json_array_end(j);
}

/* "behind": the edges of the threads stuck behind a bad one (not bad
 * themselves). False when out of memory. */
static bool j_behind(lk_ctx *c, rbp_json *j, lk_graph *g)
{
    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "behind");
    rbp_json_array(j);
    bool ok = rbp_wg_reaching(c->n, g->edges, g->ne, g->bad, g->behind);
    for (size_t i = 0; ok && i < c->n; i++) {
        uint32_t to;
        if (!g->behind[i] || g->bad[i] || !wait_edge(c, i, &to)) continue;
        j_edge(c, j, i, to);
    }
    rbp_json_array_end(j);
    return ok;
}

void rbp_locks_render(lk_ctx *c, rbp_strbuf *b, const gvl_info *gvl, size_t ngvl)
{
    rbp_json jw, *j = &jw;
    rbp_json_init(j, b, RBP_JSON_SPACED);
    rbp_json_object(j);
    rbp_json_kstr(j, "ruby_version", c->s->ruby_version);
    j_gvls(j, gvl, ngvl);
    j_threads_mutexes(c, j);

    /* The waits-for graph and what it says. */
    lk_graph g = {0};
    if (!lk_graph_build(c, &g)) {
        b->oom = true;
    } else {
        j_deadlocks(c, j, &g);
        j_orphans(c, j, &g);
        if (!j_behind(c, j, &g)) b->oom = true;
    }
    lk_graph_free(&g);

    rbp_json_ws(j, "\n ");
    rbp_json_key(j, "notes");
    rbp_json_array(j);
    for (size_t off = 0; c->notes.buf && off < c->notes.len; off += strlen(c->notes.buf + off) + 1)
        rbp_json_str(j, c->notes.buf + off);
    rbp_json_array_end(j);
    rbp_json_object_end(j);
    rbp_sb_putn(b, "\n", 1);
}
