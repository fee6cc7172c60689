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

typedef struct rbp_schedstat {
    uint64_t run_ns;    /* on a CPU */
    uint64_t wait_ns;   /* runnable, waiting for a CPU (the run queue's delay) */
    uint64_t runs;      /* times it was put on a CPU */
} rbp_schedstat;

/* /proc/PID/task/TID/NAME read whole into buf (len bytes with its NUL):
 * false when it cannot be read or is empty. The one reader of a thread's
 * small /proc files (schedstat, stat, syscall). */
bool rbp_task_file_read(pid_t pid, int64_t tid, const char *name, char *buf, size_t len);

/* False when the file cannot be read (the thread is gone, no schedstats). */
bool rbp_schedstat_read(pid_t pid, pid_t tid, rbp_schedstat *out);

/* The CPU of a /proc/PID/task/TID/stat line (its 39th field; the command
 * name in parentheses may hold spaces and parentheses): -1 if the text
 * has none. */
int rbp_stat_cpu(const char *stat_text);
/* The CPU tid is queued on or last ran on; -1 if it cannot be read. */
int rbp_task_cpu(pid_t pid, pid_t tid);

#endif
