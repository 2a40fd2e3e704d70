#include "va_space.h"

#include "core/alloc/caching_allocator.h"

#include <iterator>

namespace fs::sim {

VaSpace::VaSpace(uint64_t base, uint64_t span, uint64_t seed) : rng_(seed)
{
    free_.emplace(base, span);
}

uint64_t VaSpace::place(uint64_t size)
{
    // One placement in four skips 1..3 granules (a hole another reservation would have taken).
    const uint64_t skip = rng_.below(4) == 0 ? (1 + rng_.below(3)) * kGranule : 0;
    for (auto it = free_.begin(); it != free_.end(); ++it) {
        const uint64_t start = it->first;
        const uint64_t len = it->second;
        if (len < size) continue;
        const uint64_t at = len >= size + skip ? start + skip : start;
        // Split the free range into [start, at) and [at + size, start + len).
        free_.erase(it);
        if (at > start) free_.emplace(start, at - start);
        if (at + size < start + len) free_.emplace(at + size, start + len - at - size);
        return at;
    }
    return 0;
}

void VaSpace::release(uint64_t addr, uint64_t size)
{
    fs::alloc::releaseRange(free_, addr, size);
}

} // namespace fs::sim
