#include "scene_build.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace fs::render::detail {

void checkCancel(const LoadProgress& lp)
{
    if (lp.cancel && lp.cancel->load(std::memory_order_relaxed)) throw LoadCancelled{};
}

void report(const LoadProgress& lp, int pct, const std::string& stage)
{
    checkCancel(lp);
    if (lp.progress) lp.progress(pct, stage);
}

namespace {

// Size class of DESIGN.md's entropies: 2^n KiB, n = 2..12 (11 classes, clamped at both ends).
// floor(log2(bytes / 1024)) is bit_width(bytes) - 11 for bytes > 4 KiB: no floating point.
int sizeClass(uint64_t bytes)
{
    const int n = bytes <= 4096 ? 2 : static_cast<int>(std::bit_width(bytes)) - 11;
    return std::clamp(n, 2, 12) - 2;
}

double entropyOf(const std::array<int64_t, 11>& counts)
{
    int64_t total = 0;
    for (int64_t c : counts)
        total += c;
    if (total <= 0) return 0;
    double h = 0;
    for (int64_t c : counts) {
        if (c > 0) {
            const double p = static_cast<double>(c) / static_cast<double>(total);
            h -= p * std::log2(p);
        }
    }
    return h;
}

} // namespace

ReplayEv replayEv(int64_t t, ReplayEv::Kind kind, size_t idx)
{
    static constexpr int kOrder[] = {2, 1, 3, 0}; // create, destroy, alloc, free
    return {t, kOrder[kind], kind, idx};
}

void sortReplayEvents(std::vector<ReplayEv>& evs)
{
    std::sort(evs.begin(), evs.end(), [](const ReplayEv& a, const ReplayEv& b) {
        // A region must exist before the allocations placed in it at the same instant (and
        // outlive those freed then), or their bytes would be counted as free.
        if (a.t != b.t) return a.t < b.t;
        return a.order != b.order ? a.order < b.order : a.idx < b.idx;
    });
}

void Replay::advance(const LevelData& ld, const std::vector<ReplayEv>& evs,
                     const std::vector<int64_t>& times, size_t& next, std::vector<StateSample>& out,
                     const LoadProgress* lp)
{
    for (size_t i = 0; i < evs.size(); ++i) {
        const ReplayEv& e = evs[i];
        while (next < times.size() && times[next] < e.t)
            out.push_back(sample(times[next++]));
        if (lp && (i & 0xFFFF) == 0) checkCancel(*lp);
        switch (e.kind) {
        case ReplayEv::RegionCreate:
            regionCreate(ld.regions[e.idx]);
            break;
        case ReplayEv::RegionDestroy:
            regionDestroy(ld.regions[e.idx]);
            break;
        case ReplayEv::Alloc:
            alloc(ld.allocs[e.idx], e.t);
            break;
        default:
            release(ld.allocs[e.idx], e.t);
            break;
        }
    }
}

void Replay::addFrag(int64_t region, uint64_t a, uint64_t s)
{
    if (s == 0) return;
    frags_[region][a] = s;
    sizes_.insert(s);
    ++classes_[static_cast<size_t>(sizeClass(s))];
}

void Replay::dropFrag(std::map<uint64_t, uint64_t>& m, std::map<uint64_t, uint64_t>::iterator it)
{
    sizes_.erase(sizes_.find(it->second));
    --classes_[static_cast<size_t>(sizeClass(it->second))];
    m.erase(it);
}

void Replay::regionCreate(const RegionRec& r)
{
    reserved_ += static_cast<double>(r.size);
    free_ += static_cast<double>(r.size);
    addFrag(r.id, r.address, r.size);
}

void Replay::regionDestroy(const RegionRec& r)
{
    reserved_ -= static_cast<double>(r.size);
    auto it = frags_.find(r.id);
    if (it == frags_.end()) return;
    for (auto f = it->second.begin(); f != it->second.end();) {
        free_ -= static_cast<double>(f->second);
        auto next = std::next(f);
        dropFrag(it->second, f);
        f = next;
    }
    frags_.erase(it);
}

void Replay::event(uint64_t size, int64_t t)
{
    constexpr int64_t kWindow = 300'000'000'000; // 300 s, DESIGN.md default
    const int c = sizeClass(size);
    window_.push_back({t, c});
    ++evClasses_[static_cast<size_t>(c)];
    while (!window_.empty() && window_.front().first <= t - kWindow) {
        --evClasses_[static_cast<size_t>(window_.front().second)];
        window_.pop_front();
    }
}

void Replay::alloc(const AllocRec& a, int64_t t)
{
    event(a.size, t);
    allocated_ += static_cast<double>(a.size);
    if (a.regionId == 0) return;
    auto rit = frags_.find(a.regionId);
    if (rit == frags_.end()) return;
    auto& m = rit->second;
    auto it = m.upper_bound(a.address);
    if (it == m.begin()) return;
    --it;
    const uint64_t fa = it->first, fsz = it->second;
    if (a.address + a.size > fa + fsz)
        return; // overlaps a live allocation: an anomaly ingest already recorded
    dropFrag(m, it);
    addFrag(a.regionId, fa, a.address - fa);
    addFrag(a.regionId, a.address + a.size, fa + fsz - (a.address + a.size));
    free_ -= static_cast<double>(a.size);
}

void Replay::release(const AllocRec& a, int64_t t)
{
    event(a.size, t);
    allocated_ -= static_cast<double>(a.size);
    if (a.regionId == 0) return;
    auto rit = frags_.find(a.regionId);
    if (rit == frags_.end()) return;
    auto& m = rit->second;
    uint64_t lo = a.address, hi = a.address + a.size;
    auto it = m.lower_bound(lo);
    if (it != m.end() && it->first < hi)
        return; // would overlap an existing fragment: inconsistent input, keep state sane
    if (it != m.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == lo) {
            lo = prev->first;
            dropFrag(m, prev);
        }
    }
    it = m.lower_bound(hi);
    if (it != m.end() && it->first == hi) {
        hi += it->second;
        dropFrag(m, it);
    }
    addFrag(a.regionId, lo, hi - lo);
    free_ += static_cast<double>(a.size);
}

StateSample Replay::sample(int64_t t) const
{
    StateSample s;
    s.t = t;
    s.reserved = reserved_;
    s.allocated = allocated_;
    s.freeInRegions = std::max(0.0, free_);
    s.largestFragment = sizes_.empty() ? 0 : static_cast<double>(*sizes_.rbegin());
    s.fragmentCount = static_cast<double>(sizes_.size());
    s.fragRatio = s.freeInRegions > 0 ? 1.0 - s.largestFragment / s.freeInRegions : 0.0;
    s.fragmentEntropy = entropyOf(classes_);
    s.eventEntropy = entropyOf(evClasses_);
    return s;
}

void buildSpans(LevelData& ld)
{
    std::vector<std::pair<uint64_t, uint64_t>> r;
    for (const auto& reg : ld.regions)
        r.emplace_back(reg.address, reg.address + reg.size);
    if (r.empty()) {
        // No regions (a source without them): span the allocations themselves.
        for (const auto& a : ld.allocs)
            r.emplace_back(a.address, a.address + a.size);
    }
    std::sort(r.begin(), r.end());
    std::vector<std::pair<uint64_t, uint64_t>> merged;
    for (const auto& [lo, hi] : r) {
        if (!merged.empty() && lo <= merged.back().second)
            merged.back().second = std::max(merged.back().second, hi);
        else
            merged.emplace_back(lo, hi);
    }
    double total = 0;
    for (const auto& [lo, hi] : merged)
        total += static_cast<double>(hi - lo);
    // Separators together take at most 12 % of the axis (each at most 1/150 of the mapped
    // bytes): visible between a few regions, never dominant between hundreds.
    const double gap =
        merged.size() > 1
            ? std::min(total / 150.0, total * 0.12 / static_cast<double>(merged.size() - 1))
            : 0.0;
    double y = 0;
    for (size_t i = 0; i < merged.size(); ++i) {
        if (i > 0) y += gap;
        ld.spans.push_back({merged[i].first, merged[i].second - merged[i].first, y});
        y += static_cast<double>(merged[i].second - merged[i].first);
    }
    ld.compactSize = std::max(1.0, y);
}

const char* const kAllocColumns =
    "id, device, level, COALESCE(region_id,0), address, size, COALESCE(requested_size,0),"
    " COALESCE(stream,0), alloc_ns, free_ns, COALESCE(tag,0), COALESCE(stack,0)";

AllocRec readAlloc(const Stmt& st, int64_t tEnd, uint32_t& device, int& level)
{
    device = static_cast<uint32_t>(st.i64(1));
    level = static_cast<int>(st.i64(2));
    AllocRec a;
    a.id = st.i64(0);
    a.regionId = st.i64(3);
    a.address = st.u64(4);
    a.size = st.u64(5);
    a.requested = st.u64(6);
    a.stream = static_cast<uint32_t>(st.i64(7));
    a.allocNs = st.i64(8);
    a.freed = !st.isNull(9);
    a.freeNs = a.freed ? st.i64(9) : std::max(tEnd, a.allocNs);
    a.tag = static_cast<StringId>(st.i64(10));
    a.stack = static_cast<uint32_t>(st.i64(11));
    return a;
}

const char* const kRegionColumns = "id, device, level, kind, address, size, create_ns, destroy_ns";

RegionRec readRegion(const Stmt& st, uint32_t& device, int& level)
{
    device = static_cast<uint32_t>(st.i64(1));
    level = static_cast<int>(st.i64(2));
    RegionRec r;
    r.id = st.i64(0);
    r.kind = static_cast<RegionKind>(st.i64(3));
    r.address = st.u64(4);
    r.size = st.u64(5);
    r.createNs = st.i64(6);
    r.destroyNs = st.isNull(7) ? std::numeric_limits<int64_t>::max() : st.i64(7);
    return r;
}

int64_t readStrings(const Db& db, int64_t after, Scene& scene)
{
    Stmt st = db.prepare("SELECT id, text FROM strings WHERE id > ?1");
    st.bind(1, after);
    while (st.step()) {
        after = std::max(after, st.i64(0));
        scene.strings[static_cast<StringId>(st.i64(0))] = st.text(1);
    }
    return after;
}

int64_t readStacks(const Db& db, int64_t after, Scene& scene)
{
    Stmt st = db.prepare("SELECT id, frame FROM stacks WHERE id > ?1 ORDER BY id, depth");
    st.bind(1, after);
    while (st.step()) {
        after = std::max(after, st.i64(0));
        scene.stacks[st.i64(0)].push_back(scene.str(static_cast<StringId>(st.i64(1))));
    }
    return after;
}

const char* const kKernelColumns =
    "start_ns, end_ns, name, COALESCE(stream,0), COALESCE(graph_id,0)";

KernelRec readKernel(const Stmt& st)
{
    return {st.i64(0), st.i64(1), static_cast<StringId>(st.i64(2)),
            static_cast<uint32_t>(st.i64(3)), st.i64(4)};
}

void readFrames(const Db& db, int64_t tEnd, std::vector<FrameRow>& frames,
                std::vector<std::string>& metricNames)
{
    frames.clear();
    {
        Stmt st = db.prepare("SELECT idx, start_ns, COALESCE(end_ns, ?1) FROM frames ORDER BY idx");
        st.bind(1, tEnd);
        while (st.step())
            frames.push_back({st.i64(0), st.i64(1), st.i64(2), false, {}, {}});
    }
    std::set<std::string> names;
    Stmt st = db.prepare("SELECT frame, name, value FROM frame_metrics ORDER BY frame");
    while (st.step()) {
        const int64_t fi = st.i64(0);
        auto it = std::lower_bound(frames.begin(), frames.end(), fi,
                                   [](const FrameRow& f, int64_t v) { return f.index < v; });
        std::string name = st.text(1);
        if (it != frames.end() && it->index == fi) it->metrics[name] = st.f64(2);
        names.insert(std::move(name));
    }
    metricNames.assign(names.begin(), names.end());
}

void frameKernelNames(std::vector<FrameRow>& frames, size_t from,
                      const std::vector<KernelRec>& kernels)
{
    for (size_t i = from; i < frames.size(); ++i) {
        FrameRow& f = frames[i];
        auto k = std::lower_bound(kernels.begin(), kernels.end(), f.start,
                                  [](const KernelRec& r, int64_t v) { return r.start < v; });
        std::set<StringId> names;
        for (; k != kernels.end() && k->start < f.end; ++k)
            names.insert(k->name);
        f.kernelNames.assign(names.begin(), names.end());
    }
}

} // namespace fs::render::detail
