// Device model: where cudaMalloc places a segment in the device's virtual address space.
// Placement is first-fit at 2 MiB granularity, but the driver reserves VA in chunks and leaves
// holes, so a placement sometimes skips a few granules: the space stays sparse, as on real
// devices, and the heatmap's compaction of holes between regions gets exercised.
#pragma once

#include "rng.h"

#include <cstddef>
#include <cstdint>
#include <map>

namespace fs::sim {

class VaSpace
{
public:
    static constexpr uint64_t kGranule = 2ull << 20; // 2 MiB

    VaSpace(uint64_t base, uint64_t span, uint64_t seed);
    // Start address of a new range of `size` bytes (a multiple of kGranule); 0 when the space is
    // exhausted (cannot happen with a span far above the capacity).
    uint64_t place(uint64_t size);
    void release(uint64_t addr, uint64_t size);
    size_t holes() const { return free_.size(); }

private:
    std::map<uint64_t, uint64_t> free_; // start -> size, coalesced
    Rng rng_;
};

} // namespace fs::sim
