/*
 * A thread's scheduling counters, as the kernel keeps them in
 * /proc/PID/task/TID/schedstat: its time on a CPU, its time spent runnable
 * but waiting for one, and its number of runs. The tracer reads them to
 * tell whether a sampled thread was on a CPU when it was asked to stop
 * (tracer.c), and whether a parked thread ran while its stack was read
 * (trace_native.c). And the CPU a thread is queued on or last ran on
 * (/proc/PID/task/TID/stat), which the tracing thread keeps off
 * (trace_aside.c).
 */
#ifndef RBP_PROFILE_SCHEDSTAT_H
#define RBP_PROFILE_SCHEDSTAT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Open descriptors of threads' small /proc files, kept from sample to
 * sample: opening and closing them was a third of the sampler's CPU time
 * with 16 threads (docs/performance.md). A zeroed struct is empty;
 * rbp_task_files_close closes every one. At most RBP_TASK_FILES_MAX are
 * kept (a debugger shares its descriptor limit with us); past that, a new
 * one takes an old one's place, in turn. */
#define RBP_TASK_FILES_MAX 192

typedef struct rbp_task_fd {
    int64_t tid;
    int kind;       /* which file: schedstat.c's table */
    int fd;
} rbp_task_fd;

typedef struct rbp_task_files {
    pid_t pid;      /* whose threads the descriptors are of */
    size_t n;
    size_t evict;   /* full: the entry a new file replaces next, in turn */
    rbp_task_fd fd[RBP_TASK_FILES_MAX];
} rbp_task_files;

void rbp_task_files_close(rbp_task_files *c);

typedef struct rbp_schedstat {
    uint64_t run_ns;    /* on a CPU */
    uint64_t wait_ns;   /* runnable, waiting for a CPU (the run queue's delay) */
    uint64_t runs;      /* times it was put on a CPU */
} rbp_schedstat;

/* /proc/PID/task/TID/NAME read whole into buf (len bytes with its NUL):
 * false when it cannot be read or is empty. The one reader of a thread's
 * small /proc files (schedstat, stat, syscall), through the cache c (NULL:
 * none; the file opened and closed). */
bool rbp_task_file_read(rbp_task_files *c, pid_t pid, int64_t tid, const char *name, char *buf, size_t len);

/* False when the file cannot be read (the thread is gone, no schedstats). */
bool rbp_schedstat_read(rbp_task_files *c, pid_t pid, pid_t tid, rbp_schedstat *out);

/* The CPU of a /proc/PID/task/TID/stat line (its 39th field; the command
 * name in parentheses may hold spaces and parentheses): -1 if the text
 * has none. */
int rbp_stat_cpu(const char *stat_text);
/* The CPU tid is queued on or last ran on; -1 if it cannot be read. */
int rbp_task_cpu(rbp_task_files *c, pid_t pid, pid_t tid);

#endif
