#include "scene_build.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#ifdef __linux__
#include <sys/mman.h>
#endif

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

void Replay::apply(const LevelData& ld, int kind, size_t idx, int64_t t)
{
    switch (kind) {
    case ReplayEv::RegionCreate:
        regionCreate(ld.regions[idx]);
        break;
    case ReplayEv::RegionDestroy:
        regionDestroy(ld.regions[idx]);
        break;
    case ReplayEv::Alloc:
        alloc(ld.allocs[idx], t);
        break;
    default:
        release(ld.allocs[idx], t);
        break;
    }
    compactSizes();
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
        apply(ld, e.kind, e.idx, e.t);
    }
}

void Replay::replayLevel(const LevelData& ld, const std::vector<int64_t>& times,
                         std::vector<StateSample>& out, const LoadProgress* lp)
{
    // Three streams, each sorted by (t, idx), merged by (t, order, idx) as sortReplayEvents
    // sorts: the allocations as they are, their frees, and the (few) region events.
    std::vector<ReplayEv> regs;
    for (size_t i = 0; i < ld.regions.size(); ++i) {
        regs.push_back(replayEv(ld.regions[i].createNs, ReplayEv::RegionCreate, i));
        if (ld.regions[i].destroyNs < std::numeric_limits<int64_t>::max())
            regs.push_back(replayEv(ld.regions[i].destroyNs, ReplayEv::RegionDestroy, i));
    }
    sortReplayEvents(regs);
    struct FreeEv
    {
        int64_t t;
        size_t idx;
    };
    std::vector<FreeEv> frees;
    frees.reserve(ld.allocs.size());
    preferHugePages(frees.data(), frees.capacity() * sizeof(FreeEv));
    for (size_t i = 0; i < ld.allocs.size(); ++i)
        if (ld.allocs[i].freed) frees.push_back({ld.allocs[i].freeNs, i});
    const auto freeLess = [](const FreeEv& x, const FreeEv& y) {
        return x.t != y.t ? x.t < y.t : x.idx < y.idx;
    };
    // Short-lived allocations free in about the order they were made: often nothing to sort.
    if (!std::is_sorted(frees.begin(), frees.end(), freeLess))
        std::sort(frees.begin(), frees.end(), freeLess);

    constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
    size_t ai = 0, fi = 0, ri = 0, next = 0, n = 0;
    // The event-size window's oldest allocation and free: two trailing cursors over the same
    // streams replace the queue of every event in the window (millions over 300 s, a malloc per
    // few dozen), which was half of the replay's time.
    size_t wa = 0, wf = 0;
    ownWindow_ = false;
    const size_t na = ld.allocs.size(), nf = frees.size(), nr = regs.size();
    while (ai < na || fi < nf || ri < nr) {
        // Free (order 0) < region event (order 1 or 2) < alloc (order 3) at the same time.
        const int64_t tf = fi < nf ? frees[fi].t : kNever;
        const int64_t ta = ai < na ? ld.allocs[ai].allocNs : kNever;
        int64_t t;
        int kind;
        size_t idx;
        if (ri < nr && (fi >= nf || regs[ri].t < tf) && regs[ri].t <= ta) {
            t = regs[ri].t;
            kind = regs[ri].kind;
            idx = regs[ri].idx;
            ++ri;
        } else if (fi < nf && tf <= ta) {
            t = tf;
            kind = ReplayEv::Free;
            idx = frees[fi].idx;
            ++fi;
        } else {
            t = ta;
            kind = ReplayEv::Alloc;
            idx = ai;
            ++ai;
        }
        while (next < times.size() && times[next] < t)
            out.push_back(sample(times[next++]));
        if (lp && (n++ & 0xFFFF) == 0) checkCancel(*lp);
        apply(ld, kind, idx, t);
        if (kind == ReplayEv::Alloc || kind == ReplayEv::Free) {
            // As event() with its own queue: drop events at or before t - window (all replayed).
            const int64_t cut = t - kEventWindow;
            while (wa < ai && ld.allocs[wa].allocNs <= cut)
                expire(ld.allocs[wa++].size);
            while (wf < fi && frees[wf].t <= cut)
                expire(ld.allocs[frees[wf++].idx].size);
        }
    }
    while (next < times.size())
        out.push_back(sample(times[next++]));
}

void Replay::addSize(uint64_t s)
{
    ++fragCount_;
    ++classes_[static_cast<size_t>(sizeClass(s))];
    heap_.push_back(s);
    std::push_heap(heap_.begin(), heap_.end());
}

void Replay::dropSize(uint64_t s)
{
    --fragCount_;
    --classes_[static_cast<size_t>(sizeClass(s))];
    if (s == heap_.front()) {
        std::pop_heap(heap_.begin(), heap_.end());
        heap_.pop_back();
    } else {
        gone_.push_back(s);
        std::push_heap(gone_.begin(), gone_.end());
    }
    // Keep the top live: a removed size equal to it is also still in the heap.
    while (!gone_.empty() && !heap_.empty() && gone_.front() == heap_.front()) {
        std::pop_heap(heap_.begin(), heap_.end());
        heap_.pop_back();
        std::pop_heap(gone_.begin(), gone_.end());
        gone_.pop_back();
    }
}

void Replay::compactSizes()
{
    // Removed sizes pile up below the top: rebuild from the live fragments now and then, so the
    // heaps stay within a small multiple of the live count (amortised O(1) per removal). Only
    // between events, when frags_ and the counts agree.
    if (gone_.size() <= 1024 || gone_.size() <= 2 * fragCount_) return;
    heap_.clear();
    gone_.clear();
    for (const auto& [region, m] : frags_)
        for (const auto& [addr, size] : m)
            heap_.push_back(size);
    std::make_heap(heap_.begin(), heap_.end());
}

void Replay::regionCreate(const RegionRec& r)
{
    reserved_ += static_cast<double>(r.size);
    free_ += static_cast<double>(r.size);
    if (r.size == 0) return;
    frags_[r.id][r.address] = r.size;
    addSize(r.size);
}

void Replay::regionDestroy(const RegionRec& r)
{
    reserved_ -= static_cast<double>(r.size);
    auto it = frags_.find(r.id);
    if (it == frags_.end()) return;
    for (const auto& [addr, size] : it->second) {
        free_ -= static_cast<double>(size);
        dropSize(size);
    }
    frags_.erase(it);
}

void Replay::event(uint64_t size, int64_t t)
{
    const int c = sizeClass(size);
    ++evClasses_[static_cast<size_t>(c)];
    if (!ownWindow_) return; // replayLevel expires old events itself
    window_.push_back({t, c});
    while (!window_.empty() && window_.front().first <= t - kEventWindow) {
        --evClasses_[static_cast<size_t>(window_.front().second)];
        window_.pop_front();
    }
}

void Replay::expire(uint64_t size)
{
    --evClasses_[static_cast<size_t>(sizeClass(size))];
}

void Replay::alloc(const AllocRec& a, int64_t t)
{
    event(a.size, t);
    allocated_ += static_cast<double>(a.size);
    if (a.regionId == 0) return;
    auto rit = frags_.find(a.regionId);
    if (rit == frags_.end()) return;
    FragMap& m = rit->second;
    auto it = m.upper_bound(a.address);
    if (it == m.begin()) return;
    --it;
    const uint64_t fa = it->first, fsz = it->second;
    if (a.address + a.size > fa + fsz)
        return; // overlaps a live allocation: an anomaly ingest already recorded
    // The fragment keeps its node for the part before the allocation (no tree rebalancing).
    const uint64_t head = a.address - fa, tail = fa + fsz - (a.address + a.size);
    dropSize(fsz);
    if (head > 0) {
        it->second = head;
        addSize(head);
        ++it;
    } else {
        it = m.erase(it);
    }
    if (tail > 0) {
        m.emplace_hint(it, a.address + a.size, tail);
        addSize(tail);
    }
    free_ -= static_cast<double>(a.size);
}

void Replay::release(const AllocRec& a, int64_t t)
{
    event(a.size, t);
    allocated_ -= static_cast<double>(a.size);
    if (a.regionId == 0) return;
    auto rit = frags_.find(a.regionId);
    if (rit == frags_.end()) return;
    FragMap& m = rit->second;
    const uint64_t lo = a.address;
    uint64_t hi = a.address + a.size;
    auto it = m.lower_bound(lo);
    if (it != m.end() && it->first < hi)
        return; // would overlap an existing fragment: inconsistent input, keep state sane
    // A fragment starting at hi joins this one.
    if (it != m.end() && it->first == hi) {
        hi += it->second;
        dropSize(it->second);
        it = m.erase(it);
    }
    if (hi == lo) return; // an empty allocation next to nothing: no fragment
    if (it != m.begin()) {
        auto prev = std::prev(it);
        if (prev->first + prev->second == lo) { // grows the fragment ending at lo in place
            dropSize(prev->second);
            prev->second = hi - prev->first;
            addSize(prev->second);
            free_ += static_cast<double>(a.size);
            return;
        }
    }
    m.emplace_hint(it, lo, hi - lo);
    addSize(hi - lo);
    free_ += static_cast<double>(a.size);
}

StateSample Replay::sample(int64_t t) const
{
    StateSample s;
    s.t = t;
    s.reserved = reserved_;
    s.allocated = allocated_;
    s.freeInRegions = std::max(0.0, free_);
    s.largestFragment = fragCount_ == 0 ? 0 : static_cast<double>(heap_.front());
    s.fragmentCount = static_cast<double>(fragCount_);
    s.fragRatio = s.freeInRegions > 0 ? 1.0 - s.largestFragment / s.freeInRegions : 0.0;
    s.fragmentEntropy = entropyOf(classes_);
    s.eventEntropy = entropyOf(evClasses_);
    return s;
}

void preferHugePages(const void* p, size_t bytes)
{
#ifdef __linux__
    constexpr uintptr_t kHuge = 2u << 20;
    const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
    const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
    // Advice only: failure (no THP, old kernel) leaves ordinary pages, so the result is ignored.
    if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
    (void)p;
    (void)bytes;
#endif
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
    a.stack = StackId{static_cast<uint32_t>(st.i64(11))};
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
