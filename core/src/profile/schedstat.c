/*
 * Reading a thread's /proc/PID/task/TID/schedstat (schedstat.h): three
 * numbers on one line, "run_ns wait_ns runs".
 */
#define _GNU_SOURCE
#include "profile/schedstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

bool rbp_schedstat_read(pid_t pid, pid_t tid, rbp_schedstat *out)
{
    char path[96], buf[128];
    snprintf(path, sizeof path, "/proc/%d/task/%d/schedstat", (int)pid, (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    unsigned long long a, b, c;
    if (sscanf(buf, "%llu %llu %llu", &a, &b, &c) != 3) return false;
    *out = (rbp_schedstat){.run_ns = a, .wait_ns = b, .runs = c};
    return true;
}
