#include "graph_pools.h"

#include <algorithm>
#include <limits>
#include <set>

#include <fmt/format.h>

namespace fs::analysis {

const GraphPools::PoolOf& GraphPools::poolOf(uint32_t device, Level level)
{
    auto key = std::make_pair(device, static_cast<int>(level));
    auto it = poolOf_.find(key);
    if (it == poolOf_.end()) it = poolOf_.emplace(key, regionPools(d_, device, level)).first;
    return it->second;
}

void GraphPools::run()
{
    std::set<uint32_t> captured; // devices with graph captures
    for (const GraphInfo& g : r_.graphs)
        if (!g.captures.empty()) captured.insert(g.device);
    // Pools of the framework (PyTorch's) and pool (CUDA mempools) tracks: those with a private
    // pool, or on a device whose graphs were captured. A session with neither costs nothing.
    for (const Track& t : e_.tracks()) {
        if (t.level != Level::Framework && t.level != Level::Pool) continue;
        const PoolOf& of = poolOf(t.device, t.level);
        const bool privatePools =
            std::any_of(of.begin(), of.end(), [](const auto& kv) { return kv.second != 0; });
        if (privatePools || captured.count(t.device)) trackPools(t.device, t.level);
    }
    for (GraphInfo& g : r_.graphs)
        capturePools(g);
    linkGraphs();
    std::sort(r_.pools.begin(), r_.pools.end(), [](const PoolInfo& a, const PoolInfo& b) {
        return std::tie(a.device, a.level, a.pool) < std::tie(b.device, b.level, b.pool);
    });
    std::set<uint32_t> devices;
    for (const PoolInfo& p : r_.pools)
        devices.insert(p.device);
    concurrency();
    for (uint32_t dev : devices)
        sharingCandidates(dev);
}

void GraphPools::trackPools(uint32_t device, Level level)
{
    const TrackData* td = d_.track(device, level);
    if (!td) return;
    const PoolOf& of = poolOf(device, level);
    auto poolOfRegion = [&](uint32_t r) {
        auto it = of.find(td->regions[r].id);
        return it == of.end() ? uint64_t{0} : it->second;
    };
    std::map<uint64_t, size_t> index; // pool id -> entry of r_.pools
    auto entry = [&](uint64_t pool) -> PoolInfo& {
        auto [it, added] = index.try_emplace(pool, r_.pools.size());
        if (added) {
            r_.pools.emplace_back();
            PoolInfo& p = r_.pools.back();
            p.device = device;
            p.level = level;
            p.pool = pool;
        }
        return r_.pools[it->second];
    };
    for (const auto& [id, pool] : of)
        entry(pool);
    std::map<uint64_t, std::set<int64_t>> created, aliveAtEnd;
    for (uint32_t i = 0; i < td->regions.size(); ++i) {
        const RegionRec& rr = td->regions[i];
        const uint64_t pool = poolOfRegion(i);
        entry(pool).regions.push_back({rr.id, rr.address, rr.size, rr.createNs, rr.destroyNs});
        created[pool].insert(rr.id);
        if (rr.destroyNs == kAlive) aliveAtEnd[pool].insert(rr.id);
    }
    // One walk in the engine's event order; a pool's series gets one point per instant at which
    // its figures changed (private pools only: the default pool of a long run changes millions
    // of times, and its figures are the track's timeline's).
    Replayer rp(*td);
    rp.advanceTo(std::numeric_limits<int64_t>::max(), [&](ReplayEvent kind, uint32_t i, int64_t t) {
        uint64_t pool = 0;
        int64_t dr = 0, da = 0;
        if (kind == ReplayEvent::RegionCreate || kind == ReplayEvent::RegionDestroy) {
            pool = poolOfRegion(i);
            dr = static_cast<int64_t>(td->regions[i].size);
            if (kind == ReplayEvent::RegionDestroy) dr = -dr;
        } else if (kind == ReplayEvent::Alloc || kind == ReplayEvent::Free) {
            const Alloc& a = td->allocs[i];
            if (!a.occupies() || a.region == kNoRegion) return; // outside any pool's region
            pool = poolOfRegion(a.region);
            da = static_cast<int64_t>(a.size);
            if (kind == ReplayEvent::Free) da = -da;
        } else {
            return; // a pending free's wait: neither reserved nor allocated bytes
        }
        PoolInfo& p = entry(pool);
        p.reservedBytes = static_cast<uint64_t>(static_cast<int64_t>(p.reservedBytes) + dr);
        p.allocatedBytes = static_cast<uint64_t>(static_cast<int64_t>(p.allocatedBytes) + da);
        if (p.reservedBytes > p.peakReservedBytes) {
            p.peakReservedBytes = p.reservedBytes;
            p.peakTime = t;
            p.allocatedAtPeak = p.allocatedBytes;
        } else if (p.reservedBytes == p.peakReservedBytes && t == p.peakTime) {
            p.allocatedAtPeak = p.allocatedBytes; // the state after every event of the instant
        }
        p.peakAllocatedBytes = std::max(p.peakAllocatedBytes, p.allocatedBytes);
        if (pool == 0) return;
        if (!p.series.empty() && p.series.back().time == t)
            p.series.back() = {t, p.reservedBytes, p.allocatedBytes};
        else
            p.series.push_back({t, p.reservedBytes, p.allocatedBytes});
    });
    for (auto& [pool, i] : index) {
        PoolInfo& p = r_.pools[i];
        p.segmentsCreated = static_cast<int64_t>(created[pool].size());
        p.segments = static_cast<int64_t>(aliveAtEnd[pool].size());
    }
}

uint64_t GraphPools::reservedAt(uint32_t device, uint64_t pool, int64_t t) const
{
    for (const PoolInfo& p : r_.pools) {
        if (p.device != device || p.pool != pool || p.level != Level::Framework) continue;
        auto it = std::upper_bound(p.series.begin(), p.series.end(), t,
                                   [](int64_t v, const PoolPoint& q) { return v < q.time; });
        return it == p.series.begin() ? 0 : std::prev(it)->reserved;
    }
    return 0;
}

void GraphPools::capturePools(GraphInfo& g)
{
    if (g.captures.empty()) return;
    const TrackData* td = d_.track(g.device, Level::Framework);
    const PoolOf* of = td ? &poolOf(g.device, Level::Framework) : nullptr;
    auto poolOfAlloc = [&](const Alloc& a) {
        if (a.region == kNoRegion || !of) return uint64_t{0};
        auto it = of->find(td->regions[a.region].id);
        return it == of->end() ? uint64_t{0} : it->second;
    };
    struct Seen
    {
        PoolSource source = PoolSource::Unknown;
        uint64_t pool = 0;
        std::vector<uint32_t> allocs; // the capture's allocations (in its pool when known)
    };
    std::vector<Seen> seen(g.captures.size());
    for (size_t k = 0; k < g.captures.size(); ++k) {
        const GraphCapture& c = g.captures[k];
        Seen& s = seen[k];
        std::vector<uint32_t> window;
        std::set<uint64_t> privatePools;
        if (td) {
            auto lo = std::lower_bound(td->allocs.begin(), td->allocs.end(), c.begin,
                                       [](const Alloc& a, int64_t t) { return a.allocNs < t; });
            for (auto it = lo; it != td->allocs.end() && it->allocNs <= c.end; ++it) {
                window.push_back(static_cast<uint32_t>(it - td->allocs.begin()));
                if (const uint64_t p = poolOfAlloc(*it)) privatePools.insert(p);
            }
        }
        if (c.pool != 0) {
            s.source = PoolSource::Recorded;
            s.pool = c.pool;
        } else if (privatePools.size() == 1) {
            s.source = PoolSource::Allocations;
            s.pool = *privatePools.begin();
        }
        for (uint32_t i : window)
            if (s.source == PoolSource::Unknown || poolOfAlloc(td->allocs[i]) == s.pool)
                s.allocs.push_back(i);
        if (s.source != PoolSource::Unknown) {
            g.poolSource = s.source;
            g.pool = s.pool;
        }
    }
    // Re-captures: the i-th allocation of a capture plays the role of the i-th of the capture
    // before (the same program captured again); another address means the layout drifted.
    for (size_t k = 1; k < g.captures.size(); ++k) {
        const Seen& prev = seen[k - 1];
        const Seen& cur = seen[k];
        Recapture rc;
        rc.time = g.captures[k].begin;
        rc.allocations = static_cast<int64_t>(cur.allocs.size());
        rc.previousAllocations = static_cast<int64_t>(prev.allocs.size());
        for (size_t i = 0; i < std::min(prev.allocs.size(), cur.allocs.size()); ++i) {
            const Alloc& a = td->allocs[cur.allocs[i]];
            if (a.address != td->allocs[prev.allocs[i]].address) {
                ++rc.moved;
                rc.movedBytes += a.size;
            }
        }
        for (uint32_t i : prev.allocs) {
            const Alloc& a = td->allocs[i];
            if (a.freeNs > rc.time && a.occupies()) {
                ++rc.heldAllocations;
                rc.heldBytes += a.size;
            }
        }
        rc.samePool = prev.source != PoolSource::Unknown && cur.source != PoolSource::Unknown &&
                      prev.pool == cur.pool;
        if (!rc.samePool && prev.source != PoolSource::Unknown)
            rc.previousPoolReserved = reservedAt(g.device, prev.pool, rc.time);
        g.recaptures.push_back(rc);
    }
}

void GraphPools::linkGraphs()
{
    for (uint32_t gi = 0; gi < r_.graphs.size(); ++gi) {
        const GraphInfo& g = r_.graphs[gi];
        if (!g.poolKnown()) continue;
        PoolInfo* found = nullptr;
        for (PoolInfo& p : r_.pools)
            if (p.device == g.device && p.pool == g.pool && (!found || p.level == Level::Framework))
                found = &p;
        if (!found) { // named by the capture only: the pool never held a region
            r_.pools.emplace_back();
            found = &r_.pools.back();
            found->device = g.device;
            found->level = Level::Framework;
            found->pool = g.pool;
        }
        found->graphs.push_back(gi);
    }
}

// Graphs that replayed at the same time at least once (on any stream of their device): one
// sweep over the replays in start order, keeping each graph's latest end.
void GraphPools::concurrency()
{
    std::vector<int64_t> activeEnd(r_.graphs.size(), std::numeric_limits<int64_t>::min());
    std::vector<uint32_t> active;
    std::set<std::pair<uint32_t, uint32_t>> pairs;
    for (const GraphReplay& rp : r_.replays) {
        std::erase_if(active, [&](uint32_t g) { return activeEnd[g] <= rp.start; });
        bool inActive = false;
        for (uint32_t g : active) {
            if (g == rp.graph)
                inActive = true;
            else if (r_.graphs[g].device == r_.graphs[rp.graph].device)
                pairs.insert(std::minmax(g, rp.graph));
        }
        if (!inActive) active.push_back(rp.graph);
        activeEnd[rp.graph] = std::max(activeEnd[rp.graph], rp.end);
    }
    r_.concurrent.assign(pairs.begin(), pairs.end());
}

// Pools whose graphs never replay concurrently may share one (docs/analysis.md "Sharing
// what-if"): two private pools conflict when a graph of one replayed concurrently with a graph
// of the other; the others are grouped first fit, largest peak first.
void GraphPools::sharingCandidates(uint32_t device)
{
    std::vector<size_t> cand; // indices into r_.pools
    std::map<uint64_t, size_t> candOf;
    for (size_t i = 0; i < r_.pools.size(); ++i) {
        const PoolInfo& p = r_.pools[i];
        if (p.device == device && p.level == Level::Framework && p.pool != 0 && !p.graphs.empty()) {
            candOf[p.pool] = cand.size();
            cand.push_back(i);
        }
    }
    const size_t n = cand.size();
    if (n == 0) return;
    std::vector<std::vector<bool>> conflict(n, std::vector<bool>(n, false));
    for (const auto& [a, b] : r_.concurrent) {
        const GraphInfo& ga = r_.graphs[a];
        const GraphInfo& gb = r_.graphs[b];
        if (ga.device != device || !ga.poolKnown() || !gb.poolKnown()) continue;
        auto ia = candOf.find(ga.pool);
        auto ib = candOf.find(gb.pool);
        if (ia == candOf.end() || ib == candOf.end()) continue;
        if (ia->second == ib->second)
            r_.notes.push_back(fmt::format("graphs '{}' and '{}' share pool {} but replay "
                                           "concurrently",
                                           ga.name, gb.name, poolLabel(ga.pool, Level::Framework)));
        else
            conflict[ia->second][ib->second] = conflict[ib->second][ia->second] = true;
    }

    std::vector<size_t> order(n);
    for (size_t i = 0; i < n; ++i)
        order[i] = i;
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const PoolInfo& pa = r_.pools[cand[a]];
        const PoolInfo& pb = r_.pools[cand[b]];
        if (pa.peakReservedBytes != pb.peakReservedBytes)
            return pa.peakReservedBytes > pb.peakReservedBytes;
        return pa.pool < pb.pool;
    });
    std::vector<std::vector<size_t>> groups;
    for (size_t c : order) {
        auto fits = [&](const std::vector<size_t>& grp) {
            return std::none_of(grp.begin(), grp.end(), [&](size_t m) { return conflict[c][m]; });
        };
        auto it = std::find_if(groups.begin(), groups.end(), fits);
        if (it == groups.end())
            groups.push_back({c});
        else
            it->push_back(c);
    }
    for (const auto& grp : groups) {
        if (grp.size() < 2) continue;
        SharingGroup s;
        s.device = device;
        for (size_t c : grp) {
            const PoolInfo& p = r_.pools[cand[c]];
            s.pools.push_back(p.pool);
            s.graphs.insert(s.graphs.end(), p.graphs.begin(), p.graphs.end());
        }
        std::sort(s.pools.begin(), s.pools.end());
        std::sort(s.graphs.begin(), s.graphs.end());
        r_.sharing.push_back(std::move(s));
    }
}

} // namespace fs::analysis
