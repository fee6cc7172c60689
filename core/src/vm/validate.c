/*
 * Layout validation at attach (see validate.h).
 *
 * A wrong layout does not fail loudly: it reads some other member and
 * prints it. So before any command prints, the chosen layout must pass
 * checks that a wrong one fails with near certainty, using invariants the
 * interpreter keeps at every instant (so they hold on a running process as
 * on a core):
 *
 *   - the main thread's execution context points back at that thread;
 *   - the context's control-frame pointer lies inside its VM stack, on a
 *     frame boundary counted from the stack's end;
 *   - the Thread object of the main thread is a T_DATA object;
 *   - every Ruby frame from the current one to the stack's end that has a
 *     pc holds an imemo_iseq whose body's label is a String and whose path
 *     is a String or an Array.
 *
 * A live target may push and pop frames while we read, so a frame check
 * that fails is read again from fresh memory before it counts.
 */
#include "vm/validate.h"

#include "vm/discover_scan.h"
#include "vm/robject.h"
#include "vm/threads.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many frames and threads the checks look at: enough to catch a wrong
 * layout, bounded so a corrupt stack cannot make attach slow. */
#define MAX_FRAMES_CHECKED 64
#define MAX_STACK_FRAMES 100000
#define MAX_THREADS_SETTLED 64
#define FRAME_RETRIES 3

static bool read_u64(rbpeek_session *s, uint64_t addr, uint64_t *out) { return rbp_mem_u64(s->mem, addr, out); }

static uint64_t main_thread(rbpeek_session *s)
{
    rbp_field_id f = rbp_vm_main_thread_field(&s->layout);
    uint64_t th = 0;
    if (f == RBP_L_COUNT || !read_u64(s, s->vm + (uint64_t)rbp_off(&s->layout, f), &th)) return 0;
    return th;
}

/* The execution context of th and its VM stack: ec->thread_ptr names th,
 * and cfp lies on a frame boundary inside the stack. */
static bool check_ec(rbpeek_session *s, uint64_t th, uint64_t *cfp_out, uint64_t *stack_end, char *why, size_t n)
{
    const rbp_layout *L = &s->layout;
    uint64_t ec = 0, back = 0, stack = 0, words = 0, cfp = 0;
    if (!read_u64(s, th + (uint64_t)rbp_off(L, RBP_L_th_ec), &ec) || !ec) {
        snprintf(why, n, "the main thread has no readable execution context");
        return false;
    }
    if (rbp_has(L, RBP_L_ec_thread_ptr) &&
        (!read_u64(s, ec + (uint64_t)rbp_off(L, RBP_L_ec_thread_ptr), &back) || back != th)) {
        snprintf(why, n, "the main thread's execution context does not point back to it");
        return false;
    }
    if (!read_u64(s, ec + (uint64_t)rbp_off(L, RBP_L_ec_vm_stack), &stack) ||
        !read_u64(s, ec + (uint64_t)rbp_off(L, RBP_L_ec_vm_stack_size), &words) ||
        !read_u64(s, ec + (uint64_t)rbp_off(L, RBP_L_ec_cfp), &cfp)) {
        snprintf(why, n, "the main thread's VM stack is not readable");
        return false;
    }
    uint64_t cfp_size = (uint64_t)L->f[RBP_L_cfp_size].size;
    /* Ruby's VM stacks are 128 KiB to 1 MiB by default (RUBY_THREAD_VM_STACK_SIZE
     * allows more); 64 MiB of VALUEs is far beyond any real one. */
    if (!stack || stack % 8 || words < 64 || words > (UINT64_C(8) << 20)) {
        snprintf(why, n, "the main thread's VM stack size (%llu words) is implausible", (unsigned long long)words);
        return false;
    }
    uint64_t end = stack + words * 8;
    if (cfp < stack || cfp >= end || (end - cfp) % cfp_size != 0) {
        snprintf(why, n, "the main thread's current frame 0x%llx is not a frame of its VM stack",
                 (unsigned long long)cfp);
        return false;
    }
    *cfp_out = cfp;
    *stack_end = end;
    return true;
}

static bool is_string(rbpeek_session *s, uint64_t v) { return rbp_obj_type(s, v) == RBP_T_STRING; }

/* Walks the main thread's frames: every Ruby frame (one with a pc) names an
 * iseq whose label is a String and path a String or an Array. Returns the
 * number of iseqs checked, or -1 with why set. */
static int check_frames(rbpeek_session *s, uint64_t cfp, uint64_t end, char *why, size_t n)
{
    const rbp_layout *L = &s->layout;
    uint64_t size = (uint64_t)L->f[RBP_L_cfp_size].size;
    int checked = 0;
    for (int i = 0; cfp + size <= end && i < MAX_STACK_FRAMES && checked < MAX_FRAMES_CHECKED; cfp += size, i++) {
        uint64_t iseq = 0, pc = 0, body = 0, label = 0, path = 0;
        if (!read_u64(s, cfp + (uint64_t)rbp_off(L, RBP_L_cfp_iseq), &iseq) ||
            !read_u64(s, cfp + (uint64_t)rbp_off(L, RBP_L_cfp_pc), &pc)) {
            snprintf(why, n, "a control frame of the main thread is not readable");
            return -1;
        }
        if (!iseq || !pc || rbp_imemo_type(s, iseq) != RBP_IMEMO_ISEQ) continue; /* C and dummy frames */
        if (!read_u64(s, iseq + (uint64_t)rbp_off(L, RBP_L_iseq_body), &body) || !body ||
            !read_u64(s, body + (uint64_t)rbp_off(L, RBP_L_body_label), &label) ||
            !read_u64(s, body + (uint64_t)rbp_off(L, RBP_L_body_pathobj), &path)) {
            snprintf(why, n, "an iseq's body is not readable");
            return -1;
        }
        int pt = rbp_obj_type(s, path);
        if (!is_string(s, label) || (pt != RBP_T_STRING && pt != RBP_T_ARRAY)) {
            snprintf(why, n, "an iseq's location does not hold a label String and a path (iseq 0x%llx)",
                     (unsigned long long)iseq);
            return -1;
        }
        checked++;
    }
    return checked;
}

/* --- settling configuration-dependent members ----------------------------- */

/* rb_thread_t.name is nil or a String on every thread. */
static bool thread_name_fits(rbpeek_session *s, const rbp_thread_raw *t, size_t nt, const rbp_field *f)
{
    for (size_t i = 0; i < nt && i < MAX_THREADS_SETTLED; i++) {
        uint64_t v = 0;
        if (!read_u64(s, t[i].th + (uint64_t)f->offset, &v)) return false;
        if (!rbp_is_nil(&s->rel, v) && !is_string(s, v)) return false;
    }
    return true;
}

/* Every alternative placement comes from one build choice, the size of
 * rb_jmpbuf_t: 40 bytes with __builtin_setjmp, 200 with glibc's jmp_buf
 * (what gcc's -fcf-protection, the distributions' default, leads to). A
 * member after one sits further on with glibc's, so of its two placements
 * the smaller offset is __builtin_setjmp's. rb_thread_t.name (2.7, 3.0) is
 * settled by what it holds; every other member follows the same choice,
 * or, without a thread name to go by, rb_fiber_t.status is settled by the
 * main thread's running fiber, which is FIBER_RESUMED. */
enum { FIBER_RESUMED = 1 };

static void swap_alt(rbp_layout *L, rbp_layout_alt *alt)
{
    rbp_field was = L->f[alt->id]; /* swap, so the table still records the placement not taken */
    L->f[alt->id] = alt->f;
    alt->f = was;
}

/* 1 when the running fiber's status reads FIBER_RESUMED at f, 0 when it
 * reads otherwise, -1 when it cannot be read. */
static int fiber_resumed_at(rbpeek_session *s, const rbp_thread_raw *main, const rbp_field *f)
{
    const rbp_layout *L = &s->layout;
    uint64_t fiber = 0, word = 0;
    if (!main || !rbp_has(L, RBP_L_ec_fiber_ptr) ||
        !read_u64(s, main->ec + (uint64_t)rbp_off(L, RBP_L_ec_fiber_ptr), &fiber) || !fiber ||
        !read_u64(s, fiber + (uint64_t)f->offset, &word))
        return -1;
    uint64_t status = f->bit_size ? word >> f->bit_offset : word;
    if (f->bit_size && f->bit_size < 64) status &= (UINT64_C(1) << f->bit_size) - 1;
    return status == FIBER_RESUMED;
}

static bool settle_alts(rbpeek_session *s, char *why, size_t n)
{
    rbp_layout *L = &s->layout;
    if (!L->nalt) return true;
    rbp_thread_raw *t = NULL;
    size_t nt = 0;
    const char *warning = NULL;
    if (rbp_threads_collect(s, &t, &nt, &warning) != RBPEEK_OK || nt == 0) {
        free(t);
        snprintf(why, n, "cannot list the threads to settle the layout's configuration-dependent members");
        return false;
    }
    const rbp_thread_raw *main = NULL;
    for (size_t i = 0; i < nt && !main; i++)
        if (t[i].is_main) main = &t[i];

    /* Gather the evidence first, then decide once: every placement follows
     * the one setjmp choice, so the member that tells decides for all.
     * builtin: 1 if the smaller offsets (__builtin_setjmp's) are the
     * target's, 0 if the larger are, -1 while nothing tells. */
    int builtin = -1;
    bool ok = true;
    for (int a = 0; a < L->nalt && ok; a++) {
        rbp_layout_alt *alt = &L->alt[a];
        bool small_is_primary = L->f[alt->id].offset < alt->f.offset;
        if (alt->id == RBP_L_th_name) {
            /* Both can fit when no thread has a name and the other word
             * happens to read nil: then the name does not tell. */
            bool primary = thread_name_fits(s, t, nt, &L->f[alt->id]);
            bool other = thread_name_fits(s, t, nt, &alt->f);
            if (!primary && !other) {
                snprintf(why, n, "rb_thread_t.name holds neither nil nor a String at offset %d or %d",
                         L->f[alt->id].offset, alt->f.offset);
                ok = false;
            } else if (primary != other && builtin < 0) {
                builtin = primary == small_is_primary;
            }
        } else if (alt->id == RBP_L_fiber_status) {
            int primary = fiber_resumed_at(s, main, &L->f[alt->id]);
            int other = fiber_resumed_at(s, main, &alt->f);
            if (primary >= 0 && other >= 0 && primary != other && builtin < 0)
                builtin = (primary == 1) == small_is_primary;
        } else {
            snprintf(why, n, "the layout lists an alternative for %s, which rbpeek cannot settle",
                     rbp_field_name(alt->id));
            ok = false;
        }
    }
    for (int a = 0; a < L->nalt && ok; a++) {
        rbp_layout_alt *alt = &L->alt[a];
        if (builtin < 0) {
            /* Nothing told. The name is kept where the table puts it (it
             * fits there); the fiber's status is not read at all: not
             * knowing beats reading the wrong word. */
            if (alt->id != RBP_L_th_name) L->f[alt->id].offset = -1;
            continue;
        }
        if ((L->f[alt->id].offset < alt->f.offset) != (builtin == 1)) swap_alt(L, alt);
    }
    for (int a = 0; a < L->nalt && ok; a++) {
        size_t len = strlen(s->layout_checks);
        rbp_field_id id = L->alt[a].id;
        if (rbp_has(L, id))
            snprintf(s->layout_checks + len, sizeof s->layout_checks - len, "; %s settled at offset %d",
                     rbp_field_name(id), L->f[id].offset);
        else
            snprintf(s->layout_checks + len, sizeof s->layout_checks - len, "; %s left unknown (unsettled)",
                     rbp_field_name(id));
    }
    free(t);
    return ok;
}

rbpeek_status rbp_validate_layout(rbpeek_session *s)
{
    char why[256] = "";
    s->layout_checks[0] = '\0';
    uint64_t th = main_thread(s), cfp = 0, end = 0;
    int checked = -1;
    /* vm_plausible (discover.c) already saw main_thread->vm == vm. */
    if (!th) snprintf(why, sizeof why, "the VM has no main thread");
    for (int attempt = 0; th && attempt < FRAME_RETRIES; attempt++) {
        if (attempt) rbp_mem_invalidate(s->mem); /* a live target moved on: read afresh */
        checked = check_ec(s, th, &cfp, &end, why, sizeof why) ? check_frames(s, cfp, end, why, sizeof why) : -1;
        if (checked >= 0) break;
    }
    bool ok = checked >= 0;
    uint64_t self = 0;
    if (ok && (!read_u64(s, th + (uint64_t)rbp_off(&s->layout, RBP_L_th_self), &self) ||
               rbp_obj_type(s, self) != RBP_T_DATA)) {
        snprintf(why, sizeof why, "the main thread's Thread object is not a T_DATA object");
        ok = false;
    }
    if (ok)
        snprintf(s->layout_checks, sizeof s->layout_checks,
                 "main thread and VM point at each other; its context, VM stack and %d iseq frame%s read as Ruby "
                 "keeps them",
                 checked, checked == 1 ? "" : "s");
    if (ok) ok = settle_alts(s, why, sizeof why);
    if (ok) return RBPEEK_OK;

    return rbp_layout_misfit(s, why);
}

rbpeek_status rbp_layout_misfit(rbpeek_session *s, const char *why)
{
    const char *found = s->target_version[0] ? s->target_version : "unknown";
    return rbp_fail(s, RBPEEK_ERR_NO_LAYOUT,
                    "the layout %s does not fit this process (it reports Ruby %s): %s; %s", s->layout_source, found,
                    why,
                    s->version_override[0] || s->layout_file
                        ? "drop --ruby-version/--layout, or give a layout made for this exact build"
                        : "install debug info for libruby, or pass --layout FILE made by rbpeek-layoutgen");
}
