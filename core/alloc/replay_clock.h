// When each segment event of a replay happens, and what the recorded device did (docs/whatif.md
// "What is replayed"). A segment event the recording made during the same request (the same
// segment created by the same allocation, released by the same empty_cache() call or
// free-and-retry, or the same mapped bytes) takes its recorded time: only the trace tells when a
// cudaMalloc returned and how a release burst spread while the host waited in cudaFree. Any other
// event is timed by assumption: a release during a request that released segments in the
// recording takes that burst's release times in order (the k-th release of the replay at the
// recording's k-th, the rest at its last), anything else the time of its request.
//
// While the replay has made exactly the recording's segment events (it "follows" the
// recording), the device also does what the recording shows it did: it refuses a request's
// cudaMalloc (or mapping) until the request's recorded releases are all made (a free-and-retry:
// the device's usable memory was reached then, which the refusal marks), and it refuses every
// cudaMalloc of a request that failed. After the first event the recording lacks, the device
// decides by its capacity alone.
#pragma once

#include "trace.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace fs::alloc {

constexpr uint32_t kNoSegment = UINT32_MAX;

// What the replay took from the trace, for the fidelity verdict.
struct TakenFromTrace
{
    int64_t creations = 0;         // segment creations (and mappings) at their recorded time
    int64_t releases = 0;          // releases (and unmappings) at their recorded time
    int64_t assumed = 0;           // events the recording lacks, timed by assumption
    int64_t emptyCaches = 0;       // empty_cache() calls replayed (bursts no request explains)
    int64_t emptyCachesBefore = 0; // of them, found right before a cudaMalloc
    int64_t retries = 0;           // free-and-retries the device's refusal reproduced
    int64_t failuresFollowed = 0;  // requests that failed in the recording, refused again
    int64_t maxBurstSpanNs = 0;    // the longest release burst replayed at its recorded times
};

class ReplayClock
{
public:
    explicit ReplayClock(const DeviceTrace& d);

    // Around request i of DeviceTrace::requests (in order).
    void begin(size_t i) { cur_ = static_cast<uint32_t>(i); }
    void end()
    {
        if (nextOwned_ < owned_.size() && owned_[nextOwned_].first <= cur_) finish();
    }
    // The empty_cache() of request i (an EmptyCache request, or one found right before the
    // cudaMalloc of an allocation whose recorded burst no free-and-retry explains).
    void emptyCache(bool beforeMalloc);

    // Times of the model's segment events during the current request. `recorded`: the recorded
    // segment the device gave this address (kNoSegment: another address).
    int64_t created(uint32_t recorded);
    int64_t released(uint32_t recorded, uint64_t bytes);
    int64_t mapped(uint64_t bytes);
    int64_t unmapped(uint64_t bytes);

    // Whether the device refuses `bytes` more now (see above); `reserved`: what the allocator
    // holds, for the usable-memory mark of a free-and-retry.
    bool refuse(uint64_t reserved, uint64_t bytes);
    bool following() const { return !diverged_; }

    const TakenFromTrace& taken() const { return taken_; }
    // The smallest usable memory a free-and-retry marked (reserved + the refused size - 1), 0 when
    // none.
    uint64_t usableMark() const { return usableMark_; }

private:
    void state();  // the current request's recorded events, set up on its first use
    void finish(); // after a request that owns recorded events: did the replay make them all?
    int64_t releaseTime(int64_t recorded, bool matched);
    const SegmentEvent* mappingAt(SegmentEvent::Kind kind, uint64_t sofar) const;
    int64_t requestTime() const { return d_.requests[cur_].time; }

    const DeviceTrace& d_;
    uint32_t cur_ = 0;
    bool diverged_ = false;
    // (request, recorded events it owns), by request; the cursor is at the current request.
    std::vector<std::pair<uint32_t, uint32_t>> owned_;
    size_t nextOwned_ = 0;
    // Mapping changes by owner: (request, DeviceTrace::mappingChanges index).
    std::vector<std::pair<uint32_t, uint32_t>> maps_;
    size_t nextMap_ = 0;
    size_t nextBurst_ = 0;

    // The current request's state (for stateFor_).
    uint32_t stateFor_ = kNoRequest;
    const ReleaseBurst* burst_ = nullptr;
    size_t mapsBegin_ = 0, mapsEnd_ = 0;
    uint64_t remaining_ = 0; // recorded released bytes the replay has not released yet
    uint32_t matched_ = 0;   // recorded events made
    uint32_t releasesSoFar_ = 0;
    uint64_t mappedSoFar_ = 0, unmappedSoFar_ = 0;
    bool refused_ = false;
    int64_t lastRelease_ = INT64_MIN;

    TakenFromTrace taken_;
    uint64_t usableMark_ = 0;
};

} // namespace fs::alloc
