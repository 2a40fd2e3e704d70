#include "metrics.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <numeric>

#include <boost/math/distributions/students_t.hpp>
#include <fmt/format.h>

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

double correlationPValue(double r, double n)
{
    if (!(n >= 3)) return 1;
    if (std::fabs(r) >= 1) return 0;
    const double df = n - 2;
    const double t = std::fabs(r) * std::sqrt(df / (1 - r * r));
    return std::clamp(2 * boost::math::cdf(boost::math::complement(boost::math::students_t(df), t)),
                      0.0, 1.0);
}

double effectiveSampleSize(std::span<const double> a, std::span<const double> b)
{
    // Bartlett (1935) for the variance of a cross-correlation of two independent stationary
    // series, with Pyper and Peterman's (1998) weights (m - k) / m and lags up to m / 5:
    // 1 / n_eff = 1 / m + (2 / m) sum_k (m - k) / m rho_a(k) rho_b(k). Capped at 64 lags (a
    // million-replay series would cost seconds otherwise; the changes' autocorrelations are
    // short) and at m (anti-persistent series give no more than m independent pairs).
    const size_t m = std::min(a.size(), b.size());
    if (m < 2) return static_cast<double>(m);
    const size_t lags = std::clamp<size_t>(m / 5, 1, 64);
    const auto acf = [m, lags](std::span<const double> v) {
        double mean = 0;
        for (size_t i = 0; i < m; ++i)
            mean += v[i];
        mean /= static_cast<double>(m);
        double c0 = 0;
        for (size_t i = 0; i < m; ++i)
            c0 += (v[i] - mean) * (v[i] - mean);
        std::vector<double> rho(lags + 1, 0.0);
        if (c0 == 0) return rho;
        for (size_t k = 1; k <= lags; ++k) {
            double s = 0;
            for (size_t i = k; i < m; ++i)
                s += (v[i] - mean) * (v[i - k] - mean);
            rho[k] = s / c0;
        }
        return rho;
    };
    const std::vector<double> ra = acf(a), rb = acf(b);
    const double md = static_cast<double>(m);
    double sum = 0;
    for (size_t k = 1; k <= lags; ++k)
        sum += (md - static_cast<double>(k)) / md * ra[k] * rb[k];
    const double inv = 1 / md + 2 / md * sum;
    return inv <= 1 / md ? md : 1 / inv;
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

std::vector<double> ranksWithout(std::span<const double> ranks, std::span<const double> v, size_t k)
{
    // Average ranks of v without v[k]: a larger value moves down one place; a value tied with
    // v[k] stays in a group one shorter, whose average rank is half a place lower.
    std::vector<double> out;
    out.reserve(v.size() - 1);
    for (size_t i = 0; i < v.size(); ++i)
        if (i != k) out.push_back(ranks[i] - (v[i] > v[k] ? 1.0 : v[i] == v[k] ? 0.5 : 0.0));
    return out;
}

std::string correlationTestName(const Correlation& c)
{
    return c.maxLag > 0
               ? fmt::format("changes, Bartlett n_eff, Pearson+Spearman, lag 0-{}", c.maxLag)
               : std::string("changes, Bartlett n_eff, Pearson+Spearman, lag 0");
}

Correlation correlate(std::span<const double> x, std::span<const double> y, int maxLag)
{
    Correlation c;
    c.maxLag = std::max(0, maxLag);
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
    c.spearman = pearsonOf(averageRanks(a), averageRanks(b));

    // The test (docs/analysis.md "Correlations"): the step-to-step changes, y's change at step
    // i against x's at i - lag, by Pearson and by Spearman (their ranks), each p from Student's
    // t with n_eff - 2 degrees of freedom; the smallest p of the (lag, coefficient) tests times
    // their number (Bonferroni). A change needs both values of both steps; gaps drop the changes
    // that span them.
    double best = std::numeric_limits<double>::quiet_NaN();
    int tested = 0;
    auto test = [&](int lag, bool ranked, std::span<const double> u, std::span<const double> v) {
        ++tested;
        const double r = pearsonOf(u, v);
        const double ne = effectiveSampleSize(u, v);
        const double p = correlationPValue(r, ne);
        if (std::isnan(best) || p < best) {
            best = p;
            c.lag = lag;
            c.changeSpearman = ranked;
            c.changeR = r;
            c.nEff = ne;
        }
    };
    std::vector<double> dx0, dy0, rx0, ry0;
    for (int lag = 0; lag <= c.maxLag; ++lag) {
        std::vector<double> dx, dy;
        for (size_t i = static_cast<size_t>(lag) + 1; i < n; ++i) {
            const double x1 = x[i - lag], x0 = x[i - lag - 1], y1 = y[i], y0 = y[i - 1];
            if (std::isnan(x1) || std::isnan(x0) || std::isnan(y1) || std::isnan(y0)) continue;
            dx.push_back(x1 - x0);
            dy.push_back(y1 - y0);
        }
        if (static_cast<int64_t>(dx.size()) < kCorrelationMinChanges) continue;
        std::vector<double> rx, ry;
        if (lag == 1 && dx0.size() == n - 1 && dx.size() == n - 2) {
            // No gap: lag 1's changes are lag 0's without x's last and y's first, and their
            // ranks follow from lag 0's without a sort (a replay series has a million).
            rx = ranksWithout(rx0, dx0, dx0.size() - 1);
            ry = ranksWithout(ry0, dy0, 0);
        } else {
            rx = averageRanks(dx);
            ry = averageRanks(dy);
        }
        test(lag, false, dx, dy);
        test(lag, true, rx, ry);
        if (lag == 0) {
            dx0 = std::move(dx);
            dy0 = std::move(dy);
            rx0 = std::move(rx);
            ry0 = std::move(ry);
        }
    }
    c.p = tested ? std::min(1.0, best * tested) : std::numeric_limits<double>::quiet_NaN();
    c.q = c.p;
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
