/*
 * Formatting a one-line error into a caller's buffer: the convention of the
 * modules that run before a session exists (memory sources, the DWARF
 * extractor), which report through (char *err, size_t errlen).
 */
#ifndef RBP_ERRBUF_H
#define RBP_ERRBUF_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

static inline void rbp_set_err(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static inline void rbp_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif
