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

#include <string.h>

#include "vm/robject.h"
#include "vm/threads.h"

static rbp_field_id objspace_field(rbpeek_session *s)
{
    return rbp_has(&s->layout, RBP_L_vm_gc_objspace) ? RBP_L_vm_gc_objspace : RBP_L_vm_objspace;
}

bool rbp_gc_state_known(rbpeek_session *s)
{
    return rbp_has(&s->layout, objspace_field(s)) && rbp_has(&s->layout, RBP_L_objspace_flag_mode) &&
           rbp_has(&s->layout, RBP_L_objspace_flag_during_gc);
}

/* A member's value from a copy of the bytes at [lo, ...) of its struct
 * (as rbp_field_extract does from the whole struct). */
static uint64_t extract(const rbp_field *f, const uint8_t *buf, int32_t lo)
{
    uint64_t v = 0;
    int n = f->bit_size > 0 ? (f->bit_offset + f->bit_size + 7) / 8 : f->size > 0 && f->size <= 8 ? f->size : 8;
    memcpy(&v, buf + (f->offset - lo), (size_t)(n > 8 ? 8 : n));
    if (f->bit_size > 0) {
        v >>= f->bit_offset;
        if (f->bit_size < 64) v &= (UINT64_C(1) << f->bit_size) - 1;
    }
    return v;
}

bool rbp_gc_state_read(rbpeek_session *s, rbp_gc_state *out)
{
    *out = (rbp_gc_state){0};
    if (!s->attached || !rbp_gc_state_known(s)) return false;
    /* The objspace is made at boot and never moves: read (and checked)
     * once per attach. The sampler reads the state at every sample. */
    uint64_t os = s->gc_objspace;
    if (!os) {
        if (!rbp_mem_u64(s->mem, s->vm + (uint64_t)rbp_off(&s->layout, objspace_field(s)), &os) || !rbp_is_heap_ptr(s, os))
            return false;
        s->gc_objspace = os;
    }
    out->objspace = os;
    /* Both flags are bits of one word of the flags struct: one read. */
    const rbp_field *d = &s->layout.f[RBP_L_objspace_flag_during_gc], *m = &s->layout.f[RBP_L_objspace_flag_mode];
    int32_t lo = d->offset < m->offset ? d->offset : m->offset;
    int32_t hi = d->offset > m->offset ? d->offset : m->offset;
    uint8_t buf[24];
    if (lo >= 0 && hi - lo + 8 <= (int32_t)sizeof buf && rbp_mem_read(s->mem, os + (uint64_t)lo, buf, (size_t)(hi - lo + 8))) {
        out->during_gc = extract(d, buf, lo);
        out->mode = extract(m, buf, lo);
        return true;
    }
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
