/*
 * What the profile writers (folded.c, speedscope.c, pprof.c, top.c, flamegraph.c)
 * share: opening and closing the output file with every write error turned
 * into a status, numbers formatted without the locale, and UTF-8-safe text
 * for XML.
 */
#ifndef RBP_OUTPUT_WRITER_H
#define RBP_OUTPUT_WRITER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "profile/profile.h"

/* Opens an output file ("-" = stdout; NULL with *st set on failure) /
 * closes it, turning any write error seen on the stream into RBPEEK_ERR_IO
 * (st is returned as is if already an error). */
FILE *rbp_profile_open_out(const rbpeek_profile *p, const char *path, rbpeek_status *st);
rbpeek_status rbp_profile_close_out(const rbpeek_profile *p, FILE *f, const char *path,
                                    rbpeek_status st);

/* Writes s as XML character data / attribute text: markup characters are
 * escaped, invalid UTF-8 and characters XML 1.0 forbids (C0 controls other
 * than tab/LF/CR, U+FFFE, U+FFFF) become U+FFFD, so the document stays
 * well-formed whatever bytes the target had. At most max_chars code points
 * are written (SIZE_MAX for all); returns the number written. (flamegraph.c) */
size_t rbp_xml_write(FILE *f, const char *s, size_t max_chars);

/* Counts the characters rbp_xml_write would write for s (an invalid byte
 * counts as one, as it becomes one U+FFFD). */
size_t rbp_utf8_length(const char *s);

/* Formats v with a fixed number of decimals (0..6) without printf's %f,
 * whose decimal separator follows LC_NUMERIC: a host that called
 * setlocale() (debuggers do) must not get "12,5" inside SVG or JSON. */
void rbp_fmt_fixed(char *buf, size_t cap, double v, int decimals);

#endif
