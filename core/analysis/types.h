// Plain value types the analysis engine returns (fs::analysis). Every result is a whole,
// immutable value: views and the CLI copy or keep them; nothing here refers back to SQLite.
// Definitions and how they are computed: docs/analysis.md.
#pragma once

#include "core/events.h"

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace fs::analysis {

// Bumped whenever a result's definition or computation changes: cached results carry it and are
// rebuilt when it differs.
constexpr int kEngineVersion = 5;

constexpr int64_t kAlive = std::numeric_limits<int64_t>::max(); // free time of a never-freed block

// What a result computed over this session must be read with (docs/analysis.md, "Caveats").
struct Caveats
{
    bool synthetic = false;     // simulated data, not a measurement
    int64_t droppedRecords = 0; // capture lost records: figures are lower bounds
    int64_t anomalies = 0;      // ingest repaired inconsistent input (see anomalies table)
    bool endedAbruptly = false; // the writer died: data stops at the last commit
    bool ordinalTime = false;   // the time axis is an event ordinal, not nanoseconds
    bool noAddresses = false;   // the source has no addresses: no address-space figures
    std::vector<std::string>
        notes; // one human sentence per caveat above, plus result-specific ones
    bool any() const { return !notes.empty(); }
};

// One histogram bin [lo, hi) in bytes; hi == 0 means unbounded above.
struct HistogramBin
{
    uint64_t lo = 0;
    uint64_t hi = 0;
    int64_t count = 0;
    uint64_t bytes = 0;
};

// Fragment-cluster histogram: log2 bins ([2^k, 2^(k+1)) for every k that holds a fragment, in
// ascending order) and the cluster ranges 8-32 KiB, 64-128 KiB, >= 256 KiB (inclusive
// ranges, as docs/analysis.md states them: [8 KiB, 32 KiB], [64 KiB, 128 KiB], [256 KiB, inf)).
struct Histogram
{
    std::vector<HistogramBin> log2;
    std::vector<HistogramBin> clusters;
};

// Allocator state of one (device, level) at one instant: after every event with time <= t.
struct State
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t time = 0;
    int regionCount = 0;                // regions hosting this level alive at t
    int64_t liveAllocations = 0;        // live allocations of this level (inside regions or not)
    uint64_t reservedBytes = 0;         // sum of the sizes of the live regions
    uint64_t allocatedBytes = 0;        // live allocations of this level inside those regions
    uint64_t allocatedOutsideBytes = 0; // live allocations of this level outside any region
    // reserved - allocated - pendingFreeBytes (inside regions): what the allocator can hand out
    uint64_t freeBytes = 0;
    int64_t fragmentCount = 0;
    uint64_t largestFreeFragmentBytes = 0;
    double fragmentationRatio = 0;  // 1 - largest / free, 0 when nothing is free
    double fragmentEntropyBits = 0; // entropy of the fragments' size classes
    // Event-size entropy of the alloc/free events in (time - window, time], the engine's entropy
    // window (LoadOptions::entropyWindowNs): the value the timeline plots at this instant.
    double eventSizeEntropyBits = 0;
    int64_t entropyWindowNs = 0;
    Histogram histogram;
    // Pending frees (docs/analysis.md "Pending frees"): blocks the program freed that another
    // stream still uses (PyTorch's active_pending_free), inside regions. Neither allocated nor
    // free: in no fragment, nor in freeBytes, the largest fragment or F.
    int64_t pendingFreeBlocks = 0;
    uint64_t pendingFreeBytes = 0;
    // The same figures once every pending free completes (pending counted as free: PyTorch
    // memory_viz's free and F); equal to freeBytes, largestFreeFragmentBytes and
    // fragmentationRatio when nothing is pending.
    uint64_t largestFreeOncePendingCompleteBytes = 0;
    double fragmentationRatioOncePendingComplete = 0;
    uint64_t freeIncludingPendingBytes() const { return freeBytes + pendingFreeBytes; }
};

// One free fragment (for the memory map, tooltips and tests).
struct Fragment
{
    int64_t regionId = 0;
    uint64_t address = 0;
    uint64_t size = 0;
};

// One allocation as the views show it (hover tooltip, selection).
struct AllocationInfo
{
    int64_t id = 0; // allocations.id
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t regionId = -1; // -1: outside any region
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requestedSize = 0; // 0 when unknown
    uint32_t stream = 0;
    int64_t allocNs = 0;
    int64_t freeNs = kAlive;        // kAlive: never freed in the session
    std::string tag;                // name given by the source (may be empty)
    std::vector<std::string> stack; // outermost last; empty when unknown
    std::string userMetadata;       // PyTorch snapshots: user_metadata of the allocation
    std::string compileContext;     // PyTorch snapshots: compile_context (torch.compile)
};

struct RegionInfo
{
    int64_t id = 0;
    uint32_t device = 0;
    Level level = Level::Framework; // level of the allocations it hosts
    RegionKind kind = RegionKind::Segment;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t createNs = 0;
    int64_t destroyNs = kAlive;
};

// A (device, level) pair that holds regions or allocations.
struct Track
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t allocations = 0;
    int64_t regions = 0;
};

// One memory pool of a (device, level) track at one instant (docs/analysis.md, "Pools"):
// PyTorch's private pools (segment_pool_id, e.g. CUDA-graph pools) apart from the default pool 0.
// state covers the pool's regions only: regionCount, liveAllocations, reserved, allocated, free
// fragments, F, fragment entropy and histogram; allocations outside any region count in pool 0;
// the event-size entropy is a figure of the whole track and stays 0 here.
struct PoolState
{
    uint64_t pool = 0; // regions.pool_id; PyTorch's (a, b) is a << 32 | b
    State state;
};
// "default" for 0; "(a, b)" for a PyTorch pool id; "0x..." for a pool-level (CUDA mempool) id.
std::string poolLabel(uint64_t pool, Level level);
// Reads "default", "a,b", "(a, b)", a decimal or a 0x-hex id; false when it is none of these.
bool parsePoolId(std::string_view text, uint64_t& pool);

// ---- timelines -------------------------------------------------------------------------------

struct TimelineOptions
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t from = kNoTime;                    // kNoTime: session begin
    int64_t to = kNoTime;                      // kNoTime: session end
    int64_t step = 0;                          // sample spacing; 0: (to - from) / 1000
    int64_t entropyWindowNs = 300'000'000'000; // event-size entropy window (default 300 s)
};

// Samples at time[i] (state after every event <= time[i]); all series have time.size() entries.
struct Timeline
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t step = 0;
    int64_t entropyWindowNs = 0;
    std::vector<int64_t> time;
    std::vector<double> reserved;         // bytes
    std::vector<double> allocated;        // bytes inside regions
    std::vector<double> allocatedOutside; // bytes of live blocks outside any region
    std::vector<double> freeInRegions;    // bytes
    std::vector<double> fragmentCount;
    std::vector<double> largestFragment;    // bytes
    std::vector<double> fragmentationRatio; // F
    std::vector<double> eventEntropy;       // bits, over (t - window, t]
    std::vector<double> fragmentEntropy;    // bits
    int64_t eventsReplayed = 0;
    Caveats caveats;
};

// A run of allocations whose gaps are under the burst gap (default 5 ms).
struct Burst
{
    int64_t begin = 0; // first allocation's time
    int64_t end = 0;   // last allocation's time
    int64_t allocations = 0;
    uint64_t bytes = 0;
};

// What a report says about a track's bursts.
struct BurstSummary
{
    int64_t bursts = 0;             // bursts of more than one allocation
    int64_t largestAllocations = 0; // allocations in the largest of them (0: none)
};

// Least-squares line y = slope * x + intercept.
struct Trend
{
    int64_t n = 0;
    double slope = 0;
    double intercept = 0;
    double r2 = 0; // 0 when y is constant or n < 2
};

struct Correlation
{
    std::string allocatorMetric;
    std::string frameMetric;
    int64_t n = 0;       // steps with both values; never show a coefficient without it
    double pearson = 0;  // of the values themselves, lag 0: what the scatter plot draws
    double spearman = 0; // ... of their ranks
    // The test (correlate(), docs/analysis.md "Correlations"; correlationTestName names it):
    // the changes from step to step, at the lag and by the coefficient with the smallest p.
    int maxLag = 1;              // the largest lag tested
    int lag = 0;                 // steps by which the first series leads the second
    bool changeSpearman = false; // the coefficient of the changes: Spearman, else Pearson
    double changeR = 0;          // ... its value at that lag
    double nEff = 0;             // Bartlett's effective number of independent changes there
    double p = 1; // two-sided, Bonferroni over lags and coefficients; NaN: too few changes
    // Benjamini-Hochberg q over every pair tested in the same report (adjustForMultipleTests);
    // p until adjusted. Only q < kSignificanceLevel is significant.
    double q = 1;
};

// The frames behind one correlation (Engine::correlationPoints): what its scatter plot draws.
struct CorrelationPoints
{
    Correlation stats;           // the pair's coefficients (q stays 1: it needs the other pairs)
    std::vector<int64_t> frames; // frame index of each point, in frame order
    bool xInBytes = false;       // the allocator figure counts bytes (else a count or ratio)
    std::vector<double> x;       // the allocator figure (frames where either is NaN left out)
    std::vector<double> y;       // the frame metric
    Trend line;                  // least-squares y = slope * x + intercept over the points
};

// The false-discovery rate under which a correlation is called significant (q < 0.05).
constexpr double kSignificanceLevel = 0.05;

// ---- frames and collapses --------------------------------------------------------------------

// Allocator figures of one frame for one (device, level): the value at frame end plus the
// extremes inside the frame.
struct FrameAllocator
{
    uint32_t device = 0;
    Level level = Level::Framework;
    State atEnd; // histogram left empty (ask stateAt for it)
    uint64_t minLargestFragment = 0;
    uint64_t maxLargestFragment = 0;
    double minRatio = 0;
    double maxRatio = 0;
    int64_t minFragmentCount = 0;
    int64_t maxFragmentCount = 0;
    int64_t allocs = 0; // alloc events in the frame
    int64_t frees = 0;
    uint64_t allocBytes = 0;
};

struct FrameInfo
{
    int64_t index = 0;
    int64_t start = 0;
    int64_t end = 0;
    std::map<std::string, double> metrics; // frame_metrics by name
    std::vector<FrameAllocator> allocator; // one per track
    int64_t kernels = 0;
    int64_t distinctKernels = 0;
    int64_t newKernelVariants = 0; // names never seen in a previous frame
    int collapse = -1;             // index into collapses(), -1 when none
    bool breaksRule = false;
};

enum class Compare : uint8_t { Less, Greater };

struct CollapseRule
{
    std::string metric;
    Compare compare = Compare::Less;
    double threshold = 0;
    bool broken(double v) const { return compare == Compare::Less ? v < threshold : v > threshold; }
    std::string describe() const; // "coherence_score < 0.05"
    bool operator==(const CollapseRule&) const = default;
};

// True when frame metrics break at least one of the rules.
bool breaksAnyRule(const std::map<std::string, double>& metrics,
                   const std::vector<CollapseRule>& rules);

// Defaults: coherence_score < 0.05, id_match_rate < 0.65, clip_entropy_bits > 2.95 (scores
// and bits, the same at every resolution), warp_error_z > 6 (the video metrics' break, relative
// to the run). No fixed-pixel video rule: `flow_l2_px > 8.7` means something else at every
// resolution and camera motion (a user may still set it).
std::vector<CollapseRule> defaultCollapseRules();

// A rule on a video metric (`metrics compute`: flow, warp error, flicker, SSIM and their z)
// that fires on most of the frames that carry its metric describes the video, not a break in
// it (a moving camera's flow): it makes no collapse and does not make frames unhealthy
// (docs/analysis.md "a rule that fires on most frames is not a break"). Only runs of
// kCommonRuleMinFrames or more frames with the metric are judged so. Scores the generating
// script or the simulator reports (coherence_score, ...) keep their rules: a model's score
// under its threshold from frame 17 on is the long collapse the user looks for.
constexpr int64_t kCommonRuleMinFrames = 10;
struct CommonRule
{
    CollapseRule rule;
    int64_t fires = 0;            // frames that break it
    int64_t frames = 0;           // frames that carry its metric
    std::string describe() const; // "flow_l2_px > 8.7: not a break: fires on 39 of 48 frames"
    // describe() and why: the one sentence report, collapse and the GUI print.
    std::string explain() const;
    bool operator==(const CommonRule&) const = default;
};
struct RuleSplit
{
    std::vector<CollapseRule> active; // the rules that can make collapses, in their order
    std::vector<CommonRule> common;   // those that fire on more than half the frames
};
RuleSplit splitCommonRules(const std::vector<CollapseRule>& rules,
                           const std::vector<FrameInfo>& frames);
bool isVideoMetric(const std::string& metric); // one of videoMetricNames()

// A run of consecutive rule-breaking frames (the first starts the collapse).
struct Collapse
{
    int64_t firstFrame = 0;
    int64_t lastFrame = 0;
    std::vector<std::string> brokenRules; // rules broken at the first frame, with values
};

enum class PrecursorKind : uint8_t {
    Oom,                // an allocation failed
    NewKernelVariant,   // a kernel name runs in frame f but in none of the previous frames (kept
                        // for old results; the ranking reports KernelVariantShift instead)
    RegionCreated,      // a new segment / pool reservation
    RegionReleased,     // a segment released (a pool trim when its level is pool)
    SplitLargest,       // an allocation placed inside the largest fragment, shrinking it
    AddressJump,        // same-role allocation moved between f-1 and f
    GraphLaunch,        // a graph launch that overlapped other precursors
    KernelVariantShift, // a kernel family ran another variant in f than in the healthy frames
    PendingFree,        // freed blocks held back while another stream still used them
    ExternalMemory, // device memory outside the allocator (driver-level regions it does not own)
    GraphChange,    // kernels that ran in a captured graph ran outside it (eager, re-captured)
};
const char* precursorKindName(PrecursorKind k);

// How the allocation request just before a shifted kernel differed from the one before the
// family's usual variant (docs/analysis.md "Kernel-variant shifts").
enum class RequestChange : uint8_t {
    None,   // no allocation before it differed
    Failed, // an out-of-memory event between the previous launch and this one
    Shrank, // the largest request there was smaller than before the usual variant
    Moved,  // same size, but it landed in another region or at another address
};
const char* requestChangeName(RequestChange c);

struct PrecedingAllocation
{
    RequestChange change = RequestChange::None;
    int64_t allocationId = -1; // the largest request before the shifted call (-1: none)
    int64_t time = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t usualSize = 0; // the largest request before the usual variant's last call
    uint64_t usualAddress = 0;
    int regionsReleased = 0; // cached segments the allocator released in the same gap
    uint64_t oomRequested = 0;
    std::string description; // empty when change is None
};

// One kernel-variant shift: the families (same graph node, else same position in the stream's
// launch sequence, else same name stem) whose calls moved to `variant`, summed over them.
struct KernelShift
{
    std::string basis;      // "graph_node", "launch_position" or "name_stem"
    std::string family;     // "graph node 2", "8 graph nodes (2, 9, 16, ...)", ...
    int families = 1;       // families folded into this row
    std::string variant;    // the kernel that ran more in f
    std::string usual;      // the family's most frequent variant in the healthy frames ("" if none)
    int64_t callsAfter = 0; // calls of variant in f, in these families
    int64_t totalAfter = 0; // all calls of these families in f
    int64_t callsBefore = 0; // the same over the healthy baseline frames
    int64_t totalBefore = 0;
    double shareBefore = 0;   // callsBefore / totalBefore (0 when the families never ran)
    double shareAfter = 0;    // callsAfter / totalAfter
    double shareAfterLow = 0; // 95 % Wilson lower bound of shareAfter
    int64_t firstFrame = -1;  // first frame in which the variant ran at all
    PrecedingAllocation preceding;
    // How far that request departs downwards from the requests before the same families in the
    // healthy frames (robust z on log2 bytes) and what the healthy frames reach among themselves.
    double requestZ = 0;
    double requestThreshold = 0;
};

// What a row is to the verdict (docs/analysis.md "Verdict"): a change in the frame's
// computation or timing (an OOM, a kernel fallback, a graph no longer replayed, a cache flush), a
// memory condition that explains such a change (pending frees, memory outside the allocator),
// another allocator condition (new segments, splits, moved blocks), or context (graph launches
// that overlapped other rows).
enum class PrecursorRole : uint8_t { Effect, Explanation, Condition, Context };
const char* precursorRoleName(PrecursorRole r);

// A precursor's evidence (docs/analysis.md "Ranking"): the per-frame figure it is measured by,
// in its frame against the same figure in the healthy baseline frames, as a robust z, and the
// score that ranks it: score = closeness x m / (1 + m), m = z / threshold.
struct Evidence
{
    double closeness = 0;     // 1 inside the collapsed frame, 1 / (1 + frames before its onset)
    double novelty = 0;       // 1 - seenInHealthy / healthyFrames (1 when there is no baseline)
    double largestEffect = 0; // relative drop of the largest free block it caused, 0..1
    uint64_t largestDropBytes = 0; // ... in bytes
    double fragmentationJump = 0;  // F after the event minus F before it
    double kernelEffect = 0;       // share of a family's calls that changed variant, 0..1
    int64_t seenInHealthy = 0;     // healthy baseline frames in which the same thing happened
    int64_t healthyFrames = 0;
    std::string feature;      // the per-frame figure ("oom_events", "pending_free_peak_bytes", ...)
    int64_t frame = -1;       // the frame the row's event fell in (-1: none)
    double value = 0;         // the figure in that frame
    double healthyMedian = 0; // ... its median over the healthy frames
    double healthyScale = 0;  // ... and their spread (1.4826 MAD, else 1.2533 mean deviation)
    double z = 0;             // (value - median) / scale; inf when the healthy frames never varied
    double threshold = 0;     // max(3.5, the largest z a healthy frame reaches against the others)
    // The largest healthy value whose own departure was infinite (the other healthy frames never
    // varied): the figure must exceed it too; -inf when there is none.
    double floor = 0;
    bool standsOut = false; // z > threshold and value > floor
    // Memory outside the allocator: the device would have had room for a failed request without
    // it (a counterfactual on the recorded figures; explains that failure even when not
    // standing out).
    bool explainsFailure = false;
    // Kernel and graph changes: an allocator event preceded it (a failed or much smaller request,
    // a moved input); without one the change is not evidence for an allocator cause.
    bool allocatorLinked = true;
    // Base rate (docs/analysis.md "Verdict"): of the run's healthy frames (runHealthyFrames),
    // how many had the same figure at least as far from normal as this row (runDeparted), and
    // their share. A row that stands out but whose base rate is above kMaxBaseRate (stats.h) is
    // common: shown as such, never enough by itself for an allocator-related verdict.
    int64_t runHealthyFrames = 0;
    int64_t runDeparted = 0;
    double baseRate = 0;
    bool common = false;
};

// Score from closeness, z and threshold (docs/analysis.md "Ranking").
double evidenceScore(const Evidence& e);
// 95 % Wilson score interval lower bound of k successes in n trials (0 when n == 0).
double wilsonLower(int64_t k, int64_t n);
// The family stem of a kernel name: the function name without template arguments, parameters
// or namespace, cut to its first two '_'-separated words, lower case ("flash_attn_fwd_kernel"
// -> "flash_attn").
std::string kernelNameStem(const std::string& name);

struct Precursor
{
    PrecursorKind kind = PrecursorKind::Oom;
    PrecursorRole role = PrecursorRole::Condition;
    std::string mechanism; // what it is evidence for ("kernel_fallback", ...; see mechanismText)
    int64_t time = 0;
    uint32_t device = 0;
    Level level = Level::Framework;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t allocationId = -1; // when the precursor is an allocation
    double score = 0;          // evidence, 0..1 (docs/analysis.md "Ranking")
    std::string description;
    int64_t count = 1;       // events folded into this row (same signature in the window)
    bool background = false; // happened in every healthy baseline frame
    Evidence evidence{};
    std::optional<KernelShift> shift{}; // set for KernelVariantShift
};

struct StateDiff
{
    uint32_t device = 0;
    Level level = Level::Framework;
    State before; // end of frame f-1 (or start of f when f has no predecessor)
    State after;  // end of frame f
};

struct AddressJump
{
    int64_t frame = 0;
    std::string role; // "tag:NAME" or "size:BYTES#ORDINAL"
    int64_t previousId = 0;
    int64_t currentId = 0;
    uint64_t previousAddress = 0;
    uint64_t currentAddress = 0;
    uint64_t size = 0;
    uint64_t distance = 0; // |addr(f) - addr(f-1)|
};

struct KernelSummary
{
    std::string name;
    int64_t count = 0;
    int64_t totalNs = 0;
    bool newInFrame = false; // ran in none of the previous frames
};

// The verdict on a collapse (docs/analysis.md "Verdict"): allocator-related when at least one
// precursor stands out against the healthy frames, with the mechanism the first of them names.
struct Verdict
{
    bool allocatorRelated = false;
    std::string mechanism;        // "" when not allocator-related
    std::string headline;         // the sentence views show first
    std::vector<size_t> evidence; // indices into CollapseReport::precursors, ranked
    int64_t healthyFrames = 0;    // frames the departures were measured against
};
// One sentence for a mechanism name ("kernel fallback after failed workspace allocation").
std::string mechanismText(const std::string& mechanism);

struct CollapseReport
{
    Collapse collapse;
    int64_t frame = 0;                 // the frame asked about (inside the collapse)
    int64_t windowBegin = 0;           // start(first frame) - lookback
    int64_t windowEnd = 0;             // end(first frame)
    std::vector<Precursor> precursors; // ranked, highest score first
    std::vector<StateDiff> diff;       // one per track
    std::vector<KernelSummary> newKernels;
    std::vector<int64_t> baselineFrames; // healthy frames the novelty is measured against
    Verdict verdict;
    Caveats caveats;
};

// ---- rasters ---------------------------------------------------------------------------------

// The compacted address space of one track: the union of its regions' ranges, in address order,
// laid end to end with a separator between neighbours that are not contiguous.
struct AddressLayout
{
    struct Range
    {
        uint64_t addrBegin = 0;
        uint64_t addrEnd = 0;      // exclusive
        uint64_t compactBegin = 0; // where addrBegin lands in compacted space
    };
    std::vector<Range> ranges;
    std::vector<std::pair<uint64_t, uint64_t>> separators; // [begin, end) in compacted space
    uint64_t compactSize = 0;
    uint64_t separatorBytes = 0; // width of each separator in compacted units
    // Address -> compacted position; false when the address is in no range.
    bool toCompact(uint64_t addr, uint64_t& out) const;
    // Compacted position -> address; false inside a separator or past the end.
    bool toAddress(uint64_t compact, uint64_t& out) const;
};

enum class CellState : uint8_t {
    Outside = 0,   // no region at this time and address
    Free = 1,      // inside a region, no live allocation
    Allocated = 2, // at least part covered by a live allocation (and no more by pending frees)
    Separator = 3, // the gap drawn between two non-contiguous regions
    Pending = 4,   // inside a region, more of it waits on pending frees than is allocated
};

struct HeatmapRequest
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t t0 = kNoTime; // kNoTime: session begin
    int64_t t1 = kNoTime; // kNoTime: session end (exclusive)
    uint64_t y0 = 0;      // compacted address range [y0, y1); y1 == 0: the whole layout
    uint64_t y1 = 0;
    int width = 1920;
    int height = 1080;
};

// Cell (x, y) is at index y * width + x; column x spans time [t0 + x*dt, t0 + (x+1)*dt), row y
// spans compacted addresses [y0 + y*dy, y0 + (y+1)*dy): row 0 is the LOWEST address (renderers
// flip it to draw high addresses at the top).
struct HeatmapRaster
{
    int width = 0;
    int height = 0;
    int64_t t0 = 0;
    int64_t t1 = 0;
    uint64_t y0 = 0;
    uint64_t y1 = 0;
    std::vector<float> occupancy;        // allocated byte-time / cell byte-time, 0..1
    std::vector<float> reservedFraction; // region byte-time / cell byte-time, 0..1
    std::vector<CellState> state;
    AddressLayout layout;
    int64_t allocationsInView = 0;
    Caveats caveats;
};

struct MemmapRequest
{
    uint32_t device = 0;
    Level level = Level::Framework;
    int64_t time = kNoTime; // kNoTime: session end
    int order = 8;          // grid side 2^order cells
};

// The track's compacted address space at one instant laid along a Hilbert curve: curve position
// d covers compacted bytes [d * bytesPerCell, (d + 1) * bytesPerCell); hilbertXY gives its cell.
struct MemmapRaster
{
    int side = 0;
    int64_t time = 0;
    uint64_t bytesPerCell = 0;
    std::vector<float> occupancy; // index y * side + x
    std::vector<CellState> state;
    AddressLayout layout;
    Caveats caveats;
};

// ---- OOM diagnosis ---------------------------------------------------------------------------

// The allocator settings a session recorded (meta allocator_settings), as far as the OOM advice
// needs them. "Known" is false when the session does not say.
struct AllocatorSettings
{
    bool expandableKnown = false;
    bool expandableSegments = false;
    bool maxSplitKnown = false;
    uint64_t maxSplitBytes = 0; // 0 with maxSplitKnown: unlimited
    std::string text;           // the recorded JSON text, empty when none
};
AllocatorSettings parseAllocatorSettings(const std::string& json);

// One OOM and why it happened (docs/analysis.md "OOM diagnosis"). Figures are at the OOM's time,
// over the device's allocator track of the OOM's level.
struct OomDiagnosis
{
    int64_t time = 0;
    uint32_t device = 0;
    Level level = Level::Framework;
    uint32_t stream = 0;
    uint64_t requestedBytes = 0;
    bool deviceFreeKnown = false;
    uint64_t deviceFreeBytes = 0; // as recorded with the OOM
    uint64_t reservedBytes = 0;
    uint64_t allocatedBytes = 0;
    // Free bytes cached in the request's pool (the default pool) and stream, and the largest
    // free block there.
    uint64_t poolStreamFreeBytes = 0;
    uint64_t poolStreamLargestFreeBytes = 0;
    uint64_t cachedFreeBytes = 0;     // reserved - allocated - pending, every pool and stream
    int64_t pendingFreeFits = 0;      // pending-free blocks of the pool and stream >= the request
    uint64_t pendingFreeFitBytes = 0; // ... their bytes
    uint64_t capacityBytes = 0;       // device memory, 0 when unknown
    uint64_t externalBytes = 0;       // capacity - device free - reserved (0 when capacity unknown)
    // The smallest free block (ties: lowest address) of another stream or pool that would have
    // fitted the request: PyTorch looks only in the request's pool and stream (get_free_block).
    // elsewhereFitBytes 0: none.
    uint64_t elsewhereFitBytes = 0;
    uint64_t elsewhereFitAddress = 0;
    uint32_t elsewhereFitStream = 0;
    uint64_t elsewhereFitPool = 0; // 0: the default pool
    std::string cause;             // capacity | fragmentation | pending_free | external
    std::string reason;            // the rule that decided, with the figures
    std::string suggestion;        // what to change, given the recorded settings
};

// Hilbert curve position d (0 <= d < side*side) -> cell (x, y) for a side that is a power of 2.
void hilbertXY(int side, uint64_t d, int& x, int& y);
uint64_t hilbertD(int side, int x, int y);

} // namespace fs::analysis
