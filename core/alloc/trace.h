// A session's framework-level request stream, as the what-if replay needs it (docs/whatif.md
// "What is replayed"): every allocation's requested size, stream, pool and order, every free,
// the empty_cache() calls the trace implies, and what only the recording can tell (the address
// each segment got, usable memory from OOMs, the recorded allocator settings).
#pragma once

#include "config.h"

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fs {
class Session;
}

namespace fs::alloc {

// A request that failed in the recording (an OOM entry) has no allocation: its index is this.
constexpr uint32_t kFailedRequest = UINT32_MAX;
// A recorded segment event during no request (DeviceTrace::requests index).
constexpr uint32_t kNoRequest = UINT32_MAX;

struct Request
{
    // Free: the program freed the block (PyTorch's free_requested). FreeCompleted: a free that
    // waited on stream events (record_stream) completed: the block goes back to its pool then.
    enum Kind : uint8_t { Alloc, Free, EmptyCache, FreeCompleted };
    // Alloc: the recording released segments right before this request's cudaMalloc, with no
    // other request between: its own free-and-retry or garbage collection, or an empty_cache()
    // just before it; the replay tells them apart (docs/whatif.md "What is replayed").
    static constexpr uint8_t kReleasedFirst = 1;
    int64_t time = 0;
    uint64_t size = 0;  // Alloc: requested bytes
    uint32_t index = 0; // Alloc/Free: index into DeviceTrace::allocs
    uint32_t stream = 0;
    int32_t pool = 0;
    Kind kind = Alloc;
    uint8_t flags = 0;
};
static_assert(sizeof(Request) <= 32, "requests are replayed by the million: keep them small");

struct RecordedAlloc
{
    uint64_t address = 0;
    uint64_t size = 0;      // block size as recorded
    uint64_t requested = 0; // what the replay asks for
    int64_t allocNs = 0;
    int64_t freeNs = 0; // kAliveNs when alive at the end
    // When the free waited on stream events (a pending_frees row): when it completed, kAliveNs
    // while still pending at the end; kNoWait: the block went back to its pool at freeNs.
    int64_t freeCompletedNs = INT64_MIN;
    uint32_t stream = 0;
    uint32_t tag = 0; // string id in the source session
    // Carried into a kept replay as they are (ids in the source session; 0: none).
    uint32_t stack = 0;
    uint32_t userMetadata = 0;
    uint32_t compileContext = 0;
};
constexpr int64_t kAliveNs = INT64_MAX;
constexpr int64_t kNoWait = INT64_MIN;

// A segment-level change, of the recorded run or of a replay (docs/whatif.md "Fidelity"): a
// cudaMalloc'd segment created or released, or an expandable segment's mapped bytes growing
// (Map) or shrinking (Unmap). The recorded run's mappings are known as the session's maximal
// mapped pieces, so mapping changes are compared as each instant's net change on the device
// (address 0); creations and releases by address and size.
struct SegmentEvent
{
    enum Kind : uint8_t { Create, Release, Map, Unmap };
    int64_t time = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    Kind kind = Create;
    // Recorded events: the request during which it happened (the allocation whose cudaMalloc it
    // was, the empty_cache() call, the allocation whose free-and-retry released it), kNoRequest
    // when none.
    uint32_t request = kNoRequest;
};

struct RecordedSegment
{
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t createNs = 0;
    int64_t destroyNs = kAliveNs;
    uint32_t stream = 0;
    bool expandable = false; // an expandable segment's reservation
    // The requests (DeviceTrace::requests) during which it was created and released.
    uint32_t createdBy = kNoRequest;
    uint32_t releasedBy = kNoRequest;
};

// Segment releases (and unmappings) with no request between them, all during one request: the
// host waits in each cudaFree, the first of which waits for the device to drain, so a burst
// spreads over time. What only the trace can tell the replay: when each release happened.
struct ReleaseBurst
{
    uint32_t request = 0; // DeviceTrace::requests index
    uint32_t first = 0;   // its release times: DeviceTrace::burstTimes[first, first + count)
    uint32_t count = 0;
    uint64_t bytes = 0;      // released, segments and unmapped bytes together
    bool emptyCache = false; // an empty_cache() call no allocation explains
};

struct DeviceTrace
{
    uint32_t device = 0;
    std::string name;
    uint64_t capacityBytes = 0; // from the devices table, 0 when unknown
    uint64_t usableBytes = 0;   // from OOM entries: reserved then + device_free (0: none)
    std::vector<Request> requests;
    std::vector<RecordedAlloc> allocs;     // in allocation order
    std::vector<RecordedSegment> segments; // in creation order
    // cudaMalloc sizes and expandable mappings in the order they happened (what the replay's
    // DeviceReplay::segmentSizes is compared with).
    std::vector<uint64_t> backingSizes;
    // Expandable segments' mapped bytes: each instant's net change (Map or Unmap), in time order.
    std::vector<SegmentEvent> mappingChanges;
    // In request order; burstTimes holds their release times, in the order they happened.
    std::vector<ReleaseBurst> bursts;
    std::vector<int64_t> burstTimes;
    int64_t emptyCacheCalls = 0;       // bursts read as empty_cache() (no allocation explains them)
    int64_t pendingFrees = 0;          // frees that waited on stream events
    int64_t pendingFreesUnmatched = 0; // pending_frees rows with no allocation freed then
    int64_t recordedOoms = 0;
    uint64_t recordedPeakReserved = 0;
    uint64_t recordedFinalReserved = 0;
};

struct Frame
{
    int64_t index = 0;
    int64_t start = 0;
    int64_t end = 0;
};

struct Marker
{
    int64_t time = 0;
    int64_t end = -1; // -1: a mark, else a range
    std::string message;
};

struct Trace
{
    std::string path;
    std::string sourceKind;
    Config recorded;            // the run's settings
    bool settingsKnown = false; // from the session's allocator_settings meta key
    std::string settingsNote;   // how the settings were found, for the output
    bool complete = false;      // the trace starts with the run
    std::string completeNote;   // why (not)
    bool ordinalTime = false;
    // The smallest time step the source records: 1 µs for a PyTorch snapshot (time_us), 1 ns
    // (or one entry, on an ordinal axis) otherwise. Times that differ by less are the same.
    int64_t resolutionNs = 1;
    int64_t allocationsWithoutStream = 0; // replayed on stream 0 (best fit is per stream)
    std::vector<DeviceTrace> devices;
    // Request::pool -> the session's pool id (regions.pool_id); [0] is the default pool.
    std::vector<uint64_t> poolIds{0};
    std::vector<Frame> frames;
    std::vector<Marker> markers;
    std::vector<std::string> strings; // the source session's strings (tags), by id
    // The source session's call stacks: id -> frame string ids, innermost first.
    std::unordered_map<uint32_t, std::vector<uint32_t>> stacks;
};

// The settings the recorded run used, and how that is known (for the output and the GUI's
// what-if dialog). Throws fs::SessionError on a bad file.
struct RecordedSettings
{
    Config config;
    bool known = false; // from the session's allocator_settings meta key
    std::string note;
};
RecordedSettings recordedSettings(Session& s);
RecordedSettings recordedSettings(const std::string& path);

// Each instant's net change of mapped bytes, from (time, +bytes mapped / -bytes unmapped) in any
// order: one Map or Unmap event per instant whose changes do not cancel out.
std::vector<SegmentEvent> netMappingChanges(std::vector<std::pair<int64_t, int64_t>> deltas);

// Reads a session file. Throws fs::SessionError ("FILE: problem") on a bad file.
Trace readTrace(const std::string& path);

} // namespace fs::alloc
