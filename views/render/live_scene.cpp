#include "live_scene.h"

#include "core/session.h"
#include "scene_build.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <map>
#include <mutex>
#include <unordered_map>

namespace fs::render {

namespace {

using Key = std::pair<uint32_t, int>; // (device, level), the order of Scene::levels
constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

struct LevelState
{
    LevelData ld;
    detail::Replay replay;
    std::vector<int64_t> pending;                    // sample times the replay has not reached
    std::unordered_map<int64_t, size_t> regionIndex; // region id -> index in ld.regions
    std::vector<detail::ReplayEv> evs;               // this refresh's state changes
    // Allocations freed after they were first read: (refresh, index). Published scenes older
    // than that refresh still have them live.
    std::vector<std::pair<int64_t, size_t>> freedLog;
};

// A scene handed out by refresh(), kept to be brought up to date again once nobody holds it.
struct Published
{
    std::shared_ptr<Scene> scene;
    int64_t version = 0; // the refresh it shows
    int64_t lastString = 0, lastStack = 0;
};

} // namespace

struct LiveScene::Impl
{
    std::string path;
    int samples = 1200;
    mutable std::mutex mu;
    Stats stats;
    Scene base; // everything but the levels and the summary
    std::map<Key, LevelState> levels;
    // Allocations without a free yet: id -> (level, index in its allocs).
    std::unordered_map<int64_t, std::pair<Key, size_t>> liveAllocs;
    int64_t lastAllocId = 0, lastKernelId = 0, lastGraphId = 0, lastStringId = 0, lastStackId = 0;
    int64_t version = 0; // refreshes so far
    // Kernels re-sorted from an index on: (refresh, first index that changed).
    std::vector<std::pair<int64_t, size_t>> kernelsDirty;
    Published published[2];
    int64_t t0 = kNoTime;        // first sample time
    int64_t step = 0;            // sample step
    int64_t scheduled = kNoTime; // sample times up to here are in some pending list
    int64_t watermark = kNoTime; // the latest event time replayed: later events come after it
    // The previous refresh's frames: the leading framesFinal of them ended before a kernel that
    // had already started, so no kernel still to come can change their kernel names.
    std::vector<FrameRow> prevFrames;
    size_t framesFinal = 0;

    LevelState& level(Key k)
    {
        LevelState& s = levels[k];
        s.ld.device = k.first;
        s.ld.level = static_cast<Level>(k.second);
        return s;
    }
    void readRegions(Db& db);
    void readAllocations(Db& db, int64_t tEnd);
    void readKernels(Db& db);
    void frameKernels();
    void schedule(int64_t tBegin, int64_t tEnd);
    void replay();
    std::shared_ptr<Scene> copyAll() const;
    void catchUp(Published& p) const;
    std::shared_ptr<const Scene> snapshot(const SessionSummary& sum,
                                          const std::vector<CollapseRule>& rules);
};

void LiveScene::Impl::readRegions(Db& db)
{
    // Regions are few (segments, pools, reservations): read them whole, find the new and the
    // newly destroyed ones.
    Stmt st = db.prepare(fmt::format("SELECT {} FROM regions ORDER BY id", detail::kRegionColumns));
    while (st.step()) {
        uint32_t dev = 0;
        int lvl = 0;
        const RegionRec r = detail::readRegion(st, dev, lvl);
        LevelState& ls = level({dev, lvl});
        auto it = ls.regionIndex.find(r.id);
        if (it == ls.regionIndex.end()) {
            const size_t i = ls.ld.regions.size();
            ls.regionIndex.emplace(r.id, i);
            ls.ld.regions.push_back(r);
            ls.evs.push_back(detail::replayEv(r.createNs, detail::ReplayEv::RegionCreate, i));
            if (r.destroyNs != kNever)
                ls.evs.push_back(detail::replayEv(r.destroyNs, detail::ReplayEv::RegionDestroy, i));
        } else if (ls.ld.regions[it->second].destroyNs == kNever && r.destroyNs != kNever) {
            ls.ld.regions[it->second].destroyNs = r.destroyNs;
            ls.evs.push_back(
                detail::replayEv(r.destroyNs, detail::ReplayEv::RegionDestroy, it->second));
        }
    }
}

void LiveScene::Impl::readAllocations(Db& db, int64_t tEnd)
{
    // Ingest gives allocation ids in time order and, at every commit, writes each allocation
    // made since the previous commit (freed or not): the rows new since the last refresh are
    // exactly those with a larger id. Frees of older allocations are UPDATEs of rows that were
    // live at the last refresh: look those up one by one (there are only as many as are live).
    struct Added
    {
        int64_t id;
        Key key;
        size_t index;
    };
    std::vector<Added> added;
    {
        Stmt st = db.prepare(fmt::format("SELECT {} FROM allocations WHERE id > ?1 ORDER BY id",
                                         detail::kAllocColumns));
        st.bind(1, lastAllocId);
        while (st.step()) {
            uint32_t dev = 0;
            int lvl = 0;
            const AllocRec a = detail::readAlloc(st, tEnd, dev, lvl);
            LevelState& ls = level({dev, lvl});
            const size_t i = ls.ld.allocs.size();
            ls.ld.allocs.push_back(a);
            ls.evs.push_back(detail::replayEv(a.allocNs, detail::ReplayEv::Alloc, i));
            if (a.freed) {
                ls.evs.push_back(detail::replayEv(a.freeNs, detail::ReplayEv::Free, i));
                ls.ld.maxAllocDuration = std::max(ls.ld.maxAllocDuration, a.freeNs - a.allocNs);
            } else {
                added.push_back({a.id, Key{dev, lvl}, i});
            }
            lastAllocId = std::max(lastAllocId, a.id);
            ++stats.allocationRows;
        }
    }
    Stmt st = db.prepare("SELECT free_ns FROM allocations WHERE id = ?1");
    for (auto it = liveAllocs.begin(); it != liveAllocs.end();) {
        st.reset();
        st.bind(1, it->first);
        ++stats.liveLookups;
        if (!st.step() || st.isNull(0)) {
            ++it;
            continue;
        }
        LevelState& ls = levels[it->second.first];
        AllocRec& a = ls.ld.allocs[it->second.second];
        a.freed = true;
        a.freeNs = st.i64(0);
        ls.evs.push_back(detail::replayEv(a.freeNs, detail::ReplayEv::Free, it->second.second));
        ls.freedLog.emplace_back(version, it->second.second);
        ls.ld.maxAllocDuration = std::max(ls.ld.maxAllocDuration, a.freeNs - a.allocNs);
        it = liveAllocs.erase(it);
    }
    for (const Added& a : added)
        liveAllocs.emplace(a.id, std::pair{a.key, a.index});
    // Still-live allocations last until the end of what was recorded so far.
    for (const auto& [id, where] : liveAllocs) {
        LevelState& ls = levels[where.first];
        AllocRec& a = ls.ld.allocs[where.second];
        a.freeNs = std::max(tEnd, a.allocNs);
        ls.ld.maxAllocDuration = std::max(ls.ld.maxAllocDuration, a.freeNs - a.allocNs);
    }
}

void LiveScene::Impl::readKernels(Db& db)
{
    const size_t before = base.kernels.size();
    Stmt st = db.prepare(fmt::format("SELECT id, {} FROM kernels WHERE id > ?1 ORDER BY id",
                                     detail::kKernelColumns));
    st.bind(1, lastKernelId);
    while (st.step()) {
        lastKernelId = st.i64(0);
        base.kernels.push_back({st.i64(1), st.i64(2), static_cast<StringId>(st.i64(3)),
                                static_cast<uint32_t>(st.i64(4)), st.i64(5)});
    }
    // Rows come in release order, which is start order but for equal-time ties across streams.
    auto byStart = [](const KernelRec& a, const KernelRec& b) { return a.start < b.start; };
    const auto mid = base.kernels.begin() + static_cast<std::ptrdiff_t>(before);
    std::stable_sort(mid, base.kernels.end(), byStart);
    if (mid != base.kernels.end()) {
        const auto from = std::upper_bound(base.kernels.begin(), mid, *mid, byStart);
        kernelsDirty.emplace_back(version, static_cast<size_t>(from - base.kernels.begin()));
    }
    std::inplace_merge(base.kernels.begin(), mid, base.kernels.end(), byStart);

    Stmt g = db.prepare("SELECT id, start_ns, end_ns, COALESCE(graph_id,0) FROM graph_launches"
                        " WHERE id > ?1 ORDER BY id");
    g.bind(1, lastGraphId);
    while (g.step()) {
        lastGraphId = g.i64(0);
        base.graphLaunches.push_back({g.i64(1), g.i64(2), g.i64(3)});
    }
    base.ooms.clear();
    Stmt o = db.prepare("SELECT time_ns, COALESCE(requested_bytes,0) FROM ooms ORDER BY time_ns");
    while (o.step())
        base.ooms.emplace_back(o.i64(0), o.u64(1));
}

void LiveScene::Impl::frameKernels()
{
    auto& frames = base.frames;
    size_t from = 0;
    while (from < frames.size() && from < framesFinal &&
           prevFrames[from].index == frames[from].index &&
           prevFrames[from].start == frames[from].start &&
           prevFrames[from].end == frames[from].end) {
        frames[from].kernelNames = std::move(prevFrames[from].kernelNames);
        ++from;
    }
    detail::frameKernelNames(frames, from, base.kernels);
    const int64_t lastStart = base.kernels.empty() ? kNoTime : base.kernels.back().start;
    framesFinal = 0;
    while (framesFinal < frames.size() && frames[framesFinal].end <= lastStart)
        ++framesFinal;
    prevFrames = frames;
}

void LiveScene::Impl::schedule(int64_t tBegin, int64_t tEnd)
{
    // A regular grid from the first event, plus every frame boundary (the frames table and the
    // collapse inspector read the state there) not yet passed when the frame became known: a
    // frame recorded late gets the nearest earlier sample until the finished file is opened. When
    // the grid outgrows 2 * samples points, its step doubles and the samples off the coarser grid
    // go, except those at frame boundaries.
    if (t0 == kNoTime) {
        t0 = tBegin;
        step = std::max<int64_t>(1, (tEnd - t0) / samples);
        scheduled = t0 - 1;
    }
    std::vector<int64_t> bounds;
    for (const auto& f : base.frames) {
        bounds.push_back(f.start);
        bounds.push_back(f.end);
    }
    std::sort(bounds.begin(), bounds.end());
    while ((tEnd - t0) / step > 2 * static_cast<int64_t>(samples)) {
        step *= 2;
        for (auto& [k, ls] : levels) {
            auto keep = [&](int64_t t) {
                return (t - t0) % step == 0 || std::binary_search(bounds.begin(), bounds.end(), t);
            };
            std::erase_if(ls.ld.samples, [&](const StateSample& s) { return !keep(s.t); });
            std::erase_if(ls.pending, [&](int64_t t) { return !keep(t); });
        }
    }
    if (tEnd <= scheduled) return;
    std::vector<int64_t> times;
    for (int64_t t = t0 + ((scheduled - t0) / step + 1) * step; t <= tEnd; t += step)
        times.push_back(t);
    for (int64_t b : bounds)
        if (b > scheduled && b <= tEnd) times.push_back(b);
    std::sort(times.begin(), times.end());
    times.erase(std::unique(times.begin(), times.end()), times.end());
    for (auto& [k, ls] : levels) {
        const size_t n = ls.pending.size();
        ls.pending.insert(ls.pending.end(), times.begin(), times.end());
        std::inplace_merge(ls.pending.begin(), ls.pending.begin() + static_cast<std::ptrdiff_t>(n),
                           ls.pending.end());
    }
    scheduled = tEnd;
}

void LiveScene::Impl::replay()
{
    for (auto& [k, ls] : levels) {
        detail::sortReplayEvents(ls.evs);
        if (!ls.evs.empty()) watermark = std::max(watermark, ls.evs.back().t);
    }
    for (auto& [k, ls] : levels) {
        size_t next = 0;
        ls.replay.advance(ls.ld, ls.evs, ls.pending, next, ls.ld.samples);
        // Later events all come at or after the watermark: a sample before it is final.
        while (next < ls.pending.size() && ls.pending[next] < watermark)
            ls.ld.samples.push_back(ls.replay.sample(ls.pending[next++]));
        ls.pending.erase(ls.pending.begin(),
                         ls.pending.begin() + static_cast<std::ptrdiff_t>(next));
        ls.evs.clear();
    }
}

std::shared_ptr<Scene> LiveScene::Impl::copyAll() const
{
    auto scene = std::make_shared<Scene>(base);
    for (const auto& [k, ls] : levels)
        scene->levels.push_back(ls.ld);
    return scene;
}

void LiveScene::Impl::catchUp(Published& p) const
{
    // Everything that changed after refresh p.version: appended rows, allocations freed since,
    // the end time of those still live, re-sorted kernels, and the small tables whole.
    Scene& s = *p.scene;
    s.frames = base.frames;
    s.metricNames = base.metricNames;
    s.ooms = base.ooms;
    s.strings.insert(base.strings.upper_bound(static_cast<StringId>(p.lastString)),
                     base.strings.end());
    s.stacks.insert(base.stacks.upper_bound(p.lastStack), base.stacks.end());
    size_t from = s.kernels.size();
    for (const auto& [v, i] : kernelsDirty)
        if (v > p.version) from = std::min(from, i);
    s.kernels.resize(base.kernels.size());
    std::copy(base.kernels.begin() + static_cast<std::ptrdiff_t>(from), base.kernels.end(),
              s.kernels.begin() + static_cast<std::ptrdiff_t>(from));
    s.graphLaunches.insert(s.graphLaunches.end(),
                           base.graphLaunches.begin() +
                               static_cast<std::ptrdiff_t>(s.graphLaunches.size()),
                           base.graphLaunches.end());
    if (s.levels.size() != levels.size()) { // a new (device, level): rare, copy the levels
        s.levels.clear();
        for (const auto& [k, ls] : levels)
            s.levels.push_back(ls.ld);
        return;
    }
    std::map<Key, size_t> pos;
    size_t i = 0;
    for (const auto& [k, ls] : levels) {
        LevelData& d = s.levels[i];
        pos[k] = i++;
        const LevelData& m = ls.ld;
        const size_t n0 = d.allocs.size();
        d.allocs.insert(d.allocs.end(), m.allocs.begin() + static_cast<std::ptrdiff_t>(n0),
                        m.allocs.end());
        for (const auto& [v, idx] : ls.freedLog)
            if (v > p.version && idx < n0) d.allocs[idx] = m.allocs[idx];
        d.regions = m.regions;
        d.spans = m.spans;
        d.samples = m.samples;
        d.compactSize = m.compactSize;
        d.maxAllocDuration = m.maxAllocDuration;
    }
    for (const auto& [id, where] : liveAllocs) {
        const size_t li = pos[where.first];
        s.levels[li].allocs[where.second].freeNs =
            levels.at(where.first).ld.allocs[where.second].freeNs;
    }
}

std::shared_ptr<const Scene> LiveScene::Impl::snapshot(const SessionSummary& sum,
                                                       const std::vector<CollapseRule>& rules)
{
    // The views hold the scene they show; the one before it is usually free again by the next
    // refresh. Bringing that one up to date costs what changed since; copying the whole
    // recording is the fallback when both are still held.
    Published* p = nullptr;
    for (auto& c : published)
        if (c.scene && c.scene.use_count() == 1 && (!p || c.version > p->version)) p = &c;
    if (p) {
        std::atomic_thread_fence(std::memory_order_acquire); // the last holder's reads are done
        catchUp(*p);
    } else {
        p = !published[0].scene ||
                    (published[1].scene && published[0].version < published[1].version)
                ? &published[0]
                : &published[1];
        p->scene = copyAll();
        ++stats.fullCopies;
    }
    p->version = version;
    p->lastString = lastStringId;
    p->lastStack = lastStackId;
    Scene& scene = *p->scene;
    scene.summary = sum;
    scene.live = true;
    for (LevelData& ld : scene.levels)
        // The state at the end of what was recorded, so that the timelines reach it.
        if (ld.samples.empty() || ld.samples.back().t < sum.timeEnd)
            ld.samples.push_back(
                levels.at({ld.device, static_cast<int>(ld.level)}).replay.sample(sum.timeEnd));
    scene.applyRules(rules.empty() ? defaultCollapseRules() : rules);
    // Log entries every kept scene has seen are no longer needed.
    int64_t seen = version;
    for (const auto& c : published)
        if (c.scene) seen = std::min(seen, c.version);
    auto old = [seen](const std::pair<int64_t, size_t>& e) { return e.first <= seen; };
    std::erase_if(kernelsDirty, old);
    for (auto& [k, ls] : levels)
        std::erase_if(ls.freedLog, old);
    return p->scene;
}

LiveScene::LiveScene(std::string path, int samples) : d_(std::make_unique<Impl>())
{
    d_->path = std::move(path);
    d_->samples = std::max(16, samples);
    d_->base.path = d_->path;
}

LiveScene::~LiveScene() = default;

LiveScene::Stats LiveScene::stats() const
{
    std::lock_guard lk(d_->mu);
    return d_->stats;
}

std::shared_ptr<const Scene> LiveScene::refresh(const std::vector<CollapseRule>& rules)
{
    std::lock_guard lk(d_->mu);
    Impl& d = *d_;
    ++d.version;
    // No integrity check (it reads every page; the final open does it) and one read
    // transaction, so that every table below shows the same commit.
    Session s = Session::open(d.path, false);
    s.db().exec("BEGIN");
    SessionSummary sum = s.summary(false);
    const int64_t tEnd = sum.timeEnd;
    d.lastStringId = detail::readStrings(s.db(), d.lastStringId, d.base);
    d.lastStackId = detail::readStacks(s.db(), d.lastStackId, d.base);
    detail::readFrames(s.db(), tEnd, d.base.frames, d.base.metricNames);
    d.readKernels(s.db());
    d.readRegions(s.db());
    d.readAllocations(s.db(), tEnd);
    s.db().exec("COMMIT");

    d.frameKernels();

    for (auto& [k, ls] : d.levels) {
        // The compacted axis changes with a new region or, for a level without regions (its
        // axis spans the allocations), with an allocation outside the current spans.
        const LevelData& ld = ls.ld;
        const bool axisChanged = std::any_of(ls.evs.begin(), ls.evs.end(), [&](const auto& e) {
            if (e.kind == detail::ReplayEv::RegionCreate) return true;
            if (e.kind != detail::ReplayEv::Alloc || !ld.regions.empty()) return false;
            const AllocRec& a = ld.allocs[e.idx];
            return ld.addressToY(a.address) < 0 || ld.addressToY(a.address + a.size) < 0;
        });
        if (axisChanged) {
            ls.ld.spans.clear();
            detail::buildSpans(ls.ld);
        }
    }
    if (!d.levels.empty()) {
        d.schedule(sum.timeBegin, tEnd);
        d.replay();
    }
    // The counts the summary left out: what this scene holds.
    sum.regions = 0;
    for (const auto& [k, ls] : d.levels) {
        sum.regions += static_cast<int64_t>(ls.ld.regions.size());
    }
    sum.allocations = d.stats.allocationRows;
    sum.kernels = static_cast<int64_t>(d.base.kernels.size());
    sum.graphLaunches = static_cast<int64_t>(d.base.graphLaunches.size());
    sum.frames = static_cast<int64_t>(d.base.frames.size());
    sum.ooms = static_cast<int64_t>(d.base.ooms.size());
    for (const auto& f : d.base.frames)
        sum.frameMetrics += static_cast<int64_t>(f.metrics.size());
    ++d.stats.refreshes;
    return d.snapshot(sum, rules);
}

} // namespace fs::render
