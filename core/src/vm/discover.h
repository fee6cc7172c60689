/*
 * Attach-time discovery, in order: which Ruby version the target runs,
 * which struct layout describes it, and where its VM is. Each step records
 * how it got its answer (for `ruby info`) and fails with one line that says
 * what to try.
 */
#ifndef RBP_DISCOVER_H
#define RBP_DISCOVER_H

#include "session.h"

rbpeek_status rbp_discover_version(rbpeek_session *s);
rbpeek_status rbp_discover_layout(rbpeek_session *s);
rbpeek_status rbp_discover_vm(rbpeek_session *s);

/* Frees the symbol/label caches hung off the session (symbolize.c). */
void rbp_caches_free(rbpeek_session *s);

#endif
