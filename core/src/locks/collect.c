/*
 * Small helpers of the threads-and-locks collection (see collect.h): the
 * notes on what could not be told on this Ruby, and the check that the
 * layout has what a fact needs.
 */
#include "locks/collect.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/strbuf.h"

void lk_note(lk_ctx *c, const char *fmt, ...)
{
    char buf[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    /* the same note once only; notes are kept NUL-separated */
    for (size_t off = 0; c->notes.buf && off < c->notes.len; off += strlen(c->notes.buf + off) + 1)
        if (strcmp(c->notes.buf + off, buf) == 0) return;
    c->nnotes++;
    rbp_sb_putn(&c->notes, buf, strlen(buf) + 1);
}

bool lk_list_step(lk_ctx *c, rbp_walkguard *g, uint64_t node, const char *what)
{
    rbp_walk_verdict v = rbp_walkguard_step(g, node);
    if (v == RBP_WALK_OK) return true;
    lk_note(c, "%s was cut (%s): what depends on it is partial", what, rbp_walk_verdict_str(v));
    return false;
}

bool lk_need(lk_ctx *c, const char *what, rbp_field_id a, rbp_field_id b)
{
    rbp_field_id missing = !rbp_has(c->L, a) ? a : (b != RBP_L_COUNT && !rbp_has(c->L, b)) ? b : RBP_L_COUNT;
    if (missing == RBP_L_COUNT) return true;
    lk_note(c, "%s: unknown on Ruby %s (its struct layout has no %s.%s)", what, c->s->ruby_version,
            rbp_field_type(missing), rbp_field_member(missing));
    return false;
}
