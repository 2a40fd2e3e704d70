// LiveEngine: incremental refresh of the engine's index (live.h; docs/analysis.md "Live
// sessions").
#include "live.h"

#include "engine_impl.h"

#include "core/store/regions.h"

#include <algorithm>
#include <mutex>
#include <unordered_map>

namespace fs::analysis {

namespace {

// Merges the new entries (indices) into a stream sorted by (key(index), index): the order a
// fresh load gives by stable-sorting ascending indices. Appends when they all come after it.
template <typename Key>
void mergeInto(std::vector<uint32_t>& stream, std::vector<uint32_t>& added, Key key)
{
    if (added.empty()) return;
    auto less = [&](uint32_t a, uint32_t b) {
        const int64_t ka = key(a), kb = key(b);
        return ka != kb ? ka < kb : a < b;
    };
    std::sort(added.begin(), added.end(), less);
    if (stream.empty() || less(stream.back(), added.front())) {
        stream.insert(stream.end(), added.begin(), added.end());
        return;
    }
    std::vector<uint32_t> merged;
    merged.reserve(stream.size() + added.size());
    std::merge(stream.begin(), stream.end(), added.begin(), added.end(), std::back_inserter(merged),
               less);
    stream.swap(merged);
}

} // namespace

struct LiveEngine::Impl
{
    std::string path;
    LoadOptions opts;
    std::mutex mu;
    std::shared_ptr<Engine> engine;
    int64_t lastAllocId = 0;
    int64_t lastRegionId = 0;
    std::string stamp;
    bool rebuildNext = false; // a refresh failed halfway: the index may be inconsistent
    std::unordered_map<int64_t, std::pair<uint32_t, uint32_t>> liveAllocs; // id -> (track, i)
    std::unordered_map<int64_t, int64_t> regionDestroy; // non-expandable region id -> destroy

    void fullLoad(Engine::Impl& e);
    bool increment(Engine::Impl& e);
};

LiveEngine::LiveEngine(std::string path, LoadOptions opts) : d_(std::make_unique<Impl>())
{
    d_->path = std::move(path);
    d_->opts = std::move(opts);
    d_->opts.useCache = false;
    d_->opts.integrityCheck = false;
}

LiveEngine::~LiveEngine() = default;

void LiveEngine::setRules(std::vector<CollapseRule> rules)
{
    std::lock_guard lock(d_->mu);
    d_->opts.rules = std::move(rules);
}

void LiveEngine::Impl::fullLoad(Engine::Impl& e)
{
    {
        // Taken before the load: a change between the two only costs one more rebuild.
        Session s = Session::open(path, false, SQLITE_OPEN_NOMUTEX);
        stamp = store::expandableRegionsStamp(s);
    }
    e.options = opts;
    e.keepBuilders = true;
    e.load(opts, true);
    lastAllocId = 0;
    lastRegionId = 0;
    liveAllocs.clear();
    regionDestroy.clear();
    for (uint32_t ti = 0; ti < e.tracks.size(); ++ti) {
        const TrackData& t = e.tracks[ti];
        for (uint32_t i = 0; i < t.allocs.size(); ++i) {
            lastAllocId = std::max(lastAllocId, t.allocs[i].id);
            if (t.allocs[i].freeNs == kAlive) liveAllocs[t.allocs[i].id] = {ti, i};
        }
        for (const RegionRec& r : t.regions) {
            lastRegionId = std::max(lastRegionId, r.id);
            regionDestroy[r.id] = r.destroyNs;
        }
    }
}

bool LiveEngine::Impl::increment(Engine::Impl& e)
{
    constexpr int64_t kNone = std::numeric_limits<int64_t>::max();
    Session& db = *e.session;
    db.beginRead();
    struct Finish
    {
        Session& db;
        ~Finish()
        {
            try {
                db.commitRead();
            } catch (...) { // a read transaction: nothing to lose
            }
        }
    } finish{db};
    if (store::expandableRegionsStamp(db) != stamp) return false;
    SessionSummary sum = e.session->summary();
    auto trackOf = [&](uint32_t device, int level) -> int {
        for (size_t i = 0; i < e.tracks.size(); ++i)
            if (e.tracks[i].device == device && static_cast<int>(e.tracks[i].level) == level)
                return static_cast<int>(i);
        return -1;
    };
    const size_t nt = e.tracks.size();
    std::vector<int64_t> minTime(nt, kNone);
    std::vector<std::vector<uint32_t>> newFrees(nt), newEnds(nt);
    std::vector<bool> regionsChanged(nt, false);
    // Regions: the new ones (appended in creation order), then the newly released ones.
    {
        store::RegionRows rows = store::RegionRows::newerThan(db, lastRegionId);
        store::RegionRow row;
        while (rows.next(row)) {
            uint32_t device = 0;
            int level = 0;
            bool expandable = false;
            const RegionRec r = readRegionRow(row, path, device, level, expandable);
            const int ti = trackOf(device, level);
            if (ti < 0) return false; // a new track: its place in the sorted track list moves
            TrackData& t = e.tracks[static_cast<size_t>(ti)];
            if (!t.regions.empty() && r.createNs < t.regions.back().createNs) return false;
            const auto i = static_cast<uint32_t>(t.regions.size());
            t.regions.push_back(r);
            e.regionById[r.id].emplace_back(static_cast<size_t>(ti), i);
            regionDestroy[r.id] = r.destroyNs;
            lastRegionId = std::max(lastRegionId, r.id);
            regionsChanged[static_cast<size_t>(ti)] = true;
            auto& m = minTime[static_cast<size_t>(ti)];
            m = std::min(m, r.createNs);
            if (r.destroyNs != kAlive) newEnds[static_cast<size_t>(ti)].push_back(i);
        }
    }
    for (const auto& [id, destroyNs] : store::regionReleases(db, lastRegionId)) {
        auto it = regionDestroy.find(id);
        if (it == regionDestroy.end() || it->second != kAlive) continue;
        for (const auto& [ti, i] : e.regionById[it->first]) {
            RegionRec& r = e.tracks[ti].regions[i];
            r.destroyNs = std::max(destroyNs, r.createNs);
            it->second = r.destroyNs;
            newEnds[ti].push_back(i);
            minTime[ti] = std::min(minTime[ti], r.destroyNs);
        }
    }
    // Allocations: rows new since the last refresh (ids grow with time), then the frees of the
    // ones that were live (UPDATEs of their rows: one point lookup each).
    {
        bool usable = true;
        store::AllocationRecords::after(db, lastAllocId, [&](const store::AllocationRecord& row) {
            uint32_t device = 0;
            int level = 0;
            int64_t regionId = -1;
            Alloc a = readAllocRow(row, path, device, level, regionId);
            ++e.loadInfo.allocationRowsRead;
            const int ti = trackOf(device, level);
            if (ti < 0) return usable = false; // a new track: a whole load
            const auto tu = static_cast<size_t>(ti);
            TrackData& t = e.tracks[tu];
            if (!t.allocs.empty() &&
                (a.allocNs < t.allocs.back().allocNs ||
                 (a.allocNs == t.allocs.back().allocNs && a.id < t.allocs.back().id)))
                return usable = false; // out of time order: the stream would need re-sorting
            if (regionId >= 0) a.region = e.regionOf(regionId, tu, a);
            const auto i = static_cast<uint32_t>(t.allocs.size());
            t.allocs.push_back(a);
            lastAllocId = std::max(lastAllocId, a.id);
            minTime[tu] = std::min(minTime[tu], a.allocNs);
            if (a.freeNs != kAlive) {
                newFrees[tu].push_back(i);
                minTime[tu] = std::min(minTime[tu], a.freeNs);
            } else {
                liveAllocs[a.id] = {static_cast<uint32_t>(tu), i};
            }
            return true;
        });
        if (!usable) return false;
    }
    {
        store::AllocationFrees frees(db);
        for (auto it = liveAllocs.begin(); it != liveAllocs.end();) {
            ++e.loadInfo.liveLookups;
            const std::optional<int64_t> freeNs = frees.freeNs(it->first);
            if (!freeNs) {
                ++it;
                continue;
            }
            const auto [tu, i] = it->second;
            Alloc& a = e.tracks[tu].allocs[i];
            a.freeNs = std::max(*freeNs, a.allocNs);
            newFrees[tu].push_back(i);
            minTime[tu] = std::min(minTime[tu], a.freeNs);
            it = liveAllocs.erase(it);
        }
    }
    // The streams stay sorted as a fresh load sorts them; the checkpoint walk goes on from where
    // it stopped (or from the last checkpoint before the earliest new event).
    for (size_t ti = 0; ti < nt; ++ti) {
        if (minTime[ti] == kNone) continue;
        TrackData& t = e.tracks[ti];
        mergeInto(t.byFree, newFrees[ti], [&](uint32_t i) { return t.allocs[i].freeNs; });
        mergeInto(t.regionsByEnd, newEnds[ti], [&](uint32_t i) { return t.regions[i].destroyNs; });
        e.builders[ti].resume(t, minTime[ti]);
        e.builders[ti].run(t);
        if (regionsChanged[ti]) e.buildLayout(t);
    }
    e.readPendingFrees(db); // few rows: read again whole
    e.applySummary(std::move(sum));
    {
        std::lock_guard lock(e.dbMutex);
        e.kernelIndexReady = false;
        e.oomRows.reset();
        e.kernelDevices.clear();
        e.kernelFirstStart.clear();
    }
    e.options = opts;
    e.loadFrames(opts);
    return true;
}

std::shared_ptr<const Engine> LiveEngine::refresh()
{
    std::lock_guard lock(d_->mu);
    if (!d_->engine) {
        std::shared_ptr<Engine> e(new Engine());
        e->d_->path = d_->path;
        e->d_->session.setPath(d_->path);
        e->d_->dbMutex.bind(&e->d_->session);
        d_->fullLoad(*e->d_);
        {
            std::lock_guard dl(e->d_->dbMutex);
            e->d_->dbMutex.setTransient(true);
        } // closes the connection
        d_->engine = std::move(e);
        return d_->engine;
    }
    Engine::Impl& e = *d_->engine->d_;
    std::unique_lock write(e.liveMutex);
    {
        std::lock_guard dl(e.dbMutex);
        e.dbMutex.setTransient(false); // the refresh keeps its connection until it is done
    }
    struct Close
    {
        Engine::Impl& e;
        ~Close()
        {
            std::lock_guard lock(e.dbMutex);
            e.dbMutex.setTransient(true);
        } // unlocking closes the connection
    } close{e};
    bool ok = false;
    if (!d_->rebuildNext) {
        try {
            ok = d_->increment(e);
        } catch (...) {
            d_->rebuildNext = true;
            throw;
        }
    }
    {
        std::lock_guard lod(e.lodMutex);
        e.lods.clear(); // level-of-detail grids describe the data before this refresh
    }
    if (ok) {
        ++e.loadInfo.liveRefreshes;
    } else {
        const LoadInfo keep = e.loadInfo;
        d_->fullLoad(e);
        e.loadInfo.allocationRowsRead += keep.allocationRowsRead;
        e.loadInfo.liveRefreshes = keep.liveRefreshes;
        e.loadInfo.liveRebuilds = keep.liveRebuilds + 1;
        e.loadInfo.liveLookups = keep.liveLookups;
        d_->rebuildNext = false;
    }
    return d_->engine;
}

} // namespace fs::analysis
