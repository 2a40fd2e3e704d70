// Pure metric functions (no session needed): size classes, entropy, histograms, trend,
// correlation, bursts. The engine uses these; tests check them with known answers.
#pragma once

#include "types.h"

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <vector>

namespace fs::analysis {

// Entropy size classes 2^n KiB, n = 2..12 (docs/analysis.md): class n holds sizes in
// (2^(n-1) KiB, 2^n KiB]; sizes <= 4 KiB go to the first class, sizes > 4 MiB to the last.
constexpr int kSizeClasses = 11;
int sizeClass(uint64_t bytes); // 0..10 (class index = n - 2)
// The most an entropy over the size classes can be: log2(kSizeClasses) = 3.46 bits.
double maxSizeClassEntropyBits();

// The seed's reference fragmentation ratio: F above it means the largest free block is under
// 65 % of free memory. The default of `fragmented_min_ratio` (FragmentedRule) and the line the
// timelines draw.
constexpr double kReferenceFragmentationRatio = 0.35;

// The seed's three fragment clusters (docs/analysis.md), bounds inclusive; hi 0: no upper bound.
struct ClusterRange
{
    uint64_t lo;
    uint64_t hi;
    const char* label;
};
inline constexpr std::array<ClusterRange, 3> kClusterRanges{{
    {8ull << 10, 32ull << 10, "8–32 KiB"},
    {64ull << 10, 128ull << 10, "64–128 KiB"},
    {256ull << 10, 0, "≥ 256 KiB"},
}};

// Shannon entropy in bits of a frequency table: -sum p_i log2 p_i over the non-empty entries.
double entropyBits(std::span<const int64_t> counts);

// Running class counts for entropy (event-size and fragment entropy).
struct SizeClassCounts
{
    std::array<int64_t, kSizeClasses> counts{};
    void add(uint64_t bytes) { ++counts[static_cast<size_t>(sizeClass(bytes))]; }
    void remove(uint64_t bytes) { --counts[static_cast<size_t>(sizeClass(bytes))]; }
    double bits() const { return entropyBits(counts); }
};

// Free fragments counted by size, with the largest at hand (the replay's F and largest free
// block after every event). Most sizes are unique (94 % of additions and removals on the
// simulated runs add or drop a size of their own) and a track has tens of fragments, so while
// there are at most kFlatMax fragments they sit in an unordered array, one entry each: an
// addition appends, a removal finds its entry by a scan (predictable branches, a few cache
// lines) and moves the last one in, and the largest is kept at hand, looked for again only when
// its entry goes. A sorted array's binary search mispredicted at most of its steps, and every
// new size moved half the array (a fifth of a first open's frame replay). Past kFlatMax an
// ordered map of counts; back to the array below a quarter of it.
class FragmentSizes
{
public:
    static constexpr size_t kFlatMax = 256;
    void add(uint64_t size);
    // A size not counted is left alone.
    void remove(uint64_t size);
    uint64_t largest() const
    {
        return tree_ ? (map_.empty() ? 0 : map_.rbegin()->first) : largest_;
    }
    size_t count() const { return count_; } // fragments counted (repeats included)
    bool usesMap() const { return tree_; }

private:
    std::vector<uint64_t> flat_; // one entry per fragment, in no order
    uint64_t largest_ = 0;       // of flat_
    size_t count_ = 0;
    std::map<uint64_t, int64_t> map_; // size -> fragments
    bool tree_ = false;
};

// log2 bin index of a size: floor(log2(bytes)), 0 for 0 and 1.
int log2Bin(uint64_t bytes);
// The log2 bins a cluster range covers most of: [first, last]; last is -1 for an open range.
// 8–32 KiB: bins 13 and 14 (32 KiB itself is the first size of bin 15).
int clusterFirstBin(const ClusterRange& c);
int clusterLastBin(const ClusterRange& c);
// Builds a histogram from fragment sizes.
Histogram makeHistogram(std::span<const uint64_t> fragmentSizes);
// Sets a state's free-fragment figures from its fragment sizes: freeBytes (their sum),
// fragmentCount, largestFreeFragmentBytes, fragmentationRatio, fragmentEntropyBits, histogram.
void setFragmentFigures(State& s, std::span<const uint64_t> fragmentSizes);
// Builds it from log2-bin counts/bytes (64 bins) plus the cluster ranges counted separately.
Histogram makeHistogram(const std::array<int64_t, 64>& count, const std::array<uint64_t, 64>& bytes,
                        const std::array<int64_t, 3>& clusterCount,
                        const std::array<uint64_t, 3>& clusterBytes);
// Which seed cluster a fragment size falls in: 0 = 8-32 KiB, 1 = 64-128 KiB, 2 = >= 256 KiB, -1
// none.
int clusterOf(uint64_t bytes);

// Least-squares fit with R^2.
Trend fitTrend(std::span<const double> x, std::span<const double> y);

// The correlation of two series of one step each (frames, replays): Pearson and Spearman
// (average ranks for ties) of the values, and the test behind its p-value, which keeps its
// nominal false-alarm rate on independent autocorrelated or drifting series (docs/analysis.md
// "Correlations", calibrated by tst_analysis_correlation): Pearson and Spearman of the
// step-to-step changes, x leading y by 0 to kCorrelationMaxLag steps, Student's t with
// Bartlett's effective sample size, Bonferroni over the four tests. Pairs where either value is
// NaN are skipped for the coefficients; n < 3 gives coefficients 0, and fewer than
// kCorrelationMinChanges changes at every lag leave p NaN (not tested).
constexpr int kCorrelationMaxLag = 1;
// Fewer changes than this and the autocorrelation behind n_eff cannot be estimated (at ten,
// one lag), nor Spearman's p taken from Student's t: not tested.
constexpr int64_t kCorrelationMinChanges = 10;
// The test's name in the report, the JSON and the GUI: "changes, Bartlett n_eff,
// Pearson+Spearman, lag 0-1" (or "lag 0" when only lag 0 was asked for).
std::string correlationTestName(const Correlation& c);
// maxLag: the largest lag tested (0 where no leading relation is asked about: a graph
// replay's duration against the allocator state at its own start).
Correlation correlate(std::span<const double> x, std::span<const double> y,
                      int maxLag = kCorrelationMaxLag);
// Two-sided p-value of a correlation coefficient r over n independent pairs (n may be an
// effective, fractional size): Student's t with n - 2 degrees of freedom; 1 when n < 3.
double correlationPValue(double r, double n);
// Bartlett's effective number of independent pairs behind the correlation of a and b.
double effectiveSampleSize(std::span<const double> a, std::span<const double> b);

// Splits allocation times (ascending) into bursts: a new burst starts when the gap to the
// previous allocation is >= gapNs. sizes[i] is the size of the allocation at times[i].
std::vector<Burst> splitBursts(std::span<const int64_t> times, std::span<const uint64_t> sizes,
                               int64_t gapNs = 5'000'000);
// The same one allocation at a time (no copy of a track's times and sizes). keep = false keeps
// only the summary (no list of bursts: a long run has tens of millions).
class BurstSplitter
{
public:
    explicit BurstSplitter(int64_t gapNs, bool keep = true) : gapNs_(gapNs), keep_(keep) {}
    void add(int64_t time, uint64_t size);
    std::vector<Burst> take(); // the bursts so far, and starts afresh
    BurstSummary summary();    // of every burst added so far

private:
    void close();
    int64_t gapNs_;
    bool keep_;
    bool open_ = false;
    Burst current_;
    std::vector<Burst> out_;
    BurstSummary sum_;
};

// Ranks with ties averaged (1-based), as Spearman uses them.
std::vector<double> averageRanks(std::span<const double> v);
// averageRanks of v without its element k, from ranks = averageRanks(v), in one pass.
std::vector<double> ranksWithout(std::span<const double> ranks, std::span<const double> v,
                                 size_t k);

} // namespace fs::analysis
