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

#include "base/strbuf.h"
#include "context/context.h"
#include "vm/robject.h"

enum { MAX_POOLS = 16 };

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
    if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(l, osf), &g->objspace) || !rbp_is_heap_ptr(s, g->objspace))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the objspace pointer of the VM at 0x%llx",
                        (unsigned long long)s->vm);
    uint64_t os = g->objspace;
    bool ok = rd(s, os, RBP_L_objspace_profile_count, &g->count) && rd(s, os, RBP_L_objspace_major_gc_count, &g->major) &&
              rd(s, os, RBP_L_objspace_minor_gc_count, &g->minor) &&
              rd(s, os, RBP_L_objspace_malloc_increase, &g->malloc_increase) &&
              rd(s, os, RBP_L_objspace_oldmalloc_increase, &g->oldmalloc_increase) &&
              rd(s, os, RBP_L_objspace_flag_mode, &g->mode) && rd(s, os, RBP_L_objspace_flag_during_gc, &g->during_gc) &&
              rd(s, os, RBP_L_objspace_flag_dont_gc, &g->dont_gc) &&
              rd(s, os, RBP_L_objspace_gc_stress_mode, &g->stress_value);
    if (!ok)
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the objspace at 0x%llx", (unsigned long long)os);
    rd(s, os, RBP_L_objspace_flag_stressful, &g->stressful);
    rd(s, os, RBP_L_objspace_flag_during_minor_gc, &g->minor_gc);
    rd(s, os, RBP_L_objspace_flag_during_compacting, &g->compacting);
    rd(s, os, RBP_L_objspace_flag_during_incremental_marking, &g->incremental);
    if (!read_pools(s, g))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the heaps of the objspace at 0x%llx (layout %s)",
                        (unsigned long long)os, s->layout_source);
    /* heap_allocated_pages: 3.4 counts its rb_darray of sorted pages;
     * before, heap_pages.allocated_pages */
    if (rbp_ver_ge(s, 3, 4)) {
        uint64_t arr = 0;
        if (!rd(s, os, RBP_L_objspace_pages_sorted, &arr) || !arr || !rbp_mem_u64(s->mem, arr, &g->allocated_pages))
            return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read the heap page table of the objspace at 0x%llx",
                            (unsigned long long)os);
    } else if (!rd(s, os, RBP_L_objspace_pages_allocated, &g->allocated_pages)) {
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read heap_pages.allocated_pages of the objspace at 0x%llx",
                        (unsigned long long)os);
    }
    for (size_t i = 0; i < g->npools; i++) {
        const gc_pool *p = &g->pools[i];
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
    if (!rbp_ver_ge(s, 3, 4) && !rd(s, os, RBP_L_objspace_final_slots, &g->final_slots))
        return rbp_fail(s, RBPEEK_ERR_READ, "gc: cannot read heap_pages.final_slots of the objspace at 0x%llx",
                        (unsigned long long)os);
    /* objspace_live_slots and objspace_free_slots, in size_t arithmetic as gc.c does */
    g->live = g->allocated - g->freed - g->final_slots;
    g->free_slots = g->available - g->live - g->final_slots;
    return RBPEEK_OK;
}

static const char *phase_name(const gc_stat *g)
{
    switch (g->mode) {
    case 1: return "marking";
    case 2: return "sweeping";
    case 3: return "compacting";
    default: return "none";
    }
}

/* GC.stress's value: false, true, or the Integer of stress flags. */
static void put_stress(rbpeek_session *s, rbp_strbuf *b, uint64_t v)
{
    if (v == 0)
        rbp_sb_puts(b, "false");
    else if (v == 0x14)
        rbp_sb_puts(b, "true");
    else if (v & 1)
        rbp_sb_printf(b, "%lld", (long long)((int64_t)v >> 1));
    else if (v == rbp_qnil(s))
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

static void render_json(rbpeek_session *s, const gc_stat *g, rbp_strbuf *b)
{
    rbp_sb_puts(b, "{\"ruby_version\": ");
    rbp_sb_json_str(b, s->ruby_version);
    rbp_sb_printf(b, ", \"objspace\": \"0x%llx\"", (unsigned long long)g->objspace);
#define J(name, m) rbp_sb_printf(b, ", \"" name "\": %llu", (unsigned long long)g->m);
    COUNTERS(J)
#undef J
    rbp_sb_printf(b, ", \"during_gc\": %s, \"phase\": \"%s\", \"minor_gc\": %s, \"incremental_marking\": %s",
                  g->during_gc ? "true" : "false", phase_name(g), g->minor_gc ? "true" : "false",
                  g->incremental ? "true" : "false");
    rbp_sb_printf(b, ", \"disabled\": %s, \"stress\": ", g->dont_gc ? "true" : "false");
    put_stress(s, b, g->stress_value);
    rbp_sb_puts(b, ", \"heaps\": [");
    for (size_t i = 0; i < g->npools; i++) {
        const gc_pool *p = &g->pools[i];
        rbp_sb_printf(b, "%s{\"slot_size\": %llu, \"heap_eden_pages\": %llu, \"heap_eden_slots\": %llu", i ? ", " : "",
                      (unsigned long long)p->slot_size, (unsigned long long)p->eden_pages,
                      (unsigned long long)p->eden_slots);
        if (p->has_tomb)
            rbp_sb_printf(b, ", \"heap_tomb_pages\": %llu, \"heap_tomb_slots\": %llu", (unsigned long long)p->tomb_pages,
                          (unsigned long long)p->tomb_slots);
        if (p->has_objects)
            rbp_sb_printf(b, ", \"total_allocated_objects\": %llu, \"total_freed_objects\": %llu",
                          (unsigned long long)p->allocated, (unsigned long long)p->freed);
        rbp_sb_puts(b, "}");
    }
    rbp_sb_puts(b, "]}\n");
}

static void render_text(rbpeek_session *s, const gc_stat *g, rbp_strbuf *b)
{
    const char *state;
    if (g->during_gc)
        state = g->mode == 2 ? "running: sweeping" : g->mode == 3 ? "running: compacting" : "running: marking";
    else if (g->mode == 1)
        state = "between steps of an incremental marking";
    else if (g->mode == 2)
        state = "between steps of a lazy sweep";
    else
        state = "not running";
    rbp_sb_printf(b, "GC: %s%s%s; %s; stress ", state, g->mode && g->minor_gc ? " (minor)" : "",
                  g->mode && !g->minor_gc ? " (major)" : "", g->dont_gc ? "disabled (GC.disable)" : "enabled");
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
