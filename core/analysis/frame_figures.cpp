// Per-frame figures for the collapse verdict (docs/analysis.md "Verdict"): OOMs, bytes held by
// pending frees, memory outside the allocator, kernels that left their captured graph, segments
// released and created, the smallest largest free block, blocks that moved. Each is a figure of
// one frame, so the same figure over the healthy baseline frames gives its normal spread.
//
// The session reads are the small functions at the top, each over a typed reader of core/store
// (docs/store.md), under the engine's connection lock.
#include "precursors.h"

#include "core/store/allocations.h"
#include "core/store/kernels.h"
#include "core/store/ooms.h"

#include <algorithm>
#include <set>
#include <unordered_map>
#include <unordered_set>

namespace fs::analysis {

namespace {

struct OomRow
{
    int64_t time;
    uint32_t device;
    uint64_t requested; // 0 when the source did not say
};
struct PendingRow
{
    uint32_t device, stream;
    uint64_t size;
    int64_t begin, end; // end: kAlive while still pending at the end of the session
};
// The graph a launch ran in, -1 when launched outside any graph.
int64_t graphOf(const store::LaunchRow& k)
{
    return k.graphId ? static_cast<int64_t>(*k.graphId) : int64_t{-1};
}

std::vector<OomRow> readOomTimes(const Engine::Impl& d, int64_t begin, int64_t end)
{
    std::vector<OomRow> out;
    std::lock_guard lock(d.dbMutex);
    if (end <= begin) return out;
    for (const store::OomRow& o : d.oomsBetween(begin, end - 1)) // [begin, end)
        out.push_back({o.timeNs, static_cast<uint32_t>(o.device), o.requestedBytes.value_or(0)});
    return out;
}

std::vector<PendingRow> readPendingFrees(const Engine::Impl& d, int64_t begin, int64_t end)
{
    std::vector<PendingRow> out;
    std::lock_guard lock(d.dbMutex);
    if (!d.session) return out;
    for (const store::PendingFreeRow& p : store::pendingFreesOverlapping(*d.session, begin, end))
        out.push_back({static_cast<uint32_t>(p.device), static_cast<uint32_t>(p.stream.value_or(0)),
                       p.size, p.requestNs, p.completeNs.value_or(kAlive)});
    return out;
}

// Regions of driver-level tracks that no region of another level on the same device overlaps:
// device memory the allocator does not own (another library's cudaMalloc, another process seen
// through the driver). Only on devices where an allocator track has regions.
struct OutsideRegion
{
    uint32_t device;
    uint64_t size;
    int64_t create, destroy;
};

std::vector<OutsideRegion> outsideRegions(const Engine::Impl& d)
{
    std::vector<OutsideRegion> out;
    for (const TrackData& td : d.tracks) {
        if (td.level != Level::Driver) continue;
        // Allocator regions of the device by address: a driver region is the allocator's own
        // when one of them covers part of its range while both are alive.
        std::vector<const RegionRec*> owned;
        for (const TrackData& o : d.tracks)
            if (o.device == td.device && o.level != Level::Driver)
                for (const RegionRec& r : o.regions)
                    owned.push_back(&r);
        if (owned.empty()) continue; // no allocator on the device: nothing is "outside" it
        std::sort(owned.begin(), owned.end(),
                  [](const RegionRec* a, const RegionRec* b) { return a->address < b->address; });
        for (const RegionRec& r : td.regions) {
            auto stop = std::lower_bound(
                owned.begin(), owned.end(), r.address + r.size,
                [](const RegionRec* a, uint64_t addr) { return a->address < addr; });
            bool overlaps = false;
            for (auto j = owned.begin(); j != stop && !overlaps; ++j)
                overlaps = (*j)->address + (*j)->size > r.address && (*j)->createNs < r.destroyNs &&
                           r.createNs < (*j)->destroyNs;
            if (!overlaps) out.push_back({td.device, r.size, r.createNs, r.destroyNs});
        }
    }
    return out;
}

} // namespace

std::vector<FrameFigures> frameFigures(const Engine::Impl& d,
                                       const std::vector<const FrameInfo*>& frames, size_t healthy)
{
    std::vector<FrameFigures> out(frames.size());
    if (frames.empty()) return out;
    int64_t begin = frames[0]->start, end = frames[0]->end;
    for (const FrameInfo* f : frames) {
        begin = std::min(begin, f->start);
        end = std::max(end, f->end);
    }
    auto inFrame = [](const FrameInfo* f, int64_t t) { return t >= f->start && t < f->end; };

    const std::vector<OomRow> ooms = readOomTimes(d, begin, end);
    const std::vector<PendingRow> pending = readPendingFrees(d, begin, end);
    const std::vector<OutsideRegion> outside = outsideRegions(d);

    // Kernels: which names the healthy frames ran inside graphs, per device.
    const std::vector<int64_t> kernelDevices = d.kernelDeviceIds();
    std::map<int64_t, std::vector<std::shared_ptr<const Engine::Impl::Launches>>> kernels;
    std::map<int64_t, std::unordered_set<int64_t>> graphNames;
    for (int64_t dev : kernelDevices) {
        auto& rows = kernels[dev];
        for (size_t i = 0; i < frames.size(); ++i) {
            rows.push_back(d.launchesIn(dev, frames[i]->start, frames[i]->end));
            if (i < healthy)
                for (const store::LaunchRow& k : *rows.back())
                    if (graphOf(k) >= 0) graphNames[dev].insert(k.name);
        }
    }

    for (size_t i = 0; i < frames.size(); ++i) {
        const FrameInfo* f = frames[i];
        FrameFigures& g = out[i];
        g.frame = f;
        for (const OomRow& o : ooms)
            if (inFrame(f, o.time)) g.ooms[o.device] += std::max<uint64_t>(o.requested, 1);

        // Pending frees: the bytes held at the worst instant (a sweep over the waits clipped
        // to the frame).
        std::map<uint32_t, std::vector<const PendingRow*>> byDevice;
        for (const PendingRow& p : pending)
            if (p.begin < f->end && p.end > f->start) byDevice[p.device].push_back(&p);
        for (auto& [dev, rows] : byDevice) {
            std::vector<std::pair<int64_t, int64_t>> edges; // (time, +index+1 / -(index+1))
            for (size_t k = 0; k < rows.size(); ++k) {
                edges.emplace_back(std::max(rows[k]->begin, f->start), static_cast<int64_t>(k) + 1);
                edges.emplace_back(std::min(rows[k]->end, f->end), -static_cast<int64_t>(k) - 1);
            }
            std::sort(edges.begin(), edges.end()); // ends (negative) before starts at equal times
            uint64_t held = 0;
            std::set<size_t> live;
            FrameFigures::Pending& best = g.pending[dev];
            for (const auto& [t, ev] : edges) {
                if (ev < 0) {
                    held -= rows[static_cast<size_t>(-ev - 1)]->size;
                    live.erase(static_cast<size_t>(-ev - 1));
                    continue;
                }
                held += rows[static_cast<size_t>(ev - 1)]->size;
                live.insert(static_cast<size_t>(ev - 1));
                if (held > best.peak) {
                    best.peak = held;
                    best.at = t;
                    best.blocks = static_cast<int64_t>(live.size());
                    best.longestNs = 0;
                    uint64_t largest = 0;
                    for (size_t k : live) {
                        const PendingRow& p = *rows[k];
                        const int64_t wait = (p.end == kAlive ? f->end : p.end) - p.begin;
                        best.longestNs = std::max(best.longestNs, wait);
                        if (p.size > largest) {
                            largest = p.size;
                            best.stream = p.stream;
                        }
                    }
                }
            }
        }

        // Memory outside the allocator: the peak over the frame.
        std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> extEdges; // (time, +-bytes)
        for (const OutsideRegion& r : outside) {
            FrameFigures::External& x = g.external[r.device];
            if (r.create < f->end && r.create > x.lastGrowth) {
                x.lastGrowth = r.create;
                x.lastGrowthBytes = r.size;
            }
            if (r.create >= f->end || r.destroy <= f->start) continue;
            extEdges[r.device].emplace_back(std::max(r.create, f->start),
                                            static_cast<int64_t>(r.size));
            if (r.destroy < f->end)
                extEdges[r.device].emplace_back(r.destroy, -static_cast<int64_t>(r.size));
        }
        for (auto& [dev, edges] : extEdges) {
            std::sort(edges.begin(), edges.end());
            int64_t now = 0;
            for (const auto& [t, delta] : edges) {
                now += delta;
                g.external[dev].peak = std::max(g.external[dev].peak, static_cast<uint64_t>(now));
            }
        }

        // Kernels that the healthy frames ran inside graphs, and ran here outside the frame's
        // first graph.
        for (int64_t dev : kernelDevices) {
            const auto& names = graphNames[dev];
            if (names.empty()) continue;
            FrameFigures::Graph& gr = g.graph[static_cast<uint32_t>(dev)];
            for (const store::LaunchRow& k : *kernels[dev][i]) {
                if (!names.count(k.name)) continue;
                ++gr.launches;
                const int64_t graph = graphOf(k);
                if (gr.graphId < 0 && graph >= 0) gr.graphId = graph;
                if (graph < 0 || graph != gr.graphId) {
                    ++gr.outside;
                    if (gr.firstOutside == kNoTime) gr.firstOutside = k.startNs;
                }
            }
        }

        // Per track: segments released and created, the smallest largest free block, moves.
        g.released.assign(d.tracks.size(), 0);
        g.created.assign(d.tracks.size(), 0);
        g.minLargest.assign(d.tracks.size(), 0);
        g.jumps.assign(d.tracks.size(), 0);
        for (size_t t = 0; t < d.tracks.size(); ++t) {
            const TrackData& td = d.tracks[t];
            // Regions are in creation order, the released ones also in release order.
            auto r = std::lower_bound(td.regions.begin(), td.regions.end(), f->start,
                                      [](const RegionRec& x, int64_t v) { return x.createNs < v; });
            for (; r != td.regions.end() && r->createNs < f->end; ++r)
                g.created[t] += r->size;
            auto releasedFrom = [&](int64_t v) {
                return std::lower_bound(
                    td.regionsByEnd.begin(), td.regionsByEnd.end(), v,
                    [&](uint32_t k, int64_t x) { return td.regions[k].destroyNs < x; });
            };
            for (auto k = releasedFrom(f->start), stop = releasedFrom(f->end); k != stop; ++k)
                g.released[t] += td.regions[*k].size;
            for (const FrameAllocator& fa : f->allocator)
                if (fa.device == td.device && fa.level == td.level)
                    g.minLargest[t] = static_cast<double>(fa.minLargestFragment);
            if (!td.allocs.empty())
                g.jumps[t] = static_cast<int64_t>(d.rolePairs(td, f->index, true).pairs.size());
        }
    }
    return out;
}

} // namespace fs::analysis
