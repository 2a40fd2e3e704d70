// Statistics behind the collapse verdict and the report's correlations (docs/analysis.md
// "Verdict" and "Many comparisons"): robust departures from a healthy sample, and
// Benjamini-Hochberg q-values. Pure functions; tests check them with known answers.
#pragma once

#include "types.h"

#include <span>
#include <vector>

namespace fs::analysis {

// The modified z-score cutoff of Iglewicz and Hoaglin (1993): a value more than 3.5 robust
// standard deviations from the median is an outlier candidate.
constexpr double kZCutoff = 3.5;
// Fewer healthy frames than this and no departure is called (nothing to measure spread with).
constexpr int64_t kMinHealthyFrames = 3;

double median(std::vector<double> v);
// The median of |x - m| over v (0 for an empty v).
double medianAbsoluteDeviation(std::span<const double> v, double m);
// Spread of v around its median m: 1.4826 x the median absolute deviation (a normal sample's
// standard deviation), else (at least half the values equal the median) 1.2533 x the mean
// absolute deviation (also a normal sample's standard deviation); 0 when every value is m.
double robustScale(std::span<const double> v, double m);
// One-sided robust z of x against the sample: (x - median) / scale; 0 when x <= median, +inf
// when the scale is 0 and x > median.
double robustZ(double x, std::span<const double> healthy);

// How far x departs from the healthy values, and whether that is more than they vary among
// themselves. Each healthy value h departs from the others by robustZ(h, the others); x stands
// out when z > kZCutoff and z exceeds every such departure, where a healthy value whose
// departure is infinite (the others never varied) is exceeded only by a larger x. threshold is
// max(kZCutoff, the largest finite departure), floor the largest healthy value whose departure is
// infinite (-inf when none). With fewer than kMinHealthyFrames values nothing is measured: z is
// 0 and nothing stands out.
struct Departure
{
    double value = 0;
    double median = 0;
    double scale = 0;
    double z = 0;
    double threshold = 0;
    double floor = 0;
    bool standsOut = false;
};
Departure departure(double x, std::span<const double> healthy);

// Benjamini-Hochberg: q_(i) = min over j >= i of m p_(j) / j, capped at 1, for the m p-values in
// ascending order; NaN p-values are not tests (their q is NaN, and they do not count in m).
std::vector<double> benjaminiHochberg(std::span<const double> p);
// Sets q of every correlation: BH over the p-values of the pairs that were tested (p not NaN;
// the others keep q NaN).
void adjustForMultipleTests(std::vector<Correlation>& pairs);

// Base rates (docs/analysis.md "Verdict"): evidence that also occurs in the run's healthy frames
// is weighed by how often it does there. A departure that at least one healthy frame in 20
// reaches as well (a rate above 5 %, the conventional false-alarm level) is common: on a
// collapse the content caused, such a figure turns up by coincidence that often, so it cannot
// decide a verdict alone.
constexpr double kMaxBaseRate = 0.05;
struct BaseRate
{
    int64_t frames = 0;   // healthy frames of the run measured
    int64_t departed = 0; // ... whose figure reached x or beyond (>= x)
    double rate = 0;      // departed / frames (0 when no frame)
    // rate > kMaxBaseRate, measured on at least kMinHealthyFrames frames.
    bool common = false;
};
// x: the figure in the collapse's window (larger is further from normal); healthy: the same
// figure in each healthy frame of the run.
BaseRate baseRate(double x, std::span<const double> healthy);

} // namespace fs::analysis
