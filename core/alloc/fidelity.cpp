#include "fidelity.h"

#include <algorithm>
#include <deque>
#include <map>
#include <tuple>

namespace fs::alloc {

namespace {

// The step of `res` nanoseconds that holds t (floor division).
int64_t stepOf(int64_t t, int64_t res)
{
    if (res <= 1) return t;
    return t >= 0 ? t / res : -((-t + res - 1) / res);
}

int64_t deltaOf(const SegmentEvent& e)
{
    const auto s = static_cast<int64_t>(e.size);
    return e.kind == SegmentEvent::Create || e.kind == SegmentEvent::Map ? s : -s;
}

void byTime(std::vector<SegmentEvent>& v)
{
    std::stable_sort(v.begin(), v.end(),
                     [](const SegmentEvent& a, const SegmentEvent& b) { return a.time < b.time; });
}

std::vector<SegmentEvent> recordedEvents(const DeviceTrace& d)
{
    std::vector<SegmentEvent> out;
    for (const RecordedSegment& s : d.segments) {
        if (s.expandable) continue; // its mappings are in mappingChanges
        out.push_back({s.createNs, s.address, s.size, SegmentEvent::Create});
        if (s.destroyNs != kAliveNs)
            out.push_back({s.destroyNs, s.address, s.size, SegmentEvent::Release});
    }
    out.insert(out.end(), d.mappingChanges.begin(), d.mappingChanges.end());
    byTime(out);
    return out;
}

// The replay's mappings as the recorded run's are known: each instant's net change.
std::vector<SegmentEvent> replayEvents(const DeviceReplay& r)
{
    std::vector<SegmentEvent> out;
    std::vector<std::pair<int64_t, int64_t>> mapped;
    for (const SegmentEvent& e : r.segmentEvents)
        if (e.kind == SegmentEvent::Create || e.kind == SegmentEvent::Release)
            out.push_back(e);
        else
            mapped.emplace_back(e.time, deltaOf(e));
    const std::vector<SegmentEvent> net = netMappingChanges(std::move(mapped));
    out.insert(out.end(), net.begin(), net.end());
    byTime(out);
    return out;
}

// Largest |a - b| after every instant (a step of `res` ns) of a list of (time, delta of a, delta
// of b); the time of the first event of the step where it is largest.
std::pair<uint64_t, int64_t> largestGap(std::vector<std::tuple<int64_t, int64_t, int64_t>> steps,
                                        int64_t res)
{
    std::sort(steps.begin(), steps.end(),
              [](const auto& x, const auto& y) { return std::get<0>(x) < std::get<0>(y); });
    uint64_t largest = 0;
    int64_t at = -1, a = 0, b = 0;
    for (size_t i = 0; i < steps.size();) {
        const int64_t t = std::get<0>(steps[i]), step = stepOf(t, res);
        for (; i < steps.size() && stepOf(std::get<0>(steps[i]), res) == step; ++i) {
            a += std::get<1>(steps[i]);
            b += std::get<2>(steps[i]);
        }
        const auto gap = static_cast<uint64_t>(a > b ? a - b : b - a);
        if (gap > largest) {
            largest = gap;
            at = t;
        }
    }
    return {largest, at};
}

} // namespace

TimeCourse compareTimeCourse(const DeviceTrace& real, const DeviceReplay& replay,
                             int64_t resolutionNs)
{
    TimeCourse c;
    const std::vector<SegmentEvent> rec = recordedEvents(real), rep = replayEvents(replay);
    c.realEvents = static_cast<int64_t>(rec.size());
    c.replayEvents = static_cast<int64_t>(rep.size());

    // Twins: the k-th event of one kind, address and size in one run is the k-th in the other.
    using Key = std::tuple<int, uint64_t, uint64_t>;
    std::map<Key, std::deque<int64_t>> twins;
    for (const SegmentEvent& e : rec)
        twins[{e.kind, e.address, e.size}].push_back(e.time);
    auto differ = [&](int64_t t) {
        ++c.timeDiffers;
        if (c.firstDiffer < 0 || t < c.firstDiffer) c.firstDiffer = t;
    };
    for (const SegmentEvent& e : rep) {
        auto it = twins.find({e.kind, e.address, e.size});
        if (it == twins.end() || it->second.empty()) {
            differ(e.time);
            continue;
        }
        const int64_t t = it->second.front();
        it->second.pop_front();
        c.maxTimeDiffNs = std::max(c.maxTimeDiffNs, t > e.time ? t - e.time : e.time - t);
        if (stepOf(t, resolutionNs) != stepOf(e.time, resolutionNs)) differ(std::min(t, e.time));
    }
    for (const auto& [key, left] : twins)
        for (int64_t t : left)
            differ(t);

    std::vector<std::tuple<int64_t, int64_t, int64_t>> steps;
    for (const SegmentEvent& e : rec)
        steps.emplace_back(e.time, deltaOf(e), 0);
    for (const SegmentEvent& e : rep)
        steps.emplace_back(e.time, 0, deltaOf(e));
    std::tie(c.maxReservedDiff, c.maxReservedDiffAt) = largestGap(std::move(steps), resolutionNs);

    // Allocated bytes as PyTorch counts them (allocated_bytes: whole blocks, a request's rounding
    // and an unsplit remainder included) after every instant; an allocation the replay could not
    // serve counts on the recorded side only.
    std::vector<std::tuple<int64_t, int64_t, int64_t>> allocated;
    allocated.reserve(real.allocs.size() * 2);
    for (size_t i = 0; i < real.allocs.size(); ++i) {
        const RecordedAlloc& a = real.allocs[i];
        const auto got = static_cast<int64_t>(
            i < replay.blockSizes.size() && i < replay.addresses.size() && replay.addresses[i] != 0
                ? replay.blockSizes[i]
                : 0);
        const auto had = static_cast<int64_t>(a.size);
        allocated.emplace_back(a.allocNs, had, got);
        if (a.freeNs != kAliveNs) allocated.emplace_back(a.freeNs, -had, -got);
    }
    c.maxAllocatedDiff = largestGap(std::move(allocated), resolutionNs).first;
    return c;
}

} // namespace fs::alloc
