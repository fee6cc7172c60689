/*
 * Attach-time discovery, in order: which Ruby version the target runs,
 * which struct layout describes it, and where its VM is. Each step records
 * how it got its answer (for `ruby info`) and fails with one line that says
 * what to try.
 */
#ifndef RBP_DISCOVER_H
#define RBP_DISCOVER_H

#include "context/context.h"

rbpeek_status rbp_discover_version(rbpeek_session *s);
rbpeek_status rbp_discover_layout(rbpeek_session *s);
rbpeek_status rbp_discover_vm(rbpeek_session *s);

#endif
