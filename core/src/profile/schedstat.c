/*
 * Reading a thread's scheduling files in /proc (schedstat.h): its
 * schedstat, three numbers on one line ("run_ns wait_ns runs"), and the
 * CPU field of its stat; and the cache of their open descriptors, reread
 * from offset 0 at each sample.
 */
#define _GNU_SOURCE
#include "profile/schedstat.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The files kept open, by name; a name not here is opened for each read. */
static const char *const KINDS[] = {"schedstat", "stat", "syscall"};

static int kind_of(const char *name)
{
    for (int k = 0; k < (int)(sizeof KINDS / sizeof KINDS[0]); k++)
        if (strcmp(KINDS[k], name) == 0) return k;
    return -1;
}

static int open_task_file(pid_t pid, int64_t tid, const char *name)
{
    char path[128];
    snprintf(path, sizeof path, "/proc/%d/task/%lld/%s", (int)pid, (long long)tid, name);
    return open(path, O_RDONLY | O_CLOEXEC);
}

/* A seq_file in /proc builds its text anew for each read from offset 0. */
static bool read_whole(int fd, char *buf, size_t len)
{
    ssize_t n = pread(fd, buf, len - 1, 0);
    if (n <= 0) return false;
    buf[n] = '\0';
    return true;
}

void rbp_task_files_close(rbp_task_files *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->n; i++) close(c->fd[i].fd);
    c->n = 0;
}

static void forget(rbp_task_files *c, size_t i)
{
    close(c->fd[i].fd);
    c->fd[i] = c->fd[--c->n];
}

bool rbp_task_file_read(rbp_task_files *c, pid_t pid, int64_t tid, const char *name, char *buf, size_t len)
{
    if (pid <= 0 || tid <= 0 || len < 2) return false;
    int kind = c ? kind_of(name) : -1;
    if (kind >= 0) {
        if (c->pid != pid) {   /* another process: none of these is its */
            rbp_task_files_close(c);
            c->pid = pid;
        }
        for (size_t i = 0; i < c->n; i++) {
            if (c->fd[i].tid != tid || c->fd[i].kind != kind) continue;
            if (read_whole(c->fd[i].fd, buf, len)) return true;
            /* The thread is gone (ESRCH), or its TID now names another:
             * open it afresh below. */
            forget(c, i);
            break;
        }
    }
    int fd = open_task_file(pid, tid, name);
    if (fd < 0) return false;
    bool ok = read_whole(fd, buf, len);
    if (!ok || kind < 0) {
        close(fd);
        return ok;
    }
    /* Full (threads come and go: a thread that ended keeps its other
     * files until they are read): the new one takes an old one's place,
     * in turn. */
    size_t slot;
    if (c->n < RBP_TASK_FILES_MAX) {
        slot = c->n++;
    } else {
        slot = c->evict++ % RBP_TASK_FILES_MAX;
        close(c->fd[slot].fd);
    }
    c->fd[slot] = (rbp_task_fd){.tid = tid, .kind = kind, .fd = fd};
    return ok;
}

bool rbp_schedstat_read(rbp_task_files *c, pid_t pid, pid_t tid, rbp_schedstat *out)
{
    char buf[128];
    if (!rbp_task_file_read(c, pid, tid, "schedstat", buf, sizeof buf)) return false;
    unsigned long long run, wait, runs;
    if (sscanf(buf, "%llu %llu %llu", &run, &wait, &runs) != 3) return false;
    *out = (rbp_schedstat){.run_ns = run, .wait_ns = wait, .runs = runs};
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

int rbp_task_cpu(rbp_task_files *c, pid_t pid, pid_t tid)
{
    char buf[1024];
    return rbp_task_file_read(c, pid, tid, "stat", buf, sizeof buf) ? rbp_stat_cpu(buf) : -1;
}
