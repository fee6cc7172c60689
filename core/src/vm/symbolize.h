/*
 * The symbolizer: turns what a control frame points at (an iseq and a pc, or
 * a method entry) into the label, path and line number the target Ruby's own
 * Thread#backtrace_locations would report. Version differences in labelling
 * (3.4's "Klass#meth" names computed at backtrace time, "block (N levels) in")
 * live here; the frame walker only decides which frames to report.
 */
#ifndef RBP_SYMBOLIZE_H
#define RBP_SYMBOLIZE_H

#include <stdbool.h>
#include <stdint.h>

#include "context/context.h"

enum { /* rb_iseq_type, the same from 2.7 to 3.4 */
    RBP_ISEQ_TOP, RBP_ISEQ_METHOD, RBP_ISEQ_BLOCK, RBP_ISEQ_CLASS, RBP_ISEQ_RESCUE,
    RBP_ISEQ_ENSURE, RBP_ISEQ_EVAL, RBP_ISEQ_MAIN, RBP_ISEQ_PLAIN,
};
#define RBP_BUILTIN_ATTR_C_TRACE 0x08u /* 3.4: a Ruby builtin that reports like a C method */

/* What we keep per iseq. Strings are owned by the session's cache. */
typedef struct rbp_iseq_info {
    uint64_t iseq, body;
    int type;
    const char *label;        /* location.label */
    const char *path;         /* rb_iseq_path; "" if unreadable */
    const char *abspath;      /* rb_iseq_realpath, or NULL (nil) */
    int first_lineno;         /* location.first_lineno; 0 if unknown */
    uint64_t parent_iseq, local_iseq;
    uint32_t builtin_attrs;
    uint64_t iseq_encoded;
    uint32_t iseq_size;
    uint64_t insns_body, insns_positions, insns_succ;
    uint32_t insns_size;
} rbp_iseq_info;

/* The cached info of an iseq, or NULL if iseq is not a readable iseq. */
const rbp_iseq_info *rbp_iseq_get(rbpeek_session *s, uint64_t iseq);

/* Line number for pc in iseq, as Ruby's calc_lineno: 0 if unknown. */
int rbp_iseq_lineno(rbpeek_session *s, const rbp_iseq_info *info, uint64_t pc);

/* The callable method entry of a frame, found from its ep the way
 * rb_vm_frame_method_entry does; 0 if none (or *budget ran out).
 * budget (or NULL): hops shared by the walk of a whole stack, whose frames
 * each follow their own chain of environments: a pairwise walk, which a
 * damaged stack could make frames x MAX_PARENT_HOPS long. Each chain is
 * bounded (and cycle-checked) on its own anyway. */
uint64_t rbp_frame_method_entry(rbpeek_session *s, uint64_t ep, size_t *budget);
/* A budget for a walk of nframes frames' chains: real ones are a few hops
 * (one per enclosing block), so this is far above what a real stack uses. */
#define RBP_EP_HOPS_BUDGET(nframes) (16 * (size_t)(nframes) + 256)

/* A method entry's definition. */
typedef struct rbp_cme {
    uint64_t def;            /* its rb_method_definition_t */
    uint64_t owner;
    uint64_t original_id;
    int def_type;            /* 0 = ISEQ, 1 = CFUNC, ... */
    uint64_t iseqptr;        /* for ISEQ methods */
} rbp_cme;
bool rbp_cme_read(rbpeek_session *s, uint64_t cme, rbp_cme *out);

/* True if a frame with this method entry reports like a C method (3.4's
 * location_cfunc_p; before 3.4, only real C functions). */
bool rbp_cme_is_cfunc_like(rbpeek_session *s, const rbp_cme *cme);

/* The label for an iseq frame (owner from its method entry, 0 if none) and
 * for a C frame. Returned strings are owned by the session's cache. */
const char *rbp_iseq_frame_label(rbpeek_session *s, const rbp_iseq_info *info, uint64_t owner);
const char *rbp_cfunc_label(rbpeek_session *s, const rbp_cme *cme);

void rbp_symcache_free(rbp_symcache *c);

#endif
