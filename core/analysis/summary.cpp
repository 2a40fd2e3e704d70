// The track summary (summary.h; docs/analysis.md "Summary"): one replay of the track that looks
// at the state after every instant, split over the cores at instant boundaries. The mean of F is
// summed in 128-bit fixed point, so it does not depend on how the work was split (a double sum
// would change in its last digits with the number of cores).
#include "summary.h"
#include "engine_impl.h"
#include "parallel.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace fs::analysis {

namespace {

__extension__ using Wide = unsigned __int128;
constexpr double kOne = 0x1p62; // F in fixed point: F * 2^62

uint64_t fixedRatio(double f)
{
    return static_cast<uint64_t>(std::llround(std::clamp(f, 0.0, 1.0) * kOne));
}

// What the summary reads of a state.
struct Point
{
    uint64_t reserved = 0, allocatedIn = 0, allocatedOut = 0, largest = 0;
    int64_t fragCount = 0;
    double ratio = 0;
};
Point pointOf(const FragState& s)
{
    return {s.reserved, s.allocatedIn, s.allocatedOut, s.largest(), s.fragCount, s.ratio()};
}

class Accumulator
{
public:
    // The state after instant t's events, holding until `until` (the next instant, or the
    // session's end after the last).
    void add(int64_t t, int64_t until, const Point& s)
    {
        ++f_.instants;
        final_ = s.reserved;
        if (s.allocatedOut > f_.peakAllocatedOutsideBytes) {
            f_.peakAllocatedOutsideBytes = s.allocatedOut;
            f_.peakAllocatedOutsideAtNs = t;
        }
        if (s.reserved == 0) return;
        const uint64_t q = fixedRatio(s.ratio);
        const int64_t dt = std::max<int64_t>(until - t, 0);
        weighted_ += static_cast<Wide>(q) * static_cast<uint64_t>(dt);
        plain_ += q;
        f_.reservedNs += dt;
        // One state's extremes, taken directly: this runs for every instant of a replay.
        takeExtremes(f_.countedInstants++ == 0, {s.reserved, t}, {s.allocatedIn, t}, {s.ratio, t},
                     {s.largest, t}, {s.fragCount, t});
    }

    // Appends the figures of a later stretch of time (the next chunk).
    void append(const Accumulator& later)
    {
        f_.instants += later.f_.instants;
        if (later.f_.instants > 0) final_ = later.final_;
        if (later.f_.peakAllocatedOutsideBytes > f_.peakAllocatedOutsideBytes) {
            f_.peakAllocatedOutsideBytes = later.f_.peakAllocatedOutsideBytes;
            f_.peakAllocatedOutsideAtNs = later.f_.peakAllocatedOutsideAtNs;
        }
        weighted_ += later.weighted_;
        plain_ += later.plain_;
        f_.reservedNs += later.f_.reservedNs;
        mergeExtremes(later.f_);
    }

    SummaryFigures figures() const
    {
        SummaryFigures out = f_;
        out.finalReservedBytes = final_;
        // Integer division: the mean in fixed point, exact to 2^-62.
        if (f_.reservedNs > 0)
            out.meanFragmentationRatio =
                static_cast<double>(weighted_ / static_cast<uint64_t>(f_.reservedNs)) / kOne;
        else if (f_.countedInstants > 0) // every counting state lasted no time: plain mean
            out.meanFragmentationRatio =
                static_cast<double>(plain_ / static_cast<uint64_t>(f_.countedInstants)) / kOne;
        return out;
    }

private:
    // Extremes of `g`'s counting states, which come after this one's.
    void mergeExtremes(const SummaryFigures& g)
    {
        if (g.countedInstants == 0) return;
        const bool first = f_.countedInstants == 0;
        f_.countedInstants += g.countedInstants;
        takeExtremes(first, {g.peakReservedBytes, g.peakReservedAtNs},
                     {g.peakAllocatedBytes, g.peakAllocatedAtNs},
                     {g.maxFragmentationRatio, g.maxFragmentationRatioAtNs},
                     {g.minLargestFreeBytes, g.minLargestFreeAtNs},
                     {g.maxFragmentCount, g.maxFragmentCountAtNs});
    }
    // Each figure with its time, from a later stretch; first: this one has no counting state
    // yet (take them all). Ties keep the earlier.
    template <typename T> struct At
    {
        T v;
        int64_t at;
    };
    void takeExtremes(bool first, At<uint64_t> reserved, At<uint64_t> allocated, At<double> ratio,
                      At<uint64_t> largest, At<int64_t> frags)
    {
        auto more = [first](auto& v, int64_t& at, auto n) {
            if (first || n.v > v) {
                v = n.v;
                at = n.at;
            }
        };
        more(f_.peakReservedBytes, f_.peakReservedAtNs, reserved);
        more(f_.peakAllocatedBytes, f_.peakAllocatedAtNs, allocated);
        more(f_.maxFragmentationRatio, f_.maxFragmentationRatioAtNs, ratio);
        more(f_.maxFragmentCount, f_.maxFragmentCountAtNs, frags);
        if (first || largest.v < f_.minLargestFreeBytes) {
            f_.minLargestFreeBytes = largest.v;
            f_.minLargestFreeAtNs = largest.at;
        }
    }

    SummaryFigures f_;
    uint64_t final_ = 0;
    Wide weighted_ = 0; // sum of F * 2^62 * duration over the counting states
    Wide plain_ = 0;    // sum of F * 2^62 over the counting states
};

} // namespace

struct SummaryPass::Sums
{
    Accumulator acc;
    // The instant being replayed and the state after its latest event: it is added when an
    // event of a later instant comes (so no look ahead at the next event per event).
    bool any = false;
    int64_t at = 0;
    int64_t first = 0; // the first instant (with any)
    Point last;
};

SummaryPass::SummaryPass(int64_t sessionEnd) : s_(std::make_unique<Sums>()), end_(sessionEnd) {}
SummaryPass::SummaryPass(SummaryPass&&) noexcept = default;
SummaryPass& SummaryPass::operator=(SummaryPass&&) noexcept = default;
SummaryPass::~SummaryPass() = default;

void SummaryPass::after(const Replayer& r, int64_t t)
{
    // summariseRange's step: the state once the instant's last event is in, until the next.
    Sums& s = *s_;
    if (s.any && t != s.at) s.acc.add(s.at, t, s.last);
    if (!s.any) s.first = t;
    s.any = true;
    s.at = t;
    s.last = pointOf(r.state());
}

void SummaryPass::append(SummaryPass&& later)
{
    Sums& s = *s_;
    const Sums& l = *later.s_;
    if (!l.any) return;
    if (s.any) s.acc.add(s.at, l.first, s.last); // as after() would at the later's first instant
    s.acc.append(l.acc);
    s.any = true;
    s.at = l.at;
    s.last = l.last;
}

SummaryFigures SummaryPass::figures() const
{
    Accumulator all = s_->acc;
    if (s_->any) all.add(s_->at, std::max(end_, s_->at), s_->last); // the last instant
    return all.figures();
}

namespace {

// The pools summariseWithPools keeps apart: those of the regions, and the default pool (0) when
// a block lies outside every region.
std::map<uint64_t, size_t> poolIndexOf(const TrackData& td,
                                       const std::unordered_map<int64_t, uint64_t>& poolOf)
{
    std::map<uint64_t, size_t> poolIndex;
    for (const auto& [id, pool] : poolOf)
        poolIndex.emplace(pool, 0);
    const auto outside = [](const Alloc& a) { return a.region == kNoRegion; };
    if (std::any_of(td.allocs.begin(), td.allocs.end(), outside) ||
        std::any_of(td.pending.begin(), td.pending.end(), outside))
        poolIndex.emplace(0, 0);
    size_t k = 0;
    for (auto& [pool, index] : poolIndex)
        index = k++;
    return poolIndex;
}

// The track's instants with time in [from, to) (from == kNoTime: from the start), each state
// weighed until the next instant (which may lie past `to`) or the session's end.
Accumulator summariseRange(const TrackData& td, int64_t from, int64_t to, int64_t sessionEnd)
{
    Replayer r(td);
    if (from != kNoTime) r.seek(from - 1); // the state after every event before `from`
    Accumulator acc;
    for (int64_t t = r.nextTime(); t != Replayer::kNoEvent && t < to;) {
        r.advanceTo(t);
        const int64_t next = r.nextTime();
        acc.add(t, next == Replayer::kNoEvent ? std::max(sessionEnd, t) : next, pointOf(r.state()));
        t = next;
    }
    return acc;
}

// The track and each of its pools in one pass: a state per pool, fed the events of its regions
// (blocks outside any region belong to the default pool, as in Engine::poolStatesAt).
SummaryFigures summariseWithPools(const TrackData& td, const std::map<uint64_t, size_t>& poolIndex,
                                  const std::unordered_map<int64_t, uint64_t>& poolOf,
                                  int64_t sessionEnd, std::vector<PoolSummary>& pools)
{
    auto poolOfRegion = [&](uint32_t r) -> size_t {
        if (r == kNoRegion) return poolIndex.at(0);
        const auto it = poolOf.find(td.regions[r].id);
        return poolIndex.at(it == poolOf.end() ? 0 : it->second);
    };
    std::vector<size_t> regionPool(td.regions.size());
    for (uint32_t r = 0; r < td.regions.size(); ++r)
        regionPool[r] = poolOfRegion(r);
    std::vector<FragState> states(poolIndex.size(), FragState(td));
    std::vector<Accumulator> accs(poolIndex.size());
    const auto& A = td.allocs;
    auto hook = [&](ReplayEvent kind, uint32_t i, int64_t) {
        switch (kind) {
        case ReplayEvent::RegionCreate:
            states[regionPool[i]].regionCreate(i);
            break;
        case ReplayEvent::RegionDestroy:
            states[regionPool[i]].regionDestroy(i);
            break;
        case ReplayEvent::Alloc:
            if (A[i].occupies())
                states[A[i].region == kNoRegion ? poolIndex.at(0) : regionPool[A[i].region]].alloc(
                    A[i]);
            break;
        case ReplayEvent::Free:
            if (A[i].occupies())
                states[A[i].region == kNoRegion ? poolIndex.at(0) : regionPool[A[i].region]].free(
                    A[i]);
            break;
        case ReplayEvent::PendingStart:
        case ReplayEvent::PendingEnd: {
            const Alloc& p = td.pending[i];
            if (!p.occupies()) break;
            FragState& st = states[p.region == kNoRegion ? poolIndex.at(0) : regionPool[p.region]];
            if (kind == ReplayEvent::PendingStart)
                st.alloc(p, true);
            else
                st.free(p, true);
            break;
        }
        }
    };
    Replayer r(td);
    Accumulator track;
    for (int64_t t = r.nextTime(); t != Replayer::kNoEvent;) {
        r.advanceTo(t, hook);
        const int64_t next = r.nextTime();
        const int64_t until = next == Replayer::kNoEvent ? std::max(sessionEnd, t) : next;
        track.add(t, until, pointOf(r.state()));
        for (size_t p = 0; p < states.size(); ++p)
            accs[p].add(t, until, pointOf(states[p]));
        t = next;
    }
    for (const auto& [pool, p] : poolIndex)
        pools.push_back({pool, accs[p].figures()});
    return track.figures();
}

} // namespace

bool summarySplitsByPool(const TrackData& td, const std::unordered_map<int64_t, uint64_t>& poolOf)
{
    return poolIndexOf(td, poolOf).size() > 1;
}

SummaryDelta summaryDelta(const SummaryFigures& a, const SummaryFigures& b)
{
    auto d = [](uint64_t from, uint64_t to) {
        return static_cast<int64_t>(to) - static_cast<int64_t>(from);
    };
    SummaryDelta out;
    out.peakReservedBytes = d(a.peakReservedBytes, b.peakReservedBytes);
    out.peakAllocatedBytes = d(a.peakAllocatedBytes, b.peakAllocatedBytes);
    out.finalReservedBytes = d(a.finalReservedBytes, b.finalReservedBytes);
    out.meanFragmentationRatio = b.meanFragmentationRatio - a.meanFragmentationRatio;
    out.maxFragmentationRatio = b.maxFragmentationRatio - a.maxFragmentationRatio;
    out.minLargestFreeBytes = d(a.minLargestFreeBytes, b.minLargestFreeBytes);
    out.maxFragmentCount = b.maxFragmentCount - a.maxFragmentCount;
    return out;
}

TrackSummary Engine::trackSummary(uint32_t device, Level level) const
{
    TrackSummary out;
    out.track.device = device;
    out.track.level = level;
    for (const Track& t : tracks())
        if (t.device == device && t.level == level) out.track = t;
    // The kept figures need no allocation rows (a reopen defers reading them).
    if (!d_->trackInfo(device, level) || d_->readSummaryCache(device, level, out)) return out;
    const TrackData* td = d_->track(device, level);
    if (!td) return out;
    const int64_t end = d_->timeEnd;

    // Pools: only a track with more than one (PyTorch's private pools) is split.
    const auto poolOf = regionPools(*d_, device, level);
    const std::map<uint64_t, size_t> poolIndex = poolIndexOf(*td, poolOf);
    if (poolIndex.size() > 1) {
        out.figures = summariseWithPools(*td, poolIndex, poolOf, end, out.pools);
        d_->writeSummaryCache(device, level, out);
        return out;
    }

    // Chunks start at allocation times (distinct, ascending): each replays from its checkpoint.
    const size_t chunks = parallelChunks(td->allocs.size(), d_->options.parallelFrom);
    std::vector<int64_t> bounds = {kNoTime};
    for (size_t c = 1; c < chunks; ++c) {
        const int64_t b = td->allocs[td->allocs.size() * c / chunks].allocNs;
        if (b > bounds.back()) bounds.push_back(b);
    }
    bounds.push_back(Replayer::kNoEvent);
    std::vector<Accumulator> parts(bounds.size() - 1);
    forEachChunk(parts.size(), parts.size(), [&](size_t, size_t k0, size_t k1) {
        for (size_t k = k0; k < k1; ++k)
            parts[k] = summariseRange(*td, bounds[k], bounds[k + 1], end);
    });
    Accumulator all;
    for (const Accumulator& p : parts)
        all.append(p);
    out.figures = all.figures();
    d_->writeSummaryCache(device, level, out);
    return out;
}

} // namespace fs::analysis
