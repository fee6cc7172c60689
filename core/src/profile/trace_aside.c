/*
 * Keeping the tracing thread off the CPU of the thread it samples
 * (tracer.h: tr_aside_*).
 *
 * Why: a sample is a uniform draw from the GVL holder's CPU time only if
 * the stop finds it running (tracer.c, "on a CPU"). With no CPU idle (a
 * loaded machine; on 2 CPUs, one other busy process), the scheduler glued
 * the tracing thread to the holder's CPU: the holder's stop wakes the
 * tracer there (its CPU has just gone idle), the holder is resumed onto the
 * CPU the tracer is still using, and the tracer's next timer fires on that
 * same CPU and preempts the holder before its interrupt is sent. Nearly
 * every sample then found the holder waiting for a CPU, preempted by the
 * sampler itself (measured 2026-11-28, 3.4.5, 2 CPUs, one busy loop beside
 * the program: 426-495 of 2,000 samples on a CPU), and the GC's share of
 * the CPU time rested on those few.
 *
 * So at each sample, once it knows which thread holds the GVL and before
 * it stops it, the tracing thread reads which CPU the holder runs or is
 * queued on (field 39 of /proc/PID/task/TID/stat) and, where its own CPUs
 * allow another, leaves that one out of its affinity (moving off it at
 * once if it is there): its stop, its work and its timer run beside the
 * holder, not in its place. Only the tracing thread's own affinity is
 * changed (never the target's), and it ends with the thread. A machine or
 * cpuset with one CPU has no choice, and nothing is done.
 *
 * Until 2026-11-29 this was done after each sample's resume, and only
 * after a sample that found the holder waiting. The GVL passes from thread
 * to thread, and a new holder last ran on the tracer's CPU in a fifth of
 * the samples of a 16-thread YJIT program on an idle 2-CPU machine: the
 * tracer's wake-up had just preempted it there, the tracer then spun on
 * that CPU waiting for the stop the holder could not reach without it
 * (the stop took 86-147 us a sample on average instead of 33-40), and the
 * holder, resumed on the CPU the tracer still used, preempted it for
 * milliseconds while the other CPU idled (resuming: 300-700 us a sample
 * instead of 45-56). The read costs the sampler some 10 us a sample; the
 * holder is not stopped yet.
 */
#define _GNU_SOURCE
#include "profile/tracer.h"

#include <sched.h>

#include "profile/schedstat.h"

void tr_aside_init(struct rbpeek_trace *t)
{
    t->aside_cpu = -1;
    CPU_ZERO(&t->aside_allowed);
    t->aside_ok = sched_getaffinity(0, sizeof t->aside_allowed, &t->aside_allowed) == 0 &&
                  CPU_COUNT(&t->aside_allowed) > 1;
}

void tr_aside_step(struct rbpeek_trace *t, pid_t holder)
{
    if (!t->aside_ok || holder <= 0) return;
    int cpu = rbp_task_cpu(&t->add_scratch.files, t->pid, holder);
    if (cpu < 0 || cpu >= CPU_SETSIZE || cpu == t->aside_cpu || !CPU_ISSET(cpu, &t->aside_allowed)) return;
    cpu_set_t set = t->aside_allowed;
    CPU_CLR(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) == 0) {
        t->aside_cpu = cpu;
    } else {
        t->aside_ok = false;   /* a cpuset that changed under us: leave the scheduler to it */
    }
}
