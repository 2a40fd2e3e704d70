// The mapped pieces of one expandable reservation (PyTorch expandable segments, VMM), kept
// maximal whoever reports them: a map that touches mapped pieces joins them into one (the
// segment grew: the old pieces end, one piece covers the union), and an unmap ends every piece
// it hits and maps again what lies outside it. The analysis counts each piece as its own range
// (free space never spans two), so two touching pieces would split one free range in two; the
// what-if model and PyTorch's trace report growth page run by page run and may release several
// runs at once. Used by ingest (rows of region_mappings) and the snapshot importer (its check
// of the final state against the snapshot's segments).
#pragma once

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace fs {

template <typename Tag> class MappedPieces
{
public:
    struct Piece
    {
        uint64_t size = 0;
        Tag tag{};
    };
    using Map = std::map<uint64_t, Piece>;

    // Maps [a, a + size): `ended(address, piece)` for each piece it joins, then
    // `started(address, size)` returns the tag of the one piece that now covers them all.
    template <typename Ended, typename Started>
    void map(uint64_t a, uint64_t size, Ended&& ended, Started&& started)
    {
        uint64_t lo = a, hi = a + size;
        for (auto it = firstTouching(a); it != pieces_.end() && it->first <= a + size;) {
            lo = std::min(lo, it->first);
            hi = std::max(hi, it->first + it->second.size);
            ended(it->first, it->second);
            it = pieces_.erase(it);
        }
        pieces_[lo] = {hi - lo, started(lo, hi - lo)};
    }

    // Unmaps [a, a + size): `ended` for each piece it hits, `started` for what is left of them
    // on either side. Size 0 unmaps from a to the end of the piece that holds a. False when it
    // hits no mapped piece.
    template <typename Ended, typename Started>
    bool unmap(uint64_t a, uint64_t size, Ended&& ended, Started&& started)
    {
        if (size == 0) {
            auto it = pieces_.upper_bound(a);
            if (it == pieces_.begin()) return false;
            --it;
            if (it->first + it->second.size <= a) return false;
            size = it->first + it->second.size - a;
        }
        const uint64_t hi = a + size;
        std::vector<std::pair<uint64_t, uint64_t>> keep;
        bool hit = false;
        for (auto it = firstTouching(a); it != pieces_.end() && it->first < hi;) {
            const uint64_t lo = it->first, end = lo + it->second.size;
            if (end <= a) {
                ++it;
                continue;
            }
            hit = true;
            if (lo < a) keep.emplace_back(lo, a - lo);
            if (end > hi) keep.emplace_back(hi, end - hi);
            ended(it->first, it->second);
            it = pieces_.erase(it);
        }
        for (const auto& [lo, n] : keep)
            pieces_[lo] = {n, started(lo, n)};
        return hit;
    }

    const Map& pieces() const { return pieces_; }

private:
    // The first piece that ends at or after a (a map joins a piece that ends exactly at a).
    typename Map::iterator firstTouching(uint64_t a)
    {
        auto it = pieces_.upper_bound(a);
        if (it != pieces_.begin() && std::prev(it)->first + std::prev(it)->second.size >= a) --it;
        return it;
    }

    Map pieces_;
};

} // namespace fs
