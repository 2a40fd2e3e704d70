// Frames, collapses, address jumps, kernels per frame and correlations (precursors:
// precursors.cpp, kernel-variant shifts: kernel_shift.cpp).
#include "engine_impl.h"
#include "parallel.h"
#include "stats.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <sys/stat.h>

#include <fmt/format.h>

#include "core/format.h"
#include "core/store/allocations.h"
#include "core/store/catalog.h"
#include "core/store/frames.h"
#include "core/store/kernels.h"

namespace fs::analysis {

void Engine::Impl::loadFrames(const LoadOptions& o)
{
    std::lock_guard lock(dbMutex);
    const Session& db = *session;
    FrameWork w;
    if (!readFrames(db, o, w)) return;
    // The kernel pass needs no allocation record, so on a long run it reads on a thread of its
    // own (dbMutex is held for it) while the replay runs.
    startFrameKernels(w, o, &db);
    if (w.compute) replayFrames(o, w, w.kernels.joinable() ? 1 : 0);
    endFrameKernels(w, o, db);
    finishFrames(o, w);
}

bool Engine::Impl::readFrames(const Session& db, const LoadOptions& o, FrameWork& w)
{
    frames.clear();
    framesInTime.clear();
    forgetDerived();
    std::map<int64_t, FrameInfo> byIndex;
    {
        std::vector<FrameInfo> ordered;
        for (const store::FrameRow& row : store::framesByStart(db)) {
            FrameInfo f;
            f.index = row.index;
            f.start = row.startNs;
            f.end = row.endNs.value_or(kNoTime);
            ordered.push_back(f);
        }
        // An open frame ends where the next one starts, or at the session end.
        for (size_t i = 0; i < ordered.size(); ++i) {
            if (ordered[i].end == kNoTime)
                ordered[i].end = i + 1 < ordered.size() ? ordered[i + 1].start : timeEnd;
            ordered[i].end = std::max(ordered[i].end, ordered[i].start);
            byIndex[ordered[i].index] = ordered[i];
        }
    }
    for (const store::FrameMetricRow& m : store::frameMetrics(db)) {
        auto [it, inserted] = byIndex.try_emplace(m.frame);
        if (inserted) { // a metric for a frame the session never marked: no time range
            it->second.index = m.frame;
            it->second.start = it->second.end = kNoTime;
        }
        it->second.metrics[m.name] = m.value;
    }
    for (auto& [idx, f] : byIndex)
        frames.push_back(std::move(f));
    if (frames.empty()) return false;

    // Timed frames in time order (frames are few compared with events).
    std::vector<size_t> timed;
    for (size_t i = 0; i < frames.size(); ++i)
        if (frames[i].start != kNoTime) timed.push_back(i);
    std::stable_sort(timed.begin(), timed.end(),
                     [&](size_t a, size_t b) { return frames[a].start < frames[b].start; });
    framesInTime = timed;
    w.compute = !(o.useCache && readFrameCache(db, timed));
    if (w.compute) {
        ensureRows(); // a deferred load (engine_impl.h) needs the records now
        // Which tracks' summaries split by pool (read now: the kernel pass may then have the
        // connection to itself).
        for (const TrackData& td : tracks)
            w.byPool.push_back(summarySplitsByPool(td, regionPools(db, td.device, td.level)));
    }
    return true;
}

void Engine::Impl::startFrameKernels(FrameWork& w, const LoadOptions& o, const Session* shared)
{
    if (!w.compute || framesInTime.empty()) return;
    size_t records = 0;
    for (const TrackData& td : tracks)
        records += td.allocs.size();
    if (parallelChunks(records, o.parallelFrom) < 2) return; // short: endFrameKernels counts
    w.kernelsStarted = true;
    w.kernels = std::jthread([this, &w, &o, shared] {
        try {
            if (shared) {
                countFrameKernels(*shared, o);
            } else {
                const Session own = Session::openUnchecked(path);
                countFrameKernels(own, o);
            }
        } catch (...) {
            w.kernelError = std::current_exception();
        }
    });
}

void Engine::Impl::endFrameKernels(FrameWork& w, const LoadOptions& o, const Session& db)
{
    if (w.kernels.joinable())
        w.kernels.join();
    else if (!w.kernelsStarted && w.compute && !framesInTime.empty())
        countFrameKernels(db, o);
    if (w.kernelError) std::rethrow_exception(w.kernelError);
}

namespace {

// Kernel names (strings ids) as dense indices 0, 1, ...: a table for the small ids every writer
// gives, a map for any other.
class DenseNames
{
public:
    static constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
    uint32_t of(int64_t name)
    {
        if (name >= 0 && name < kTableMax) {
            const auto i = static_cast<size_t>(name);
            if (i >= table_.size()) table_.resize(std::max(i + 1, 2 * table_.size()), kNone);
            uint32_t& d = table_[i];
            if (d == kNone) d = add(name);
            return d;
        }
        const auto it = other_.find(name);
        return it != other_.end() ? it->second : other_[name] = add(name);
    }
    const std::vector<int64_t>& names() const { return names_; }

private:
    static constexpr int64_t kTableMax = int64_t{1} << 22;
    uint32_t add(int64_t name)
    {
        names_.push_back(name);
        return static_cast<uint32_t>(names_.size() - 1);
    }
    std::vector<uint32_t> table_;
    std::unordered_map<int64_t, uint32_t> other_;
    std::vector<int64_t> names_;
};

} // namespace

void Engine::Impl::countFrameKernels(const Session& db, const LoadOptions& o)
{
    // One pass over the kernels of the frames' span (33 M rows on the 100 M-event simulation):
    // per row a frame found from the last one's (rows come about in time order; any order is
    // counted right), a name's dense index from a table, and a (frame, name) pair counted only
    // when the name last ran in another frame, so a hash lookup per pair, not per row.
    const std::vector<size_t>& timed = framesInTime;
    std::vector<int64_t> starts;
    for (size_t fi : timed)
        starts.push_back(frames[fi].start);
    int64_t last = frames[timed.front()].end;
    for (size_t fi : timed)
        last = std::max(last, frames[fi].end);
    constexpr size_t kNoFrame = std::numeric_limits<size_t>::max();
    std::vector<int64_t> calls(timed.size(), 0), distinct(timed.size(), 0);
    DenseNames dense;
    std::vector<int64_t> firstStart;    // by dense name: its earliest start in the span
    std::vector<size_t> lastFrame;      // by dense name: the frame it last ran in
    std::vector<size_t> firstFrame;     // by dense name: the first frame it ran in
    std::unordered_set<uint64_t> pairs; // (frame, dense name) counted
    size_t k = 0;                       // the frame of the last row: starts[k] <= t < starts[k + 1]
    // The same pass gives the kernels index (buildKernelIndex) for free. Its answers concern
    // kernels inside frames, so starts from the first frame's start to the last frame's end say
    // all it needs: a name that first runs later is in no frame.
    std::set<int64_t> devices;
    int64_t lastDevice = -1;
    uint32_t sinceCheck = 0;
    bool cancelled = false;
    store::KernelRows::startingIn(
        db, frames[timed.front()].start, last, [&](const store::KernelRow& kernel) {
            if (++sinceCheck == 1u << 16) {
                sinceCheck = 0;
                if (o.cancel && o.cancel->load()) return !(cancelled = true);
            }
            const int64_t t = kernel.startNs;
            if (kernel.device != lastDevice) devices.insert(lastDevice = kernel.device);
            const uint32_t d = dense.of(kernel.name);
            if (d == firstStart.size()) {
                firstStart.push_back(t);
                lastFrame.push_back(kNoFrame);
                firstFrame.push_back(kNoFrame);
            } else if (t < firstStart[d]) {
                firstStart[d] = t;
            }
            if (t < starts[k] || (k + 1 < starts.size() && t >= starts[k + 1])) {
                auto it = std::upper_bound(starts.begin(), starts.end(), t);
                if (it == starts.begin()) return true; // before the first frame (none here)
                k = static_cast<size_t>(it - starts.begin() - 1);
            }
            if (t >= frames[timed[k]].end) return true; // between frames
            ++calls[k];
            if (lastFrame[d] != k) {
                lastFrame[d] = k;
                if (pairs.insert((uint64_t{k} << 32) | d).second) {
                    ++distinct[k];
                    firstFrame[d] = std::min(firstFrame[d], k);
                }
            }
            return true;
        });
    if (cancelled) throw Cancelled();
    for (size_t i = 0; i < timed.size(); ++i) {
        FrameInfo& f = frames[timed[i]];
        f.kernels = calls[i];
        f.distinctKernels = distinct[i];
        f.newKernelVariants = 0;
    }
    // A name is new in the first frame it runs in, after the first frame.
    for (size_t first : firstFrame)
        if (first != kNoFrame && first > 0) ++frames[timed[first]].newKernelVariants;
    kernelFirstStart.clear();
    for (size_t d = 0; d < firstStart.size(); ++d)
        kernelFirstStart.emplace(dense.names()[d], firstStart[d]);
    kernelDevices.assign(devices.begin(), devices.end());
    kernelIndexReady = true;
    if (o.useCache) writeKernelIndexCache(frames[timed.front()].start);
}

namespace {

// One stretch of a track's replay over the frames: frames [k0, k1) of `timed` on a replayer that
// starts after every event <= from (kNoTime: from the track's start) and ends after every event
// <= to. The pass, when kept, sees every event in (from, to]; it is dropped when frames overlap.
void replayStretch(const TrackData& td, std::vector<FrameInfo>& frames,
                   const std::vector<size_t>& timed, size_t k0, size_t k1, int64_t from, int64_t to,
                   std::optional<SummaryPass>& pass)
{
    Replayer r(td);
    if (from != kNoTime) r.seek(from);
    auto summarise = [&](ReplayEvent, uint32_t, int64_t t) { pass->after(r, t); };
    int64_t reached = std::numeric_limits<int64_t>::min();
    for (size_t k = k0; k < k1; ++k) {
        FrameInfo& f = frames[timed[k]];
        // A frame's events are those in (start, end]: adjacent frames (start = previous end)
        // then replay strictly forward, never rebuilding from a checkpoint.
        if (f.start < reached) pass.reset(); // frames overlap: the summary is replayed apart
        if (pass)
            r.advanceTo(f.start, summarise);
        else
            r.seek(f.start);
        reached = std::max(reached, f.end);
        FrameAllocator fa;
        fa.device = td.device;
        fa.level = td.level;
        const FragState& s = r.state();
        fa.minLargestFragment = fa.maxLargestFragment = s.largest();
        fa.minRatio = fa.maxRatio = s.ratio();
        fa.minFragmentCount = fa.maxFragmentCount = s.fragCount;
        r.advanceTo(f.end, [&](ReplayEvent kind, uint32_t i, int64_t t) {
            if (kind == ReplayEvent::Alloc) {
                ++fa.allocs;
                fa.allocBytes += td.allocs[i].size;
            } else if (kind == ReplayEvent::Free) {
                ++fa.frees;
            }
            const uint64_t l = s.largest();
            const double ratio = s.ratio();
            fa.minLargestFragment = std::min(fa.minLargestFragment, l);
            fa.maxLargestFragment = std::max(fa.maxLargestFragment, l);
            fa.minRatio = std::min(fa.minRatio, ratio);
            fa.maxRatio = std::max(fa.maxRatio, ratio);
            fa.minFragmentCount = std::min(fa.minFragmentCount, s.fragCount);
            fa.maxFragmentCount = std::max(fa.maxFragmentCount, s.fragCount);
            if (pass) pass->after(r, t);
        });
        fa.atEnd = s.snapshot(f.end, false);
        f.allocator.push_back(std::move(fa));
    }
    if (pass) r.advanceTo(to, summarise);
}

} // namespace

void Engine::Impl::replayFrames(const LoadOptions& o, FrameWork& w, unsigned busy)
{
    // Allocator figures per frame and track: a forward replay per track; the hook keeps the
    // extremes inside each frame. The track's summary is taken on the way (it is a replay of
    // every event, seconds on a long run, that `report` and the GUI ask for) when the frames go
    // strictly forward and the track is one pool. A long track's replay is split at frame starts
    // into stretches of about equal numbers of blocks, each on a core of its own (those the
    // `busy` threads beside leave) from the checkpoint before it; the stretches' passes join
    // into one (SummaryPass::append: the same figures).
    const std::vector<size_t>& timed = framesInTime;
    bool forward = true;
    for (size_t k = 1; k < timed.size(); ++k)
        forward = forward && frames[timed[k]].start >= frames[timed[k - 1]].end;
    for (const TrackData& td : tracks) {
        if (o.cancel && o.cancel->load()) throw Cancelled();
        const bool summarise = !w.byPool[static_cast<size_t>(&td - tracks.data())];
        // Stretch boundaries: indices into timed, each stretch from its first frame's start.
        std::vector<size_t> bounds = {0};
        const unsigned cores = std::thread::hardware_concurrency();
        const size_t chunks =
            forward && cores > busy + 1
                ? std::min<size_t>(parallelChunks(td.allocs.size(), o.parallelFrom), cores - busy)
                : 1;
        for (size_t c = 1; c < chunks; ++c) {
            const int64_t at = td.allocs[td.allocs.size() * c / chunks].allocNs;
            const size_t k = static_cast<size_t>(
                std::lower_bound(timed.begin(), timed.end(), at,
                                 [&](size_t fi, int64_t v) { return frames[fi].start < v; }) -
                timed.begin());
            if (k > bounds.back() && k < timed.size()) bounds.push_back(k);
        }
        bounds.push_back(timed.size());
        const size_t n = bounds.size() - 1;
        std::vector<std::optional<SummaryPass>> passes(n);
        forEachChunk(n, n, [&](size_t, size_t c0, size_t c1) {
            for (size_t c = c0; c < c1; ++c) {
                if (summarise) passes[c].emplace(timeEnd);
                const int64_t from = c == 0 ? kNoTime : frames[timed[bounds[c]]].start;
                const int64_t to = c + 1 < n ? frames[timed[bounds[c + 1]]].start
                                             : std::numeric_limits<int64_t>::max();
                replayStretch(td, frames, timed, bounds[c], bounds[c + 1], from, to, passes[c]);
            }
        });
        if (!passes[0]) continue;
        for (size_t c = 1; c < n; ++c)
            passes[0]->append(std::move(*passes[c]));
        w.passes.emplace_back(&td, std::move(*passes[0]));
    }
}

void Engine::Impl::finishFrames(const LoadOptions& o, FrameWork& w)
{
    if (w.compute) {
        if (o.useCache) writeFrameCache(framesInTime);
        for (const auto& [td, pass] : w.passes) {
            TrackSummary ts;
            ts.track.device = td->device;
            ts.track.level = td->level;
            ts.figures = pass.figures();
            writeSummaryCacheLocked(td->device, td->level, ts);
        }
    }
    ruleSplit = splitCommonRules(o.rules, frames);
    collapses = computeCollapses(o.rules);
    for (size_t c = 0; c < collapses.size(); ++c)
        for (FrameInfo& f : frames)
            if (f.index >= collapses[c].firstFrame && f.index <= collapses[c].lastFrame)
                f.collapse = static_cast<int>(c);
    for (FrameInfo& f : frames)
        f.breaksRule = breaksAnyRule(f.metrics, ruleSplit.active);
}

std::vector<Collapse> Engine::Impl::computeCollapses(const std::vector<CollapseRule>& all) const
{
    // A rule that fires on most frames makes no collapse (CommonRule).
    const std::vector<CollapseRule> rules = splitCommonRules(all, frames).active;
    std::vector<Collapse> out;
    int64_t prev = std::numeric_limits<int64_t>::min();
    bool inRun = false;
    for (const FrameInfo& f : frames) { // ascending index
        std::vector<std::string> broken;
        for (const CollapseRule& rule : rules) {
            auto it = f.metrics.find(rule.metric);
            if (it != f.metrics.end() && rule.broken(it->second))
                // Six significant digits: a computed metric (the video's) is no short decimal,
                // and its 17 digits in a headline read as noise; marked values keep theirs.
                broken.push_back(
                    fmt::format("{} = {:.6g} ({})", rule.metric, it->second, rule.describe()));
        }
        const bool consecutive = prev != std::numeric_limits<int64_t>::min() && f.index == prev + 1;
        if (broken.empty()) {
            inRun = false;
        } else if (inRun && consecutive) {
            out.back().lastFrame = f.index;
        } else {
            out.push_back({f.index, f.index, std::move(broken)});
            inRun = true;
        }
        prev = f.index;
    }
    return out;
}

const std::vector<FrameInfo>& Engine::frames() const
{
    return d_->frames;
}
const std::vector<CollapseRule>& Engine::rules() const
{
    return d_->options.rules;
}
const std::vector<Collapse>& Engine::collapses() const
{
    return d_->collapses;
}

std::vector<Collapse> Engine::collapsesWith(const std::vector<CollapseRule>& rules) const
{
    return d_->computeCollapses(rules);
}

const std::vector<CommonRule>& Engine::commonRules() const
{
    return d_->ruleSplit.common;
}

RuleSplit Engine::splitRules(const std::vector<CollapseRule>& rules) const
{
    return rules == d_->options.rules ? d_->ruleSplit : splitCommonRules(rules, d_->frames);
}

std::optional<CollapseReport> Engine::collapseReport(int64_t frame) const
{
    return collapseReport(frame, d_->options.rules);
}

std::optional<CollapseReport> Engine::collapseReport(int64_t frame,
                                                     const std::vector<CollapseRule>& rules) const
{
    const std::vector<Collapse> runs =
        rules == d_->options.rules ? d_->collapses : d_->computeCollapses(rules);
    for (const Collapse& c : runs) {
        if (frame >= c.firstFrame && frame <= c.lastFrame) {
            CollapseReport r = collapseReport(c, rules);
            r.frame = frame;
            return r;
        }
    }
    return std::nullopt;
}

CollapseReport Engine::collapseReport(const Collapse& c,
                                      const std::vector<CollapseRule>& rules) const
{
    // The collapse starts at its first frame: that is where the precursors are.
    CollapseReport r = frameReport(c.firstFrame, rules);
    r.collapse = c;
    r.frame = c.firstFrame;
    return r;
}

void Engine::Impl::buildKernelIndex(int64_t firstStart) const
{
    // Then every frame's query is an index range. The stored copy first: on a long run (33 M
    // kernels) the pass costs seconds, and a collapse query needs it at once.
    if (!readKernelIndexCache(firstStart)) {
        // One pass, aggregated here: SQLite's GROUP BY over an unindexed column sorts every
        // row through a temporary B-tree (3.5x the CPU of the plain scan).
        std::set<int64_t> devices;
        store::KernelRows::names(*session, [&](const store::KernelRow& k) {
            devices.insert(k.device);
            const int64_t t = k.startNs;
            if (t < firstStart) return true;
            auto [it, added] = kernelFirstStart.try_emplace(k.name, t);
            if (!added && t < it->second) it->second = t;
            return true;
        });
        kernelDevices.assign(devices.begin(), devices.end());
        writeKernelIndexCache(firstStart);
    }
    kernelIndexReady = true;
}

std::vector<KernelSummary> Engine::kernelsInFrame(int64_t frame) const
{
    d_->ensureRows(); // kernel-variant shifts look at the allocations around them
    const auto& fr = d_->frames;
    auto it =
        std::find_if(fr.begin(), fr.end(), [&](const FrameInfo& f) { return f.index == frame; });
    if (it == fr.end() || it->start == kNoTime) return {};
    int64_t firstStart = it->start;
    for (const FrameInfo& f : fr)
        if (f.start != kNoTime) firstStart = std::min(firstStart, f.start);
    {
        std::lock_guard lock(d_->dbMutex);
        if (!d_->session) return {};
        if (!d_->kernelIndexReady) d_->buildKernelIndex(firstStart);
    }
    std::map<int64_t, KernelSummary> byName; // by strings.id
    for (int64_t device : d_->kernelDeviceIds()) {
        // Held here: the memo may drop its copy meanwhile.
        const auto launches = d_->launchesIn(device, it->start, it->end);
        for (const store::LaunchRow& l : *launches) {
            KernelSummary& k = byName[l.name];
            ++k.count;
            k.totalNs += l.endNs - l.startNs;
        }
    }
    for (auto& [name, k] : byName)
        k.name = d_->text(name);
    {
        // New: no kernel of this name started between the first frame and this one.
        std::lock_guard lock(d_->dbMutex);
        for (auto& [name, k] : byName) {
            auto f = d_->kernelFirstStart.find(name);
            k.newInFrame = it->start != firstStart && f != d_->kernelFirstStart.end() &&
                           f->second >= it->start;
        }
    }
    std::vector<KernelSummary> out;
    for (auto& [id, k] : byName)
        out.push_back(std::move(k));
    std::stable_sort(out.begin(), out.end(), [](const KernelSummary& a, const KernelSummary& b) {
        return a.count != b.count ? a.count > b.count : a.name < b.name;
    });
    return out;
}

std::vector<int64_t> Engine::Impl::kernelDeviceIds() const
{
    std::lock_guard lock(dbMutex);
    if (kernelIndexReady) return kernelDevices;
    return session ? store::kernelDevices(*session) : std::vector<int64_t>{};
}

std::shared_ptr<const Engine::Impl::Launches> Engine::Impl::launchesIn(int64_t device, int64_t from,
                                                                       int64_t to) const
{
    const auto key = std::make_tuple(device, from, to);
    {
        std::lock_guard lock(launchesMutex);
        if (auto hit = launches.find(key); hit != launches.end()) return hit->second;
    }
    auto rows = std::make_shared<Launches>();
    bool read = false;
    for (LaunchReader& r : launchReaders) {
        if (!readersAllowed) break;
        std::unique_lock lock(r.m, std::try_to_lock);
        if (!lock) continue; // another thread's
        if (!r.session) {
            // The file the engine opened, checked after the open: one moved, replaced or deleted
            // since is left to the engine's own connection, which still holds the original.
            std::optional<Session> s;
            try {
                s.emplace(Session::open(path, false, SQLITE_OPEN_NOMUTEX));
            } catch (const SessionError&) {
            }
            struct stat st
            {
            };
            if (!s || ::stat(path.c_str(), &st) != 0 ||
                fileId != std::make_pair(static_cast<uint64_t>(st.st_dev),
                                         static_cast<uint64_t>(st.st_ino))) {
                readersAllowed = false;
                break;
            }
            r.session = std::move(s);
        }
        *rows = store::launchesIn(*r.session, device, from, to);
        read = true;
        break;
    }
    if (!read) {
        std::lock_guard lock(dbMutex);
        if (session) *rows = store::launchesIn(*session, device, from, to);
    }
    std::lock_guard lock(launchesMutex);
    // Bounded: a few hundred frames of ~1000 launches (tens of MB).
    if (launches.size() >= 512 || launchRows > (size_t{1} << 21)) {
        launches.clear();
        launchRows = 0;
    }
    if (launches.emplace(key, rows).second) launchRows += rows->size();
    return rows;
}

std::span<const store::OomRow> Engine::Impl::oomsBetween(int64_t first, int64_t last) const
{
    if (!session || last < first) return {};
    if (!oomRows) oomRows = store::oomsByTime(*session);
    const auto byTime = [](const store::OomRow& r, int64_t t) { return r.timeNs < t; };
    const auto b = std::lower_bound(oomRows->begin(), oomRows->end(), first, byTime);
    const auto e = std::upper_bound(b, oomRows->end(), last,
                                    [](int64_t t, const store::OomRow& r) { return t < r.timeNs; });
    return {b, e};
}

std::string Engine::Impl::text(int64_t stringId) const
{
    {
        std::lock_guard lock(textsMutex);
        if (auto it = texts.find(stringId); it != texts.end()) return it->second;
    }
    std::string t;
    {
        std::lock_guard lock(dbMutex);
        if (!session) return {};
        t = store::stringText(*session, stringId);
    }
    std::lock_guard lock(textsMutex);
    texts.emplace(stringId, t);
    return t;
}

std::string Engine::Impl::tagOf(const Alloc& a) const
{
    if (a.tag == kNoTag) return {};
    if (a.tag != kTagById) return text(a.tag);
    std::lock_guard lock(dbMutex);
    return session ? store::allocationTag(*session, a.id) : std::string();
}

uint32_t Engine::Impl::tagClassOf(const Alloc& a) const
{
    if (a.tag == kNoTag) return 0;
    if (a.tag != kTagById) {
        std::lock_guard lock(textsMutex);
        if (auto it = tagClassById.find(a.tag); it != tagClassById.end()) return it->second;
    }
    std::string tag = tagOf(a);
    if (tag.empty()) return 0;
    std::lock_guard lock(textsMutex);
    auto [it, added] =
        tagClassByText.try_emplace(std::move(tag), static_cast<uint32_t>(tagClassTexts.size()));
    if (added) tagClassTexts.push_back(it->first);
    if (a.tag != kTagById) tagClassById.emplace(a.tag, it->second);
    return it->second;
}

std::string Engine::Impl::roleText(const RoleRow& r, bool withOrdinal) const
{
    std::string base;
    if (r.tagClass == 0) {
        base = fmt::format("size:{}", r.size);
    } else {
        std::lock_guard lock(textsMutex);
        base = "tag:" + tagClassTexts[r.tagClass];
    }
    return withOrdinal ? fmt::format("{}#{}", base, r.ordinal) : base;
}

namespace {
// A role as numbers: (tag class, size when untagged, ordinal).
using RoleKey = std::tuple<uint32_t, uint64_t, uint32_t>;
RoleKey keyOf(const Engine::Impl::RoleRow& r)
{
    return {r.tagClass, r.tagClass ? 0 : r.size, r.ordinal};
}
} // namespace

std::shared_ptr<const Engine::Impl::FrameRoles> Engine::Impl::frameRoles(const TrackData& td,
                                                                         const FrameInfo& f) const
{
    const auto key = std::make_tuple(td.device, static_cast<int>(td.level), f.index);
    {
        std::lock_guard lock(rolesMutex);
        if (auto hit = roles.find(key); hit != roles.end()) return hit->second;
    }
    // The track's blocks made in [start, end), in (time, id) order: as the records are held.
    auto out = std::make_shared<FrameRoles>();
    std::vector<RoleRow>& rows = out->rows;
    auto a = std::lower_bound(td.allocs.begin(), td.allocs.end(), f.start,
                              [](const Alloc& x, int64_t t) { return x.allocNs < t; });
    for (; a != td.allocs.end() && a->allocNs < f.end; ++a)
        rows.push_back({a->id, a->address, a->size, tagClassOf(*a), 0});
    // Grouped by role, in time order inside a group (stable): the ordinal is the place in it.
    std::vector<uint32_t>& by = out->byRole;
    by.resize(rows.size());
    for (uint32_t i = 0; i < by.size(); ++i)
        by[i] = i;
    std::stable_sort(by.begin(), by.end(), [&](uint32_t x, uint32_t y) {
        return keyOf(rows[x]) < keyOf(rows[y]); // ordinals are all 0 yet
    });
    for (size_t k = 1; k < by.size(); ++k) {
        const RoleRow& p = rows[by[k - 1]];
        RoleRow& r = rows[by[k]];
        if (r.tagClass == p.tagClass && (r.tagClass || r.size == p.size)) r.ordinal = p.ordinal + 1;
    }
    std::lock_guard lock(rolesMutex);
    if (roles.size() >= 256) roles.clear();
    roles.emplace(key, out);
    return out;
}

Engine::Impl::RolePairs Engine::Impl::rolePairs(const TrackData& td, int64_t frame,
                                                bool movedOnly) const
{
    RolePairs out;
    const auto& fr = frames; // by index
    auto it = std::lower_bound(fr.begin(), fr.end(), frame,
                               [](const FrameInfo& f, int64_t i) { return f.index < i; });
    if (it == fr.end() || it->index != frame || it->start == kNoTime) return out;
    // The previous frame in time: the latest start before this one's (the lowest index among
    // frames that share it).
    const auto& timed = framesInTime; // by (start, index)
    auto byStart = [&](int64_t start) {
        return std::lower_bound(timed.begin(), timed.end(), start,
                                [&](size_t i, int64_t v) { return fr[i].start < v; });
    };
    const auto here = byStart(it->start);
    const FrameInfo* prev = here == timed.begin() ? nullptr : &fr[*byStart(fr[*(here - 1)].start)];
    if (!prev) return out;
    out.before = frameRoles(td, *prev);
    out.now = frameRoles(td, *it);
    const std::vector<RoleRow>&b = out.before->rows, &n = out.now->rows;
    // Both in role order: one merge finds every role the two frames share.
    auto i = out.before->byRole.begin(), ie = out.before->byRole.end();
    for (const uint32_t k : out.now->byRole) {
        const RoleKey want = keyOf(n[k]);
        while (i != ie && keyOf(b[*i]) < want)
            ++i;
        if (i == ie) break;
        if (keyOf(b[*i]) != want) continue;
        const RoleRow &was = b[*i], &is = n[k];
        const uint64_t distance =
            is.address > was.address ? is.address - was.address : was.address - is.address;
        if (!movedOnly || (distance >= is.size && distance > 0)) out.pairs.emplace_back(*i, k);
    }
    std::sort(out.pairs.begin(), out.pairs.end(),
              [](const auto& x, const auto& y) { return x.second < y.second; });
    return out;
}

std::vector<AddressJump> Engine::Impl::jumps(const TrackData& td, int64_t frame,
                                             bool movedOnly) const
{
    const RolePairs rp = rolePairs(td, frame, movedOnly);
    std::vector<AddressJump> out;
    out.reserve(rp.pairs.size());
    for (const auto& [bi, ni] : rp.pairs) {
        const RoleRow &was = rp.before->rows[bi], &is = rp.now->rows[ni];
        AddressJump j;
        j.frame = frame;
        j.role = roleText(is);
        j.previousId = was.id;
        j.currentId = is.id;
        j.previousAddress = was.address;
        j.currentAddress = is.address;
        j.size = is.size;
        j.distance = is.address > was.address ? is.address - was.address : was.address - is.address;
        out.push_back(std::move(j));
    }
    return out;
}

std::vector<AddressJump> Engine::addressJumps(uint32_t device, Level level, int64_t frame) const
{
    d_->ensureRows();
    const TrackData* td = d_->trackInfo(device, level);
    return td ? d_->jumps(*td, frame, false) : std::vector<AddressJump>{};
}

namespace {
// The per-frame allocator metrics correlations use, and whether each counts bytes.
struct FrameAllocatorMetric
{
    const char* name;
    bool bytes;
};
constexpr FrameAllocatorMetric kFrameAllocatorMetrics[] = {{"largest_fragment_end", true},
                                                           {"fragmentation_ratio_end", false},
                                                           {"fragment_count_end", false},
                                                           {"fragment_entropy_end", false},
                                                           {"free_end", true},
                                                           {"allocated_end", true},
                                                           {"reserved_end", true},
                                                           {"min_largest_fragment", true},
                                                           {"max_fragmentation_ratio", false},
                                                           {"allocs", false},
                                                           {"alloc_bytes", true},
                                                           {"new_kernel_variants", false}};
} // namespace

std::vector<std::string> Engine::frameAllocatorMetrics()
{
    std::vector<std::string> out;
    for (const FrameAllocatorMetric& m : kFrameAllocatorMetrics)
        out.emplace_back(m.name);
    return out;
}

std::vector<double> Engine::frameSeries(uint32_t device, Level level,
                                        const std::string& metric) const
{
    std::vector<double> out;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    for (const FrameInfo& f : d_->frames) {
        if (metric == "new_kernel_variants") {
            out.push_back(f.start == kNoTime ? nan : static_cast<double>(f.newKernelVariants));
            continue;
        }
        const FrameAllocator* fa = nullptr;
        for (const FrameAllocator& a : f.allocator)
            if (a.device == device && a.level == level) fa = &a;
        if (!fa) {
            out.push_back(nan);
            continue;
        }
        const State& s = fa->atEnd;
        double v = nan;
        if (metric == "largest_fragment_end")
            v = static_cast<double>(s.largestFreeFragmentBytes);
        else if (metric == "fragmentation_ratio_end")
            v = s.fragmentationRatio;
        else if (metric == "fragment_count_end")
            v = static_cast<double>(s.fragmentCount);
        else if (metric == "fragment_entropy_end")
            v = s.fragmentEntropyBits;
        else if (metric == "free_end")
            v = static_cast<double>(s.freeBytes);
        else if (metric == "allocated_end")
            v = static_cast<double>(s.allocatedBytes);
        else if (metric == "reserved_end")
            v = static_cast<double>(s.reservedBytes);
        else if (metric == "min_largest_fragment")
            v = static_cast<double>(fa->minLargestFragment);
        else if (metric == "max_fragmentation_ratio")
            v = fa->maxRatio;
        else if (metric == "allocs")
            v = static_cast<double>(fa->allocs);
        else if (metric == "alloc_bytes")
            v = static_cast<double>(fa->allocBytes);
        else
            throw std::invalid_argument("unknown per-frame allocator metric '" + metric + "'");
        out.push_back(v);
    }
    return out;
}

namespace {
// A frame metric of every frame, NaN where a frame lacks it.
std::vector<double> frameMetricSeries(const std::vector<FrameInfo>& frames, const std::string& name)
{
    std::vector<double> y;
    y.reserve(frames.size());
    for (const FrameInfo& f : frames) {
        auto it = f.metrics.find(name);
        y.push_back(it == f.metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
    }
    return y;
}
} // namespace

Correlation Engine::correlation(uint32_t device, Level level, const std::string& allocatorMetric,
                                const std::string& frameMetric) const
{
    Correlation c = correlate(frameSeries(device, level, allocatorMetric),
                              frameMetricSeries(d_->frames, frameMetric));
    c.allocatorMetric = allocatorMetric;
    c.frameMetric = frameMetric;
    return c;
}

CorrelationPoints Engine::correlationPoints(uint32_t device, Level level,
                                            const std::string& allocatorMetric,
                                            const std::string& frameMetric) const
{
    CorrelationPoints p;
    const std::vector<double> x = frameSeries(device, level, allocatorMetric);
    const std::vector<double> y = frameMetricSeries(d_->frames, frameMetric);
    p.stats = correlate(x, y);
    p.stats.allocatorMetric = allocatorMetric;
    p.stats.frameMetric = frameMetric;
    for (const FrameAllocatorMetric& m : kFrameAllocatorMetrics)
        p.xInBytes = p.xInBytes || (m.bytes && allocatorMetric == m.name);
    for (size_t i = 0; i < x.size() && i < y.size() && i < d_->frames.size(); ++i) {
        if (std::isnan(x[i]) || std::isnan(y[i])) continue; // as correlate() skips them
        p.frames.push_back(d_->frames[i].index);
        p.x.push_back(x[i]);
        p.y.push_back(y[i]);
    }
    p.line = fitTrend(p.x, p.y);
    return p;
}

std::vector<Correlation> Engine::correlations() const
{
    std::vector<Correlation> out;
    const auto def = defaultTrack(0);
    if (!def) return out;
    std::set<std::string> names;
    for (const FrameInfo& f : d_->frames)
        for (const auto& [k, v] : f.metrics)
            names.insert(k);
    for (const std::string& m : names)
        for (const std::string& a : frameAllocatorMetrics())
            out.push_back(correlation(def->device, def->level, a, m));
    adjustForMultipleTests(out); // q-values over exactly these pairs
    return out;
}

} // namespace fs::analysis
