/*
 * The per-thread step of `ruby allocs --sites` (alloc_sites.c), shared
 * with its unit tests, which build a thread and its native stack by hand.
 */
#ifndef RBP_ALLOC_SITES_H
#define RBP_ALLOC_SITES_H

#include <stdbool.h>

#include "rbpeek.h"
#include "profile/sampler.h"

/* Judges thread t by its native stack ns (NULL: none): in the allocator
 * (or a GC step under it), its stack is added to p and its site counted
 * (ADDED); otherwise counted in a's stats and left out (FILTERED). The
 * profile must be the one a counts sites of. saved_line: its first
 * frame's saved line (rbp_snapshot_saved_line), the site's line where
 * that frame's is not known (JIT code), 0 for none. */
rbp_sample_fate rbp_alloc_sites_add_thread(rbpeek_alloc_sites *a, rbpeek_profile *p, const rbpeek_thread *t,
                                           const rbpeek_native_stack *ns, const rbpeek_sample_options *opt,
                                           int32_t saved_line, bool *tid_unknown);

#endif
