#include "metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>

namespace fs::analysis {

int sizeClass(uint64_t bytes)
{
    // Class n holds (2^(n-1), 2^n] KiB: bytes - 1 lies in [2^(n-1) KiB, 2^n KiB), so n is the bit
    // width of (bytes - 1) / 1 KiB. Checked against CATALOGUE.md's fragment entropies (the floor
    // rule, [2^n, 2^(n+1)) KiB, gives other figures).
    if (bytes == 0) return 0;
    const int n = static_cast<int>(std::bit_width((bytes - 1) >> 10));
    return std::clamp(n, 2, 12) - 2;
}

void FragmentSizes::add(uint64_t size)
{
    ++count_;
    if (tree_) {
        ++map_[size];
        return;
    }
    flat_.push_back(size);
    largest_ = std::max(largest_, size);
    if (flat_.size() > kFlatMax) {
        for (uint64_t s : flat_)
            ++map_[s];
        flat_.clear();
        tree_ = true;
    }
}

void FragmentSizes::remove(uint64_t size)
{
    if (tree_) {
        const auto it = map_.find(size);
        if (it == map_.end()) return;
        --count_;
        if (--it->second == 0) map_.erase(it);
        if (count_ < kFlatMax / 4) {
            for (const auto& [s, n] : map_)
                flat_.insert(flat_.end(), static_cast<size_t>(n), s);
            largest_ = map_.empty() ? 0 : map_.rbegin()->first;
            map_.clear();
            tree_ = false;
        }
        return;
    }
    // From the newest entry back: a fragment an event leaves is often the next event's.
    const auto rit = std::find(flat_.rbegin(), flat_.rend(), size);
    if (rit == flat_.rend()) return;
    --count_;
    *rit = flat_.back();
    flat_.pop_back();
    if (size == largest_)
        largest_ = flat_.empty() ? 0 : *std::max_element(flat_.begin(), flat_.end());
}

double entropyBits(std::span<const int64_t> counts)
{
    int64_t total = 0;
    for (int64_t c : counts)
        total += c > 0 ? c : 0;
    if (total <= 0) return 0;
    double h = 0;
    for (int64_t c : counts) {
        if (c <= 0) continue;
        const double p = static_cast<double>(c) / static_cast<double>(total);
        h -= p * std::log2(p);
    }
    return h == 0 ? 0.0 : h; // no -0
}

int log2Bin(uint64_t bytes)
{
    return bytes <= 1 ? 0 : static_cast<int>(std::bit_width(bytes)) - 1;
}

int clusterOf(uint64_t bytes)
{
    for (size_t i = 0; i < kClusterRanges.size(); ++i) {
        const ClusterRange& c = kClusterRanges[i];
        if (bytes >= c.lo && (c.hi == 0 || bytes <= c.hi)) return static_cast<int>(i);
    }
    return -1;
}

int clusterFirstBin(const ClusterRange& c)
{
    return log2Bin(c.lo);
}

int clusterLastBin(const ClusterRange& c)
{
    return c.hi == 0 ? -1 : log2Bin(c.hi - 1);
}

double maxSizeClassEntropyBits()
{
    return std::log2(static_cast<double>(kSizeClasses));
}

Histogram makeHistogram(const std::array<int64_t, 64>& count, const std::array<uint64_t, 64>& bytes,
                        const std::array<int64_t, 3>& clusterCount,
                        const std::array<uint64_t, 3>& clusterBytes)
{
    Histogram h;
    for (int k = 0; k < 64; ++k) {
        if (count[static_cast<size_t>(k)] == 0) continue;
        HistogramBin b;
        b.lo = k == 0 ? 0 : uint64_t{1} << k;
        b.hi = k == 63 ? 0 : uint64_t{1} << (k + 1);
        b.count = count[static_cast<size_t>(k)];
        b.bytes = bytes[static_cast<size_t>(k)];
        h.log2.push_back(b);
    }
    const uint64_t lo[3] = {8u << 10, 64u << 10, 256u << 10};
    const uint64_t hi[3] = {(32u << 10) + 1, (128u << 10) + 1, 0};
    for (size_t i = 0; i < 3; ++i)
        h.clusters.push_back({lo[i], hi[i], clusterCount[i], clusterBytes[i]});
    return h;
}

void setFragmentFigures(State& s, std::span<const uint64_t> fragmentSizes)
{
    SizeClassCounts classes;
    s.freeBytes = 0;
    s.largestFreeFragmentBytes = 0;
    for (uint64_t f : fragmentSizes) {
        s.freeBytes += f;
        s.largestFreeFragmentBytes = std::max(s.largestFreeFragmentBytes, f);
        classes.add(f);
    }
    s.fragmentCount = static_cast<int64_t>(fragmentSizes.size());
    s.fragmentationRatio = s.freeBytes == 0
                               ? 0.0
                               : 1.0 - static_cast<double>(s.largestFreeFragmentBytes) /
                                           static_cast<double>(s.freeBytes);
    s.fragmentEntropyBits = classes.bits();
    s.histogram = makeHistogram(fragmentSizes);
}

Histogram makeHistogram(std::span<const uint64_t> fragmentSizes)
{
    std::array<int64_t, 64> count{};
    std::array<uint64_t, 64> bytes{};
    std::array<int64_t, 3> cc{};
    std::array<uint64_t, 3> cb{};
    for (uint64_t s : fragmentSizes) {
        const auto k = static_cast<size_t>(log2Bin(s));
        ++count[k];
        bytes[k] += s;
        const int c = clusterOf(s);
        if (c >= 0) {
            ++cc[static_cast<size_t>(c)];
            cb[static_cast<size_t>(c)] += s;
        }
    }
    return makeHistogram(count, bytes, cc, cb);
}

Trend fitTrend(std::span<const double> x, std::span<const double> y)
{
    Trend t;
    const size_t n = std::min(x.size(), y.size());
    double sx = 0, sy = 0;
    size_t m = 0;
    for (size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i]) || std::isnan(y[i])) continue;
        sx += x[i];
        sy += y[i];
        ++m;
    }
    t.n = static_cast<int64_t>(m);
    if (m < 2) return t;
    const double mx = sx / static_cast<double>(m), my = sy / static_cast<double>(m);
    double sxx = 0, sxy = 0, syy = 0;
    for (size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i]) || std::isnan(y[i])) continue;
        sxx += (x[i] - mx) * (x[i] - mx);
        sxy += (x[i] - mx) * (y[i] - my);
        syy += (y[i] - my) * (y[i] - my);
    }
    if (sxx == 0) {
        t.intercept = my;
        return t;
    }
    t.slope = sxy / sxx;
    t.intercept = my - t.slope * mx;
    t.r2 = syy == 0 ? 0 : (sxy * sxy) / (sxx * syy);
    return t;
}

namespace {

// Continued fraction of the regularized incomplete beta function (modified Lentz).
double betaContinuedFraction(double a, double b, double x)
{
    constexpr double tiny = 1e-300, eps = 1e-15;
    double c = 1, d = 1 - (a + b) * x / (a + 1);
    if (std::fabs(d) < tiny) d = tiny;
    d = 1 / d;
    double h = d;
    for (int m = 1; m <= 300; ++m) {
        const double m2 = 2.0 * m;
        double aa = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
        d = 1 + aa * d;
        d = std::fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = std::fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        h *= d * c;
        aa = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
        d = 1 + aa * d;
        d = std::fabs(d) < tiny ? tiny : d;
        c = 1 + aa / c;
        c = std::fabs(c) < tiny ? tiny : c;
        d = 1 / d;
        const double del = d * c;
        h *= del;
        if (std::fabs(del - 1) < eps) break;
    }
    return h;
}

double regularizedBeta(double a, double b, double x)
{
    if (x <= 0) return 0;
    if (x >= 1) return 1;
    const double lbt =
        std::lgamma(a + b) - std::lgamma(a) - std::lgamma(b) + a * std::log(x) + b * std::log1p(-x);
    const double bt = std::exp(lbt);
    if (x < (a + 1) / (a + b + 2)) return bt * betaContinuedFraction(a, b, x) / a;
    return 1 - bt * betaContinuedFraction(b, a, 1 - x) / b;
}

double pearsonOf(std::span<const double> x, std::span<const double> y)
{
    const size_t n = x.size();
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; ++i) {
        mx += x[i];
        my += y[i];
    }
    mx /= static_cast<double>(n);
    my /= static_cast<double>(n);
    double sxx = 0, syy = 0, sxy = 0;
    for (size_t i = 0; i < n; ++i) {
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
        sxy += (x[i] - mx) * (y[i] - my);
    }
    if (sxx == 0 || syy == 0) return 0;
    return std::clamp(sxy / std::sqrt(sxx * syy), -1.0, 1.0);
}

} // namespace

double correlationPValue(double r, int64_t n)
{
    if (n < 3) return 1;
    const double df = static_cast<double>(n - 2);
    if (std::fabs(r) >= 1) return 0;
    const double t2 = r * r * df / (1 - r * r);
    // Two-sided p of Student's t: I_{df/(df+t^2)}(df/2, 1/2).
    return std::clamp(regularizedBeta(df / 2, 0.5, df / (df + t2)), 0.0, 1.0);
}

std::vector<double> averageRanks(std::span<const double> v)
{
    // (value, index) pairs sorted in place: the indirect sort through v was most of a
    // million-replay correlation. Ties get the mean of the ranks they span.
    std::vector<std::pair<double, size_t>> order(v.size());
    for (size_t i = 0; i < v.size(); ++i)
        order[i] = {v[i], i};
    std::sort(order.begin(), order.end());
    std::vector<double> rank(v.size());
    for (size_t i = 0; i < order.size();) {
        size_t j = i;
        while (j + 1 < order.size() && order[j + 1].first == order[i].first)
            ++j;
        const double r = (static_cast<double>(i) + static_cast<double>(j)) / 2 + 1;
        for (size_t k = i; k <= j; ++k)
            rank[order[k].second] = r;
        i = j + 1;
    }
    return rank;
}

Correlation correlate(std::span<const double> x, std::span<const double> y)
{
    Correlation c;
    std::vector<double> a, b;
    const size_t n = std::min(x.size(), y.size());
    for (size_t i = 0; i < n; ++i) {
        if (std::isnan(x[i]) || std::isnan(y[i])) continue;
        a.push_back(x[i]);
        b.push_back(y[i]);
    }
    c.n = static_cast<int64_t>(a.size());
    if (c.n < 3) return c;
    c.pearson = pearsonOf(a, b);
    c.pearsonP = correlationPValue(c.pearson, c.n);
    const auto ra = averageRanks(a), rb = averageRanks(b);
    c.spearman = pearsonOf(ra, rb);
    c.spearmanP = correlationPValue(c.spearman, c.n);
    return c;
}

std::vector<Burst> splitBursts(std::span<const int64_t> times, std::span<const uint64_t> sizes,
                               int64_t gapNs)
{
    BurstSplitter b(gapNs);
    for (size_t i = 0; i < times.size(); ++i)
        b.add(times[i], i < sizes.size() ? sizes[i] : 0);
    return b.take();
}

void BurstSplitter::add(int64_t time, uint64_t size)
{
    if (open_ && time - current_.end < gapNs_) {
        current_.end = time;
        ++current_.allocations;
        current_.bytes += size;
        return;
    }
    close();
    current_ = {time, time, 1, size};
    open_ = true;
}

void BurstSplitter::close()
{
    if (!open_) return;
    open_ = false;
    if (current_.allocations > 1) {
        ++sum_.bursts;
        sum_.largestAllocations = std::max(sum_.largestAllocations, current_.allocations);
    }
    if (keep_) out_.push_back(current_);
}

std::vector<Burst> BurstSplitter::take()
{
    close();
    return std::move(out_);
}

BurstSummary BurstSplitter::summary()
{
    close();
    return sum_;
}

} // namespace fs::analysis
