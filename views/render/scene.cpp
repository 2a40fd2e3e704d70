#include "scene.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <set>

namespace fs::render {

std::string TrackEntry::label() const
{
    if (pool)
        return fmt::format("device {} · {} · pool {}", device, levelName(level),
                           analysis::poolLabel(*pool, level));
    return fmt::format("device {} · {}", device, levelName(level));
}

double TrackEntry::addressToY(uint64_t addr) const
{
    uint64_t c = 0;
    if (!layout.toCompact(addr, c)) {
        // The end of a range (an allocation's end address) maps to the range's end.
        if (addr == 0 || !layout.toCompact(addr - 1, c)) return -1;
        return static_cast<double>(c) + 1;
    }
    return static_cast<double>(c);
}

bool TrackEntry::yToAddress(double y, uint64_t& addr) const
{
    if (y < 0) return false;
    return layout.toAddress(static_cast<uint64_t>(y), addr);
}

int Scene::defaultTrack() const
{
    if (tracks.empty()) return -1;
    if (engine) {
        std::optional<analysis::Track> t;
        {
            const auto lock = engine->readLock();
            t = engine->defaultTrack(0);
        }
        if (t)
            for (size_t i = 0; i < tracks.size(); ++i)
                if (tracks[i].device == t->device && tracks[i].level == t->level)
                    return static_cast<int>(i);
    }
    return 0;
}

const analysis::FrameInfo* Scene::frame(int64_t index) const
{
    auto it = std::lower_bound(frames.begin(), frames.end(), index,
                               [](const analysis::FrameInfo& f, int64_t v) { return f.index < v; });
    return it != frames.end() && it->index == index ? &*it : nullptr;
}

const analysis::FrameInfo* Scene::frameAt(int64_t t) const
{
    for (const auto& f : frames)
        if (f.start != kNoTime && t >= f.start && t < f.end) return &f;
    return nullptr;
}

const analysis::Collapse* Scene::collapseOf(int64_t frameIndex) const
{
    for (const auto& c : collapses)
        if (frameIndex >= c.firstFrame && frameIndex <= c.lastFrame) return &c;
    return nullptr;
}

bool Scene::anyTimedFrame() const
{
    return std::any_of(frames.begin(), frames.end(),
                       [](const analysis::FrameInfo& f) { return f.start != kNoTime; });
}

int64_t Scene::frameX(size_t i) const
{
    const analysis::FrameInfo& f = frames.at(i);
    if (f.start != kNoTime) return f.start + (f.end - f.start) / 2;
    if (anyTimedFrame()) return kNoTime;
    const int64_t span = std::max<int64_t>(1, timeEnd() - timeBegin());
    return timeBegin() +
           static_cast<int64_t>(static_cast<double>(span) * (static_cast<double>(i) + 0.5) /
                                static_cast<double>(frames.size()));
}

std::string Scene::reason(const analysis::Collapse& c)
{
    return c.brokenRules.empty() ? std::string() : c.brokenRules.front();
}

std::shared_ptr<const Scene> Scene::withRules(std::vector<analysis::CollapseRule> r) const
{
    auto s = std::make_shared<Scene>(*this); // timelines and the engine are shared pointers
    s->rules = std::move(r);
    if (engine) {
        const auto lock = engine->readLock();
        s->collapses = engine->collapsesWith(s->rules);
        s->commonRules = engine->splitRules(s->rules).common;
    }
    return s;
}

namespace {
// Runs an engine query under its read lock. A lookup that needs the file (tags, stacks,
// kernels) can fail when the file went away behind a live view: the view then shows nothing
// for it rather than failing.
template <typename F> auto locked(const Scene& s, F&& f) -> decltype(f(*s.engine))
{
    const auto lock = s.engine->readLock();
    try {
        return f(*s.engine);
    } catch (const std::exception&) {
        return {};
    }
}
} // namespace

analysis::State Scene::stateAt(int ti, int64_t t) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(*this, [&](const analysis::Engine& e) {
        if (!ld.pool) return e.stateAt(ld.device, ld.level, t);
        for (analysis::PoolState& p : e.poolStatesAt(ld.device, ld.level, t))
            if (p.pool == *ld.pool) return std::move(p.state);
        return analysis::State{}; // the pool has nothing at t
    });
}

std::vector<analysis::Fragment> Scene::fragmentsAt(int ti, int64_t t) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(*this, [&](const analysis::Engine& e) {
        return ld.pool ? e.poolFragmentsAt(ld.device, ld.level, t, *ld.pool)
                       : e.fragmentsAt(ld.device, ld.level, t);
    });
}

std::vector<analysis::Fragment> Scene::pendingFreesAt(int ti, int64_t t) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(
        *this, [&](const analysis::Engine& e) { return e.pendingFreesAt(ld.device, ld.level, t); });
}

std::vector<analysis::RegionInfo> Scene::regions(int ti) const
{
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(*this, [&](const analysis::Engine& e) { return e.regions(ld.device, ld.level); });
}

analysis::HeatmapRequest heatmapRequest(const TrackEntry& ld, int64_t t0, int64_t t1, double y0,
                                        double y1, int w, int h)
{
    analysis::HeatmapRequest rq;
    rq.device = ld.device;
    rq.level = ld.level;
    rq.t0 = t0;
    rq.t1 = t1;
    rq.y0 = static_cast<uint64_t>(std::max(0.0, std::floor(y0)));
    rq.y1 = static_cast<uint64_t>(std::max(0.0, std::ceil(y1)));
    if (rq.y1 <= rq.y0) rq.y1 = rq.y0 + 1;
    rq.width = w;
    rq.height = h;
    return rq;
}

analysis::HeatmapRaster Scene::heatmap(int ti, int64_t t0, int64_t t1, double y0, double y1, int w,
                                       int h) const
{
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const auto rq = heatmapRequest(tracks[static_cast<size_t>(ti)], t0, t1, y0, y1, w, h);
    return locked(*this, [&](const analysis::Engine& e) {
        return keepHeatmaps ? e.heatmapKept(rq) : e.heatmap(rq);
    });
}

bool Scene::previewReady(int ti) const
{
    if (ti < 0 || ti >= static_cast<int>(tracks.size())) return false;
    if (!engine) return preview != nullptr;
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(*this,
                  [&](const analysis::Engine& e) { return e.previewReady(ld.device, ld.level); });
}

analysis::HeatmapRaster Scene::heatmapPreview(int ti, int64_t t0, int64_t t1, double y0, double y1,
                                              int w, int h) const
{
    if (ti < 0 || ti >= static_cast<int>(tracks.size()) || (!engine && !preview)) return {};
    const auto rq = heatmapRequest(tracks[static_cast<size_t>(ti)], t0, t1, y0, y1, w, h);
    if (!engine) return preview->raster(rq);
    return locked(*this, [&](const analysis::Engine& e) { return e.heatmapPreview(rq); });
}

analysis::MemmapRaster Scene::memmap(int ti, int64_t t, int order) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return {};
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    analysis::MemmapRequest rq;
    rq.device = ld.device;
    rq.level = ld.level;
    rq.time = t;
    rq.order = order;
    return locked(*this, [&](const analysis::Engine& e) { return e.memmap(rq); });
}

std::optional<analysis::AllocationInfo> Scene::allocationAt(int ti, int64_t t, uint64_t addr) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || ti < 0 || ti >= static_cast<int>(tracks.size())) return std::nullopt;
    const TrackEntry& ld = tracks[static_cast<size_t>(ti)];
    return locked(*this, [&](const analysis::Engine& e) {
        return e.allocationAt(ld.device, ld.level, t, addr);
    });
}

std::optional<analysis::AllocationInfo> Scene::allocation(int64_t id) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine || id < 0) return std::nullopt;
    return locked(*this, [&](const analysis::Engine& e) { return e.allocation(id); });
}

analysis::CollapseReport Scene::frameReport(int64_t f) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine) return {};
    std::lock_guard lock(reportCache->mutex);
    if (reportCache->frame != f || reportCache->rules != rules || live) {
        reportCache->report =
            locked(*this, [&](const analysis::Engine& e) { return e.frameReport(f, rules); });
        reportCache->frame = f;
        reportCache->rules = rules;
    }
    return reportCache->report;
}

std::vector<analysis::Correlation> Scene::correlations() const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine) return {};
    return locked(*this, [](const analysis::Engine& e) { return e.correlations(); });
}

analysis::CorrelationPoints Scene::correlationPoints(const std::string& allocatorMetric,
                                                     const std::string& frameMetric) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine) return {};
    return locked(*this, [&](const analysis::Engine& e) {
        const auto def = e.defaultTrack(0);
        return def ? e.correlationPoints(def->device, def->level, allocatorMetric, frameMetric)
                   : analysis::CorrelationPoints{};
    });
}

std::vector<analysis::KernelSummary> Scene::kernelsInFrame(int64_t f) const
{
    if (firstLook && !recordsReady()) return {};
    if (!engine) return {};
    return locked(*this, [&](const analysis::Engine& e) { return e.kernelsInFrame(f); });
}

std::vector<analysis::KernelSpan> Scene::kernelSpans(int64_t from, int64_t to) const
{
    if (!engine) return {};
    return locked(*this, [&](const analysis::Engine& e) { return e.kernelSpans(from, to); });
}

std::vector<analysis::GraphLaunchSpan> Scene::graphLaunches(int64_t from, int64_t to) const
{
    if (!engine) return {};
    return locked(*this, [&](const analysis::Engine& e) { return e.graphLaunches(from, to); });
}

namespace {
analysis::TimelineOptions timelineOptions(const analysis::Engine& e, uint32_t device, Level level,
                                          int samples)
{
    analysis::TimelineOptions o;
    o.device = device;
    o.level = level;
    o.step = std::max<int64_t>(1, (e.timeEnd() - e.timeBegin()) / std::max(1, samples));
    return o;
}
} // namespace

std::shared_ptr<Scene> sceneFromEngine(std::shared_ptr<const analysis::Engine> engine, int samples)
{
    auto s = std::make_shared<Scene>();
    {
        const auto lock = engine->readLock();
        const analysis::Engine& e = *engine;
        s->path = e.path();
        s->summary = e.summary();
        s->frames = e.frames();
        s->rules = e.rules();
        s->collapses = e.collapses();
        s->commonRules = e.commonRules();
        std::set<std::string> names;
        for (const auto& f : s->frames)
            for (const auto& [k, v] : f.metrics)
                names.insert(k);
        s->metricNames.assign(names.begin(), names.end());
        for (const analysis::Track& t : e.tracks()) {
            TrackEntry ld;
            ld.device = t.device;
            ld.level = t.level;
            ld.allocations = t.allocations;
            ld.regions = t.regions;
            ld.layout = e.layout(t.device, t.level);
            ld.timeline = std::make_shared<const analysis::Timeline>(
                e.timeline(timelineOptions(e, t.device, t.level, samples)));
            s->tracks.push_back(std::move(ld));
        }
    }
    s->explorer = std::make_shared<const analysis::Explorer>(engine);
    s->engine = std::move(engine);
    return s;
}

std::shared_ptr<Scene> previewScene(const std::string& path, const SessionSummary& summary,
                                    std::shared_ptr<const analysis::HeatmapPreview> preview)
{
    auto s = std::make_shared<Scene>();
    s->path = path;
    s->summary = summary;
    s->firstLook = true;
    TrackEntry ld;
    ld.device = preview->device;
    ld.level = preview->level;
    ld.allocations = preview->allocations;
    ld.regions = preview->regions;
    ld.layout = preview->layout;
    s->tracks.push_back(std::move(ld));
    s->preview = std::move(preview);
    return s;
}

void addPoolTracks(Scene& s, int samples)
{
    if (!s.engine) return;
    const auto lock = s.engine->readLock();
    const analysis::Engine& e = *s.engine;
    const size_t tracks = s.tracks.size();
    for (size_t i = 0; i < tracks; ++i) {
        const TrackEntry ld = s.tracks[i];
        if (ld.pool) return; // already added
        const std::vector<uint64_t> pools = e.pools(ld.device, ld.level);
        if (pools.size() < 2 && (pools.empty() || pools.front() == 0)) continue;
        const auto o = timelineOptions(e, ld.device, ld.level, samples);
        std::vector<analysis::Timeline> tls = e.poolTimelines(o, pools);
        for (size_t k = 0; k < pools.size(); ++k) {
            TrackEntry p = ld;
            p.pool = pools[k];
            p.timeline = std::make_shared<const analysis::Timeline>(std::move(tls[k]));
            s.tracks.push_back(std::move(p));
        }
    }
}

void Scene::warmUp() const
{
    // The level-of-detail grid of the default track (the heatmap's first preview needs it).
    const int ti = defaultTrack();
    if (ti >= 0)
        heatmapPreview(ti, timeBegin(), timeEnd() + 1, 0, tracks[size_t(ti)].compactSize(), 1, 1);
    for (const auto& f : frames)
        if (f.start != kNoTime) {
            kernelsInFrame(f.index);
            return;
        }
}

namespace {
// FRAGSCOPE_ANALYSIS_TIMING=1 prints the loader's stages after the engine's own (stderr).
void stageTime(const char* stage)
{
    static const bool on = std::getenv("FRAGSCOPE_ANALYSIS_TIMING") != nullptr;
    if (!on) return;
    static thread_local auto last = std::chrono::steady_clock::now();
    const auto now = std::chrono::steady_clock::now();
    std::fprintf(stderr, "load scene: %-30s %8.1f ms\n", stage,
                 std::chrono::duration<double, std::milli>(now - last).count());
    last = now;
}
} // namespace

std::shared_ptr<const Scene> loadScene(const std::string& path, const LoadProgress& lp, int samples)
{
    stageTime("start");
    analysis::LoadOptions o = lp.options;
    o.cancel = lp.cancel;
    o.summary = lp.summary;
    if (lp.progress) {
        lp.progress(0, "opening");
        o.progress = [&](int64_t done, int64_t total) {
            lp.progress(static_cast<int>(90 * done / std::max<int64_t>(1, total)), "indexing");
        };
    }
    std::shared_ptr<const analysis::Engine> e;
    try {
        e = analysis::Engine::open(path, o);
    } catch (const analysis::Cancelled&) {
        throw LoadCancelled{};
    }
    if (lp.progress) lp.progress(90, "timelines");
    if (lp.cancel && lp.cancel->load()) throw LoadCancelled{};
    stageTime("engine open");
    if (lp.loadRows) e->loadRows();
    stageTime("allocation records");
    if (lp.cancel && lp.cancel->load()) throw LoadCancelled{};
    auto s = sceneFromEngine(std::move(e), samples);
    if (lp.loadRows) addPoolTracks(*s, samples);
    s->keepHeatmaps = lp.keepHeatmaps;
    stageTime("scene (timelines)");
    if (lp.loadRows)
        s->ooms = std::make_shared<const std::vector<analysis::OomDiagnosis>>(s->engine->ooms());
    stageTime("OOM diagnoses");
    s->video = store::VideoImages::open(path);
    stageTime("video thumbnails index");
    if (lp.progress) lp.progress(100, "done");
    return s;
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

} // namespace fs::render
