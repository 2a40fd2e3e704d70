// Call sites (explore.h): allocations grouped by call site, tag, stream or pool, with the bytes
// they hold at an instant, what they allocated over a range and the holes their frees left.
#include "explore_impl.h"

#include <algorithm>
#include <unordered_map>

namespace fs::analysis {

std::shared_ptr<const std::vector<Hole>> holesOf(const Engine& e, Explorer::Data& d,
                                                 const TrackData& td)
{
    const size_t ti = static_cast<size_t>(&td - engineImpl(e).tracks.data());
    if (ti >= d.holes.size()) return std::make_shared<std::vector<Hole>>();
    {
        std::lock_guard lock(d.mu);
        if (d.holes[ti]) return d.holes[ti];
    }
    std::lock_guard load(d.loadMu);
    {
        std::lock_guard lock(d.mu);
        if (d.holes[ti]) return d.holes[ti];
    }
    // One replay of the whole track: each free's fragment right after it (FragState::lastFreed).
    auto holes = std::make_shared<std::vector<Hole>>();
    Replayer r(td);
    r.advanceTo(std::numeric_limits<int64_t>::max(), [&](ReplayEvent k, uint32_t i, int64_t t) {
        if (k != ReplayEvent::Free || !td.allocs[i].occupies()) return;
        const FragState::FreedGap& g = r.state().lastFreed;
        if (g.enclosed) holes->push_back({t, i, g.bytes});
    });
    std::lock_guard lock(d.mu);
    d.holes[ti] = std::move(holes);
    return d.holes[ti];
}

CallSiteTable Explorer::callSites(uint32_t device, Level level, int64_t from, int64_t to,
                                  GroupBy by, std::optional<uint64_t> pool,
                                  const std::vector<CategoryRule>& categoryRules) const
{
    const ExploreContext c = exploreContext(*engine_, data(), device, level, true);
    const Engine::Impl& d = c.d;
    const TrackData& td = c.td;
    const auto holes = holesOf(*engine_, *c.data, td);
    CallSiteTable out;
    out.from = from;
    out.to = to;
    out.by = by;
    out.pool = pool;
    out.stacksRecorded = std::any_of(c.attrs->stack.begin(), c.attrs->stack.end(),
                                     [](uint32_t s) { return s != 0; });
    const std::vector<uint32_t> live = d.liveAt(td, to, to);
    // Allocations made in (from, to]: a contiguous run of the records (sorted by time); the
    // frees that left a hole in (from, to].
    const auto& A = td.allocs;
    auto byTime = [](int64_t v, const Alloc& a) { return v < a.allocNs; };
    const auto a0 = std::upper_bound(A.begin(), A.end(), from, byTime);
    const auto a1 = std::upper_bound(a0, A.end(), to, byTime);
    auto byHoleTime = [](int64_t v, const Hole& h) { return v < h.time; };
    const auto h0 = std::upper_bound(holes->begin(), holes->end(), from, byHoleTime);
    const auto h1 = std::upper_bound(h0, holes->end(), to, byHoleTime);
    // By memory category: each allocation the table counts, categorised once (categories.cpp).
    std::unordered_map<uint32_t, MemoryCategory> categoryOf;
    if (by == GroupBy::Category) {
        std::vector<uint32_t> idx = live;
        for (auto it = a0; it != a1; ++it)
            idx.push_back(static_cast<uint32_t>(it - A.begin()));
        for (auto it = h0; it != h1; ++it)
            idx.push_back(it->alloc);
        std::sort(idx.begin(), idx.end());
        idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
        const std::vector<MemoryCategory> cats = categoriesOf(c, idx, categoryRules);
        for (size_t k = 0; k < idx.size(); ++k)
            categoryOf.emplace(idx[k], cats[k]);
    }
    std::unordered_map<uint64_t, size_t> rowOf;
    auto row = [&](size_t i) -> CallSiteRow* {
        if (pool && c.pools->ofAlloc(td.allocs[i]) != *pool) return nullptr;
        const uint64_t key = by == GroupBy::Category
                                 ? static_cast<uint64_t>(categoryOf.at(static_cast<uint32_t>(i)))
                                 : groupKey(by, td, i, *c.attrs, *c.stacks, *c.pools);
        auto [it, inserted] = rowOf.try_emplace(key, out.rows.size());
        if (inserted) {
            CallSiteRow r;
            r.label = groupLabel(by, key, td, *c.attrs, *c.stacks);
            if (by == GroupBy::CallSite && key < c.stacks->sites.size())
                r.detail = c.stacks->sites[key].detail;
            out.rows.push_back(std::move(r));
        }
        return &out.rows[it->second];
    };
    for (uint32_t i : live)
        if (CallSiteRow* r = row(i)) {
            ++r->liveBlocks;
            r->heldBytes += td.allocs[i].size;
            out.heldBytes += td.allocs[i].size;
        }
    for (auto it = a0; it != a1; ++it)
        if (CallSiteRow* r = row(static_cast<size_t>(it - A.begin()))) {
            ++r->allocations;
            r->allocatedBytes += it->size;
        }
    for (auto it = h0; it != h1; ++it)
        if (CallSiteRow* r = row(it->alloc)) {
            ++r->holes;
            r->holeBytes += it->bytes;
        }
    std::sort(out.rows.begin(), out.rows.end(), [](const CallSiteRow& a, const CallSiteRow& b) {
        if (a.heldBytes != b.heldBytes) return a.heldBytes > b.heldBytes;
        if (a.allocatedBytes != b.allocatedBytes) return a.allocatedBytes > b.allocatedBytes;
        return a.label < b.label;
    });
    return out;
}

} // namespace fs::analysis
