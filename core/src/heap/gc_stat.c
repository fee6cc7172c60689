/*
 * `ruby gc`: the GC's counters and state, read from the objspace and named
 * as GC.stat and GC.stat_heap name them. Each figure is computed the way the
 * target version's gc.c computes it (objspace_live_slots,
 * objspace_free_slots, total_allocated_objects...), from the members
 * layout_fields.def lists under "GC state": before 3.1 one eden and one
 * tomb heap, 3.1-3.3 an array of size pools, from 3.4 an array of heaps.
 * The objspace is reached from the VM alone, not through the heap page
 * table, so a core taken in the middle of a GC, whose pages may be half
 * swept, still gives its counters and says which phase it was in.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/json.h"
#include "base/strbuf.h"
#include "context/context.h"
#include "heap/heap.h"
#include "vm/gc_state.h"
#include "vm/robject.h"
#include "vm/threads.h"
#include "vm/validate.h"

enum { MAX_POOLS = 16 };
/* A booted Ruby has allocated more objects than this; heap pages are 16 KiB
 * (before 3.1) or 64 KiB; no counter of a real process comes near 2^52. */
#define MIN_BOOT_ALLOCATIONS 1000u
#define MAX_PAGE_BYTES 65536u
#define MAX_COUNTER (UINT64_C(1) << 52)

typedef struct gc_pool {
    uint64_t slot_size, eden_pages, eden_slots, tomb_pages, tomb_slots;
    uint64_t allocated, freed, final_slots;
    bool has_objects, has_tomb;
} gc_pool;

typedef struct gc_stat {
    uint64_t objspace;
    uint64_t count, major, minor;
    uint64_t allocated_pages, available, live, free_slots, final_slots;
    uint64_t allocated, freed;
    uint64_t malloc_increase, oldmalloc_increase;
    uint64_t mode, during_gc, dont_gc, stressful, minor_gc, compacting, incremental;
    uint64_t stress_value;
    bool minor_known;  /* the layout places flags.during_minor_gc */
    bool stress_known; /* ... and flags.gc_stressful */
    gc_pool pools[MAX_POOLS];
    size_t npools;
} gc_stat;

#define L(s) (&(s)->layout)

static bool rd(rbpeek_session *s, uint64_t base, rbp_field_id id, uint64_t *out)
{
    return rbp_has(L(s), id) && rbp_read_field(s, base, id, out);
}

/* The members every version's GC.stat needs, beyond the per-pool ones. */
static const rbp_field_id COMMON[] = {
    RBP_L_objspace_malloc_increase, RBP_L_objspace_flag_mode,     RBP_L_objspace_flag_dont_gc,
    RBP_L_objspace_flag_during_gc,  RBP_L_objspace_gc_stress_mode, RBP_L_objspace_profile_count,
    RBP_L_objspace_minor_gc_count,  RBP_L_objspace_major_gc_count, RBP_L_objspace_oldmalloc_increase,
};

/* The pools (heaps) and their counters: 3.4's heaps[], 3.1-3.3's
 * size_pools[], or 2.7/3.0's eden and tomb heaps. */
static bool read_pools(rbpeek_session *s, gc_stat *g)
{
    const rbp_layout *l = L(s);
    uint64_t os = g->objspace;
    if (rbp_has(l, RBP_L_objspace_heaps) && rbp_has(l, RBP_L_gc_heap_size) &&
        rbp_has(l, RBP_L_gc_heap_total_allocated_objects)) {
        uint64_t sz = (uint64_t)l->f[RBP_L_gc_heap_size].size;
        int32_t all = l->f[RBP_L_objspace_heaps].size;
        if (sz == 0 || all <= 0) return false;
        g->npools = (size_t)((uint64_t)all / sz);
        if (g->npools > MAX_POOLS) g->npools = MAX_POOLS;
        for (size_t i = 0; i < g->npools; i++) {
            gc_pool *p = &g->pools[i];
            uint64_t h = os + (uint64_t)rbp_off(l, RBP_L_objspace_heaps) + i * sz;
            if (!rd(s, h, RBP_L_gc_heap_slot_size, &p->slot_size) || !rd(s, h, RBP_L_gc_heap_total_pages, &p->eden_pages) ||
                !rd(s, h, RBP_L_gc_heap_total_slots, &p->eden_slots) ||
                !rd(s, h, RBP_L_gc_heap_total_allocated_objects, &p->allocated) ||
                !rd(s, h, RBP_L_gc_heap_total_freed_objects, &p->freed) ||
                !rd(s, h, RBP_L_gc_heap_final_slots_count, &p->final_slots))
                return false;
            p->slot_size &= 0xffff;
            p->has_objects = true;
        }
        return true;
    }
    if (rbp_has(l, RBP_L_objspace_size_pools) && rbp_has(l, RBP_L_size_pool_size)) {
        uint64_t sz = (uint64_t)l->f[RBP_L_size_pool_size].size;
        int32_t all = l->f[RBP_L_objspace_size_pools].size;
        if (sz == 0 || all <= 0) return false;
        g->npools = (size_t)((uint64_t)all / sz);
        if (g->npools > MAX_POOLS) g->npools = MAX_POOLS;
        for (size_t i = 0; i < g->npools; i++) {
            gc_pool *p = &g->pools[i];
            uint64_t b = os + (uint64_t)rbp_off(l, RBP_L_objspace_size_pools) + i * sz;
            if (!rd(s, b, RBP_L_size_pool_slot_size, &p->slot_size) ||
                !rd(s, b, RBP_L_size_pool_eden_total_pages, &p->eden_pages) ||
                !rd(s, b, RBP_L_size_pool_eden_total_slots, &p->eden_slots) ||
                !rd(s, b, RBP_L_size_pool_tomb_total_pages, &p->tomb_pages) ||
                !rd(s, b, RBP_L_size_pool_tomb_total_slots, &p->tomb_slots))
                return false;
            p->slot_size &= 0xffff;
            p->has_tomb = true;
            if (rbp_has(l, RBP_L_size_pool_total_allocated_objects)) {
                if (!rd(s, b, RBP_L_size_pool_total_allocated_objects, &p->allocated) ||
                    !rd(s, b, RBP_L_size_pool_total_freed_objects, &p->freed))
                    return false;
                p->has_objects = true;
            }
        }
        return true;
    }
    if (rbp_has(l, RBP_L_objspace_eden_total_slots)) {
        gc_pool *p = &g->pools[0];
        g->npools = 1;
        p->slot_size = rbp_has(l, RBP_L_rvalue_size) ? (uint64_t)l->f[RBP_L_rvalue_size].size : 40;
        p->has_tomb = true;
        return rd(s, os, RBP_L_objspace_eden_total_pages, &p->eden_pages) &&
               rd(s, os, RBP_L_objspace_eden_total_slots, &p->eden_slots) &&
               rd(s, os, RBP_L_objspace_tomb_total_pages, &p->tomb_pages) &&
               rd(s, os, RBP_L_objspace_tomb_total_slots, &p->tomb_slots);
    }
    return false;
}

/* What gc.c guarantees of its counters, whatever the moment the target was
 * stopped at. A member misplaced in the layout (rb_objspace is private, and
 * the tables of lines without a DWARF build are worked out: docs/versions.md)
 * reads as a number that breaks one of these, and is refused rather than
 * printed. gc_start counts the GC (profile.count) a moment before
 * gc_marks_start counts it as minor or major, so inside a GC count may be
 * one ahead. Both malloc counters grow together, the old one is reset only
 * by a major GC, which also resets the other. */
static bool stress_value_ok(rbpeek_session *s, const gc_stat *g)
{
    uint64_t v = g->stress_value;
    const rbp_release *r = &s->rel;
    bool set = rbp_rtest(r, v); /* GC.stress= keeps any value; RTEST sets the bit */
    if (g->stress_known && (g->stressful != 0) != set) return false;
    return rbp_is_false(r, v) || rbp_is_true(r, v) || rbp_is_nil(r, v) || rbp_is_fixnum(v) || rbp_is_heap_ptr(s, v);
}

static bool plausible(rbpeek_session *s, const gc_stat *g, char *why, size_t n)
{
    uint64_t sum = g->minor + g->major, pages = 0;
    if (g->count != sum && !(g->during_gc && g->count == sum + 1))
        snprintf(why, n, "gc: count %llu is not minor %llu + major %llu", (unsigned long long)g->count,
                 (unsigned long long)g->minor, (unsigned long long)g->major);
    else if (g->allocated < MIN_BOOT_ALLOCATIONS || g->allocated > MAX_COUNTER ||
             g->freed + g->final_slots > g->allocated)
        snprintf(why, n, "gc: %llu objects allocated, %llu freed and %llu awaiting finalizers is no heap's count",
                 (unsigned long long)g->allocated, (unsigned long long)g->freed, (unsigned long long)g->final_slots);
    else if (g->allocated - g->freed > g->available)
        snprintf(why, n, "gc: %llu objects in use do not fit the heaps' %llu slots",
                 (unsigned long long)(g->allocated - g->freed), (unsigned long long)g->available);
    /* No relation between malloc_increase and oldmalloc_increase is
     * checked: the GC adds each malloc's size to one, then to the other, so
     * a thread caught between the two (in a running process, or stopped
     * there) leaves oldmalloc_increase below malloc_increase, which it
     * otherwise never is (a worker read live: 2,134,488 and 2,134,624). */
    else if (!stress_value_ok(s, g))
        snprintf(why, n, "gc: GC.stress reads 0x%llx%s", (unsigned long long)g->stress_value,
                 g->stress_known ? ", against flags.gc_stressful" : "");
    else
        why[0] = 0;
    for (size_t i = 0; !why[0] && i < g->npools; i++) {
        const gc_pool *p = &g->pools[i];
        /* pools and heaps hold ever larger slots (3.1-3.3: RVALUE << i) */
        if (i > 0 && p->slot_size <= g->pools[i - 1].slot_size) {
            snprintf(why, n, "gc: heap %zu's slot size %llu after heap %zu's %llu", i, (unsigned long long)p->slot_size,
                     i - 1, (unsigned long long)g->pools[i - 1].slot_size);
            break;
        }
        uint64_t max_slots = p->slot_size ? MAX_PAGE_BYTES / p->slot_size : 0;
        if (p->slot_size < 40 || p->slot_size % 8 || p->eden_pages > p->eden_slots ||
            p->eden_slots > p->eden_pages * max_slots || p->tomb_pages > p->tomb_slots ||
            p->tomb_slots > p->tomb_pages * max_slots || (p->has_objects && p->freed > p->allocated))
            snprintf(why, n, "gc: heap %zu reads slot size %llu, %llu+%llu pages of %llu+%llu slots", i,
                     (unsigned long long)p->slot_size, (unsigned long long)p->eden_pages,
                     (unsigned long long)p->tomb_pages, (unsigned long long)p->eden_slots,
                     (unsigned long long)p->tomb_slots);
        pages += p->eden_pages + p->tomb_pages;
    }
    /* every page of a heap is in the page table; from 3.4 the table also
     * holds the empty pages no heap owns, before only a page being added */
    if (!why[0] && (pages > g->allocated_pages || (!s->rel.gc.pages_darray && g->allocated_pages - pages > 1)))
        snprintf(why, n, "gc: the heaps hold %llu pages, the page table %llu", (unsigned long long)pages,
                 (unsigned long long)g->allocated_pages);
    return !why[0];
}

static rbpeek_status read_stat(rbpeek_session *s, gc_stat *g)
{
    const rbp_layout *l = L(s);
    memset(g, 0, sizeof *g);
    rbp_field_id osf = rbp_has(l, RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
    bool complete = rbp_has(l, osf);
    for (size_t i = 0; i < sizeof COMMON / sizeof COMMON[0]; i++) complete = complete && rbp_has(l, COMMON[i]);
    if (!complete)
        return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                        "gc: the struct layout (%s) lacks the GC's counters (rb_objspace is private to gc.c "
                        "and has no table for this Ruby line yet); use a layout made from this Ruby's DWARF "
                        "(rbpeek-layoutgen, --layout FILE)",
                        s->layout_source);
    /* The objspace and its phase: the reader the stacks' GC frames use too */
    rbp_gc_state gs;
    if (!rbp_gc_state_read(s, &gs)) {
        uint64_t os = 0;
        if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(l, osf), &os) || !rbp_is_heap_ptr(s, os))
            return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the objspace pointer of the VM at 0x%llx",
                            (unsigned long long)s->vm);
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the objspace at 0x%llx", (unsigned long long)os);
    }
    uint64_t os = g->objspace = gs.objspace;
    g->mode = gs.mode;
    g->during_gc = gs.during_gc;
    bool ok = rd(s, os, RBP_L_objspace_profile_count, &g->count) && rd(s, os, RBP_L_objspace_major_gc_count, &g->major) &&
              rd(s, os, RBP_L_objspace_minor_gc_count, &g->minor) &&
              rd(s, os, RBP_L_objspace_malloc_increase, &g->malloc_increase) &&
              rd(s, os, RBP_L_objspace_oldmalloc_increase, &g->oldmalloc_increase) &&
              rd(s, os, RBP_L_objspace_flag_dont_gc, &g->dont_gc) &&
              rd(s, os, RBP_L_objspace_gc_stress_mode, &g->stress_value);
    if (!ok)
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the objspace at 0x%llx", (unsigned long long)os);
    g->stress_known = rd(s, os, RBP_L_objspace_flag_stressful, &g->stressful);
    g->minor_known = rd(s, os, RBP_L_objspace_flag_during_minor_gc, &g->minor_gc);
    rd(s, os, RBP_L_objspace_flag_during_compacting, &g->compacting);
    rd(s, os, RBP_L_objspace_flag_during_incremental_marking, &g->incremental);
    if (!read_pools(s, g))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the heaps of the objspace at 0x%llx (layout %s)",
                        (unsigned long long)os, s->layout_source);
    /* heap_allocated_pages: what the page table counts */
    uint64_t table;
    if (!rbp_heap_page_table_read(s, os, &table, &g->allocated_pages))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the heap page table of the objspace at 0x%llx",
                        (unsigned long long)os);
    /* 4.0: what each Ractor allocated since the last GC is still counted
     * in its newobj cache (GC.stat adds the calling Ractor's first). */
    uint64_t cached[MAX_POOLS] = {0};
    if (!rbp_ractor_cache_counts(s, cached, g->npools))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the Ractors' newobj caches, where 4.0 counts the "
                                            "objects allocated since the last GC");
    for (size_t i = 0; i < g->npools; i++) {
        gc_pool *p = &g->pools[i];
        p->allocated += cached[i];
        g->available += p->eden_slots + p->tomb_slots;
        g->allocated += p->allocated;
        g->freed += p->freed;
        g->final_slots += p->final_slots;
    }
    if (!g->npools || !g->pools[0].has_objects) { /* before 3.3: objspace-wide counters */
        if (!rd(s, os, RBP_L_objspace_total_allocated_objects, &g->allocated) ||
            !rd(s, os, RBP_L_objspace_total_freed_objects, &g->freed))
            return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the object counters of the objspace at 0x%llx",
                            (unsigned long long)os);
    }
    if (s->rel.gc.final_slots_in_objspace && !rd(s, os, RBP_L_objspace_final_slots, &g->final_slots))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read heap_pages.final_slots of the objspace at 0x%llx",
                        (unsigned long long)os);
    char why[200];
    if (!plausible(s, g, why, sizeof why)) return rbp_layout_misfit(s, why);
    /* objspace_live_slots and objspace_free_slots, in size_t arithmetic as gc.c does */
    g->live = g->allocated - g->freed - g->final_slots;
    g->free_slots = g->available - g->live - g->final_slots;
    return RBPEEK_OK;
}

static const char *phase_name(const gc_stat *g)
{
    switch (g->mode) {
    case RBP_GC_MODE_MARKING: return "marking";
    case RBP_GC_MODE_SWEEPING: return "sweeping";
    case RBP_GC_MODE_COMPACTING: return "compacting";
    default: return "none";
    }
}

/* GC.stress's value: false, true, or the Integer of stress flags (text). */
static void put_stress(rbpeek_session *s, rbp_strbuf *b, uint64_t v)
{
    const rbp_release *r = &s->rel;
    if (rbp_is_false(r, v))
        rbp_sb_puts(b, "false");
    else if (rbp_is_true(r, v))
        rbp_sb_puts(b, "true");
    else if (rbp_is_fixnum(v))
        rbp_sb_printf(b, "%lld", (long long)rbp_fixnum_value(v));
    else if (rbp_is_nil(r, v))
        rbp_sb_puts(b, "nil");
    else
        rbp_sb_printf(b, "\"0x%llx\"", (unsigned long long)v);
}

/* The counters, in GC.stat's order and with its names. */
#define COUNTERS(X)                                                                                                    \
    X("count", count) X("heap_allocated_pages", allocated_pages) X("heap_available_slots", available)                \
    X("heap_live_slots", live) X("heap_free_slots", free_slots) X("heap_final_slots", final_slots)                    \
    X("total_allocated_objects", allocated) X("total_freed_objects", freed)                                           \
    X("malloc_increase_bytes", malloc_increase) X("minor_gc_count", minor) X("major_gc_count", major)                 \
    X("oldmalloc_increase_bytes", oldmalloc_increase)

/* GC.stress's value in JSON: nil is null there. */
static void json_stress(rbpeek_session *s, rbp_json *j, uint64_t v)
{
    const rbp_release *r = &s->rel;
    if (rbp_is_false(r, v) || rbp_is_true(r, v))
        rbp_json_bool(j, rbp_is_true(r, v));
    else if (rbp_is_fixnum(v))
        rbp_json_i64(j, rbp_fixnum_value(v));
    else if (rbp_is_nil(r, v))
        rbp_json_null(j);
    else
        rbp_json_hex(j, v);
}

static void render_json(rbpeek_session *s, const gc_stat *g, rbp_strbuf *b)
{
    rbp_json j;
    rbp_json_init(&j, b, RBP_JSON_SPACED);
    rbp_json_object(&j);
    rbp_json_kstr(&j, "ruby_version", s->ruby_version);
    rbp_json_khex(&j, "objspace", g->objspace);
#define J(name, m) rbp_json_ku64(&j, name, g->m);
    COUNTERS(J)
#undef J
    rbp_json_kbool(&j, "during_gc", g->during_gc);
    rbp_json_kstr(&j, "phase", phase_name(g));
    if (g->minor_known) { /* 3.2's table leaves these bits out (docs/versions.md) */
        rbp_json_kbool(&j, "minor_gc", g->minor_gc);
        rbp_json_kbool(&j, "incremental_marking", g->incremental);
    }
    rbp_json_kbool(&j, "disabled", g->dont_gc);
    rbp_json_key(&j, "stress");
    json_stress(s, &j, g->stress_value);
    rbp_json_key(&j, "heaps");
    rbp_json_array(&j);
    for (size_t i = 0; i < g->npools; i++) {
        const gc_pool *p = &g->pools[i];
        rbp_json_object(&j);
        rbp_json_ku64(&j, "slot_size", p->slot_size);
        rbp_json_ku64(&j, "heap_eden_pages", p->eden_pages);
        rbp_json_ku64(&j, "heap_eden_slots", p->eden_slots);
        if (p->has_tomb) {
            rbp_json_ku64(&j, "heap_tomb_pages", p->tomb_pages);
            rbp_json_ku64(&j, "heap_tomb_slots", p->tomb_slots);
        }
        if (p->has_objects) {
            rbp_json_ku64(&j, "total_allocated_objects", p->allocated);
            rbp_json_ku64(&j, "total_freed_objects", p->freed);
        }
        rbp_json_object_end(&j);
    }
    rbp_json_array_end(&j);
    rbp_json_object_end(&j);
    rbp_sb_putn(b, "\n", 1);
}

static void render_text(rbpeek_session *s, const gc_stat *g, rbp_strbuf *b)
{
    const char *state;
    if (g->during_gc)
        state = g->mode == RBP_GC_MODE_SWEEPING     ? "running: sweeping"
                : g->mode == RBP_GC_MODE_COMPACTING ? "running: compacting"
                                                    : "running: marking";
    else if (g->mode == RBP_GC_MODE_MARKING)
        state = "between steps of an incremental marking";
    else if (g->mode == RBP_GC_MODE_SWEEPING)
        state = "between steps of a lazy sweep";
    else
        state = "not running";
    const char *kind = !g->mode || !g->minor_known ? "" : g->minor_gc ? " (minor)" : " (major)";
    rbp_sb_printf(b, "GC: %s%s; %s; stress ", state, kind, g->dont_gc ? "disabled (GC.disable)" : "enabled");
    put_stress(s, b, g->stress_value);
    rbp_sb_printf(b, "  [objspace 0x%llx]\n", (unsigned long long)g->objspace);
#define T(name, m) rbp_sb_printf(b, "  %-26s %llu\n", name, (unsigned long long)g->m);
    COUNTERS(T)
#undef T
    rbp_sb_puts(b, "Heaps:\n   slot_size   eden_pages   eden_slots");
    bool tomb = g->npools && g->pools[0].has_tomb, objs = g->npools && g->pools[0].has_objects;
    if (tomb) rbp_sb_puts(b, "   tomb_pages   tomb_slots");
    if (objs) rbp_sb_puts(b, "     allocated        freed");
    rbp_sb_puts(b, "\n");
    for (size_t i = 0; i < g->npools; i++) {
        const gc_pool *p = &g->pools[i];
        rbp_sb_printf(b, "  %10llu %12llu %12llu", (unsigned long long)p->slot_size, (unsigned long long)p->eden_pages,
                      (unsigned long long)p->eden_slots);
        if (tomb) rbp_sb_printf(b, " %12llu %12llu", (unsigned long long)p->tomb_pages, (unsigned long long)p->tomb_slots);
        if (objs) rbp_sb_printf(b, " %13llu %12llu", (unsigned long long)p->allocated, (unsigned long long)p->freed);
        rbp_sb_puts(b, "\n");
    }
}

rbpeek_status rbpeek_gc_render(rbpeek_session *s, rbpeek_format format, char **out)
{
    if (!s || !out) return rbp_fail(s, RBPEEK_ERR_ARG, "gc: no session or no output");
    *out = NULL;
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "gc: attach to a Ruby first");
    gc_stat g;
    rbpeek_status st = read_stat(s, &g);
    if (st != RBPEEK_OK) return st;
    rbp_strbuf b;
    rbp_sb_init(&b);
    if (format == RBPEEK_FORMAT_JSON)
        render_json(s, &g, &b);
    else
        render_text(s, &g, &b);
    if (!(*out = rbp_sb_take(&b))) return rbp_fail(s, RBPEEK_ERR_NOMEM, "gc: out of memory");
    return RBPEEK_OK;
}
