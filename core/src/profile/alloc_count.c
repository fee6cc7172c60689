/*
 * How many objects the target has allocated (rbpeek_alloc_counts_read): the
 * counters GC.stat(:total_allocated_objects) and GC.count add up, read from
 * the objspace while the target runs. `ruby allocs` reads them at the start
 * and the end of its run; their difference is the exact number of objects
 * allocated meanwhile, whatever the sampling of sites does.
 *
 * Where they are: before 3.2, one rb_objspace.total_allocated_objects; in
 * 3.2 and 3.3, one per size pool (rb_objspace.size_pools[i]); from 3.4, one
 * per heap (rb_objspace.heaps[i]), to which 4.0 adds what each Ractor's
 * newobj cache has counted since the last GC. Each is incremented once per
 * allocation by the allocating thread (gc.c newobj_init / newobj_alloc), so
 * a read of the running target sees a value that was true a moment ago.
 * rb_objspace is gc.c's private struct: its members come from our DWARF
 * builds, and a value that cannot be a counter (too small for a booted
 * Ruby, or going backwards, which the caller checks) refuses the layout.
 */
#include <stdio.h>
#include <string.h>

#include "context/context.h"
#include "memory/mem.h"
#include "vm/robject.h"
#include "vm/threads.h"
#include "vm/validate.h"

/* A booted Ruby has allocated more objects than this before running any
 * code of its own; a counter below it is not a counter. */
#define MIN_BOOT_ALLOCATIONS 1000u
#define MAX_PLAUSIBLE (1ull << 52)

static bool read_at(rbpeek_session *s, uint64_t addr, uint64_t *out)
{
    return rbp_mem_u64(s->mem, addr, out) && *out < MAX_PLAUSIBLE;
}

rbpeek_status rbpeek_alloc_counts_read(rbpeek_session *s, rbpeek_alloc_counts *out)
{
    if (!s || !out) return RBPEEK_ERR_ARG;
    memset(out, 0, sizeof *out);
    out->gc_count = UINT64_MAX;
    if (!s->attached) return rbp_fail(s, RBPEEK_ERR_STATE, "allocs: attach to a Ruby first");
    const rbp_layout *L = &s->layout;
    rbp_field_id osf = rbp_has(L, RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
    bool single = rbp_has(L, RBP_L_objspace_total_allocated_objects);
    bool pools = rbp_has(L, RBP_L_objspace_size_pools) && rbp_has(L, RBP_L_size_pool_total_allocated_objects) &&
                 L->f[RBP_L_size_pool_size].size > 0;
    bool heaps = rbp_has(L, RBP_L_objspace_heaps) && rbp_has(L, RBP_L_gc_heap_total_allocated_objects) &&
                 L->f[RBP_L_gc_heap_size].size > 0;
    if (!rbp_has(L, osf) || !(single || pools || heaps))
        return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                        "allocs: the struct layout (%s) does not say where this Ruby counts its allocations "
                        "(rb_objspace's total_allocated_objects); use a layout made from this Ruby's DWARF "
                        "(rbpeek-layoutgen)",
                        s->layout_source);
    /* The target runs between reads: nothing cached may answer. */
    rbp_mem_invalidate(s->mem);
    uint64_t os = 0;
    if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(L, osf), &os) || !os || (os & 7))
        return rbp_fail(s, RBPEEK_ERR_READ, "allocs: cannot read the objspace pointer of the VM at 0x%llx",
                        (unsigned long long)s->vm);
    if (single) {
        if (!read_at(s, os + (uint64_t)rbp_off(L, RBP_L_objspace_total_allocated_objects), &out->total))
            return rbp_fail(s, RBPEEK_ERR_READ, "allocs: cannot read the allocation counter of the objspace at 0x%llx",
                            (unsigned long long)os);
    } else {
        rbp_field_id arr = pools ? RBP_L_objspace_size_pools : RBP_L_objspace_heaps;
        rbp_field_id cnt = pools ? RBP_L_size_pool_total_allocated_objects : RBP_L_gc_heap_total_allocated_objects;
        uint64_t stride = (uint64_t)L->f[pools ? RBP_L_size_pool_size : RBP_L_gc_heap_size].size;
        uint64_t n = L->f[arr].size > 0 ? (uint64_t)L->f[arr].size / stride : 0;
        if (n == 0 || n > RBPEEK_ALLOC_MAX_HEAPS) {
            char why[160];
            snprintf(why, sizeof why, "allocs: %llu heaps of %llu bytes in the objspace is not a GC's",
                     (unsigned long long)n, (unsigned long long)stride);
            return rbp_layout_misfit(s, why);
        }
        uint32_t base = L->f[RBP_L_rvalue_size].size > 0 ? (uint32_t)L->f[RBP_L_rvalue_size].size : 40;
        for (uint64_t i = 0; i < n; i++) {
            uint64_t at = os + (uint64_t)rbp_off(L, arr) + i * stride;
            if (!read_at(s, at + (uint64_t)rbp_off(L, cnt), &out->per_heap[i]))
                return rbp_fail(s, RBPEEK_ERR_READ, "allocs: cannot read the allocation counter of heap %llu at 0x%llx",
                                (unsigned long long)i, (unsigned long long)at);
            uint64_t slot = (uint64_t)base << i;   /* 3.2, 3.3: pool i holds slots of RVALUE size << i */
            if (heaps && rbp_has(L, RBP_L_gc_heap_slot_size) && !rbp_read_field(s, at, RBP_L_gc_heap_slot_size, &slot))
                slot = 0;
            out->slot_size[i] = (uint32_t)slot;
            out->total += out->per_heap[i];
        }
        out->nheaps = (uint32_t)n;
        /* 4.0: what each Ractor allocated since the last GC is still
         * counted in its newobj cache, not yet in its heap's counter. */
        uint64_t cached[RBPEEK_ALLOC_MAX_HEAPS] = {0};
        if (!rbp_ractor_cache_counts(s, cached, (size_t)n))
            return rbp_fail(s, RBPEEK_ERR_READ, "allocs: cannot read the Ractors' newobj caches, where 4.0 counts "
                                                "the objects allocated since the last GC");
        for (uint64_t i = 0; i < n; i++) {
            out->per_heap[i] += cached[i];
            out->total += cached[i];
        }
    }
    if (out->total < MIN_BOOT_ALLOCATIONS) {
        char why[160];
        snprintf(why, sizeof why, "allocs: the allocation counter reads %llu, fewer than any booted Ruby has made",
                 (unsigned long long)out->total);
        return rbp_layout_misfit(s, why);
    }
    uint64_t gc = 0;
    if (rbp_has(L, RBP_L_objspace_profile_count) && read_at(s, os + (uint64_t)rbp_off(L, RBP_L_objspace_profile_count), &gc) &&
        gc <= out->total)
        out->gc_count = gc;
    return RBPEEK_OK;
}
