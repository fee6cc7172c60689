/*
 * Benchmark (not a test): what one PTRACE_INTERRUPT stop of a running
 * thread costs it, depending on where the tracer asks from: the floor
 * under `ruby sample`'s default mode, which stops the GVL holder from
 * wherever its tracing thread runs. Moving that thread to the holder's
 * CPU for the stop was tried with these figures in hand and not kept:
 * docs/sampling-cost.md says why.
 *
 *   cc -O2 -o /tmp/bench_ptrace_stop tests/bench/bench_ptrace_stop.c
 *   /tmp/bench_ptrace_stop [SAMPLES] [GAP_US]      (default 3000, 1000)
 *
 * A child spins in user space; the parent seizes it and, every GAP_US,
 * interrupts it, waits for the stop, and resumes it at once (no reads in
 * between), in three ways:
 *   other-cpu    from wherever the scheduler put the tracer (on an idle
 *                machine, the other CPU): the kernel must interrupt the
 *                child's CPU, and the child's stop must wake the tracer;
 *   same-cpu     the tracer first moves itself to the CPU the child last
 *                ran on (/proc/PID/stat field 39) and back afterwards;
 *   same-cpu-rt  the same at SCHED_FIFO 1 during the stop, so that the
 *                move preempts the child at once instead of waiting for
 *                its slice to end (needs CAP_SYS_NICE; else reported so);
 *   other-poll   from wherever the tracer runs, polling waitpid(WNOHANG)
 *                for the stop instead of blocking in it, so that the
 *                tracer's CPU never goes idle (what `ruby sample` does
 *                since 2026-11-26, for up to 250 us).
 * It prints the mean and median from PTRACE_INTERRUPT to waitpid's report,
 * and the child's CPU time per wall second over the run (its own
 * utime + stime): what it kept. Needs 2 CPUs or more, and a quiet machine.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <stdbool.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Field k (1-based, as proc(5) numbers them) of /proc/PID/stat. */
static const char *stat_field(pid_t pid, int k, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return "";
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p) return "";
    p += 2;   /* field 3 */
    for (int f = 3; f < k && *p; p++)
        if (*p == ' ') f++;
    return p;
}

static double cpu_seconds(pid_t pid)
{
    char buf[1024];
    unsigned long ut = strtoul(stat_field(pid, 14, buf, sizeof buf), NULL, 10);
    unsigned long st = strtoul(stat_field(pid, 15, buf, sizeof buf), NULL, 10);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void run(const char *name, int mode, int samples, int gap_us)
{
    pid_t child = fork();
    if (child == 0) {
        volatile unsigned long x = 0;
        for (;;) x++;
    }
    usleep(200000);
    if (ptrace(PTRACE_SEIZE, child, 0, 0) != 0) {
        perror("PTRACE_SEIZE");
        exit(1);
    }
    cpu_set_t all;
    sched_getaffinity(0, sizeof all, &all);
    uint64_t *lat = calloc((size_t)samples, sizeof *lat);
    bool rt_ok = true;
    double c0 = cpu_seconds(child);
    uint64_t w0 = now_ns();
    for (int i = 0; i < samples; i++) {
        usleep((useconds_t)gap_us);
        if (mode == 1 || mode == 2) {
            char buf[1024];
            int cpu = atoi(stat_field(child, 39, buf, sizeof buf));
            if (mode == 2) {
                struct sched_param rt = {.sched_priority = 1};
                rt_ok = rt_ok && pthread_setschedparam(pthread_self(), SCHED_FIFO, &rt) == 0;
            }
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            sched_setaffinity(0, sizeof one, &one);
        }
        uint64_t a = now_ns();
        ptrace(PTRACE_INTERRUPT, child, 0, 0);
        int status;
        if (mode == 3)
            while (waitpid(child, &status, __WALL | WNOHANG) == 0) continue;
        else
            waitpid(child, &status, __WALL);
        lat[i] = now_ns() - a;
        ptrace(PTRACE_CONT, child, 0, 0);
        if (mode == 1 || mode == 2) {
            sched_setaffinity(0, sizeof all, &all);
            if (mode == 2 && rt_ok) {
                struct sched_param normal = {.sched_priority = 0};
                pthread_setschedparam(pthread_self(), SCHED_OTHER, &normal);
            }
        }
    }
    double kept = (cpu_seconds(child) - c0) / ((double)(now_ns() - w0) * 1e-9);
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
    uint64_t sum = 0;
    for (int i = 0; i < samples; i++) sum += lat[i];
    qsort(lat, (size_t)samples, sizeof *lat, cmp_u64);
    printf("%-12s interrupt->stop mean %5.1f us, median %5.1f us; child kept %.1f%%%s\n", name,
           (double)sum / samples / 1e3, (double)lat[samples / 2] / 1e3, 100.0 * kept,
           mode == 2 && !rt_ok ? " (SCHED_FIFO not allowed: as same-cpu)" : "");
    free(lat);
}

int main(int argc, char **argv)
{
    int samples = argc > 1 ? atoi(argv[1]) : 3000;
    int gap_us = argc > 2 ? atoi(argv[2]) : 1000;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2) {
        fprintf(stderr, "needs 2 CPUs or more\n");
        return 77;
    }
    printf("%d stops, one every %d us (%.0f Hz), %ld CPUs\n", samples, gap_us, 1e6 / gap_us,
           sysconf(_SC_NPROCESSORS_ONLN));
    run("other-cpu", 0, samples, gap_us);
    run("same-cpu", 1, samples, gap_us);
    run("same-cpu-rt", 2, samples, gap_us);
    run("other-poll", 3, samples, gap_us);
    return 0;
}
