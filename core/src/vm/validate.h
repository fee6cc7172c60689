/*
 * Checking a layout against the target before anything is printed. Every
 * layout, whatever its source (DWARF, a built-in table exact or nearest,
 * --layout, --ruby-version), must show that it fits this process: its main
 * thread, execution context, VM stack and frames' iseqs must read as the
 * interpreter guarantees they do. Members whose place depends on how Ruby
 * was configured (the table's `alt` lines) are settled here too, by the
 * same kind of evidence.
 */
#ifndef RBP_VALIDATE_H
#define RBP_VALIDATE_H

#include "context/context.h"

/* Settles s->layout's alternative placements and checks the layout against
 * the target (VM found, layout chosen). On failure, records one line that
 * names the version found and what to try, and returns an error. The
 * checks made are summed up in s->layout_checks for `ruby info`. */
rbpeek_status rbp_validate_layout(rbpeek_session *s);

/* Records the one-line refusal of a layout that does not fit, for why
 * (what did not read as Ruby keeps it), and returns RBPEEK_ERR_NO_LAYOUT. */
rbpeek_status rbp_layout_misfit(rbpeek_session *s, const char *why);

#endif
