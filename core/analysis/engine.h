// fs::analysis::Engine: the analysis over one session file. Load once (on any thread: the GUI
// runs open() on a worker with a progress callback and a cancel flag), then ask for whole,
// immutable values. Callers never see SQLite.
//
// Thread safety: after open() returns, every const member may be called from several threads at
// once (queries that read the file take an internal lock).
//
// Times are session time (ns, or the ordinal on sessions with time_axis=ordinal). A State "at t"
// includes every event with time <= t. See docs/analysis.md for the replay index and caching.
#pragma once

#include "summary.h"
#include "types.h"

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace fs {
class Session;
struct SessionSummary;
} // namespace fs

namespace fs::analysis {

struct GraphsReport; // graphs.h

// Thrown by open() when the cancel flag was raised.
class Cancelled : public std::exception
{
public:
    const char* what() const noexcept override { return "cancelled"; }
};

class HeatmapPreview;

// From this many allocations a track's heatmap is previewed from its level-of-detail grid before
// the exact picture (a smaller one is drawn exactly at once, and opens in about a second).
inline constexpr int64_t kPreviewFromAllocations = 1'000'000;

struct LoadOptions
{
    // Called with (done, total) units of work, from the loading thread; may be empty.
    std::function<void(int64_t done, int64_t total)> progress;
    // Called with the session summary as soon as it is read, before the index is built (staged
    // results: the GUI shows the summary long before the views); may be empty.
    std::function<void(const SessionSummary&)> summary;
    const std::atomic<bool>* cancel = nullptr; // raised -> open() throws Cancelled
    std::vector<CollapseRule> rules = defaultCollapseRules();
    int64_t lookbackFrames = 2; // precursor window: the two previous frames
    // Event-size entropy window stateAt() uses (timelines take theirs in TimelineOptions).
    int64_t entropyWindowNs = 300'000'000'000;
    bool useCache = true; // read/write the per-frame cache in the session file
    // Store a newly built index (and the allocation records) in the session file before open()
    // returns; false: Engine::storeIndex() does it later (the GUI's loader, after its first
    // look: writing the records takes a while on a large session).
    bool storeIndexAtOpen = true;
    // PRAGMA quick_check on open (Session::open); false when the caller has just checked the
    // same file itself (the GUI's loader opens it in parallel).
    bool integrityCheck = true;
    // Allocation rows from which open (its row reading, free-time sort, frames' kernel pass)
    // and a timeline split their work over the cores, two threads at least (at most four);
    // tests set 1 to split even a small fixture, SIZE_MAX never splits. Results are the same
    // either way.
    size_t parallelFrom = 500'000;
    // Set: when open() reads every allocation record (a session without its stored index), it
    // builds the default track's level-of-detail grid (heatmapPreview's) as soon as the records
    // are in, before the index and the frames, and calls this once from the loading thread: the
    // GUI's first picture, seconds before open() returns. The engine keeps the grid. Only for
    // a default track of previewFrom allocations or more.
    std::function<void(std::shared_ptr<const HeatmapPreview>)> preview;
    int64_t previewFrom = kPreviewFromAllocations;
};

// One track's level-of-detail heatmap, handed out by open() before it returns
// (LoadOptions::preview): what Engine::heatmapPreview answers for the track, without the engine.
class HeatmapPreview
{
public:
    struct Grid; // engine_impl.h
    uint32_t device = 0;
    Level level = Level::Driver;
    int64_t allocations = 0, regions = 0;
    AddressLayout layout;
    int64_t timeBegin = 0, timeEnd = 0; // the session's
    Caveats caveats;
    std::shared_ptr<const Grid> grid; // the cells, shared with the engine
    // Engine::heatmapPreview(rq) for this track (rq's device and level are not looked at).
    HeatmapRaster raster(const HeatmapRequest& rq) const;
};

// How open() went (for tests, benchmarks and the GUI's status line).
struct LoadInfo
{
    bool frameCacheUsed = false;    // per-frame figures came from the session's analysis_cache
    bool frameCacheWritten = false; // ... or were computed and stored there
    bool indexCacheUsed = false;    // checkpoints and sorted streams came from analysis_cache
    bool indexCacheWritten = false; // ... or were built and stored there
    int64_t timelinesFromCache = 0; // whole-session timelines answered from analysis_cache
    // open() found every stored value valid and left the allocation records in the file: they
    // are read from the stored columns (rowsFromCache) by the first query that needs them.
    bool rowsDeferred = false;
    bool rowsFromCache = false;
    // Rows of the allocations table read into allocation records, over open() and every live
    // refresh (LiveEngine): a refresh reads only the new rows, a rule change reads none.
    int64_t allocationRowsRead = 0;
    int64_t liveRefreshes = 0; // LiveEngine::refresh calls that found the engine up to date...
    int64_t liveRebuilds = 0;  // ... and those that had to index the file again (see live.h)
    int64_t liveLookups = 0;   // point lookups of allocations that were live at a refresh
};

// A kernel launch as the kernel lane draws it.
struct KernelSpan
{
    int64_t start = 0;
    int64_t end = 0;
    std::string name;
    uint32_t stream = 0;
    int64_t graphId = 0;
};

struct GraphLaunchSpan
{
    int64_t start = 0;
    int64_t end = 0;
    int64_t graphId = 0;
};

class Engine
{
public:
    // Opens and indexes a session. Throws fs::SessionError (bad file: "FILE: problem") or
    // Cancelled.
    static std::shared_ptr<const Engine> open(const std::string& path, LoadOptions opts = {});
    ~Engine();
    Engine(const Engine&) = delete;
    Engine& operator=(const Engine&) = delete;

    const std::string& path() const;
    // An engine that a LiveEngine refreshes changes in place: code that queries it from another
    // thread than the refreshing one holds this lock (shared) around its calls; a refresh takes
    // it exclusively. An engine from open() never changes: no lock is needed.
    std::shared_lock<std::shared_mutex> readLock() const;
    // On an engine a LiveEngine refreshes, the references below stay valid only until its next
    // refresh: callers on other threads copy what they keep (the GUI's Scene does).
    const SessionSummary& summary() const;
    const Caveats& caveats() const; // session-wide caveats (every result copies them)
    LoadInfo loadInfo() const;
    int64_t timeBegin() const;
    int64_t timeEnd() const;
    std::vector<Track> tracks() const; // (device, level) pairs with data, device then level
    // The track views default to: the highest level that has regions on the device, else the
    // highest level with allocations.
    std::optional<Track> defaultTrack(uint32_t device = 0) const;
    std::vector<RegionInfo> regions(uint32_t device, Level level) const;

    // ---- state ----
    // Includes the event-size entropy over (t - LoadOptions::entropyWindowNs, t].
    State stateAt(uint32_t device, Level level, int64_t t) const;
    // Event-size entropy of the track's alloc and free events in (t - windowNs, t], counted
    // directly (the timeline keeps a sliding window instead; tests compare the two).
    double eventEntropyAt(uint32_t device, Level level, int64_t t, int64_t windowNs) const;
    // Same figures by replaying every event from the start (slow; tests compare the two).
    State stateAtFullReplay(uint32_t device, Level level, int64_t t) const;
    std::vector<Fragment> fragmentsAt(uint32_t device, Level level, int64_t t) const;
    // The pending frees waiting at t inside live regions (docs/analysis.md "Pending frees"):
    // in no fragment above; region by region in address order.
    std::vector<Fragment> pendingFreesAt(uint32_t device, Level level, int64_t t) const;
    // The state at t of each memory pool of the track (core/analysis/pools.cpp): one entry per
    // pool that has a region on the track, by pool id (the default pool 0 first). Summed over the
    // pools, reserved, allocated, free and the fragment count equal stateAt's.
    std::vector<PoolState> poolStatesAt(uint32_t device, Level level, int64_t t) const;
    // timeline(o) with the figures of one pool at each sample (poolStatesAt); the event-size
    // entropy stays the track's (a caveat says so).
    Timeline poolTimeline(const TimelineOptions& o, uint64_t pool) const;
    // poolTimeline of several pools of one track at once (each sample's state computed once).
    std::vector<Timeline> poolTimelines(const TimelineOptions& o,
                                        const std::vector<uint64_t>& pools) const;
    // The pools that have a region on the track, ascending (those poolStatesAt lists); reads
    // the regions only.
    std::vector<uint64_t> pools(uint32_t device, Level level) const;
    // fragmentsAt(device, level, t) of the regions of one pool only.
    std::vector<Fragment> poolFragmentsAt(uint32_t device, Level level, int64_t t,
                                          uint64_t pool) const;
    std::vector<AllocationInfo> liveAllocationsAt(uint32_t device, Level level, int64_t t) const;
    // Live allocation of the track covering address at t (hover tooltip), with tag and stack.
    std::optional<AllocationInfo> allocationAt(uint32_t device, Level level, int64_t t,
                                               uint64_t address) const;
    std::optional<AllocationInfo> allocation(int64_t id) const;
    // Fragment-cluster histogram over a window: every fragment alive at any sample of the window
    // (step samples, at least 2) is counted once per sample, so counts are fragment-samples.
    Histogram histogramOver(uint32_t device, Level level, int64_t from, int64_t to,
                            int samples = 64) const;

    // The track's summary over the whole session: peaks, mean and max F, smallest largest free
    // block, most fragments, each with its time, exact over every instant at which the track
    // changes; and each pool's when the track has more than one (summary.h, docs/analysis.md
    // "Summary"). report, compare, whatif and the GUI all print these.
    TrackSummary trackSummary(uint32_t device, Level level) const;

    // ---- time series ----
    Timeline timeline(const TimelineOptions& o) const;
    std::vector<Burst> bursts(uint32_t device, Level level, int64_t from = kNoTime,
                              int64_t to = kNoTime, int64_t gapNs = 5'000'000) const;
    // Their count and the largest, without the list (a report's figures).
    BurstSummary burstSummary(uint32_t device, Level level, int64_t gapNs = 5'000'000) const;
    // Trend of one timeline series ("fragmentation_ratio", "event_entropy", "fragment_entropy",
    // "largest_fragment", "fragment_count", "reserved", "allocated", "free") over [from, to],
    // x in hours from session begin (periods such as 0-48 h, 48-120 h).
    Trend trend(const Timeline& tl, const std::string& series, int64_t from, int64_t to) const;

    // ---- frames and collapses ----
    const std::vector<FrameInfo>& frames() const;
    const std::vector<CollapseRule>& rules() const;
    const std::vector<Collapse>& collapses() const;
    // Recomputes collapse runs with other rules (the GUI's rule editor); frames() keeps the
    // open() rules.
    std::vector<Collapse> collapsesWith(const std::vector<CollapseRule>& rules) const;
    // The open() rules that fire on most frames of the run: no collapse comes of them
    // (CommonRule); and the same split of other rules.
    const std::vector<CommonRule>& commonRules() const;
    RuleSplit splitRules(const std::vector<CollapseRule>& rules) const;
    // Report for the collapse containing frame f (nullopt when f is in none).
    std::optional<CollapseReport> collapseReport(int64_t frame) const;
    // Report for frame f as if it collapsed (precursors and diff of any frame).
    CollapseReport frameReport(int64_t frame) const;
    // The same under other collapse rules (the GUI's rule editor): the collapses and the
    // healthy baseline the ranking measures novelty against follow the rules, so the result
    // equals that of an engine opened with them (`--rules FILE`).
    std::optional<CollapseReport> collapseReport(int64_t frame,
                                                 const std::vector<CollapseRule>& rules) const;
    CollapseReport frameReport(int64_t frame, const std::vector<CollapseRule>& rules) const;
    // Report for collapse c, one of collapses() or collapsesWith(rules) (`report` asks for every
    // one without finding the collapses again for each).
    CollapseReport collapseReport(const Collapse& c, const std::vector<CollapseRule>& rules) const;
    std::vector<AddressJump> addressJumps(uint32_t device, Level level, int64_t frame) const;
    std::vector<KernelSummary> kernelsInFrame(int64_t frame) const;
    // Kernel launches and graph launches starting in [from, to], by start time (at most limit
    // kernels: the lane of a long window draws the first ones).
    std::vector<KernelSpan> kernelSpans(int64_t from, int64_t to, size_t limit = 100000) const;
    std::vector<GraphLaunchSpan> graphLaunches(int64_t from, int64_t to) const;
    // Names of the per-frame allocator metrics correlations use.
    static std::vector<std::string> frameAllocatorMetrics();
    // Per-frame allocator metric by name for one track (NaN where a frame lacks it).
    std::vector<double> frameSeries(uint32_t device, Level level, const std::string& metric) const;
    // Every allocator metric of the default track against every frame metric in the session,
    // with Benjamini-Hochberg q-values over these pairs (stats.h: adjustForMultipleTests).
    std::vector<Correlation> correlations() const;
    // One pair's frames with both values, for its scatter plot, and its least-squares line.
    CorrelationPoints correlationPoints(uint32_t device, Level level,
                                        const std::string& allocatorMetric,
                                        const std::string& frameMetric) const;
    // ---- CUDA graphs and pools (graphs.h; core/analysis/graphs.cpp) ----
    // Every graph, pool and replay of the session with the sharing candidates; their what-if
    // savings are the allocator model's (fs::alloc::graphsReport fills them in). replayDetail
    // false (a summary's counts): replays end with their launch records and carry no allocator
    // state (no pass over the graph kernels or the allocations).
    GraphsReport graphs(bool replayDetail = true) const;
    // ---- OOMs ----
    // Every OOM of the session, diagnosed (docs/analysis.md "OOM diagnosis"), in time order.
    std::vector<OomDiagnosis> ooms() const;
    // Those in [from, to].
    std::vector<OomDiagnosis> oomsBetween(int64_t from, int64_t to) const;
    AllocatorSettings allocatorSettings() const;
    Correlation correlation(uint32_t device, Level level, const std::string& allocatorMetric,
                            const std::string& frameMetric) const;

    // ---- rasters ----
    AddressLayout layout(uint32_t device, Level level) const;
    HeatmapRaster heatmap(const HeatmapRequest& r) const;
    // The same request answered from the track's level-of-detail grid (whole span x whole
    // compacted space at kLodTimeBins x kLodAddressBins cells, built once on first use):
    // O(pixels), whatever the blocks. Cells are exact averages over the grid's cells; a pixel
    // that cuts a grid cell assumes it uniform, so this is the quick first image that the
    // exact heatmap() then replaces (docs/analysis.md "Level of detail").
    HeatmapRaster heatmapPreview(const HeatmapRequest& r) const;
    // Whether heatmapPreview answers at once: the track's grid is built or stored. Building it
    // costs a pass over every block, more than one exact heatmap() of the whole span, so a
    // first open draws exactly and leaves the grid to later (Scene::warmUp). Never waits.
    bool previewReady(uint32_t device, Level level) const;
    // heatmap(r), kept in the session's analysis_cache (one raster per track: the last request
    // kept) and answered from there when the same request comes again for the same content:
    // `fragscope export heatmap` a second time reads no allocation record.
    HeatmapRaster heatmapKept(const HeatmapRequest& r) const;
    MemmapRaster memmap(const MemmapRequest& r) const;
    // Reads the allocation records now when open() deferred them (LoadInfo::rowsDeferred), so
    // that the first query that needs them does not wait (the GUI's loader calls it on its
    // worker after handing out the first picture); no-op otherwise. Throws SessionError when
    // the stored index went away since open (the file was changed by another program).
    void loadRows() const;
    // Whether the allocation records are in memory (always, unless open() deferred them and no
    // query or loadRows() has read them yet): a query that needs them then answers at once.
    bool rowsLoaded() const;
    // Stores the index open() built when LoadOptions::storeIndexAtOpen was false; no-op
    // otherwise or when done. Returns whether something was stored.
    bool storeIndex() const;

    struct Impl;

private:
    friend class LiveEngine;
    friend const Impl& engineImpl(const Engine& e); // the Explorer's access (explore_impl.h)
    Engine();
    std::unique_ptr<Impl> d_;
};

// Parses a TIME argument: plain integer ns (or the ordinal), a number with a unit (ns, us, ms,
// s, min, h: "12.5s", "300ms"), "end", "begin", or "frame:N" (end of frame N). Throws
// std::invalid_argument with a message naming the problem.
int64_t parseTime(const Engine& e, const std::string& text);

} // namespace fs::analysis
