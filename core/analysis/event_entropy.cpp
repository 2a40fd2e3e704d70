// Event-size entropy at one instant, counted from the track's sorted event streams.
#include "engine_impl.h"

#include <algorithm>

namespace fs::analysis {

double Engine::eventEntropyAt(uint32_t device, Level level, int64_t t, int64_t windowNs) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    windowNs = std::max<int64_t>(windowNs, 1);
    // Saturate: a window reaching before INT64_MIN covers everything before t.
    const int64_t lo = t < std::numeric_limits<int64_t>::min() + windowNs
                           ? std::numeric_limits<int64_t>::min()
                           : t - windowNs;
    const auto& A = td.allocs;
    const auto& F = td.byFree;
    // Allocations with lo < allocNs <= t (allocs are sorted by allocNs).
    auto byAlloc = [](int64_t v, const Alloc& a) { return v < a.allocNs; };
    const auto a0 = std::upper_bound(A.begin(), A.end(), lo, byAlloc);
    const auto a1 = std::upper_bound(a0, A.end(), t, byAlloc);
    // Frees with lo < freeNs <= t (byFree is sorted by freeNs).
    auto byFreeTime = [&](int64_t v, uint32_t i) { return v < A[i].freeNs; };
    const auto f0 = std::upper_bound(F.begin(), F.end(), lo, byFreeTime);
    const auto f1 = std::upper_bound(f0, F.end(), t, byFreeTime);
    SizeClassCounts c;
    for (auto it = a0; it != a1; ++it)
        c.add(it->size);
    for (auto it = f0; it != f1; ++it)
        c.add(A[*it].size);
    return c.bits();
}

} // namespace fs::analysis
