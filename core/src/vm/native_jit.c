/*
 * Where YJIT's code lies, from the VM's own state, for the unwinder
 * (docs/native.md, "JIT code"). YJIT's code has no CFI and no file: a
 * return address into it lies in an anonymous mapping. Which anonymous
 * mapping is JIT code is not guessed from its permissions: YJIT says it.
 * Its entry prologue stores into the control frame it starts running the
 * address its code returns to the interpreter by (cfp->jit_return =
 * leave_exit_code), and every call it makes into a Ruby method stores the
 * code the callee returns to; the interpreter's vm_push_frame clears it.
 * So a thread running JIT code has a control frame whose jit_return points
 * into YJIT's code: the mapping holding it (the session's regions: the
 * process's maps, or a core's segments) is JIT code, with the anonymous
 * mappings contiguous with it (3.3 and 3.4 reserve one block and change
 * its pages' protection as they fill them, which splits the mapping).
 *
 * YJIT's own globals would say the same (3.1's codeblocks cb and ocb, 3.3
 * and 3.4's CodegenGlobals), but Debian's libruby-3.1 has no symbol for
 * them, and Rust's layout of the latter is the compiler's.
 */
#include "vm/native_merge.h"

#include <stdlib.h>
#include <string.h>

#include "vm/frames.h"

/* At most this many control frames' jit_return are read per thread: the
 * innermost, where JIT code runs. */
#define JIT_FRAMES_READ 256
/* The most contiguous anonymous mappings taken as one JIT region (3.4
 * splits its block in two per page run used). */
#define JIT_REGION_PARTS 4096
/* The most a JIT region spans: YJIT's --yjit-exec-mem-size is at most
 * 2 GiB (a u32 in 3.1, checked against i32 in 3.3 and 3.4). */
#define JIT_REGION_MAX ((uint64_t)1 << 31)

static bool anonymous(const rbp_region *r)
{
    return !r->path || !r->path[0] || strncmp(r->path, "[anon:", 6) == 0;
}

static const rbp_region *anon_region_at(const rbpeek_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->nregions; i++)
        if (s->regions[i].start <= addr && addr < s->regions[i].end && anonymous(&s->regions[i]))
            return &s->regions[i];
    return NULL;
}

/* The JIT region holding addr: its anonymous mapping, grown over the
 * anonymous mappings contiguous with it. */
static bool region_of(const rbpeek_session *s, uint64_t addr, rbp_uw_range *out)
{
    const rbp_region *r = anon_region_at(s, addr);
    if (!r) return false;
    *out = (rbp_uw_range){r->start, r->end};
    for (size_t k = 0; k < JIT_REGION_PARTS; k++) {
        const rbp_region *lo = out->start ? anon_region_at(s, out->start - 1) : NULL;
        const rbp_region *hi = anon_region_at(s, out->end);
        if (lo && out->end - lo->start <= JIT_REGION_MAX) out->start = lo->start;
        else lo = NULL;
        if (hi && hi->end - out->start <= JIT_REGION_MAX) out->end = hi->end;
        else hi = NULL;
        if (!lo && !hi) break;
    }
    return true;
}

#define JIT_MAX (sizeof ((rbpeek_session *)0)->jit_lo / sizeof(uint64_t))

static bool known_jit(const rbpeek_session *s, uint64_t addr)
{
    for (size_t i = 0; i < s->njit; i++)
        if (s->jit_lo[i] <= addr && addr < s->jit_hi[i]) return true;
    return false;
}

static void give_unwinder(rbpeek_session *s)
{
    rbp_uw_range r[RBP_UW_MAX_JIT];
    size_t n = 0;
    for (; n < s->njit && n < RBP_UW_MAX_JIT; n++) r[n] = (rbp_uw_range){s->jit_lo[n], s->jit_hi[n]};
    rbp_native_set_jit(s->native, r, n);
}

void rbp_native_jit_find(rbpeek_session *s, uint64_t ec)
{
    if (!s->rel.frames.cfp_jit_return || !s->native || !ec) return;
    uint64_t size = (uint64_t)s->layout.f[RBP_L_cfp_size].size;
    if (size < 16 || size > 256) return;
    rbp_cframes cf;
    rbp_cframes_read(s, ec, JIT_FRAMES_READ, &cf);
    uint64_t cfp = cf.cfp;
    size_t n = cf.n;
    rbp_cframes_free(&cf);
    bool changed = false;
    for (size_t j = 0; j < n; j++) {
        uint64_t ret = 0;
        if (!rbp_mem_u64(s->mem, cfp + j * size + size - 8, &ret) || !ret || known_jit(s, ret)) continue;
        rbp_uw_range r;
        if (s->njit == JIT_MAX || !region_of(s, ret, &r)) continue;
        s->jit_lo[s->njit] = r.start;
        s->jit_hi[s->njit++] = r.end;
        changed = true;
    }
    if (changed) give_unwinder(s);
}

void rbp_native_jit_forget(rbpeek_session *s)
{
    s->njit = 0;
    if (s->native) rbp_native_set_jit(s->native, NULL, 0);
}
