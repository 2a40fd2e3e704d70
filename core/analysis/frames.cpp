// Frames, collapses, address jumps, kernels per frame and correlations (precursors:
// precursors.cpp, kernel-variant shifts: kernel_shift.cpp).
#include "engine_impl.h"
#include "parallel.h"
#include "stats.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <set>
#include <thread>
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
        ensureRows(); // a deferred load (engine_impl.h) needs the records now
        // Kernels per frame and the variants never seen in an earlier frame: a pass over the
        // kernels table (dbMutex is held) that needs no allocation record, so on a long run it
        // reads on a thread of its own while the replay below runs.
        auto kernelPass = [&] {
            std::vector<int64_t> starts;
            for (size_t fi : timed)
                starts.push_back(frames[fi].start);
            std::vector<std::unordered_map<int64_t, int64_t>> names(timed.size());
            Stmt st = db.prepare("SELECT start_ns, name, device FROM kernels WHERE start_ns >= ?1"
                                 " AND start_ns < ?2");
            st.bind(1, frames[timed.front()].start);
            int64_t last = frames[timed.front()].end;
            for (size_t fi : timed)
                last = std::max(last, frames[fi].end);
            st.bind(2, last);
            // The same pass gives the kernels index (buildKernelIndex) for free. Its answers
            // concern kernels inside frames, so starts from the first frame's start to the last
            // frame's end say all it needs: a name that first runs later is in no frame.
            kernelFirstStart.clear();
            std::set<int64_t> devices;
            int64_t lastDevice = -1;
            while (st.step()) {
                const int64_t t = st.i64(0);
                if (st.i64(2) != lastDevice) devices.insert(lastDevice = st.i64(2));
                auto [first, added] = kernelFirstStart.try_emplace(st.i64(1), t);
                if (!added && t < first->second) first->second = t;
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
            kernelDevices.assign(devices.begin(), devices.end());
            kernelIndexReady = true;
            if (o.useCache) writeKernelIndexCache(frames[timed.front()].start);
        };
        size_t records = 0;
        for (const TrackData& td : tracks)
            records += td.allocs.size();
        std::exception_ptr kernelError;
        std::jthread kernelThread;
        if (!timed.empty() && parallelChunks(records, o.parallelFrom) > 1)
            kernelThread = std::jthread([&] {
                try {
                    kernelPass();
                } catch (...) {
                    kernelError = std::current_exception();
                }
            });
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

        if (kernelThread.joinable())
            kernelThread.join();
        else if (!timed.empty())
            kernelPass();
        if (kernelError) std::rethrow_exception(kernelError);

        if (o.useCache) writeFrameCache(timed);
    }

    collapses = computeCollapses(o.rules);
    for (size_t c = 0; c < collapses.size(); ++c)
        for (FrameInfo& f : frames)
            if (f.index >= collapses[c].firstFrame && f.index <= collapses[c].lastFrame)
                f.collapse = static_cast<int>(c);
    for (FrameInfo& f : frames)
        f.breaksRule = breaksAnyRule(f.metrics, o.rules);
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
    return collapseReport(frame, d_->options.rules);
}

std::optional<CollapseReport> Engine::collapseReport(int64_t frame,
                                                     const std::vector<CollapseRule>& rules) const
{
    const std::vector<Collapse> runs =
        rules == d_->options.rules ? d_->collapses : d_->computeCollapses(rules);
    for (const Collapse& c : runs) {
        if (frame >= c.firstFrame && frame <= c.lastFrame) {
            // The collapse starts at its first frame: that is where the precursors are.
            CollapseReport r = frameReport(c.firstFrame, rules);
            r.collapse = c;
            r.frame = frame;
            return r;
        }
    }
    return std::nullopt;
}

void Engine::Impl::buildKernelIndex(int64_t firstStart) const
{
    // Then every frame's query is an index range. The stored copy first: on a long run (33 M
    // kernels) the pass costs seconds, and a collapse query needs it at once.
    if (!readKernelIndexCache(firstStart)) {
        // One pass, aggregated here: SQLite's GROUP BY over an unindexed column sorts every
        // row through a temporary B-tree (3.5x the CPU of the plain scan).
        std::set<int64_t> devices;
        {
            Stmt st = session->db().prepare("SELECT device, name, start_ns FROM kernels");
            while (st.step()) {
                devices.insert(st.i64(0));
                const int64_t t = st.i64(2);
                if (t < firstStart) continue;
                auto [it, added] = kernelFirstStart.try_emplace(st.i64(1), t);
                if (!added && t < it->second) it->second = t;
            }
        }
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
    std::lock_guard lock(d_->dbMutex);
    Db& db = d_->session->db();
    if (!d_->kernelIndexReady) d_->buildKernelIndex(firstStart);
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
    d_->ensureRows();
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
    adjustForMultipleTests(out); // q-values over exactly these pairs
    return out;
}

} // namespace fs::analysis
