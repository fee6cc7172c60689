/*
 * Wilson's score interval of a share (rbpeek_share_interval): the one place
 * `ruby allocs --sites` computes a site's interval, for its text and JSON
 * (through the binding) and its SVG's tooltips (output/flamegraph.c).
 * Wilson's rather than the normal approximation p +- z sqrt(p(1-p)/n): it
 * stays inside [0, 1], is not empty at k = 0 or k = n, and keeps close to
 * its nominal coverage down to a few tens of samples and small shares,
 * where the normal one is too narrow (docs/allocations.md, "Precision").
 */
#include <math.h>

#include "rbpeek.h"

void rbpeek_share_interval(double k, double n, double z, double *lo, double *hi)
{
    double l = 0.0, h = 1.0;
    if (n > 0 && k >= 0 && z > 0 && isfinite(n) && isfinite(k) && isfinite(z)) {
        double p = k > n ? 1.0 : k / n;
        double z2 = z * z, den = 1.0 + z2 / n;
        double mid = (p + z2 / (2.0 * n)) / den;
        double half = z * sqrt(p * (1.0 - p) / n + z2 / (4.0 * n * n)) / den;
        l = mid - half < 0.0 ? 0.0 : mid - half;
        h = mid + half > 1.0 ? 1.0 : mid + half;
    }
    if (lo) *lo = l;
    if (hi) *hi = h;
}
