// Per-pool state (docs/analysis.md, "Pools"): the track's state at t split by the pool of each
// region (regions.pool_id), from the same regions, live allocations and free fragments the
// engine's state is made of, so that the pools add up to the track.
#include "engine_impl.h"
#include "explore_impl.h"
#include "metrics.h"

#include "core/store/regions.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <unordered_map>

#include <fmt/format.h>

namespace fs::analysis {

std::string poolLabel(uint64_t pool, Level level)
{
    if (pool == 0) return "default";
    if (level == Level::Pool) return fmt::format("{:#x}", pool);
    return fmt::format("({}, {})", pool >> 32, pool & 0xffffffffu);
}

bool parsePoolId(std::string_view text, uint64_t& pool)
{
    auto trim = [](std::string_view v) {
        while (!v.empty() && (v.front() == ' ' || v.front() == '('))
            v.remove_prefix(1);
        while (!v.empty() && (v.back() == ' ' || v.back() == ')'))
            v.remove_suffix(1);
        return v;
    };
    auto number = [](std::string_view v, uint64_t& out) {
        int base = 10;
        if (v.starts_with("0x") || v.starts_with("0X")) {
            v.remove_prefix(2);
            base = 16;
        }
        auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), out, base);
        return !v.empty() && ec == std::errc() && p == v.data() + v.size();
    };
    text = trim(text);
    if (text == "default") {
        pool = 0;
        return true;
    }
    const size_t comma = text.find(',');
    if (comma == std::string_view::npos) return number(text, pool);
    uint64_t a = 0, b = 0;
    if (!number(trim(text.substr(0, comma)), a) || !number(trim(text.substr(comma + 1)), b) ||
        a > 0xffffffffu || b > 0xffffffffu)
        return false;
    pool = (a << 32) | b;
    return true;
}

namespace {

using PoolOf = std::unordered_map<int64_t, uint64_t>; // region id -> pool id

std::vector<PoolState> poolStates(const Engine& e, const Engine::Impl& d, const PoolOf& poolOf,
                                  uint32_t device, Level level, int64_t t)
{
    std::map<uint64_t, State> pools;
    auto at = [&](uint64_t pool) -> State& {
        auto [it, inserted] = pools.try_emplace(pool);
        if (inserted) {
            it->second.device = device;
            it->second.level = level;
            it->second.time = t;
        }
        return it->second;
    };
    auto poolOfRegion = [&](int64_t id) {
        auto it = poolOf.find(id);
        return it == poolOf.end() ? uint64_t{0} : it->second;
    };
    for (const auto& [id, pool] : poolOf)
        at(pool);
    // Regions (an expandable segment's mapped ranges each count, as in the track's state).
    std::unordered_map<int64_t, std::vector<std::pair<uint64_t, uint64_t>>> alive; // id -> ranges
    for (const RegionInfo& r : e.regions(device, level)) {
        if (r.createNs > t || r.destroyNs <= t) continue;
        State& s = at(poolOfRegion(r.id));
        ++s.regionCount;
        s.reservedBytes += r.size;
        alive[r.id].emplace_back(r.address, r.address + r.size);
    }
    // A block that outlived its region (or the mapped range it was in) is outside any region, as
    // in the track's state; it stays in its region's pool.
    auto inside = [&](int64_t regionId, uint64_t address) {
        const auto it = alive.find(regionId);
        return it != alive.end() &&
               std::any_of(it->second.begin(), it->second.end(), [&](const auto& range) {
                   return address >= range.first && address < range.second;
               });
    };
    // The live blocks as the engine holds them (liveAllocationsAt's copies and sort cost a
    // pool timeline of a session with ten pools ~20 s of a debug build's CPU).
    const TrackData& td = d.trackOrThrow(device, level);
    for (uint32_t i : d.liveAt(td, t, t)) {
        const Alloc& a = td.allocs[i];
        const int64_t regionId = a.region == kNoRegion ? -1 : td.regions[a.region].id;
        State& s = at(regionId < 0 ? 0 : poolOfRegion(regionId));
        ++s.liveAllocations;
        (inside(regionId, a.address) ? s.allocatedBytes : s.allocatedOutsideBytes) += a.size;
    }
    // Free fragments and pending frees (docs/analysis.md "Pending frees") from one replay.
    Replayer r(td);
    r.seek(t);
    std::map<uint64_t, std::vector<Fragment>> free, pending;
    for (const Fragment& f : r.state().fragments())
        free[poolOfRegion(f.regionId)].push_back(f);
    for (const Fragment& p : r.state().pendingBlocks()) {
        State& s = at(poolOfRegion(p.regionId));
        ++s.pendingFreeBlocks;
        s.pendingFreeBytes += p.size;
        pending[poolOfRegion(p.regionId)].push_back(p);
    }
    for (auto& [pool, s] : pools) {
        std::vector<uint64_t> sizes;
        for (const Fragment& f : free[pool])
            sizes.push_back(f.size);
        setFragmentFigures(s, sizes);
        setOncePendingComplete(s, std::max(s.largestFreeFragmentBytes,
                                           largestOncePendingComplete(free[pool], pending[pool])));
    }
    std::vector<PoolState> out;
    for (auto& [pool, s] : pools)
        out.push_back({pool, std::move(s)});
    return out;
}

} // namespace

PoolOf regionPools(const Session& s, uint32_t device, Level level)
{
    PoolOf poolOf;
    for (const auto& [id, pool] : store::regionPools(s, device, static_cast<int>(level)))
        poolOf[id] = pool;
    return poolOf;
}

PoolOf regionPools(const Engine::Impl& d, uint32_t device, Level level)
{
    std::lock_guard lock(d.dbMutex);
    return d.session ? regionPools(*d.session, device, level) : PoolOf{};
}

std::vector<PoolState> Engine::poolStatesAt(uint32_t device, Level level, int64_t t) const
{
    return poolStates(*this, *d_, regionPools(*d_, device, level), device, level, t);
}

std::vector<uint64_t> Engine::pools(uint32_t device, Level level) const
{
    std::vector<uint64_t> out;
    for (const auto& [id, pool] : regionPools(*d_, device, level))
        out.push_back(pool);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
}

std::vector<Fragment> Engine::poolFragmentsAt(uint32_t device, Level level, int64_t t,
                                              uint64_t pool) const
{
    const PoolOf poolOf = regionPools(*d_, device, level);
    std::vector<Fragment> out;
    for (Fragment& f : fragmentsAt(device, level, t)) {
        const auto it = poolOf.find(f.regionId);
        if ((it == poolOf.end() ? uint64_t{0} : it->second) == pool) out.push_back(std::move(f));
    }
    return out;
}

Timeline Engine::poolTimeline(const TimelineOptions& o, uint64_t pool) const
{
    return std::move(poolTimelines(o, {pool}).front());
}

std::vector<Timeline> Engine::poolTimelines(const TimelineOptions& o,
                                            const std::vector<uint64_t>& pools) const
{
    const Timeline whole = timeline(o);
    std::vector<Timeline> out(pools.size(), whole);
    const PoolOf poolOf = regionPools(*d_, o.device, o.level);
    for (size_t i = 0; i < whole.time.size(); ++i) {
        // One state per sample for every pool (a pool with nothing at that time: zeros).
        std::vector<State> at(pools.size());
        for (PoolState& p : poolStates(*this, *d_, poolOf, o.device, o.level, whole.time[i]))
            for (size_t k = 0; k < pools.size(); ++k)
                if (p.pool == pools[k]) at[k] = p.state;
        for (size_t k = 0; k < pools.size(); ++k) {
            const State& s = at[k];
            Timeline& tl = out[k];
            tl.reserved[i] = static_cast<double>(s.reservedBytes);
            tl.allocated[i] = static_cast<double>(s.allocatedBytes);
            tl.allocatedOutside[i] = static_cast<double>(s.allocatedOutsideBytes);
            tl.freeInRegions[i] = static_cast<double>(s.freeBytes);
            tl.fragmentCount[i] = static_cast<double>(s.fragmentCount);
            tl.largestFragment[i] = static_cast<double>(s.largestFreeFragmentBytes);
            tl.fragmentationRatio[i] = s.fragmentationRatio;
            tl.fragmentEntropy[i] = s.fragmentEntropyBits;
        }
    }
    for (size_t k = 0; k < pools.size(); ++k)
        out[k].caveats.notes.push_back(fmt::format(
            "pool {} only: its regions' figures; the event-size entropy is the whole track's",
            poolLabel(pools[k], o.level)));
    return out;
}

} // namespace fs::analysis
