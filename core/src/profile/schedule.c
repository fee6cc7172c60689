/*
 * The sample times: a Poisson process over the time the target runs.
 *
 * Each run of the target, from the moment a sample lets it go to the next
 * stop, is a fresh exponential draw, so every sample is a Poisson arrival,
 * and Poisson arrivals see time averages (PASTA) even where each one
 * disturbs what it samples: a stopped thread leaves its CPU and is queued
 * again when resumed. Only then is the share of samples that find the
 * GVL's holder on a CPU in the GC the GC's share of its CPU time.
 *
 * Until 2026-11-29 the schedule was kept in absolute time: a gap that ended
 * while the last sample still held the target fired at once on its resume
 * (up to five intervals behind), an atom of runs of length 0. That stopped
 * the target again where it was let go, in the state the last stop found
 * it in, so samples were not Poisson arrivals: where that stop had found
 * the holder preempted (at a return from the kernel: 3.1's GC reads the CPU
 * clock just outside its flag, 3.3's just inside), the new sample could
 * count that place as a moment on a CPU. Measured beside two busy loops,
 * the two rules gave the same mean GC share (docs/sampling.md); the old
 * one's comparisons scattered more than their samples allow on the command
 * line.
 *
 * A sample's own cost (stop, walk, resume) would lower the rate; the mean
 * run is shortened by the mean cost so far instead, down to a quarter of
 * the interval, below which the rate asked cannot be kept anyway (the Rate
 * line says why). The mean cost changes slowly and is no sample's own, so
 * the draws stay independent of the state each sample found.
 */
#include "profile/schedule.h"

#include <math.h>
#include <stdlib.h>

#include "rbpeek.h"

void rbp_schedule_init(struct rbp_schedule *s, double interval_s, uint64_t seed)
{
    s->mean_ns = interval_s * 1e9;
    s->cost_sum_ns = 0;
    s->cost_n = 0;
    s->rng = seed ? seed : 0x9e3779b97f4a7c15ull;
}

/* Exponentially distributed, of mean mean_ns, from a xorshift generator. */
static uint64_t exp_gap(struct rbp_schedule *s, double mean_ns)
{
    uint64_t x = s->rng;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s->rng = x;
    double u = ((double)(x >> 11) + 0.5) / 9007199254740992.0; /* (0, 1) */
    double g = -mean_ns * log(u);
    return g < 1.0 ? 1u : (uint64_t)g;
}

uint64_t rbp_schedule_next(struct rbp_schedule *s, uint64_t fired_ns, uint64_t resumed_ns)
{
    if (fired_ns && resumed_ns >= fired_ns) {
        s->cost_sum_ns += (double)(resumed_ns - fired_ns);
        s->cost_n++;
    }
    double run = s->mean_ns - (s->cost_n ? s->cost_sum_ns / (double)s->cost_n : 0.0);
    if (run < s->mean_ns * RBP_SCHEDULE_MIN_RUN) run = s->mean_ns * RBP_SCHEDULE_MIN_RUN;
    return resumed_ns + exp_gap(s, run);
}

/* -- the API: the loop through the debugger ---------------------------------- */

struct rbpeek_schedule {
    struct rbp_schedule s;
};

rbpeek_schedule *rbpeek_schedule_new(double interval_s, uint64_t seed)
{
    if (!(interval_s > 0)) return NULL;
    rbpeek_schedule *h = malloc(sizeof *h);
    if (h) rbp_schedule_init(&h->s, interval_s, seed);
    return h;
}

uint64_t rbpeek_schedule_next(rbpeek_schedule *h, uint64_t fired_ns, uint64_t resumed_ns)
{
    return h ? rbp_schedule_next(&h->s, fired_ns, resumed_ns) : resumed_ns;
}

void rbpeek_schedule_free(rbpeek_schedule *h)
{
    free(h);
}
