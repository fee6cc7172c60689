/*
 * Attach-time discovery, in order: which architecture the target is
 * (refused unless rbpeek reads it), which Ruby version it runs,
 * which struct layout describes it, and where its VM is. Each step records
 * how it got its answer (for `ruby info`) and fails with one line that says
 * what to try.
 */
#ifndef RBP_DISCOVER_H
#define RBP_DISCOVER_H

#include "context/context.h"

/* The target's machine: what the caller said (a core's header, the
 * debugger), then the ELF headers of the Ruby images mapped (libruby, a
 * ruby executable: an emulator's process maps arm64 ones); refused in one
 * line when rbpeek does not read it (context/machine.c). */
rbpeek_status rbp_discover_machine(rbpeek_session *s);
rbpeek_status rbp_discover_version(rbpeek_session *s);

/* Where rbp_discover_layout_next is in its candidates; zeroed to start. */
typedef struct rbp_layout_try {
    int stage;          /* 0 file, 1 exact table, 2 DWARF, 3 nearest table, 4 none left */
    long table;         /* the line's table (exact or nearest), or -1 */
    bool exact;
    size_t dwarf;       /* next DWARF candidate: debug files, then regions */
    int misfits;        /* candidates the target refused */
} rbp_layout_try;

/* Puts the next layout candidate into s->layout; last is what the target
 * said of the one before (RBPEEK_OK for the first call, else its refusal,
 * whose message stands when no candidate is left). Fails, with the
 * session's error, when there is none. */
rbpeek_status rbp_discover_layout_next(rbpeek_session *s, rbp_layout_try *it, rbpeek_status last);
rbpeek_status rbp_discover_vm(rbpeek_session *s);

#endif
