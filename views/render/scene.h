// Scene: the whole, immutable data the views draw, built once per session by the loader on a
// worker thread (loadScene). Views and the CLI exporter read it; nobody runs SQL after loading.
#pragma once

#include "core/events.h"
#include "core/session.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fs::analysis {
class Engine;
}

namespace fs::render {

// One allocation interval. freeNs is the session end for allocations alive at the end.
struct AllocRec
{
    int64_t allocNs = 0;
    int64_t freeNs = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requested = 0;
    int64_t id = 0;
    int64_t regionId = 0; // 0: outside any region
    uint32_t stream = 0;
    StringId tag = kNoString;
    StackId stack =
        kNoStack; // Scene::stacks key; 0: no stack recorded (ids count from 1 per session)
    bool freed = false;
};
static_assert(sizeof(AllocRec) <= 72, "AllocRec is a hot record");

struct RegionRec
{
    int64_t createNs = 0;
    int64_t destroyNs = 0; // session end when never destroyed
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t id = 0;
    RegionKind kind = RegionKind::Segment;
};

// The compacted address axis: the union of region ranges, concatenated, each hole between them
// shrunk to a thin separator so the heatmap shows only memory that was ever reserved.
struct Span
{
    uint64_t address = 0;
    uint64_t size = 0;
    double y0 = 0; // start on the compacted axis (bytes, separators included)
};

// Allocator state sampled over time (one device and level).
struct StateSample
{
    int64_t t = 0;
    double reserved = 0;
    double allocated = 0;
    double freeInRegions = 0;
    double largestFragment = 0;
    double fragmentCount = 0;
    double fragRatio = 0;       // F = 1 - largest / total free
    double fragmentEntropy = 0; // bits, size classes 2^n KiB n=2..12
    double eventEntropy = 0;    // bits, sliding window of alloc/free events
};

struct LevelData
{
    uint32_t device = 0;
    Level level = Level::Driver;
    std::vector<RegionRec> regions; // sorted by createNs
    std::vector<AllocRec> allocs;   // sorted by allocNs
    int64_t maxAllocDuration = 0;   // bounds the backward search for allocations in a window
    std::vector<Span> spans;
    double compactSize = 0;           // total length of the compacted axis
    std::vector<StateSample> samples; // sorted by t
    std::string label() const;

    // Maps an address to the compacted axis; -1 when outside every span.
    double addressToY(uint64_t addr) const;
    // Inverse of addressToY; returns false on a separator.
    bool yToAddress(double y, uint64_t& addr) const;
    // Index of the span holding compacted coordinate y, or -1.
    int spanAtY(double y) const;
    // State at time t (the last sample at or before t).
    StateSample stateAt(int64_t t) const;
    // Index of the allocation covering (t, addr), or -1.
    int64_t allocAt(int64_t t, uint64_t addr) const;
};

struct FrameRow
{
    int64_t index = 0;
    int64_t start = 0;
    int64_t end = 0;
    bool collapsed = false;
    std::map<std::string, double> metrics;
    std::vector<StringId> kernelNames; // distinct kernel names that ran in the frame
};

// A collapse rule: metric compared to a threshold (DESIGN.md "Frames and coherence metrics").
struct CollapseRule
{
    std::string metric;
    bool below = true; // collapse when value < threshold; else when value > threshold
    double threshold = 0;
    bool enabled = true;
};
std::vector<CollapseRule> defaultCollapseRules();

struct Collapse
{
    int64_t firstFrame = 0;
    int64_t lastFrame = 0;
    std::string reason; // the first broken rule, e.g. "coherence_score 0.009 < 0.05"
};

struct Precursor
{
    int64_t time = 0;
    std::string kind; // the engine's names: region_created, oom, new_kernel_variant, ...
    std::string what; // human description
    double score = 0; // higher = stronger evidence (the engine's: 0..1, docs/analysis.md)
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t allocId = -1;    // -1 when the precursor is not an allocation
    int64_t count = 1;       // events folded into the row
    bool background = false; // happens in every healthy frame
    // Kernel-variant shifts: share of the family's calls running the variant, healthy frames
    // -> this frame (-1 when the row is not a shift), and the shift's fields as text lines.
    double shareBefore = -1;
    double shareAfter = -1;
    std::string detail{};  // shift fields and the score's factors, one per line (tooltip)
    std::string variant{}; // kernel-variant shifts: the kernel that ran more in the frame
};

// The engine's last precursor list (the inspector and the kernel lane ask for the same frame).
struct PrecursorCache
{
    std::mutex mutex;
    int64_t frame = std::numeric_limits<int64_t>::min();
    std::vector<Precursor> rows;
};

struct StateDiff
{
    StateSample before; // end of f-1
    StateSample after;  // end of f
};

struct KernelRec
{
    int64_t start = 0;
    int64_t end = 0;
    StringId name = kNoString;
    uint32_t stream = 0;
    int64_t graphId = 0;
};

struct GraphLaunchRec
{
    int64_t start = 0;
    int64_t end = 0;
    int64_t graphId = 0;
};

struct Scene
{
    std::string path;
    SessionSummary summary;
    std::vector<LevelData> levels; // one per (device, level) with allocations or regions
    std::vector<FrameRow> frames;  // sorted by index
    std::vector<std::string> metricNames;
    std::vector<CollapseRule> rules;
    std::vector<Collapse> collapses;
    std::vector<KernelRec> kernels; // sorted by start
    std::vector<GraphLaunchRec> graphLaunches;
    std::vector<std::pair<int64_t, uint64_t>> ooms; // time, requested bytes
    std::map<StringId, std::string> strings;
    std::map<int64_t, std::vector<std::string>> stacks; // stack id -> frames, outermost last
    // The analysis engine over the same file (when this build has fragscope_analysis): the
    // collapse inspector's precursors are the engine's.
    std::shared_ptr<const analysis::Engine> engine;
    std::shared_ptr<PrecursorCache> precursorCache = std::make_shared<PrecursorCache>();
    // Made by LiveScene from a file a recording is still writing: no engine, refreshed several
    // times a second.
    bool live = false;

    int64_t timeBegin() const { return summary.timeBegin; }
    int64_t timeEnd() const { return summary.timeEnd; }
    std::string str(StringId id) const;
    // The level the views show by default: the highest level that has allocations.
    int defaultLevel() const;
    const FrameRow* frame(int64_t index) const;
    // Frame holding time t, or nullptr.
    const FrameRow* frameAt(int64_t t) const;
    // Collapse that contains frame index, or nullptr.
    const Collapse* collapseOf(int64_t frameIndex) const;
    // Re-evaluates collapses after the rules change.
    void applyRules(const std::vector<CollapseRule>& r);
    // Ranked precursors (the engine's when present, else a local ranking) and the f-1 -> f state
    // diff for frame f at level li.
    std::vector<Precursor> precursors(int64_t frameIndex, int li, int lookbackFrames = 2) const;
    StateDiff stateDiff(int64_t frameIndex, int li) const;
};

// Free fragments alive at time t for one level: (address, size), sorted by address.
std::vector<std::pair<uint64_t, uint64_t>> fragmentsAt(const LevelData& ld, int64_t t);

struct LoadProgress
{
    std::function<void(int percent, const std::string& stage)> progress;
    // Called with the summary as soon as it is read (staged results).
    std::function<void(const SessionSummary&)> summary;
    const std::atomic<bool>* cancel = nullptr;
    // Collapse rules to evaluate (the user's saved rules); empty: DESIGN.md's defaults.
    std::vector<CollapseRule> rules;
};

// Thrown when LoadProgress::cancel becomes true.
struct LoadCancelled
{
};

// Reads and indexes a session. Throws SessionError for a bad file, LoadCancelled on cancel.
std::shared_ptr<const Scene> loadScene(const std::string& path, const LoadProgress& lp = {},
                                       int samples = 1200);

// Formatting shared by every view and the CLI.
std::string formatBytes(double bytes);
std::string formatTime(int64_t ns, TimeAxis axis);
std::string formatAddress(uint64_t a);

} // namespace fs::render
