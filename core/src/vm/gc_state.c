/*
 * The GC's state at a moment: the objspace, flags.during_gc and flags.mode
 * (gc_state.h). `ruby gc` prints them with the counters (heap/gc_stat.c);
 * snapshots use them to name the GC in the stack of the thread it runs on,
 * so that a sample taken during a GC lands on "[GC: marking]" above the
 * Ruby line that allocated, not on the line alone. Reading costs a pointer
 * and a flags word (one page, kept by the sampler's prefetch); the GVL
 * holder is read only while a GC runs.
 */
#include "vm/gc_state.h"

#include "vm/robject.h"
#include "vm/threads.h"

#define L(s) (&(s)->layout)

static rbp_field_id objspace_field(rbpeek_session *s)
{
    return rbp_has(L(s), RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
}

bool rbp_gc_state_known(rbpeek_session *s)
{
    return rbp_has(L(s), objspace_field(s)) && rbp_has(L(s), RBP_L_objspace_flag_mode) &&
           rbp_has(L(s), RBP_L_objspace_flag_during_gc);
}

bool rbp_gc_state_read(rbpeek_session *s, rbp_gc_state *out)
{
    *out = (rbp_gc_state){0};
    if (!s->attached || !rbp_gc_state_known(s)) return false;
    uint64_t os = 0;
    if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(L(s), objspace_field(s)), &os) || !rbp_is_heap_ptr(s, os))
        return false;
    out->objspace = os;
    return rbp_read_field(s, os, RBP_L_objspace_flag_during_gc, &out->during_gc) &&
           rbp_read_field(s, os, RBP_L_objspace_flag_mode, &out->mode);
}

uint64_t rbp_gc_thread(rbpeek_session *s, const rbp_gc_state *g)
{
    if (!g->during_gc) return 0;
    rbp_gvl_holder h[2];
    size_t n = 0;
    if (!rbp_gvl_holders(s, h, 2, &n) || n != 1) return 0;
    return h[0].th;
}

int32_t rbp_gc_phase(const rbp_gc_state *g)
{
    if (!g->during_gc) return RBPEEK_GC_NONE;
    switch (g->mode) {
    case RBP_GC_MODE_MARKING: return RBPEEK_GC_MARKING;
    case RBP_GC_MODE_SWEEPING: return RBPEEK_GC_SWEEPING;
    case RBP_GC_MODE_COMPACTING: return RBPEEK_GC_COMPACTING;
    default: return RBPEEK_GC_RUNNING;
    }
}

const char *rbpeek_gc_phase_label(int32_t phase)
{
    switch (phase) {
    case RBPEEK_GC_MARKING: return "[GC: marking]";
    case RBPEEK_GC_SWEEPING: return "[GC: sweeping]";
    case RBPEEK_GC_COMPACTING: return "[GC: compacting]";
    case RBPEEK_GC_RUNNING: return "[GC]";
    default: return NULL;
    }
}
