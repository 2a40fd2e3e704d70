#include "scene.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <set>

#ifdef FRAGSCOPE_HAVE_ANALYSIS
#include "core/analysis/engine.h"
#endif

namespace fs::render {

namespace {

void checkCancel(const LoadProgress& lp)
{
    if (lp.cancel && lp.cancel->load(std::memory_order_relaxed)) throw LoadCancelled{};
}

void report(const LoadProgress& lp, int pct, const std::string& stage)
{
    checkCancel(lp);
    if (lp.progress) lp.progress(pct, stage);
}

// Size class of DESIGN.md's entropies: 2^n KiB, n = 2..12 (11 classes, clamped at both ends).
int sizeClass(uint64_t bytes)
{
    const double kib = static_cast<double>(bytes) / 1024.0;
    int n = kib <= 4.0 ? 2 : static_cast<int>(std::floor(std::log2(kib)));
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

// Replays one level's regions and allocations in time order, keeping each region's free
// fragments, so F, the largest fragment and the fragment entropy are exact at every sample.
class Replay
{
public:
    explicit Replay(const LevelData& ld) : ld_(ld) {}

    void run(const std::vector<int64_t>& sampleTimes, std::vector<StateSample>& out,
             const LoadProgress& lp)
    {
        struct Ev
        {
            int64_t t;
            int order; // at one time: frees, then region destroys, region creates, allocs
            int kind;  // 0 region create, 1 region destroy, 2 alloc, 3 free
            size_t idx;
        };
        std::vector<Ev> evs;
        evs.reserve(ld_.regions.size() * 2 + ld_.allocs.size() * 2);
        for (size_t i = 0; i < ld_.regions.size(); ++i) {
            evs.push_back({ld_.regions[i].createNs, 2, 0, i});
            if (ld_.regions[i].destroyNs < std::numeric_limits<int64_t>::max())
                evs.push_back({ld_.regions[i].destroyNs, 1, 1, i});
        }
        for (size_t i = 0; i < ld_.allocs.size(); ++i) {
            evs.push_back({ld_.allocs[i].allocNs, 3, 2, i});
            if (ld_.allocs[i].freed) evs.push_back({ld_.allocs[i].freeNs, 0, 3, i});
        }
        std::sort(evs.begin(), evs.end(), [](const Ev& a, const Ev& b) {
            // A region must exist before the allocations placed in it at the same instant (and
            // outlive those freed then), or their bytes would be counted as free.
            if (a.t != b.t) return a.t < b.t;
            return a.order != b.order ? a.order < b.order : a.idx < b.idx;
        });
        size_t si = 0;
        for (size_t i = 0; i <= evs.size(); ++i) {
            const int64_t t = i < evs.size() ? evs[i].t : std::numeric_limits<int64_t>::max();
            while (si < sampleTimes.size() && sampleTimes[si] < t)
                out.push_back(sample(sampleTimes[si++]));
            if (i == evs.size()) break;
            if ((i & 0xFFFF) == 0) checkCancel(lp);
            const Ev& e = evs[i];
            switch (e.kind) {
            case 0:
                regionCreate(ld_.regions[e.idx]);
                break;
            case 1:
                regionDestroy(ld_.regions[e.idx]);
                break;
            case 2:
                alloc(ld_.allocs[e.idx], e.t);
                break;
            default:
                release(ld_.allocs[e.idx], e.t);
                break;
            }
        }
    }

private:
    void addFrag(int64_t region, uint64_t a, uint64_t s)
    {
        if (s == 0) return;
        frags_[region][a] = s;
        sizes_.insert(s);
        ++classes_[static_cast<size_t>(sizeClass(s))];
    }
    void dropFrag(std::map<uint64_t, uint64_t>& m, std::map<uint64_t, uint64_t>::iterator it)
    {
        sizes_.erase(sizes_.find(it->second));
        --classes_[static_cast<size_t>(sizeClass(it->second))];
        m.erase(it);
    }
    void regionCreate(const RegionRec& r)
    {
        reserved_ += static_cast<double>(r.size);
        free_ += static_cast<double>(r.size);
        addFrag(r.id, r.address, r.size);
    }
    void regionDestroy(const RegionRec& r)
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
    void event(uint64_t size, int64_t t)
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
    void alloc(const AllocRec& a, int64_t t)
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
    void release(const AllocRec& a, int64_t t)
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
    StateSample sample(int64_t t) const
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

    const LevelData& ld_;
    std::map<int64_t, std::map<uint64_t, uint64_t>> frags_;
    std::multiset<uint64_t> sizes_;
    std::array<int64_t, 11> classes_{};
    std::array<int64_t, 11> evClasses_{};
    std::deque<std::pair<int64_t, int>> window_;
    double reserved_ = 0, allocated_ = 0, free_ = 0;
};

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

} // namespace

std::string LevelData::label() const
{
    return fmt::format("device {} · {}", device, levelName(level));
}

double LevelData::addressToY(uint64_t addr) const
{
    auto it = std::upper_bound(spans.begin(), spans.end(), addr,
                               [](uint64_t a, const Span& s) { return a < s.address; });
    if (it == spans.begin()) return -1;
    --it;
    if (addr > it->address + it->size) return -1;
    return it->y0 + static_cast<double>(addr - it->address);
}

int LevelData::spanAtY(double y) const
{
    auto it = std::upper_bound(spans.begin(), spans.end(), y,
                               [](double v, const Span& s) { return v < s.y0; });
    if (it == spans.begin()) return -1;
    --it;
    if (y > it->y0 + static_cast<double>(it->size)) return -1;
    return static_cast<int>(it - spans.begin());
}

bool LevelData::yToAddress(double y, uint64_t& addr) const
{
    const int i = spanAtY(y);
    if (i < 0) return false;
    const Span& s = spans[static_cast<size_t>(i)];
    addr = s.address + static_cast<uint64_t>(std::max(0.0, y - s.y0));
    return true;
}

StateSample LevelData::stateAt(int64_t t) const
{
    if (samples.empty()) return {};
    auto it = std::upper_bound(samples.begin(), samples.end(), t,
                               [](int64_t v, const StateSample& s) { return v < s.t; });
    if (it == samples.begin()) return samples.front();
    return *std::prev(it);
}

int64_t LevelData::allocAt(int64_t t, uint64_t addr) const
{
    auto hi = std::upper_bound(allocs.begin(), allocs.end(), t,
                               [](int64_t v, const AllocRec& a) { return v < a.allocNs; });
    for (auto it = hi; it != allocs.begin();) {
        --it;
        if (it->allocNs < t - maxAllocDuration) break;
        if (it->freeNs > t && addr >= it->address && addr < it->address + it->size)
            return it - allocs.begin();
    }
    return -1;
}

std::vector<std::pair<uint64_t, uint64_t>> fragmentsAt(const LevelData& ld, int64_t t)
{
    std::vector<std::pair<uint64_t, uint64_t>> live;
    auto hi = std::upper_bound(ld.allocs.begin(), ld.allocs.end(), t,
                               [](int64_t v, const AllocRec& a) { return v < a.allocNs; });
    for (auto it = ld.allocs.begin(); it != hi; ++it)
        if (it->freeNs > t && it->regionId != 0)
            live.emplace_back(it->address, it->address + it->size);
    std::sort(live.begin(), live.end());
    std::vector<std::pair<uint64_t, uint64_t>> out;
    std::vector<const RegionRec*> regs;
    for (const auto& r : ld.regions)
        if (r.createNs <= t && r.destroyNs > t) regs.push_back(&r);
    std::sort(regs.begin(), regs.end(),
              [](const RegionRec* a, const RegionRec* b) { return a->address < b->address; });
    auto li = live.begin();
    for (const RegionRec* r : regs) {
        uint64_t cur = r->address;
        const uint64_t end = r->address + r->size;
        while (li != live.end() && li->second <= r->address)
            ++li;
        for (auto it = li; it != live.end() && it->first < end; ++it) {
            if (it->first > cur) out.emplace_back(cur, it->first - cur);
            cur = std::max(cur, it->second);
        }
        if (cur < end) out.emplace_back(cur, end - cur);
    }
    return out;
}

std::vector<CollapseRule> defaultCollapseRules()
{
    return {{"coherence_score", true, 0.05, true},
            {"id_match_rate", true, 0.65, true},
            {"flow_l2_px", false, 8.7, true},
            {"clip_entropy_bits", false, 2.95, true}};
}

std::string Scene::str(StringId id) const
{
    auto it = strings.find(id);
    return it == strings.end() ? std::string() : it->second;
}

int Scene::defaultLevel() const
{
    int best = -1;
    for (size_t i = 0; i < levels.size(); ++i) {
        if (levels[i].allocs.empty()) continue;
        if (best < 0 || static_cast<int>(levels[i].level) >
                            static_cast<int>(levels[static_cast<size_t>(best)].level))
            best = static_cast<int>(i);
    }
    return best < 0 && !levels.empty() ? 0 : best;
}

const FrameRow* Scene::frame(int64_t index) const
{
    auto it = std::lower_bound(frames.begin(), frames.end(), index,
                               [](const FrameRow& f, int64_t v) { return f.index < v; });
    return it != frames.end() && it->index == index ? &*it : nullptr;
}

const FrameRow* Scene::frameAt(int64_t t) const
{
    for (const auto& f : frames)
        if (t >= f.start && t < f.end) return &f;
    return nullptr;
}

const Collapse* Scene::collapseOf(int64_t frameIndex) const
{
    for (const auto& c : collapses)
        if (frameIndex >= c.firstFrame && frameIndex <= c.lastFrame) return &c;
    return nullptr;
}

void Scene::applyRules(const std::vector<CollapseRule>& r)
{
    rules = r;
    collapses.clear();
    Collapse* open = nullptr;
    for (auto& f : frames) {
        std::string reason;
        for (const auto& rule : rules) {
            if (!rule.enabled) continue;
            auto it = f.metrics.find(rule.metric);
            if (it == f.metrics.end()) continue;
            const bool broken =
                rule.below ? it->second < rule.threshold : it->second > rule.threshold;
            if (broken) {
                reason = fmt::format("{} {:.4g} {} {:.4g}", rule.metric, it->second,
                                     rule.below ? "<" : ">", rule.threshold);
                break;
            }
        }
        f.collapsed = !reason.empty();
        if (!f.collapsed) {
            open = nullptr;
            continue;
        }
        if (open && open->lastFrame == f.index - 1) {
            open->lastFrame = f.index;
        } else {
            collapses.push_back({f.index, f.index, reason});
            open = &collapses.back();
        }
    }
}

StateDiff Scene::stateDiff(int64_t frameIndex, int li) const
{
    StateDiff d;
    const FrameRow* f = frame(frameIndex);
    if (!f || li < 0 || li >= static_cast<int>(levels.size())) return d;
    const LevelData& ld = levels[static_cast<size_t>(li)];
    const FrameRow* prev = frame(frameIndex - 1);
    d.before = ld.stateAt(prev ? prev->end : f->start);
    d.after = ld.stateAt(f->end);
    return d;
}

std::vector<Precursor> Scene::precursors(int64_t frameIndex, int li, int lookbackFrames) const
{
    std::vector<Precursor> out;
    const FrameRow* f = frame(frameIndex);
    if (!f || li < 0 || li >= static_cast<int>(levels.size())) return out;
#ifdef FRAGSCOPE_HAVE_ANALYSIS
    if (engine) {
        const analysis::CollapseReport rep = engine->frameReport(frameIndex);
        for (const auto& p : rep.precursors)
            out.push_back({p.time, analysis::precursorKindName(p.kind), p.description, p.score,
                           p.address, p.size, p.allocationId});
        return out;
    }
#endif
    const LevelData& ld = levels[static_cast<size_t>(li)];
    int64_t from = f->start;
    for (int k = 1; k <= lookbackFrames; ++k)
        if (const FrameRow* p = frame(frameIndex - k)) from = std::min(from, p->start);
    const int64_t to = f->end;
    for (const auto& r : ld.regions) {
        if (r.createNs >= from && r.createNs <= to)
            out.push_back(
                {r.createNs, "region_created",
                 fmt::format("new {} region {} at {}", regionKindName(r.kind),
                             formatBytes(static_cast<double>(r.size)), formatAddress(r.address)),
                 100 + std::log2(static_cast<double>(r.size) + 1), r.address, r.size, -1});
        if (r.destroyNs >= from && r.destroyNs <= to)
            out.push_back(
                {r.destroyNs, "region_released",
                 fmt::format("released region {} at {}", formatBytes(static_cast<double>(r.size)),
                             formatAddress(r.address)),
                 95 + std::log2(static_cast<double>(r.size) + 1), r.address, r.size, -1});
    }
    for (const auto& [t, req] : ooms)
        if (t >= from && t <= to)
            out.push_back(
                {t, "oom",
                 fmt::format("out of memory asking {}", formatBytes(static_cast<double>(req))), 200,
                 0, req, -1});
    // Kernel variants that run in f but in no previous frame: the workspace-fallback mechanism.
    std::set<StringId> seen;
    for (const auto& fr : frames) {
        if (fr.index >= frameIndex) break;
        seen.insert(fr.kernelNames.begin(), fr.kernelNames.end());
    }
    for (StringId k : f->kernelNames) {
        if (seen.count(k) || frameIndex == frames.front().index) continue;
        int64_t t = f->start;
        for (const auto& kr : kernels)
            if (kr.name == k && kr.start >= f->start) {
                t = kr.start;
                break;
            }
        out.push_back({t, "new_kernel_variant",
                       fmt::format("kernel {} first runs in frame {}", str(k), frameIndex), 180, 0,
                       0, -1});
    }
    // Allocations that split the region's largest fragment: large allocations in the window,
    // scored by their size relative to the largest fragment just before them.
    auto lo = std::lower_bound(ld.allocs.begin(), ld.allocs.end(), from,
                               [](const AllocRec& a, int64_t v) { return a.allocNs < v; });
    std::vector<Precursor> allocs;
    for (auto it = lo; it != ld.allocs.end() && it->allocNs <= to; ++it) {
        const double largest = std::max(1.0, ld.stateAt(it->allocNs - 1).largestFragment);
        const double share = static_cast<double>(it->size) / largest;
        if (share < 0.01) continue;
        allocs.push_back(
            {it->allocNs, share > 0.5 ? "split_largest_fragment" : "large_alloc",
             fmt::format("alloc {} at {}{}", formatBytes(static_cast<double>(it->size)),
                         formatAddress(it->address),
                         it->tag ? " (" + str(it->tag) + ")" : std::string()),
             50 * std::min(1.0, share) + std::log2(static_cast<double>(it->size) + 1) / 4,
             it->address, it->size, it->id});
    }
    std::sort(allocs.begin(), allocs.end(),
              [](const Precursor& a, const Precursor& b) { return a.score > b.score; });
    if (allocs.size() > 40) allocs.resize(40);
    out.insert(out.end(), allocs.begin(), allocs.end());
    std::stable_sort(out.begin(), out.end(),
                     [](const Precursor& a, const Precursor& b) { return a.score > b.score; });
    return out;
}

std::string formatBytes(double b)
{
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int u = 0;
    double v = std::fabs(b);
    while (v >= 1024 && u < 4) {
        v /= 1024;
        ++u;
    }
    if (b < 0) v = -v;
    return u == 0 ? fmt::format("{:.0f} B", v)
                  : fmt::format("{:.{}f} {}", v, v < 10 ? 2 : 1, units[u]);
}

std::string formatTime(int64_t ns, TimeAxis axis)
{
    if (axis == TimeAxis::Ordinal) return fmt::format("#{}", ns);
    const double a = std::fabs(static_cast<double>(ns));
    if (a >= 1e9) return fmt::format("{:.3f} s", static_cast<double>(ns) / 1e9);
    if (a >= 1e6) return fmt::format("{:.3f} ms", static_cast<double>(ns) / 1e6);
    if (a >= 1e3) return fmt::format("{:.3f} µs", static_cast<double>(ns) / 1e3);
    return fmt::format("{} ns", ns);
}

std::string formatAddress(uint64_t a)
{
    return fmt::format("0x{:x}", a);
}

std::shared_ptr<const Scene> loadScene(const std::string& path, const LoadProgress& lp, int samples)
{
    auto scene = std::make_shared<Scene>();
    scene->path = path;
    report(lp, 0, "opening");
    Session s = Session::open(path, !lp.live);
    scene->live = lp.live;
    // One read transaction: every table below comes from the same commit, even while a recorder
    // keeps committing to the file (WAL readers see a fixed snapshot).
    s.db().exec("BEGIN");
    scene->summary = s.summary();
    if (lp.summary) lp.summary(scene->summary);
    const int64_t tEnd = scene->summary.timeEnd;
    report(lp, 5, "frames");
    {
        Stmt st =
            s.db().prepare("SELECT idx, start_ns, COALESCE(end_ns, ?1) FROM frames ORDER BY idx");
        st.bind(1, tEnd);
        while (st.step())
            scene->frames.push_back({st.i64(0), st.i64(1), st.i64(2), false, {}, {}});
    }
    {
        std::set<std::string> names;
        Stmt st = s.db().prepare("SELECT frame, name, value FROM frame_metrics ORDER BY frame");
        while (st.step()) {
            const int64_t fi = st.i64(0);
            auto it = std::lower_bound(scene->frames.begin(), scene->frames.end(), fi,
                                       [](const FrameRow& f, int64_t v) { return f.index < v; });
            const std::string name = st.text(1);
            names.insert(name);
            if (it != scene->frames.end() && it->index == fi) it->metrics[name] = st.f64(2);
        }
        scene->metricNames.assign(names.begin(), names.end());
    }
    {
        Stmt st = s.db().prepare("SELECT id, text FROM strings");
        while (st.step())
            scene->strings[static_cast<StringId>(st.i64(0))] = st.text(1);
    }
    {
        Stmt st = s.db().prepare("SELECT id, frame FROM stacks ORDER BY id, depth");
        while (st.step())
            scene->stacks[st.i64(0)].push_back(scene->str(static_cast<StringId>(st.i64(1))));
    }
    report(lp, 10, "kernels");
    {
        Stmt st =
            s.db().prepare("SELECT start_ns, end_ns, name, COALESCE(stream,0), COALESCE(graph_id,0)"
                           " FROM kernels ORDER BY start_ns");
        int64_t n = 0;
        while (st.step()) {
            scene->kernels.push_back({st.i64(0), st.i64(1), static_cast<StringId>(st.i64(2)),
                                      static_cast<uint32_t>(st.i64(3)), st.i64(4)});
            if ((++n & 0xFFFF) == 0) checkCancel(lp);
        }
        Stmt g = s.db().prepare(
            "SELECT start_ns, end_ns, COALESCE(graph_id,0) FROM graph_launches ORDER BY start_ns");
        while (g.step())
            scene->graphLaunches.push_back({g.i64(0), g.i64(1), g.i64(2)});
        Stmt o = s.db().prepare(
            "SELECT time_ns, COALESCE(requested_bytes,0) FROM ooms ORDER BY time_ns");
        while (o.step())
            scene->ooms.emplace_back(o.i64(0), o.u64(1));
    }
    // Distinct kernel names per frame (kernels and frames are both sorted by time).
    {
        size_t k = 0;
        for (auto& f : scene->frames) {
            while (k < scene->kernels.size() && scene->kernels[k].start < f.start)
                ++k;
            std::set<StringId> names;
            for (size_t j = k; j < scene->kernels.size() && scene->kernels[j].start < f.end; ++j)
                names.insert(scene->kernels[j].name);
            f.kernelNames.assign(names.begin(), names.end());
        }
    }
    report(lp, 15, "regions");
    std::map<std::pair<uint32_t, int>, LevelData> byLevel;
    {
        Stmt st =
            s.db().prepare("SELECT id, device, level, kind, address, size, create_ns, destroy_ns"
                           " FROM regions ORDER BY create_ns");
        while (st.step()) {
            const auto dev = static_cast<uint32_t>(st.i64(1));
            const int lvl = static_cast<int>(st.i64(2));
            LevelData& ld = byLevel[{dev, lvl}];
            ld.device = dev;
            ld.level = static_cast<Level>(lvl);
            RegionRec r;
            r.id = st.i64(0);
            r.kind = static_cast<RegionKind>(st.i64(3));
            r.address = st.u64(4);
            r.size = st.u64(5);
            r.createNs = st.i64(6);
            r.destroyNs = st.isNull(7) ? std::numeric_limits<int64_t>::max() : st.i64(7);
            ld.regions.push_back(r);
        }
    }
    report(lp, 20, "allocations");
    {
        const int64_t total = std::max<int64_t>(1, scene->summary.allocations);
        Stmt st =
            s.db().prepare("SELECT id, device, level, COALESCE(region_id,0), address, size,"
                           " COALESCE(requested_size,0), COALESCE(stream,0), alloc_ns, free_ns,"
                           " COALESCE(tag,0), COALESCE(stack,0) FROM allocations ORDER BY alloc_ns, id");
        int64_t n = 0;
        while (st.step()) {
            const auto dev = static_cast<uint32_t>(st.i64(1));
            const int lvl = static_cast<int>(st.i64(2));
            LevelData& ld = byLevel[{dev, lvl}];
            ld.device = dev;
            ld.level = static_cast<Level>(lvl);
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
            ld.maxAllocDuration = std::max(ld.maxAllocDuration, a.freeNs - a.allocNs);
            ld.allocs.push_back(a);
            if ((++n & 0x3FFF) == 0)
                report(lp, 20 + static_cast<int>(50 * n / total), "allocations");
        }
    }
    report(lp, 70, "replay");
    std::vector<int64_t> sampleTimes;
    const int64_t t0 = scene->summary.timeBegin;
    const int64_t span = std::max<int64_t>(1, tEnd - t0);
    for (int i = 0; i <= samples; ++i)
        sampleTimes.push_back(t0 + span * i / samples);
    for (const auto& f : scene->frames) {
        sampleTimes.push_back(f.start);
        sampleTimes.push_back(f.end);
    }
    std::sort(sampleTimes.begin(), sampleTimes.end());
    sampleTimes.erase(std::unique(sampleTimes.begin(), sampleTimes.end()), sampleTimes.end());
    int done = 0;
    for (auto& [key, ld] : byLevel) {
        buildSpans(ld);
        Replay(ld).run(sampleTimes, ld.samples, lp);
        scene->levels.push_back(std::move(ld));
        report(lp, 70 + 25 * ++done / static_cast<int>(byLevel.size()), "replay");
    }
    s.db().exec("COMMIT");
    scene->applyRules(lp.rules.empty() ? defaultCollapseRules() : lp.rules);
#ifdef FRAGSCOPE_HAVE_ANALYSIS
    if (lp.live) {
        report(lp, 100, "done");
        return scene;
    }
    report(lp, 95, "analysis");
    analysis::LoadOptions ao;
    ao.cancel = lp.cancel;
    try {
        scene->engine = analysis::Engine::open(path, ao);
    } catch (const analysis::Cancelled&) {
        throw LoadCancelled{};
    }
#endif
    report(lp, 100, "done");
    return scene;
}

} // namespace fs::render
