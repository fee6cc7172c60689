/*
 * Opening files the target names, regular files only (see target_file.h),
 * and the warning sink the modules below the session say refusals on.
 */
#define _GNU_SOURCE
#include "base/target_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

void rbp_warnsink_say(const rbp_warnsink *w, const char *fmt, ...)
{
    if (!w || !w->fn) return;
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* One line: a target-made path may hold line breaks. */
    for (char *p = line; *p; p++)
        if (*p == '\n' || *p == '\r') *p = ' ';
    w->fn(w->ctx, line);
}

static const char *kind_of(mode_t m)
{
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    if (S_ISDIR(m)) return "a directory";
    return "not a file";
}

static int refuse(mode_t m, char *kind, size_t kindlen)
{
    if (kind && kindlen) snprintf(kind, kindlen, "%s", kind_of(m));
    return RBP_NOT_REGULAR;
}

int rbp_open_target_file(const char *path, char *kind, size_t kindlen)
{
    if (kind && kindlen) kind[0] = '\0';
    if (!path || !*path) {
        errno = ENOENT;
        return -1;
    }
    /* stat first: a device is refused without being opened. */
    struct stat st;
    if (stat(path, &st) != 0) return -1;
    if (!S_ISREG(st.st_mode)) return refuse(st.st_mode, kind, kindlen);
    int fd;
    do fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    while (fd < 0 && errno == EINTR);
    if (fd < 0) return -1;
    /* The path may have changed between stat and open: check what we hold. */
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return refuse(st.st_mode, kind, kindlen);
    }
    return fd;
}

int rbp_open_target_file_warn(const char *path, const char *what, const rbp_warnsink *w)
{
    char kind[32];
    int fd = rbp_open_target_file(path, kind, sizeof kind);
    if (fd == RBP_NOT_REGULAR)
        rbp_warnsink_say(w, "%s %s is %s, not a regular file: not read", what, path, kind);
    return fd;
}
