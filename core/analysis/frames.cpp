// Frames, collapses, precursors, address jumps, kernels per frame and correlations.
#include "engine_impl.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/format.h"

namespace fs::analysis {

void Engine::Impl::loadFrames(const LoadOptions& o)
{
    frames.clear();
    std::lock_guard lock(dbMutex);
    Db& db = session->db();
    std::map<int64_t, FrameInfo> byIndex;
    {
        Stmt st = db.prepare("SELECT idx, start_ns, end_ns FROM frames ORDER BY start_ns, idx");
        std::vector<FrameInfo> ordered;
        while (st.step()) {
            FrameInfo f;
            f.index = st.i64(0);
            f.start = st.i64(1);
            f.end = st.isNull(2) ? kNoTime : st.i64(2);
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
    {
        Stmt st = db.prepare("SELECT frame, name, value FROM frame_metrics");
        while (st.step()) {
            auto [it, inserted] = byIndex.try_emplace(st.i64(0));
            if (inserted) { // a metric for a frame the session never marked: no time range
                it->second.index = st.i64(0);
                it->second.start = it->second.end = kNoTime;
            }
            it->second.metrics[st.text(1)] = st.f64(2);
        }
    }
    for (auto& [idx, f] : byIndex)
        frames.push_back(std::move(f));
    if (frames.empty()) return;

    // Timed frames in time order (frames are few compared with events).
    std::vector<size_t> timed;
    for (size_t i = 0; i < frames.size(); ++i)
        if (frames[i].start != kNoTime) timed.push_back(i);
    std::stable_sort(timed.begin(), timed.end(),
                     [&](size_t a, size_t b) { return frames[a].start < frames[b].start; });

    const bool cached = o.useCache && readFrameCache(timed);
    if (!cached) {
        // Allocator figures per frame and track: one forward replay per track; the hook keeps the
        // extremes inside each frame.
        for (const TrackData& td : tracks) {
            if (o.cancel && o.cancel->load()) throw Cancelled();
            Replayer r(td);
            for (size_t fi : timed) {
                FrameInfo& f = frames[fi];
                // A frame's events are those in (start, end]: adjacent frames (start = previous
                // end) then replay strictly forward, never rebuilding from a checkpoint.
                r.seek(f.start);
                FrameAllocator fa;
                fa.device = td.device;
                fa.level = td.level;
                const FragState& s = r.state();
                fa.minLargestFragment = fa.maxLargestFragment = s.largest();
                fa.minRatio = fa.maxRatio = s.ratio();
                fa.minFragmentCount = fa.maxFragmentCount = s.fragCount;
                r.advanceTo(f.end, [&](ReplayEvent kind, uint32_t i, int64_t) {
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
                });
                fa.atEnd = s.snapshot(f.end, false);
                f.allocator.push_back(std::move(fa));
            }
        }

        // Kernels per frame and the variants never seen in an earlier frame.
        if (!timed.empty()) {
            std::vector<int64_t> starts;
            for (size_t fi : timed)
                starts.push_back(frames[fi].start);
            std::vector<std::unordered_map<int64_t, int64_t>> names(timed.size());
            Stmt st = db.prepare(
                "SELECT start_ns, name FROM kernels WHERE start_ns >= ?1 AND start_ns < ?2");
            st.bind(1, frames[timed.front()].start);
            int64_t last = frames[timed.front()].end;
            for (size_t fi : timed)
                last = std::max(last, frames[fi].end);
            st.bind(2, last);
            while (st.step()) {
                const int64_t t = st.i64(0);
                auto it = std::upper_bound(starts.begin(), starts.end(), t);
                if (it == starts.begin()) continue;
                const auto k = static_cast<size_t>(it - starts.begin() - 1);
                if (t >= frames[timed[k]].end) continue;
                ++names[k][st.i64(1)];
            }
            std::unordered_set<int64_t> seen;
            for (size_t k = 0; k < timed.size(); ++k) {
                FrameInfo& f = frames[timed[k]];
                f.distinctKernels = static_cast<int64_t>(names[k].size());
                for (const auto& [name, n] : names[k]) {
                    f.kernels += n;
                    if (k > 0 && !seen.count(name)) ++f.newKernelVariants;
                }
                for (const auto& [name, n] : names[k])
                    seen.insert(name);
            }
        }

        if (o.useCache) writeFrameCache(timed);
    }

    collapses = computeCollapses(o.rules);
    for (size_t c = 0; c < collapses.size(); ++c)
        for (FrameInfo& f : frames)
            if (f.index >= collapses[c].firstFrame && f.index <= collapses[c].lastFrame)
                f.collapse = static_cast<int>(c);
    for (FrameInfo& f : frames)
        for (const CollapseRule& rule : o.rules) {
            auto it = f.metrics.find(rule.metric);
            if (it != f.metrics.end() && rule.broken(it->second)) f.breaksRule = true;
        }
}

std::vector<Collapse> Engine::Impl::computeCollapses(const std::vector<CollapseRule>& rules) const
{
    std::vector<Collapse> out;
    int64_t prev = std::numeric_limits<int64_t>::min();
    bool inRun = false;
    for (const FrameInfo& f : frames) { // ascending index
        std::vector<std::string> broken;
        for (const CollapseRule& rule : rules) {
            auto it = f.metrics.find(rule.metric);
            if (it != f.metrics.end() && rule.broken(it->second))
                broken.push_back(
                    fmt::format("{} = {} ({})", rule.metric, it->second, rule.describe()));
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

std::optional<CollapseReport> Engine::collapseReport(int64_t frame) const
{
    for (const Collapse& c : d_->collapses) {
        if (frame >= c.firstFrame && frame <= c.lastFrame) {
            // The collapse starts at its first frame: that is where the precursors are.
            CollapseReport r = frameReport(c.firstFrame);
            r.collapse = c;
            r.frame = frame;
            return r;
        }
    }
    return std::nullopt;
}

std::vector<KernelSummary> Engine::kernelsInFrame(int64_t frame) const
{
    const auto& fr = d_->frames;
    auto it =
        std::find_if(fr.begin(), fr.end(), [&](const FrameInfo& f) { return f.index == frame; });
    if (it == fr.end() || it->start == kNoTime) return {};
    int64_t firstStart = it->start;
    for (const FrameInfo& f : fr)
        if (f.start != kNoTime) firstStart = std::min(firstStart, f.start);
    std::lock_guard lock(d_->dbMutex);
    Db& db = d_->session->db();
    if (!d_->kernelIndexReady) {
        // One pass each, then every frame's query is an index range.
        Stmt dv = db.prepare("SELECT DISTINCT device FROM kernels");
        while (dv.step())
            d_->kernelDevices.push_back(dv.i64(0));
        Stmt fs = db.prepare(
            "SELECT name, MIN(start_ns) FROM kernels WHERE start_ns >= ?1 GROUP BY name");
        fs.bind(1, firstStart);
        while (fs.step())
            d_->kernelFirstStart.emplace(fs.i64(0), fs.i64(1));
        d_->kernelIndexReady = true;
    }
    std::map<int64_t, KernelSummary> byName;
    Stmt st =
        db.prepare("SELECT k.name, s.text, COUNT(*), SUM(k.end_ns - k.start_ns) FROM kernels k"
                   " LEFT JOIN strings s ON s.id = k.name"
                   " WHERE k.device = ?3 AND k.start_ns >= ?1 AND k.start_ns < ?2 GROUP BY k.name");
    for (int64_t device : d_->kernelDevices) {
        st.reset();
        st.bind(1, it->start).bind(2, it->end).bind(3, device);
        while (st.step()) {
            KernelSummary& k = byName[st.i64(0)];
            k.name = st.text(1);
            k.count += st.i64(2);
            k.totalNs += st.i64(3);
            // New: no kernel of this name started between the first frame and this one.
            auto f = d_->kernelFirstStart.find(st.i64(0));
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

std::vector<AddressJump> Engine::addressJumps(uint32_t device, Level level, int64_t frame) const
{
    const auto& fr = d_->frames;
    auto it =
        std::find_if(fr.begin(), fr.end(), [&](const FrameInfo& f) { return f.index == frame; });
    if (it == fr.end() || it->start == kNoTime) return {};
    // The previous frame in time.
    const FrameInfo* prev = nullptr;
    for (const FrameInfo& f : fr)
        if (f.start != kNoTime && f.start < it->start && (!prev || f.start > prev->start))
            prev = &f;
    if (!prev) return {};
    struct Row
    {
        int64_t id;
        uint64_t address, size;
        std::string role;
    };
    auto rolesOf = [&](const FrameInfo& f) {
        std::vector<Row> rows;
        std::lock_guard lock(d_->dbMutex);
        Stmt st = d_->session->db().prepare(
            "SELECT a.id, a.address, a.size, COALESCE(s.text, '') FROM allocations a"
            " LEFT JOIN strings s ON s.id = a.tag"
            " WHERE a.device=?1 AND a.level=?2 AND a.alloc_ns >= ?3 AND a.alloc_ns < ?4"
            " ORDER BY a.alloc_ns, a.id");
        st.bind(1, device).bind(2, static_cast<int>(level)).bind(3, f.start).bind(4, f.end);
        std::map<std::string, int> ordinal;
        while (st.step()) {
            Row r{st.i64(0), st.u64(1), st.u64(2), {}};
            const std::string tag = st.text(3);
            const std::string base = tag.empty() ? fmt::format("size:{}", r.size) : "tag:" + tag;
            r.role = fmt::format("{}#{}", base, ordinal[base]++);
            rows.push_back(std::move(r));
        }
        return rows;
    };
    const std::vector<Row> before = rolesOf(*prev), now = rolesOf(*it);
    std::unordered_map<std::string, const Row*> byRole;
    for (const Row& r : before)
        byRole.emplace(r.role, &r);
    std::vector<AddressJump> out;
    for (const Row& r : now) {
        auto b = byRole.find(r.role);
        if (b == byRole.end()) continue;
        AddressJump j;
        j.frame = frame;
        j.role = r.role;
        j.previousId = b->second->id;
        j.currentId = r.id;
        j.previousAddress = b->second->address;
        j.currentAddress = r.address;
        j.size = r.size;
        j.distance = r.address > b->second->address ? r.address - b->second->address
                                                    : b->second->address - r.address;
        out.push_back(std::move(j));
    }
    return out;
}

CollapseReport Engine::frameReport(int64_t frame) const
{
    CollapseReport rep;
    rep.frame = frame;
    rep.collapse = {frame, frame, {}};
    rep.caveats = d_->resultCaveats();
    const auto& fr = d_->frames;
    auto it =
        std::find_if(fr.begin(), fr.end(), [&](const FrameInfo& f) { return f.index == frame; });
    if (it == fr.end() || it->start == kNoTime) {
        rep.caveats.notes.push_back(
            fmt::format("frame {} has no time range in this session", frame));
        return rep;
    }
    // Frames in time order; the window starts lookback frames earlier (session begin when the
    // frame has fewer predecessors).
    std::vector<const FrameInfo*> timed;
    for (const FrameInfo& f : fr)
        if (f.start != kNoTime) timed.push_back(&f);
    std::stable_sort(timed.begin(), timed.end(),
                     [](const FrameInfo* a, const FrameInfo* b) { return a->start < b->start; });
    const auto pos =
        static_cast<int64_t>(std::find(timed.begin(), timed.end(), &*it) - timed.begin());
    const int64_t lookback = std::max<int64_t>(d_->options.lookbackFrames, 0);
    rep.windowBegin =
        pos - lookback >= 0 ? timed[static_cast<size_t>(pos - lookback)]->start : d_->timeBegin;
    rep.windowEnd = it->end;
    const FrameInfo* prev = pos > 0 ? timed[static_cast<size_t>(pos - 1)] : nullptr;

    std::vector<Precursor> p;
    for (const TrackData& td : d_->tracks) {
        // Region changes in the window.
        for (const RegionRec& r : td.regions) {
            if (r.createNs >= rep.windowBegin && r.createNs <= rep.windowEnd)
                p.push_back({PrecursorKind::RegionCreated, r.createNs, td.device, td.level,
                             r.address, r.size, -1, static_cast<double>(r.size),
                             fmt::format("new {} region of {} at {:#x}", regionKindName(r.kind),
                                         humanBytes(r.size), r.address)});
            if (r.destroyNs != kAlive && r.destroyNs >= rep.windowBegin &&
                r.destroyNs <= rep.windowEnd)
                p.push_back(
                    {PrecursorKind::RegionReleased, r.destroyNs, td.device, td.level, r.address,
                     r.size, -1, static_cast<double>(r.size),
                     fmt::format("{} {} region of {} at {:#x}",
                                 td.level == Level::Pool ? "pool trim: released" : "released",
                                 regionKindName(r.kind), humanBytes(r.size), r.address)});
        }
        // Allocations that shrank the largest free fragment.
        Replayer r(td);
        r.seek(rep.windowBegin - 1);
        uint64_t largest = r.state().largest();
        r.advanceTo(rep.windowEnd, [&](ReplayEvent kind, uint32_t i, int64_t t) {
            const uint64_t now = r.state().largest();
            // A split leaves part of the fragment free: a block that fills the largest fragment
            // exactly uses it rather than splitting it.
            if (kind == ReplayEvent::Alloc && now < largest && td.allocs[i].size < largest) {
                const Alloc& a = td.allocs[i];
                p.push_back(
                    {PrecursorKind::SplitLargest, t, td.device, td.level, a.address, a.size, a.id,
                     static_cast<double>(largest - now),
                     fmt::format("allocation of {} at {:#x} cut the largest free fragment from "
                                 "{} to {}",
                                 humanBytes(a.size), a.address, humanBytes(largest),
                                 humanBytes(now))});
            }
            largest = now;
        });
        // Same-role allocations that moved further than their own size.
        for (const AddressJump& j : addressJumps(td.device, td.level, frame))
            if (j.distance >= j.size && j.distance > 0)
                p.push_back(
                    {PrecursorKind::AddressJump, it->start, td.device, td.level, j.currentAddress,
                     j.size, j.currentId, static_cast<double>(j.size),
                     fmt::format("{} moved {} ({:#x} -> {:#x})", j.role, humanBytes(j.distance),
                                 j.previousAddress, j.currentAddress)});
        // State diff end(f-1) -> end(f).
        StateDiff diff;
        diff.device = td.device;
        diff.level = td.level;
        diff.before = stateAt(td.device, td.level, prev ? prev->end : it->start - 1);
        diff.after = stateAt(td.device, td.level, it->end);
        rep.diff.push_back(std::move(diff));
    }
    {
        std::lock_guard lock(d_->dbMutex);
        Stmt st = d_->session->db().prepare(
            "SELECT time_ns, device, level, requested_bytes, device_free_bytes"
            " FROM ooms WHERE time_ns >= ?1 AND time_ns <= ?2");
        st.bind(1, rep.windowBegin).bind(2, rep.windowEnd);
        while (st.step()) {
            const uint64_t req = st.isNull(3) ? 0 : st.u64(3);
            p.push_back({PrecursorKind::Oom, st.i64(0), static_cast<uint32_t>(st.i64(1)),
                         static_cast<Level>(st.isNull(2) ? 0 : st.i64(2)), 0, req, -1,
                         4.0 * static_cast<double>(std::max<uint64_t>(req, 1)),
                         fmt::format("out of memory: {} requested, {} free on the device",
                                     humanBytes(req), humanBytes(st.isNull(4) ? 0 : st.u64(4)))});
        }
    }
    // New kernel variants: scored by the dip of the largest fragment they coincide with.
    rep.newKernels.clear();
    double dip = 1;
    if (auto def = defaultTrack(0)) {
        for (const FrameAllocator& fa : it->allocator)
            if (fa.device == def->device && fa.level == def->level) {
                uint64_t before = fa.maxLargestFragment;
                for (const StateDiff& d : rep.diff)
                    if (d.device == fa.device && d.level == fa.level)
                        before = d.before.largestFreeFragmentBytes;
                if (before > fa.minLargestFragment)
                    dip = std::max(dip, static_cast<double>(before - fa.minLargestFragment));
            }
    }
    // Variants new in the collapsed frame or in the lookback frames before it (a fallback
    // kernel that first ran a frame earlier is the same mechanism).
    for (int64_t q = std::max<int64_t>(0, pos - lookback); q <= pos; ++q) {
        const FrameInfo* wf = timed[static_cast<size_t>(q)];
        for (const KernelSummary& k : kernelsInFrame(wf->index)) {
            if (!k.newInFrame) continue;
            rep.newKernels.push_back(k);
            p.push_back({PrecursorKind::NewKernelVariant, wf->start, 0, Level::Driver, 0, 0, -1,
                         dip,
                         fmt::format("kernel '{}' ran {}x in frame {} and in no earlier frame",
                                     k.name, k.count, wf->index)});
        }
    }
    // Graph launches that overlapped the precursors above.
    {
        std::vector<Precursor> graphs;
        std::lock_guard lock(d_->dbMutex);
        // Launches that start inside the window (an index range on start_ns).
        Stmt st = d_->session->db().prepare(
            "SELECT start_ns, end_ns, device, graph_id FROM graph_launches"
            " WHERE start_ns >= ?1 AND start_ns <= ?2");
        st.bind(1, rep.windowBegin).bind(2, rep.windowEnd);
        while (st.step()) {
            const int64_t s = st.i64(0), e = st.i64(1);
            // Half the largest event it overlapped: it ranks just below the change it carried.
            double score = 0;
            int n = 0;
            for (const Precursor& q : p)
                if (q.time >= s && q.time <= e && q.kind != PrecursorKind::NewKernelVariant &&
                    q.kind != PrecursorKind::AddressJump) {
                    score = std::max(score, q.score);
                    ++n;
                }
            if (n > 0)
                graphs.push_back(
                    {PrecursorKind::GraphLaunch, s, static_cast<uint32_t>(st.i64(2)), Level::Driver,
                     0, 0, -1, score / 2,
                     fmt::format("graph {} launch overlapped {} of these events", st.i64(3), n)});
        }
        p.insert(p.end(), graphs.begin(), graphs.end());
    }
    std::stable_sort(p.begin(), p.end(), [](const Precursor& a, const Precursor& b) {
        return a.score != b.score ? a.score > b.score : a.time < b.time;
    });
    constexpr size_t kMaxPrecursors = 200;
    if (p.size() > kMaxPrecursors) p.resize(kMaxPrecursors);
    rep.precursors = std::move(p);
    return rep;
}

std::vector<std::string> Engine::frameAllocatorMetrics()
{
    return {"largest_fragment_end",
            "fragmentation_ratio_end",
            "fragment_count_end",
            "fragment_entropy_end",
            "free_end",
            "allocated_end",
            "reserved_end",
            "min_largest_fragment",
            "max_fragmentation_ratio",
            "allocs",
            "alloc_bytes",
            "new_kernel_variants"};
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

Correlation Engine::correlation(uint32_t device, Level level, const std::string& allocatorMetric,
                                const std::string& frameMetric) const
{
    const std::vector<double> x = frameSeries(device, level, allocatorMetric);
    std::vector<double> y;
    for (const FrameInfo& f : d_->frames) {
        auto it = f.metrics.find(frameMetric);
        y.push_back(it == f.metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second);
    }
    Correlation c = correlate(x, y);
    c.allocatorMetric = allocatorMetric;
    c.frameMetric = frameMetric;
    return c;
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
    return out;
}

} // namespace fs::analysis
