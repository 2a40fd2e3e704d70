// Replays a recorded request stream (trace.h) through the allocator model under some settings
// (docs/whatif.md). Without a sink it only runs the model (the benchmark's figure); with one it
// also writes the replay as events, which Ingest turns into a session.
#pragma once

#include "caching_allocator.h"
#include "replay_clock.h"
#include "trace.h"

#include <atomic>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fs {
class EventSink;
}

namespace fs::alloc {

enum class Policy : uint8_t {
    PyTorch, // PyTorch's rules under the given settings
    Tiered,  // experimental: lifetime-tiered pools (docs/whatif.md "Tiered policy")
};
bool parsePolicy(const std::string& name, Policy& out);
const char* policyName(Policy p);

struct ReplayOptions
{
    Config config;
    Policy policy = Policy::PyTorch;
    uint64_t capacity = 0; // bytes the allocator may hold per device; 0: unlimited
    // cudaMalloc returns the address the recorded run's segment got, as long as the replay asks
    // for the same sizes in the same order and the range is free; else a plain first-fit address
    // above every recorded one.
    bool recordedAddresses = true;
    // Per-device capacity overriding `capacity` (the usable memory a recording's OOMs tell).
    std::map<uint32_t, uint64_t> deviceCapacity;
    EventSink* sink = nullptr; // receives the replay's events (may be null)
    // With a sink: the trace's markers (frames, metrics) go out in time order with the first
    // device's events, so the replayed session has the same frames.
    bool emitMarkers = true;
    // With a sink: allocations keep their call stacks, user metadata and compile context.
    bool carryStacks = false;
    // Allocations (DeviceTrace::requests indices, ascending, per device) whose recorded release
    // burst was an empty_cache() right before their cudaMalloc, as the replay under the recorded
    // settings found them (DeviceReplay::emptyCacheFirst); null: each replay finds them itself
    // (the model could serve the request from its cache, so no free-and-retry happened).
    const std::map<uint32_t, std::vector<uint32_t>>* emptyCacheFirst = nullptr;
    // Test only: replays every empty_cache() one request late (a model whose release rule is
    // moved; the fidelity check must catch it).
    bool lateEmptyCache = false;
    // Checked every 64 Ki requests: when true, replay() throws Cancelled.
    const std::atomic<bool>* cancel = nullptr;
    // Pools merged (the graphs' sharing what-if): a request of model pool i goes to pool
    // (*poolMerge)[i]; pools past its end, and all with null, stay as recorded. The trace is not
    // touched, so replays with different merges can run at once.
    const std::vector<int32_t>* poolMerge = nullptr;
};

// Thrown by replay() and whatIf() when their cancel flag is set.
struct Cancelled
{
};

struct DeviceReplay
{
    uint32_t device = 0;
    Counters counters;                  // summed over the tiers of a tiered run
    uint64_t peakReserved = 0;          // of the device as a whole (tiers together)
    std::vector<uint64_t> segmentSizes; // cudaMalloc sizes in order (mappings for expandable)
    std::vector<uint64_t> addresses;    // per recorded allocation: replayed address, 0 = OOM
    std::vector<uint64_t> blockSizes;   // per recorded allocation: replayed block size
    // Live at the end, in address order: (address, size) of blocks and of cudaMalloc'd segments
    // (expandable segments' mappings are in segmentSizes).
    std::vector<std::pair<uint64_t, uint64_t>> finalBlocks;
    std::vector<std::pair<uint64_t, uint64_t>> finalSegments;
    int64_t requests = 0;
    int64_t firstAddressDivergence = -1; // index of the first segment not at its recorded address
    // Every segment creation and release and every mapping and unmapping, in the order the model
    // made them, at the times the replay gave them.
    std::vector<SegmentEvent> segmentEvents;
    TakenFromTrace taken;    // what the replay took from the trace (replay_clock.h)
    bool followed = false;   // made exactly the recording's segment events to the end
    uint64_t usableMark = 0; // usable memory a reproduced free-and-retry marked, 0: none
    std::vector<uint32_t> emptyCacheFirst; // see ReplayOptions::emptyCacheFirst
};

std::vector<DeviceReplay> replay(const Trace& trace, const ReplayOptions& opts);

} // namespace fs::alloc
