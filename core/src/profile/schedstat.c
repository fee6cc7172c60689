/*
 * Reading a thread's scheduling files in /proc (schedstat.h): its
 * schedstat, three numbers on one line ("run_ns wait_ns runs"), and the
 * CPU field of its stat.
 */
#define _GNU_SOURCE
#include "profile/schedstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool rbp_task_file_read(pid_t pid, int64_t tid, const char *name, char *buf, size_t len)
{
    if (pid <= 0 || tid <= 0 || len < 2) return false;
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/task/%lld/%s", (int)pid, (long long)tid, name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) return false;
    buf[n] = '\0';
    return true;
}

bool rbp_schedstat_read(pid_t pid, pid_t tid, rbp_schedstat *out)
{
    char buf[128];
    if (!rbp_task_file_read(pid, tid, "schedstat", buf, sizeof buf)) return false;
    unsigned long long a, b, c;
    if (sscanf(buf, "%llu %llu %llu", &a, &b, &c) != 3) return false;
    *out = (rbp_schedstat){.run_ns = a, .wait_ns = b, .runs = c};
    return true;
}

int rbp_stat_cpu(const char *stat_text)
{
    /* Fields count from the last ')', which closes field 2 (the command
     * name) and is followed by " S", field 3. */
    const char *p = stat_text ? strrchr(stat_text, ')') : NULL;
    if (!p) return -1;
    for (int field = 2; field < 39; field++) {   /* to the space before field 39 */
        p = strchr(p + 1, ' ');
        if (!p) return -1;
    }
    char *end;
    long cpu = strtol(p + 1, &end, 10);
    return end != p + 1 && cpu >= 0 && cpu < 1L << 20 ? (int)cpu : -1;
}

int rbp_task_cpu(pid_t pid, pid_t tid)
{
    char buf[1024];
    return rbp_task_file_read(pid, tid, "stat", buf, sizeof buf) ? rbp_stat_cpu(buf) : -1;
}
