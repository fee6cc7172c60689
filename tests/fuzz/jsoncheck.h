/*
 * A strict reader of the JSON rbpeek writes, for the fuzz harnesses: every
 * document must be one JSON value (RFC 8259) in valid UTF-8 (no overlong
 * forms, no surrogates, nothing past U+10FFFF), with no raw control
 * characters in its strings and no lone surrogate in a \u escape, whatever
 * the target's memory held. A document that is not aborts the input with
 * what was wrong and where, which libFuzzer reports as a finding.
 */
#ifndef RBP_FUZZ_JSONCHECK_H
#define RBP_FUZZ_JSONCHECK_H

#include <stddef.h>

/* Aborts, saying why, when doc (from what) is not one strict JSON value. */
void json_check(const char *what, const char *doc);
void json_check_n(const char *what, const char *doc, size_t len);
/* The same for JSON Lines (the heap dump): every line one value, each
 * ended by a newline; when !complete (the writer stopped on an error) an
 * unfinished last line is let be. */
void json_check_lines(const char *what, const char *buf, size_t len, int complete);

#endif
