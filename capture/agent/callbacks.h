// Driver-API callbacks -> wire events. CUPTI's activity records miss VMM reservations, failed
// allocations and which graph exec a launch replayed; the agent catches those at API exit. The
// logic lives here, not in agent.cpp, so that tests run real `cu*_params` structs (from the
// installed headers) through the exact function the callback calls, without a GPU.
#pragma once

#include "capture/protocol/protocol.h"

#include <cupti.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>

namespace fs::agent {

// CUPTI lookups the callbacks need. The agent installs CUPTI's own (cuptiGetStreamIdEx, ...);
// tests install fakes, since those calls need a live context. A null entry yields 0.
struct ApiResolvers
{
    uint32_t (*streamId)(CUcontext, CUstream) = nullptr;
    uint32_t (*deviceId)(CUcontext) = nullptr;
    uint64_t (*graphId)(CUgraph) = nullptr;
    uint64_t (*execId)(CUgraphExec) = nullptr;
    uint64_t (*deviceFreeBytes)(CUcontext) = nullptr; // for OOM events; 0 when unknown
};

// A map that forgets its oldest keys beyond kMaxEntries (not thread-safe): the callbacks'
// side of a join whose activity-record side may never come (activities off, records dropped).
template <class K> struct BoundedMap
{
    static constexpr size_t kMaxEntries = 1u << 16;
    std::unordered_map<K, uint64_t> map;
    std::deque<K> order; // insertion order; may hold keys erased since (trimmed in put)
    void put(K k, uint64_t v);
};

// Joins GRAPH_TRACE activity records to the graph exec that was launched: cuGraphLaunch's
// correlation id -> exec id, cuGraphInstantiate* exec id -> graph id. Both maps are bounded
// (oldest entries go first), so a process that launches forever never grows the agent.
// Thread-safe: callbacks fill it on host threads, the flush thread reads it.
class GraphJoin
{
public:
    static constexpr size_t kMaxEntries = BoundedMap<uint32_t>::kMaxEntries;

    void instantiated(uint64_t execId, uint64_t graphId);
    void destroyed(uint64_t execId);
    void launched(uint32_t correlationId, uint64_t execId);
    // Exec id of the launch with this correlation id (0 when unknown); forgets the entry.
    uint64_t takeExec(uint32_t correlationId);
    uint64_t graphOf(uint64_t execId) const; // 0 when unknown
    size_t launchesPending() const;
    size_t execsKnown() const;

private:
    mutable std::mutex mu_;
    BoundedMap<uint32_t> launches_;
    BoundedMap<uint64_t> execs_;
};

// Correlation ids of the VMM calls (cuMemCreate, cuMemMap, cuMemSetAccess, cuMemUnmap,
// cuMemRelease). CUPTI 13 also reports a mapped VMM range as a device-memory allocation and
// release (MEMORY2 records carrying those calls' correlation ids), which the callbacks already
// record as a mapping of the reservation: the decoder drops such records rather than count the
// memory twice (seen on an H200 with CUDA 13.0, scripts/gpu-check.sh). Bounded; thread-safe.
class VmmCalls
{
public:
    void called(uint32_t correlationId);
    bool contains(uint32_t correlationId) const;
    size_t known() const;

private:
    mutable std::mutex mu_;
    BoundedMap<uint32_t> calls_;
};

struct ApiState
{
    ApiResolvers resolve;
    GraphJoin graphs;
    VmmCalls vmm;
    uint64_t ooms = 0;
};

// The driver-API callbacks the agent enables (all handled by apiExitEvent).
extern const CUpti_CallbackId kApiCallbacks[];
extern const size_t kApiCallbackCount;

// The work of the agent's CUPTI callback for one API exit: fills e and returns true when the call
// becomes an event (VMM region events, Oom on CUDA_ERROR_OUT_OF_MEMORY from an allocation API,
// GraphInstantiate and GraphExecDestroy), and records graph instantiations and launches in
// st.graphs and the VMM calls' correlation ids in st.vmm. `time` is on the session clock.
bool apiExitEvent(CUpti_CallbackId cbid, const CUpti_CallbackData& info, int64_t time, ApiState& st,
                  proto::WireEvent& e);

} // namespace fs::agent
