#include "stats.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

namespace fs::analysis {

double median(std::vector<double> v)
{
    if (v.empty()) return 0;
    const size_t mid = v.size() / 2;
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
    const double hi = v[mid];
    if (v.size() % 2 == 1) return hi;
    const double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid));
    return (lo + hi) / 2;
}

double medianAbsoluteDeviation(std::span<const double> v, double m)
{
    std::vector<double> dev;
    dev.reserve(v.size());
    for (double x : v)
        dev.push_back(std::fabs(x - m));
    return median(std::move(dev));
}

double robustScale(std::span<const double> v, double m)
{
    if (v.empty()) return 0;
    const double mad = medianAbsoluteDeviation(v, m);
    if (mad > 0) return 1.4826 * mad;
    double sum = 0;
    for (double x : v)
        sum += std::fabs(x - m);
    return 1.2533 * sum / static_cast<double>(v.size());
}

double robustZ(double x, std::span<const double> healthy)
{
    const double m = median(std::vector<double>(healthy.begin(), healthy.end()));
    if (!(x > m)) return 0;
    const double s = robustScale(healthy, m);
    if (s <= 0) return std::numeric_limits<double>::infinity();
    return (x - m) / s;
}

Departure departure(double x, std::span<const double> healthy)
{
    Departure d;
    d.value = x;
    d.median = median(std::vector<double>(healthy.begin(), healthy.end()));
    d.scale = robustScale(healthy, d.median);
    d.threshold = kZCutoff;
    d.floor = -std::numeric_limits<double>::infinity();
    if (static_cast<int64_t>(healthy.size()) < kMinHealthyFrames) return d; // z 0: not measured
    d.z = robustZ(x, healthy);
    std::vector<double> others;
    for (size_t h = 0; h < healthy.size(); ++h) {
        others.assign(healthy.begin(), healthy.end());
        others.erase(others.begin() + static_cast<std::ptrdiff_t>(h));
        const double zh = robustZ(healthy[h], others);
        if (std::isinf(zh))
            d.floor = std::max(d.floor, healthy[h]);
        else
            d.threshold = std::max(d.threshold, zh);
    }
    d.standsOut = d.z > d.threshold && x > d.floor;
    return d;
}

std::vector<double> benjaminiHochberg(std::span<const double> p)
{
    const double nan = std::numeric_limits<double>::quiet_NaN();
    std::vector<double> q(p.size(), nan);
    std::vector<size_t> order;
    for (size_t i = 0; i < p.size(); ++i)
        if (!std::isnan(p[i])) order.push_back(i);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b]; });
    const double m = static_cast<double>(order.size());
    double running = 1;
    for (size_t k = order.size(); k-- > 0;) {
        running = std::min(running, m * p[order[k]] / static_cast<double>(k + 1));
        q[order[k]] = std::min(1.0, running);
    }
    return q;
}

void adjustForMultipleTests(std::vector<Correlation>& pairs)
{
    std::vector<double> p;
    for (const Correlation& c : pairs)
        p.push_back(c.p);
    const std::vector<double> q = benjaminiHochberg(p);
    for (size_t i = 0; i < pairs.size(); ++i)
        pairs[i].q = q[i];
}

BaseRate baseRate(double x, std::span<const double> healthy)
{
    BaseRate b;
    b.frames = static_cast<int64_t>(healthy.size());
    for (double h : healthy)
        b.departed += h >= x ? 1 : 0;
    b.rate = b.frames ? static_cast<double>(b.departed) / static_cast<double>(b.frames) : 0.0;
    b.common = b.frames >= kMinHealthyFrames && b.rate > kMaxBaseRate;
    return b;
}

} // namespace fs::analysis
