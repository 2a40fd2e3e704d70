// Scene: what the views draw, as a cache of the analysis engine's results (fs::analysis). The
// loader builds it on a worker thread (loadScene, or LiveScene for a recording); views and the
// CLI exporter read it. It holds no allocation records and computes nothing: every figure comes
// from the engine, either stored here (timelines, frames, collapses) or asked for through the
// helpers below, which hold the engine's read lock (a live engine changes between refreshes).
// A new set of collapse rules or a live refresh makes a new Scene that shares the engine and
// the timelines: no allocation record is copied.
#pragma once

#include "core/analysis/engine.h"
#include "core/analysis/explore.h"
#include "core/analysis/oom.h"
#include "core/events.h"
#include "core/store/session.h"
#include "core/store/videos.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace fs::render {

// One (device, level) track as the views show it, or one memory pool of such a track (PyTorch's
// private pools, e.g. CUDA-graph pools: Engine::poolTimeline).
struct TrackEntry
{
    uint32_t device = 0;
    Level level = Level::Driver;
    // Set on a pool's entry: timeline, stateAt and fragmentsAt are the pool's figures (the
    // engine's); the heatmap, memory map and regions stay the whole track's.
    std::optional<uint64_t> pool;
    int64_t allocations = 0;
    int64_t regions = 0;
    analysis::AddressLayout layout;                     // the compacted address axis
    std::shared_ptr<const analysis::Timeline> timeline; // the engine's samples
    std::string label() const;
    double compactSize() const { return static_cast<double>(layout.compactSize); }
    // Address -> compacted axis (the layout's mapping); -1 outside every range.
    double addressToY(uint64_t addr) const;
    // Inverse of addressToY; false on a separator.
    bool yToAddress(double y, uint64_t& addr) const;
};

// The engine's heatmap request for a track's entry over [t0, t1] x [y0, y1] (compacted address
// axis, rounded outwards) at w x h cells.
analysis::HeatmapRequest heatmapRequest(const TrackEntry& ld, int64_t t0, int64_t t1, double y0,
                                        double y1, int w, int h);

struct Scene
{
    std::string path;
    SessionSummary summary;
    // One per engine track, device then level; then the entries of each track's pools
    // (addPoolTracks), appended so that the tracks' indices stay those of the first look.
    std::vector<TrackEntry> tracks;
    std::vector<analysis::FrameInfo> frames; // by index; frames without a time range included
    std::vector<std::string> metricNames;
    std::vector<analysis::CollapseRule> rules; // the rules the collapses were computed with
    std::vector<analysis::Collapse> collapses;
    std::vector<analysis::CommonRule> commonRules; // rules that fire on most frames: no collapse
    std::shared_ptr<const analysis::Engine> engine;
    // The engine's explorer (time cursor, block list, call sites, search: scene_explore.h),
    // shared by the scenes withRules() makes; it reads nothing until asked.
    std::shared_ptr<const analysis::Explorer> explorer;
    // The engine's OOM diagnoses (a replay per OOM: too long for the GUI thread), computed by
    // loadScene on the loading thread; null when the scene was made otherwise (the OOM list
    // then asks the engine).
    std::shared_ptr<const std::vector<analysis::OomDiagnosis>> ooms;
    // The thumbnails of the video the frame metrics were computed from (`metrics compute`), read
    // on demand; null when the session holds none.
    std::shared_ptr<const store::VideoImages> video;
    bool live = false; // from a recording still being written (LiveScene)
    // heatmap() asks the engine for a raster kept in the session file (Engine::heatmapKept):
    // the CLI's exporter sets it, so that the same export again reads no allocation record.
    bool keepHeatmaps = false;
    // A first look (the GUI's loader hands it out before the engine has read the allocation
    // records a reopen deferred): until the records are in memory, the queries below that need
    // them answer nothing at once instead of waiting, except heatmap(), which views run on a
    // worker. The loader then delivers the complete scene (SessionLoader::completed).
    bool firstLook = false;
    bool recordsReady() const { return !engine || engine->rowsLoaded(); }
    // Set on a preview scene (previewScene): the heatmap's level-of-detail picture of its one
    // track, before the engine is open; every engine query answers nothing.
    std::shared_ptr<const analysis::HeatmapPreview> preview;
    // The engine's last frame report: the inspector and the kernel lane ask for the same frame
    // (a report ranks every precursor of the window: tens of ms on a long run). Shared by the
    // scenes withRules() makes; keyed by frame and rules, since the ranking's healthy baseline
    // follows the rules.
    struct ReportCache
    {
        std::mutex mutex;
        int64_t frame = kNoTime;
        std::vector<analysis::CollapseRule> rules;
        analysis::CollapseReport report;
    };
    std::shared_ptr<ReportCache> reportCache = std::make_shared<ReportCache>();

    int64_t timeBegin() const { return summary.timeBegin; }
    int64_t timeEnd() const { return summary.timeEnd; }
    // The track the views show by default: the engine's default track on device 0, else the
    // first.
    int defaultTrack() const;
    const analysis::FrameInfo* frame(int64_t index) const;
    // Timed frame holding time t, or nullptr.
    const analysis::FrameInfo* frameAt(int64_t t) const;
    // Collapse that contains frame index, or nullptr.
    const analysis::Collapse* collapseOf(int64_t frameIndex) const;
    bool collapsed(int64_t frameIndex) const { return collapseOf(frameIndex) != nullptr; }
    // Where a time axis draws frames[i]'s metrics: the middle of its time range. Frames without
    // one (metrics imported for frames the session never marked) are spread evenly by index
    // when no frame has a time range, else not drawn (kNoTime); the frames table lists them.
    int64_t frameX(size_t i) const;
    bool anyTimedFrame() const;
    // "coherence_score = 0.009 < 0.05": the first broken rule of a collapse.
    static std::string reason(const analysis::Collapse& c);
    // The same scene with collapses computed by the engine under other rules (shares the engine
    // and the timelines).
    std::shared_ptr<const Scene> withRules(std::vector<analysis::CollapseRule> rules) const;

    // ---- engine queries (under the engine's read lock); ti: an index into tracks ----
    analysis::State stateAt(int ti, int64_t t) const;
    std::vector<analysis::Fragment> fragmentsAt(int ti, int64_t t) const;
    std::vector<analysis::Fragment> pendingFreesAt(int ti, int64_t t) const; // the whole track's
    std::vector<analysis::RegionInfo> regions(int ti) const;
    analysis::HeatmapRaster heatmap(int ti, int64_t t0, int64_t t1, double y0, double y1, int w,
                                    int h) const;
    // The engine's quick level-of-detail heatmap of the same window (Engine::heatmapPreview).
    analysis::HeatmapRaster heatmapPreview(int ti, int64_t t0, int64_t t1, double y0, double y1,
                                           int w, int h) const;
    bool previewReady(int ti) const; // Engine::previewReady
    analysis::MemmapRaster memmap(int ti, int64_t t, int order) const;
    std::optional<analysis::AllocationInfo> allocationAt(int ti, int64_t t, uint64_t addr) const;
    std::optional<analysis::AllocationInfo> allocation(int64_t id) const;
    // Precursors and the f-1 -> f diff of frame f, as if it collapsed (the engine's ranking
    // under this scene's rules).
    analysis::CollapseReport frameReport(int64_t frame) const;
    std::vector<analysis::KernelSummary> kernelsInFrame(int64_t frame) const;
    // The report's correlations with their q-values (Engine::correlations); empty until the
    // records are loaded.
    std::vector<analysis::Correlation> correlations() const;
    // One pair's per-frame points on the default track (Engine::correlationPoints).
    analysis::CorrelationPoints correlationPoints(const std::string& allocatorMetric,
                                                  const std::string& frameMetric) const;
    std::vector<analysis::KernelSpan> kernelSpans(int64_t from, int64_t to) const;
    std::vector<analysis::GraphLaunchSpan> graphLaunches(int64_t from, int64_t to) const;
    // Asks the engine the questions whose first answer builds an index (kernel names: a pass
    // over the kernels table), so that the views' first frame click does not wait for it. The
    // loader runs it on its worker after handing the scene out.
    void warmUp() const;
};

// A scene without an engine for the heatmap's first picture of a session read without its stored
// index (LoadOptions::preview): the summary, the previewed track and its grid.
std::shared_ptr<Scene> previewScene(const std::string& path, const SessionSummary& summary,
                                    std::shared_ptr<const analysis::HeatmapPreview> preview);
// Builds the scene of an engine: every track's timeline (about `samples` samples over the
// session), frames, metric names and the collapses under the engine's rules.
std::shared_ptr<Scene> sceneFromEngine(std::shared_ptr<const analysis::Engine> engine,
                                       int samples = 1200);
// Appends an entry per memory pool of each track that has a pool other than the default one
// (Engine::poolStatesAt lists them), with the engine's per-pool timeline at the same sampling.
// It reads allocation records: loadScene calls it when it loads them, the GUI's loader for the
// complete scene (not for the first look).
void addPoolTracks(Scene& scene, int samples = 1200);

struct LoadProgress
{
    std::function<void(int percent, const std::string& stage)> progress;
    // Called with the summary as soon as it is read (staged results).
    std::function<void(const SessionSummary&)> summary;
    const std::atomic<bool>* cancel = nullptr;
    // The engine's options: collapse rules, precursor lookback, entropy window (the user's
    // settings file, docs/settings.md); progress, cancel and summary above replace its own.
    analysis::LoadOptions options;
    // Read the allocation records a reopen deferred (analysis::LoadInfo::rowsDeferred) before
    // returning, on the loading thread: the GUI's views ask row queries (state, fragments) on
    // their thread as soon as they get the scene. False: the first such query reads them.
    bool loadRows = true;
    // Exact heatmaps are kept in the session file for their request (Scene::keepHeatmaps).
    bool keepHeatmaps = false;
};

// Thrown when LoadProgress::cancel becomes true.
struct LoadCancelled
{
};

// Opens a session with the analysis engine (read once) and builds its scene. Throws
// SessionError for a bad file, LoadCancelled on cancel.
std::shared_ptr<const Scene> loadScene(const std::string& path, const LoadProgress& lp = {},
                                       int samples = 1200);

// Formatting shared by every view and the CLI.
std::string formatBytes(double bytes);
std::string formatTime(int64_t ns, TimeAxis axis);
std::string formatAddress(uint64_t a);

} // namespace fs::render
