// The test's own reading of a session's final state (independent of the analysis engine):
// regions alive at the end (plus the mapped parts of expandable reservations), framework
// allocations alive at the end, and fragments = maximal gaps between them inside one region.
#pragma once

#include "core/store/session.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

namespace fstest {

struct EndState
{
    uint64_t reserved = 0;
    uint64_t allocated = 0;
    uint64_t free = 0;
    int64_t fragments = 0;
    uint64_t largest = 0;
    double ratio = 0;
    double entropy = 0;
};

// Size class of a fragment: 2^n KiB, n = 2..12, a size s goes to the smallest n with
// s <= 2^n KiB (<= 4 KiB first class, > 2 MiB last), as docs/analysis.md and the catalogue define
// it.
inline int sizeClass(uint64_t s)
{
    int n = 2;
    while (n < 12 && s > (uint64_t{1} << (n + 10)))
        ++n;
    return n;
}

inline EndState endState(const fs::Db& db, int64_t device)
{
    std::vector<std::pair<uint64_t, uint64_t>> ranges; // backed address ranges
    {
        auto st = db.prepare("SELECT address, size, expandable, id FROM regions WHERE device=?1 "
                             "AND destroy_ns IS NULL");
        st.bind(1, device);
        std::vector<int64_t> expandable;
        while (st.step()) {
            if (st.i64(2))
                expandable.push_back(st.i64(3));
            else
                ranges.emplace_back(st.u64(0), st.u64(1));
        }
        for (int64_t id : expandable) {
            auto m = db.prepare("SELECT address, size FROM region_mappings WHERE region_id=?1 AND "
                                "unmap_ns IS NULL");
            m.bind(1, id);
            while (m.step())
                ranges.emplace_back(m.u64(0), m.u64(1));
        }
    }
    std::sort(ranges.begin(), ranges.end());
    std::map<uint64_t, uint64_t> allocs;
    {
        auto st = db.prepare("SELECT address, size FROM allocations WHERE device=?1 AND level=2 "
                             "AND free_ns IS NULL");
        st.bind(1, device);
        while (st.step())
            allocs[st.u64(0)] = st.u64(1);
    }
    EndState e;
    std::map<int, int64_t> classes;
    for (auto [ra, rs] : ranges) {
        e.reserved += rs;
        uint64_t cursor = ra;
        const uint64_t end = ra + rs;
        auto addGap = [&](uint64_t lo, uint64_t hi) {
            if (hi <= lo) return;
            ++e.fragments;
            e.free += hi - lo;
            e.largest = std::max(e.largest, hi - lo);
            ++classes[sizeClass(hi - lo)];
        };
        for (auto it = allocs.lower_bound(ra); it != allocs.end() && it->first < end; ++it) {
            addGap(cursor, it->first);
            e.allocated += std::min(end, it->first + it->second) - it->first;
            cursor = std::max(cursor, it->first + it->second);
        }
        addGap(cursor, end);
    }
    e.ratio = e.free ? 1.0 - static_cast<double>(e.largest) / static_cast<double>(e.free) : 0.0;
    for (auto [c, n] : classes) {
        const double p = static_cast<double>(n) / static_cast<double>(e.fragments);
        e.entropy -= p * std::log2(p);
    }
    return e;
}

} // namespace fstest
