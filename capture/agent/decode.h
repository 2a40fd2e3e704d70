// CUPTI activity records -> wire events. Factored out of the agent so that tests and benchmarks
// can run real CUPTI structs (built from the installed headers) through the exact code path the
// agent's buffer-completed callback uses, without a GPU.
#pragma once

#include "capture/protocol/target_stream.h"

#include <cstddef>
#include <cstdint>
#include <unordered_map>

namespace fs::agent {

class GraphJoin;
class VmmCalls;

struct DecodeState
{
    int64_t clockOffsetNs = 0; // added to every CUPTI timestamp (GPU/host calibration)
    struct OpenRange
    {
        StringId name;
        int64_t start;
    };
    std::unordered_map<uint32_t, OpenRange> openRanges; // NVTX start/end markers by id
    std::unordered_map<const char*, StringId>
        namesByPtr; // CUPTI keeps names alive: cache by address
    // Fills GraphLaunch exec ids from the launches the API callbacks saw (agent.cpp); null: 0.
    GraphJoin* graphs = nullptr;
    // Drops MEMORY2 records made by VMM calls (the callbacks record the mapping); null: none.
    const VmmCalls* vmm = nullptr;
    uint64_t vmmRecords = 0; // records dropped so
    uint64_t records = 0;
    uint64_t skipped = 0; // kinds or memory kinds we do not model
};

// Decodes every record in [buffer, buffer+validSize) (cuptiActivityGetNextRecord) into out.
// Returns the number of records seen.
size_t decodeActivityBuffer(uint8_t* buffer, size_t validSize, DecodeState& st,
                            proto::TargetStream& out);

// One record (exposed for the per-record benchmark).
void decodeRecord(const void* record, DecodeState& st, proto::TargetStream& out);

} // namespace fs::agent
