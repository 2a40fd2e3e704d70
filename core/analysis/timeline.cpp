// Time series over one track: the metrics timeline, bursts, trends and windowed histograms.
#include "engine_impl.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace fs::analysis {

Timeline Engine::timeline(const TimelineOptions& o) const
{
    Timeline tl;
    tl.device = o.device;
    tl.level = o.level;
    tl.caveats = d_->resultCaveats();
    // Whole-session timelines (the GUI's, report's) are kept in the session's analysis_cache.
    const bool whole = o.from == kNoTime && o.to == kNoTime;
    const std::string key = whole
                                ? fmt::format("timeline:{}:{}:{}:{}", o.device,
                                              static_cast<int>(o.level), o.step, o.entropyWindowNs)
                                : std::string();
    if (whole && d_->readTimelineCache(key, tl)) {
        tl.entropyWindowNs = std::max<int64_t>(o.entropyWindowNs, 1);
        ++d_->timelinesFromCache;
        return tl;
    }
    const TrackData& td = d_->trackOrThrow(o.device, o.level);
    const int64_t from = o.from == kNoTime ? d_->timeBegin : o.from;
    const int64_t to = o.to == kNoTime ? d_->timeEnd : std::max(o.to, from);
    int64_t step = o.step > 0 ? o.step : (to - from) / 1000;
    step = std::max<int64_t>(step, 1);
    // Bound the number of samples: a caller asking for 1 ns steps over hours gets 10 M samples.
    constexpr int64_t kMaxSamples = 10'000'000;
    if ((to - from) / step >= kMaxSamples) step = (to - from) / (kMaxSamples - 1) + 1;
    const int64_t window = std::max<int64_t>(o.entropyWindowNs, 1);
    tl.step = step;
    tl.entropyWindowNs = window;
    const auto samples = static_cast<size_t>((to - from) / step + 1);
    for (auto* v :
         {&tl.reserved, &tl.allocated, &tl.allocatedOutside, &tl.freeInRegions, &tl.fragmentCount,
          &tl.largestFragment, &tl.fragmentationRatio, &tl.eventEntropy, &tl.fragmentEntropy})
        v->resize(samples);
    tl.time.resize(samples);
    auto sampleTime = [&](size_t k) {
        return k + 1 == samples ? to : from + static_cast<int64_t>(k) * step;
    };
    const auto& A = td.allocs;
    const auto& F = td.byFree;
    // Samples [k0, k1): a replay from the state at the first (checkpoints make the seek cheap),
    // so that chunks run on threads of their own and give what one replay gives.
    auto fill = [&](size_t k0, size_t k1) -> int64_t {
        Replayer r(td);
        r.seek(sampleTime(k0));
        // Event-size entropy over (t - window, t]: head pointers add events up to t, tail
        // pointers remove those at or before t - window.
        const int64_t start = sampleTime(k0) - window;
        size_t ah = static_cast<size_t>(
            std::upper_bound(A.begin(), A.end(), start,
                             [](int64_t v, const Alloc& a) { return v < a.allocNs; }) -
            A.begin());
        size_t fh = static_cast<size_t>(
            std::upper_bound(F.begin(), F.end(), start,
                             [&](int64_t v, uint32_t i) { return v < A[i].freeNs; }) -
            F.begin());
        size_t at = ah, ft = fh;
        SizeClassCounts events;
        for (size_t k = k0; k < k1; ++k) {
            const int64_t t = sampleTime(k);
            r.advanceTo(t);
            while (ah < A.size() && A[ah].allocNs <= t)
                events.add(A[ah++].size);
            while (fh < F.size() && A[F[fh]].freeNs <= t)
                events.add(A[F[fh++]].size);
            while (at < ah && A[at].allocNs <= t - window)
                events.remove(A[at++].size);
            while (ft < fh && A[F[ft]].freeNs <= t - window)
                events.remove(A[F[ft++]].size);
            const FragState& s = r.state();
            tl.time[k] = t;
            tl.reserved[k] = static_cast<double>(s.reserved);
            tl.allocated[k] = static_cast<double>(s.allocatedIn);
            tl.allocatedOutside[k] = static_cast<double>(s.allocatedOut);
            tl.freeInRegions[k] = static_cast<double>(s.freeBytes);
            tl.fragmentCount[k] = static_cast<double>(s.fragCount);
            tl.largestFragment[k] = static_cast<double>(s.largest());
            tl.fragmentationRatio[k] = s.ratio();
            tl.eventEntropy[k] = events.bits();
            tl.fragmentEntropy[k] = s.entropy();
        }
        return r.processed();
    };
    // A long track's replay is split over the cores (a first open waits for it).
    const size_t chunks = samples < 2 ? 1 : parallelChunks(A.size(), d_->options.parallelFrom);
    std::vector<int64_t> processed(chunks, 0);
    forEachChunk(samples, chunks,
                 [&](size_t c, size_t k0, size_t k1) { processed[c] = fill(k0, k1); });
    tl.eventsReplayed = 0;
    for (int64_t p : processed)
        tl.eventsReplayed += p;
    if (whole) d_->writeTimelineCache(key, tl);
    return tl;
}

std::vector<Burst> Engine::bursts(uint32_t device, Level level, int64_t from, int64_t to,
                                  int64_t gapNs) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    if (from == kNoTime) from = std::numeric_limits<int64_t>::min();
    if (to == kNoTime) to = std::numeric_limits<int64_t>::max();
    // Allocations are sorted by time: the window's are one range, split in place (a copy of a
    // 33 M-allocation track's times and sizes took 0.8 GB at its peak).
    auto it = std::lower_bound(td.allocs.begin(), td.allocs.end(), from,
                               [](const Alloc& a, int64_t t) { return a.allocNs < t; });
    BurstSplitter b(gapNs);
    for (; it != td.allocs.end() && it->allocNs <= to; ++it)
        b.add(it->allocNs, it->size);
    return b.take();
}

BurstSummary Engine::burstSummary(uint32_t device, Level level, int64_t gapNs) const
{
    BurstSplitter b(gapNs, false);
    for (const Alloc& a : d_->trackOrThrow(device, level).allocs)
        b.add(a.allocNs, a.size);
    return b.summary();
}

namespace {

const std::vector<double>* seriesByName(const Timeline& tl, const std::string& name)
{
    if (name == "fragmentation_ratio") return &tl.fragmentationRatio;
    if (name == "event_entropy") return &tl.eventEntropy;
    if (name == "fragment_entropy") return &tl.fragmentEntropy;
    if (name == "largest_fragment") return &tl.largestFragment;
    if (name == "fragment_count") return &tl.fragmentCount;
    if (name == "reserved") return &tl.reserved;
    if (name == "allocated") return &tl.allocated;
    if (name == "free") return &tl.freeInRegions;
    if (name == "allocated_outside") return &tl.allocatedOutside;
    return nullptr;
}

} // namespace

Trend Engine::trend(const Timeline& tl, const std::string& series, int64_t from, int64_t to) const
{
    const std::vector<double>* y = seriesByName(tl, series);
    if (!y) throw std::invalid_argument("unknown timeline series '" + series + "'");
    std::vector<double> xs, ys;
    for (size_t i = 0; i < tl.time.size(); ++i) {
        if ((from != kNoTime && tl.time[i] < from) || (to != kNoTime && tl.time[i] > to)) continue;
        xs.push_back(static_cast<double>(tl.time[i] - d_->timeBegin) / 3.6e12);
        ys.push_back((*y)[i]);
    }
    return fitTrend(xs, ys);
}

Histogram Engine::histogramOver(uint32_t device, Level level, int64_t from, int64_t to,
                                int samples) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    samples = std::max(samples, 2);
    if (to < from) std::swap(from, to);
    Replayer r(td);
    std::map<uint64_t, HistogramBin> bins;
    Histogram out;
    for (int k = 0; k < samples; ++k) {
        const int64_t t =
            from + static_cast<int64_t>(static_cast<double>(to - from) * k / (samples - 1));
        r.seek(t);
        const Histogram h = r.state().snapshot(t, true).histogram;
        for (const HistogramBin& b : h.log2) {
            auto& acc = bins[b.lo];
            acc.lo = b.lo;
            acc.hi = b.hi;
            acc.count += b.count;
            acc.bytes += b.bytes;
        }
        if (out.clusters.empty())
            out.clusters = h.clusters;
        else
            for (size_t i = 0; i < h.clusters.size(); ++i) {
                out.clusters[i].count += h.clusters[i].count;
                out.clusters[i].bytes += h.clusters[i].bytes;
            }
    }
    for (const auto& [lo, b] : bins)
        out.log2.push_back(b);
    return out;
}

} // namespace fs::analysis
