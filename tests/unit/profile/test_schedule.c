/*
 * Tests of the sample times (schedule.c), through rbpeek_schedule: each
 * run from a resume to the next sample is an exponential draw (its mean,
 * median and short end are the exponential's), never before the resume,
 * whatever the samples cost; a sample's cost is taken off the mean run so
 * that the rate asked holds, down to a quarter of the interval. Bounds are
 * 4.5 standard errors of N draws (fixed seeds: a run is reproducible).
 */
#include <math.h>
#include <stdint.h>

#include "cu_main.h"
#include "rbpeek.h"

#define N 20000
#define Z 4.5

/* The mean run of N samples that each cost cost_ns, 10 ms apart; the share
 * of runs under a tenth of it and under its median are in *short, *half. */
static double mean_run(uint64_t cost_ns, uint64_t seed, double *short_share, double *half_share,
                       int *before_resume)
{
    rbpeek_schedule *s = rbpeek_schedule_new(0.01, seed);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    uint64_t now = 1000000000ull, fired = 0;
    double sum = 0, runs[N];
    *before_resume = 0;
    for (int i = 0; i < N; i++) {
        uint64_t resumed = fired ? fired + cost_ns : now;
        uint64_t next = rbpeek_schedule_next(s, fired, resumed);
        if (next < resumed) (*before_resume)++;
        runs[i] = (double)(next - resumed);
        sum += runs[i];
        fired = next;
    }
    rbpeek_schedule_free(s);
    double mean = sum / N;
    int shorter = 0, under_median = 0;
    for (int i = 0; i < N; i++) {
        shorter += runs[i] < 0.1 * mean;
        under_median += runs[i] < log(2.0) * mean;
    }
    *short_share = (double)shorter / N;
    *half_share = (double)under_median / N;
    return mean;
}

static void check_share(double got, double p)
{
    CU_ASSERT(fabs(got - p) < Z * sqrt(p * (1 - p) / N));
}

/* N samples that each cost cost_ns, 10 ms apart: the runs are exponential
 * of mean want_ns, none before its resume, and none piled at the resume. */
static void check_runs(uint64_t cost_ns, uint64_t seed, double want_ns)
{
    double shorter, half;
    int before;
    double m = mean_run(cost_ns, seed, &shorter, &half, &before);
    CU_ASSERT_EQUAL(before, 0);
    CU_ASSERT(fabs(m - want_ns) < Z * want_ns / sqrt(N));
    check_share(half, 0.5);
    check_share(shorter, 1 - exp(-0.1));
}

static void test_exponential_runs(void)
{
    check_runs(0, 42, 1e7);
}

static void test_cost_keeps_the_rate(void)
{
    /* 2 ms a sample at 100 Hz: runs of 8 ms on average, 10 ms apart in all. */
    check_runs(2000000, 7, 8e6);
    /* 9 ms a sample: the mean run stops at a quarter of the interval. */
    check_runs(9000000, 9, 2.5e6);
}

static void test_bad_input(void)
{
    CU_ASSERT_PTR_NULL(rbpeek_schedule_new(0, 1));
    CU_ASSERT_PTR_NULL(rbpeek_schedule_new(-1, 1));
    CU_ASSERT_PTR_NULL(rbpeek_schedule_new(NAN, 1));
    CU_ASSERT_EQUAL(rbpeek_schedule_next(NULL, 0, 123), 123);
    rbpeek_schedule_free(NULL);
    /* A resume before the fire (a clock read out of order) records no cost. */
    rbpeek_schedule *s = rbpeek_schedule_new(0.01, 3);
    CU_ASSERT_PTR_NOT_NULL_FATAL(s);
    CU_ASSERT(rbpeek_schedule_next(s, 2000, 1000) >= 1000);
    rbpeek_schedule_free(s);
}

static const rbp_cu_test TESTS[] = {
    {"runs from a resume are exponential", test_exponential_runs},
    {"a sample's cost comes off the mean run", test_cost_keeps_the_rate},
    {"bad input", test_bad_input},
    {NULL, NULL},
};

RBP_CU_MAIN("schedule", TESTS)
