/*
 * The sample times (schedule.c): when the next sample is taken, for the
 * tracer (tracer.c) and, through rbpeek_schedule, for the loop through the
 * debugger. One rule for both: the time the target runs from a resume to
 * the next stop is exponential.
 */
#ifndef RBP_PROFILE_SCHEDULE_H
#define RBP_PROFILE_SCHEDULE_H

#include <stdint.h>

struct rbp_schedule {
    double mean_ns;     /* the interval asked for */
    double cost_sum_ns; /* the samples' wall time from their fire to the resume */
    uint64_t cost_n;
    uint64_t rng;       /* xorshift64 state, never 0 */
};

#define RBP_SCHEDULE_MIN_RUN 0.25   /* of the interval: the least mean run between samples */

void rbp_schedule_init(struct rbp_schedule *s, double interval_s, uint64_t seed);
/* The next sample's CLOCK_MONOTONIC deadline: resumed_ns plus an
 * exponential run. fired_ns is when the last sample fired (0: there was
 * none), so that its cost is taken off the mean run and the rate asked is
 * kept. */
uint64_t rbp_schedule_next(struct rbp_schedule *s, uint64_t fired_ns, uint64_t resumed_ns);

#endif
