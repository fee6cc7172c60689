/*
 * Opening a file whose path the target gave us: a core's NT_FILE note, a
 * mapping's name, a libruby to read DWARF or .symtab from. Cores are
 * untrusted input (users open cores sent to them), so such a path may name
 * a FIFO, whose open waits for a writer forever, or a device, whose open
 * or read may have effects (a tape rewinds, a terminal becomes ours) or
 * never end (/dev/zero). Only regular files are opened: stat first, so a
 * device is never opened; then open with O_NONBLOCK (a FIFO swapped in
 * meanwhile does not block), O_NOCTTY and O_CLOEXEC, and fstat the
 * descriptor, so what is read is what was checked.
 *
 * What was refused is said in one line through a warning sink, which the
 * session points at its warning line (rbp_warn); layers below the session
 * take a sink instead of the session.
 */
#ifndef RBP_TARGET_FILE_H
#define RBP_TARGET_FILE_H

#include <stddef.h>

/* Where a module below the session says a one-line warning. fn NULL: say
 * nothing. */
typedef struct rbp_warnsink {
    void (*fn)(void *ctx, const char *line);
    void *ctx;
} rbp_warnsink;

void rbp_warnsink_say(const rbp_warnsink *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* rbp_open_target_file's result when the path names something that is
 * there but is no regular file. */
#define RBP_NOT_REGULAR (-2)

/* Opens path read-only if it is a regular file. Returns the descriptor;
 * -1 when it cannot be opened (errno says why; a core made elsewhere names
 * files this machine lacks, which is no news); RBP_NOT_REGULAR when it is
 * not a regular file, with what it is ("a FIFO", "a character device",
 * ...) in kind. */
int rbp_open_target_file(const char *path, char *kind, size_t kindlen);

/* The same, and a refusal is said on w as "<what> <path> is <kind>, not a
 * regular file: not read" (what: "the core's mapped file", ...). Returns
 * the descriptor or a negative value as above. */
int rbp_open_target_file_warn(const char *path, const char *what, const rbp_warnsink *w);

#endif
