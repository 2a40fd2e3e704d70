// The PyTorch snapshot importer's internals, shared by pytorch_snapshot.cpp (segments, trace,
// reconstruction, replay into ingest) and pytorch_snapshot_extras.cpp (expandable-segment
// reservations, annotations, allocator settings, allocation notes). Not a public interface: see
// importer.h (makePytorchSnapshotImporter) and docs/importers.md.
#pragma once

#include "importer.h"
#include "pickle_reader.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace fs::import::snapshot {

enum class Act : uint8_t {
    Alloc,
    FreeRequested,
    FreeCompleted,
    SegmentAlloc,
    SegmentFree,
    SegmentMap,
    SegmentUnmap,
    Oom,
    Snapshot,
    Annotate,
    Unknown,
};
inline constexpr std::array<std::string_view, 10> kActNames = {
    "alloc",        "free_requested", "free_completed", "segment_alloc",
    "segment_free", "segment_map",    "segment_unmap",  "oom",
    "snapshot",     "annotate",
};

// Device id of the pinned host memory (host_segments / host_traces): a device row of its own,
// named "host (pinned)", far above any CUDA ordinal.
inline constexpr uint32_t kHostDevice = 0xffff;

inline Act actOf(std::string_view s)
{
    for (size_t i = 0; i < kActNames.size(); ++i)
        if (s == kActNames[i]) return static_cast<Act>(i);
    if (s == "free") // older PyTorch: one free action
        return Act::FreeCompleted;
    return Act::Unknown;
}

// Keys of trace entries, blocks and frames: dicts with only these keys are stored compactly
// (PickleOptions::compactKeys), and decoding switches on the key's index in this list.
enum Key : int {
    kAction,
    kAddr,
    kSize,
    kStream,
    kTimeUs,
    kFrames,
    kDeviceFree,
    kCompileContext,
    kUserMetadata,
    kAddress,
    kRequestedSize,
    kState,
    kHistory,
    kName,
    kFilename,
    kLine,
    kRealSize,
    kPoolId,
    kStage,
    kFxNodeOp,
    kFxNodeName,
    kFxNodeTarget,
    kFxOriginalTrace,
};
inline const std::vector<std::string> kCompactKeys = {
    "action",
    "addr",
    "size",
    "stream",
    "time_us",
    "frames",
    "device_free",
    "compile_context",
    "user_metadata",
    "address",
    "requested_size",
    "state",
    "history",
    "name",
    "filename",
    "line",
    "real_size",
    "pool_id",
    "stage",
    "fx_node_op",
    "fx_node_name",
    "fx_node_target",
    "fx_original_trace",
};

struct Entry
{
    int64_t time = 0;
    PValue userMetadata, compileContext;
    uint64_t addr = 0;
    uint64_t size = 0;
    uint64_t extra =
        0; // alloc: requested size (known only for blocks alive at the end); oom: device_free
    PValue frames;
    PValue name, stage; // annotate entries
    uint64_t pool = 0;  // pool_id (a, b) as a << 32 | b (newer PyTorch), when hasPool
    uint32_t stream = 0;
    Act act = Act::Unknown;
    bool hasTime = false;
    bool hasPool = false;
};

struct SegInfo
{
    uint64_t size = 0;
    uint32_t stream = 0;
    uint64_t pool = 0;
    std::string type;
    bool expandable = false;
};

// A block freed by the program whose memory waits on other streams' work (free_requested without
// free_completed yet; state active_pending_free in the final segments). PyTorch counts it as free.
struct PendingInfo
{
    uint64_t size = 0;
    uint32_t stream = 0;
    int64_t since = 0;
    size_t entry = ~size_t{0}; // trace index of the free_requested
};

// One expandable segment's address reservation as reconstructed: the span of the mapped ranges
// it ever had, on one stream, with no other segment inside.
struct Cluster
{
    uint64_t lo = 0, hi = 0;
    uint32_t stream = 0;
    uint64_t pool = 0;
    std::string type;
};

struct AllocInfo
{
    uint64_t size = 0;
    uint64_t requested = 0;
    uint32_t stream = 0;
    PValue frames;
    PValue userMetadata, compileContext;
    bool fromFinal = false;
};

// Mapped pieces of expandable segments: address -> size, merged when adjacent.
using Ranges = std::map<uint64_t, uint64_t>;

inline void addRange(Ranges& r, uint64_t a, uint64_t s)
{
    if (s == 0) return;
    uint64_t lo = a, hi = a + s;
    auto it = r.lower_bound(a);
    if (it != r.begin() && std::prev(it)->first + std::prev(it)->second >= a) --it;
    while (it != r.end() && it->first <= hi) {
        lo = std::min(lo, it->first);
        hi = std::max(hi, it->first + it->second);
        it = r.erase(it);
    }
    r[lo] = hi - lo;
}

inline void removeRange(Ranges& r, uint64_t a, uint64_t s)
{
    const uint64_t end = a + s;
    auto it = r.lower_bound(a);
    if (it != r.begin()) --it;
    while (it != r.end() && it->first < end) {
        const uint64_t pa = it->first, pe = it->first + it->second;
        if (pe <= a) {
            ++it;
            continue;
        }
        it = r.erase(it);
        if (pa < a) r[pa] = a - pa;
        if (pe > end) r[end] = pe - end;
    }
}

struct DeviceState
{
    std::map<uint64_t, SegInfo> finalSegs;
    std::map<uint64_t, AllocInfo> finalAllocs;
    Ranges finalMapped;
    std::map<uint64_t, SegInfo> initSegs;
    std::map<uint64_t, AllocInfo> initAllocs;
    Ranges initMapped;
    std::map<uint64_t, PendingInfo> finalPending; // active_pending_free blocks, by address
    std::map<uint64_t, PendingInfo> initPending;  // ... and those pending at the trace's start
    std::unordered_set<size_t> completedFrees;    // free_completed entries that free a block
    // Expandable address ranges seen (final segments, segment_map/unmap) with their stream, and
    // the addresses of ordinary segments, to split expandable memory into reservations.
    std::vector<std::tuple<uint64_t, uint64_t, uint32_t>> expRanges;
    std::vector<uint64_t> fixedSegs;
    std::vector<Cluster> clusters;
    std::vector<PValue> trace; // the entry dicts, decoded on each pass (memory: 8 B per entry)
    // Block size, requested size and frames of the alloc entries whose block is alive at the
    // end (the final block is authoritative), by entry index.
    std::unordered_map<size_t, AllocInfo> finalInstance;
    int64_t inconsistent = 0;
    // The history's truncation (trace_alloc_overflowed / trace_alloc_max_entries): -1 unknown.
    int overflowed = -1;
    int64_t maxEntries = -1;
    Act freeAct = Act::FreeCompleted;
    bool hasCompleted = false, hasRequested = false;
};

// The model's source line of an FX frame's fx_original_trace (a Python traceback text whose last
// 'File "F", line N, in NAME' is the model code the node came from), as "NAME (F:N)"; the
// trace's last line when it has no such line.
std::string modelFrame(std::string_view trace);

class PytorchSnapshotImporter final : public Importer
{
public:
    PytorchSnapshotImporter(const std::string& path, ImportOptions opts)
        : Importer(path, std::move(opts))
    {
    }
    Format format() const override { return Format::PytorchSnapshot; }
    void prepare() override;
    void configure(IngestOptions& o) const override
    {
        o.sourceKind = "pytorch-snapshot";
        o.sourcePath = path_;
        o.timeAxis = ordinal_ ? TimeAxis::Ordinal : TimeAxis::Nanoseconds;
        o.aliveAtEndIsAnomaly = false;
        o.expectRegions = true;
        o.durable = false;     // a one-shot conversion: on failure the output is removed
        o.writerThread = true; // events are written while the next ones are decoded
        // Without "frame N" annotations, torch.profiler's ProfilerStep#N ranges are the steps.
        if (stepFrames_ && o.framePattern == IngestOptions{}.framePattern)
            o.framePattern = R"(^\s*(?:frame\s*[ =:]\s*|ProfilerStep#)(\d+)\s*$)";
    }
    void emit(Ingest& ingest) override;

private:
    [[noreturn]] void bad(const std::string& what) const
    {
        throw ImportError(path_, "snapshot structure: " + what);
    }
    uint64_t u64(PValue v, const char* what) const
    {
        uint64_t out = 0;
        if (!doc_->toU64(v, out))
            bad(fmt::format("'{}' should be a non-negative integer, found {}", what,
                            ptypeName(v.type())));
        return out;
    }
    uint32_t streamId(PValue v)
    {
        int64_t raw = 0;
        uint64_t uraw = 0;
        if (doc_->toI64(v, raw))
            uraw = static_cast<uint64_t>(raw);
        else if (!doc_->toU64(v, uraw))
            return 0;
        if (uraw == 0) return 0;
        auto [it, inserted] = streams_.emplace(uraw, static_cast<uint32_t>(streams_.size() + 1));
        return it->second;
    }
    void decodeSegments(PValue segs, bool host = false);
    void decodeHistorySettings(PValue root, PValue settings);
    std::string historyMeta(const std::map<uint32_t, std::vector<uint64_t>>& ghosts,
                            const std::map<uint32_t, int64_t>& ghostAt) const;
    void decodeTrace(uint32_t device, PValue list);
    Entry decode(PValue ev, uint32_t device);
    void reconstruct(uint32_t device, DeviceState& d);
    StackId stackOf(PValue frames, Ingest& ing);
    // A frame's text, and for an FX frame (fx_original_trace) the model's source line that
    // precedes it in the stack (kNoString when none).
    std::pair<StringId, StringId> frameString(PValue frame, Ingest& ing);

    std::unique_ptr<PickleDoc> doc_;
    void findClusters(DeviceState& d, uint32_t device);
    void emitAnnotations(Ingest& ing);
    void decodeAnnotations(PValue list);
    // JSON text of a plain value. budget bounds the values visited, so that a hostile pickle
    // whose containers refer to themselves (memo) cannot make it explode; past it, "null".
    std::string toJson(PValue v) const;
    std::string toJson(PValue v, int depth, int64_t& budget) const;
    StringId noteString(PValue v, Ingest& ing);

    std::map<uint32_t, DeviceState> devices_;
    std::map<std::pair<uint32_t, uint64_t>, SegInfo> expInfo_; // final expandable segments
    struct Annotation
    {
        int64_t time = 0;
        uint32_t device = 0;
        bool start = true;
        std::string name;
    };
    std::vector<Annotation> annotations_;
    std::string allocatorSettings_;
    int64_t badAnnotations_ = 0;
    std::unordered_map<uint64_t, StringId> noteCache_;
    std::map<uint64_t, uint32_t> streams_;
    std::array<int64_t, kActNames.size() + 1> actCounts_{};
    std::map<std::string, int64_t> unknownActs_;
    bool ordinal_ = false;
    bool anyTime_ = false;
    bool derivedAddresses_ = false;
    int64_t nonMonotonic_ = 0;
    int64_t untiledSegments_ = 0;
    struct ActSlot
    {
        PValue key;
        Act act = Act::Unknown;
        bool valid = false;
    };
    std::array<ActSlot, 16> actCache_{};
    std::unordered_map<uint64_t, std::pair<StringId, StringId>> frameCache_;
    bool stepFrames_ = false; // ProfilerStep#N ranges are the frames (no "frame N" ranges)
    std::unordered_map<std::string, StackId> stackCache_;
    std::string stackKey_;
};

} // namespace fs::import::snapshot
