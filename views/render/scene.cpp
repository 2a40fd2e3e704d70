#include "scene.h"
#include "scene_build.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <fmt/format.h>
#include <limits>
#include <set>
#include <thread>

#include "core/analysis/engine.h"
#include "core/analysis/serialize.h"

namespace fs::render {

using detail::checkCancel;
using detail::report;

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
    if (engine) {
        std::lock_guard lock(precursorCache->mutex);
        if (precursorCache->frame == frameIndex) return precursorCache->rows;
        const analysis::CollapseReport rep = engine->frameReport(frameIndex);
        for (const auto& p : rep.precursors) {
            Precursor r{p.time,        analysis::precursorKindName(p.kind),
                        p.description, p.score,
                        p.address,     p.size,
                        p.allocationId};
            r.count = p.count;
            r.background = p.background;
            if (p.shift) {
                r.shareBefore = p.shift->shareBefore;
                r.shareAfter = p.shift->shareAfter;
                r.detail = analysis::kernelShiftText(*p.shift);
                r.variant = p.shift->variant;
            }
            r.detail += analysis::evidenceText(p);
            out.push_back(std::move(r));
        }
        precursorCache->frame = frameIndex;
        precursorCache->rows = out;
        return out;
    }
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

namespace {

// Engine::open on its own thread. Destroying it unjoined (the scene load failed or was cancelled)
// cancels the engine and waits for it.
class EngineLoad
{
public:
    EngineLoad(const std::string& path, const LoadProgress& lp) : userCancel_(lp.cancel)
    {
        thread_ = std::thread([this, path] {
            analysis::LoadOptions ao;
            ao.cancel = &cancel_;
            ao.integrityCheck = false; // loadScene checked the file before starting this
            ao.progress = [this](int64_t, int64_t) {
                if (userCancel_ && userCancel_->load(std::memory_order_relaxed)) cancel_ = true;
            };
            const auto start = std::chrono::steady_clock::now();
            try {
                engine_ = analysis::Engine::open(path, ao);
            } catch (...) {
                error_ = std::current_exception();
            }
            if (std::getenv("FRAGSCOPE_LOAD_TIMING"))
                std::fprintf(stderr, "engine load (own thread) %8.1f ms\n",
                             std::chrono::duration<double, std::milli>(
                                 std::chrono::steady_clock::now() - start)
                                 .count());
        });
    }
    ~EngineLoad()
    {
        if (!thread_.joinable()) return;
        cancel_ = true;
        thread_.join();
    }
    std::shared_ptr<const analysis::Engine> join()
    {
        thread_.join();
        if (error_) {
            try {
                std::rethrow_exception(error_);
            } catch (const analysis::Cancelled&) {
                throw LoadCancelled{};
            }
        }
        return std::move(engine_);
    }

private:
    const std::atomic<bool>* userCancel_;
    std::atomic<bool> cancel_{false};
    std::shared_ptr<const analysis::Engine> engine_;
    std::exception_ptr error_;
    std::thread thread_;
};

} // namespace

namespace {
// FRAGSCOPE_LOAD_TIMING=1 prints each stage's wall time to stderr (for bench_gui_load runs).
struct StageClock
{
    bool on = std::getenv("FRAGSCOPE_LOAD_TIMING") != nullptr;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    void lap(const char* what)
    {
        const auto now = std::chrono::steady_clock::now();
        if (on)
            std::fprintf(stderr, "loadScene %-12s %8.1f ms\n", what,
                         std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
    }
};
} // namespace

std::shared_ptr<const Scene> loadScene(const std::string& path, const LoadProgress& lp, int samples)
{
    StageClock clk;
    auto scene = std::make_shared<Scene>();
    scene->path = path;
    report(lp, 0, "opening");
    // Only this thread uses the connection: no SQLite mutex around each of millions of calls.
    Session s = Session::open(path, true, SQLITE_OPEN_NOMUTEX);
    // The analysis engine indexes the same file on a second thread: the two loads take about as
    // long each, and a machine has two cores or more.
    EngineLoad engine(path, lp);
    // One read transaction: every table below comes from the same commit, even while a recorder
    // keeps committing to the file (WAL readers see a fixed snapshot).
    s.db().exec("BEGIN");
    scene->summary = s.summary();
    if (lp.summary) lp.summary(scene->summary);
    const int64_t tEnd = scene->summary.timeEnd;
    clk.lap("summary");
    report(lp, 5, "frames");
    detail::readFrames(s.db(), tEnd, scene->frames, scene->metricNames);
    detail::readStrings(s.db(), 0, *scene);
    detail::readStacks(s.db(), 0, *scene);
    report(lp, 10, "kernels");
    {
        Stmt st = s.db().prepare(
            fmt::format("SELECT {} FROM kernels ORDER BY start_ns", detail::kKernelColumns));
        int64_t n = 0;
        while (st.step()) {
            scene->kernels.push_back(detail::readKernel(st));
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
    detail::frameKernelNames(scene->frames, 0, scene->kernels);
    clk.lap("small tables");
    report(lp, 15, "regions");
    std::map<std::pair<uint32_t, int>, LevelData> byLevel;
    {
        Stmt st = s.db().prepare(
            fmt::format("SELECT {} FROM regions ORDER BY create_ns", detail::kRegionColumns));
        while (st.step()) {
            uint32_t dev = 0;
            int lvl = 0;
            const RegionRec r = detail::readRegion(st, dev, lvl);
            LevelData& ld = byLevel[{dev, lvl}];
            ld.device = dev;
            ld.level = static_cast<Level>(lvl);
            ld.regions.push_back(r);
        }
    }
    report(lp, 20, "allocations");
    {
        const int64_t total = std::max<int64_t>(1, scene->summary.allocations);
        // Rowid order, a plain table scan: no index serves "ORDER BY alloc_ns, id" over all
        // levels, and SQLite sorting millions of rows in a temporary B-tree was most of the load.
        // Ingest writes rows in about allocation order; each level is sorted below if not.
        Stmt st = s.db().prepare(fmt::format("SELECT {} FROM allocations", detail::kAllocColumns));
        int64_t n = 0;
        LevelData* cur = nullptr;
        uint32_t curDev = 0;
        int curLvl = -1;
        while (st.step()) {
            uint32_t dev = 0;
            int lvl = 0;
            const AllocRec a = detail::readAlloc(st, tEnd, dev, lvl);
            if (!cur || dev != curDev || lvl != curLvl) {
                cur = &byLevel[{dev, lvl}];
                curDev = dev;
                curLvl = lvl;
                // Untouched reserved pages cost no memory; regrowing a vector of millions does.
                if (cur->allocs.empty()) {
                    cur->allocs.reserve(static_cast<size_t>(total));
                    detail::preferHugePages(cur->allocs.data(),
                                            cur->allocs.capacity() * sizeof(AllocRec));
                }
                cur->device = dev;
                cur->level = static_cast<Level>(lvl);
            }
            cur->maxAllocDuration = std::max(cur->maxAllocDuration, a.freeNs - a.allocNs);
            cur->allocs.push_back(a);
            if ((++n & 0x3FFF) == 0)
                report(lp, 20 + static_cast<int>(50 * n / total), "allocations");
        }
        const auto byTime = [](const AllocRec& x, const AllocRec& y) {
            return x.allocNs != y.allocNs ? x.allocNs < y.allocNs : x.id < y.id;
        };
        for (auto& [key, ld] : byLevel)
            if (!std::is_sorted(ld.allocs.begin(), ld.allocs.end(), byTime))
                std::sort(ld.allocs.begin(), ld.allocs.end(), byTime);
    }
    clk.lap("allocations");
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
        detail::buildSpans(ld);
        detail::Replay replay;
        replay.replayLevel(ld, sampleTimes, ld.samples, &lp);
        scene->levels.push_back(std::move(ld));
        report(lp, 70 + 25 * ++done / static_cast<int>(byLevel.size()), "replay");
    }
    clk.lap("replay");
    s.db().exec("COMMIT");
    scene->applyRules(lp.rules.empty() ? defaultCollapseRules() : lp.rules);
    report(lp, 95, "analysis");
    scene->engine = engine.join();
    clk.lap("engine wait");
    report(lp, 100, "done");
    return scene;
}

} // namespace fs::render
