// Mapping fresh memory ahead of writing it.
//
// The kernel maps an anonymous page on its first write, one fault per 4 KiB page, and clears it.
// On the 2-core development VM a fault costs more than the clearing (its exception and the
// hypervisor's part in it): filling fresh memory ran at 0.25-0.4 GiB/s one page at a time against
// 0.6-0.8 GiB/s mapped ahead with MADV_POPULATE_WRITE (docs/analysis.md "Fresh memory"). Only a
// hint: before Linux 5.14 the pages are mapped as they are first written, as before.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

namespace fs {

// Maps the whole pages of [p, p + bytes) on the calling thread, at most 512 KiB per call: the
// kernel holds the process's memory-map lock for reading through a call, and every other
// thread's mmap or munmap (a thread's stack, a large malloc or free, e.g. the GUI's) waits for
// it. Whole chunks in one call each stalled the GUI's event loop for 40-60 ms.
void mapPages(void* p, size_t bytes);

// n zeros in an array whose pages are mapped first (the zeros then fill mapped pages).
template <typename T> std::vector<T> mappedZeros(size_t n)
{
    std::vector<T> v;
    v.reserve(n);
    mapPages(v.data(), n * sizeof(T));
    v.resize(n);
    return v;
}

// An array [at, at + capacity) written front to back, `written` elements so far, about to be
// written up to upTo: maps the 512 KiB steps the writes enter (the steps below `written` are
// mapped already). Call it before each write, or before each growth of a reserved vector
// (mapSpareAhead).
template <typename T> void mapAhead(T* at, size_t written, size_t upTo, size_t capacity)
{
    constexpr size_t step = std::max<size_t>(1, (size_t{512} << 10) / sizeof(T));
    for (size_t i = (written + step - 1) / step * step; i < upTo && i < capacity; i += step)
        mapPages(at + i, std::min(step, capacity - i) * sizeof(T));
}

// mapAhead for a vector growing to newSize within its reserved capacity.
template <typename T> void mapSpareAhead(std::vector<T>& v, size_t newSize)
{
    mapAhead(v.data(), v.size(), newSize, v.capacity());
}

// Makes malloc serve large blocks from its heap and keep freed memory for reuse (no mmap and
// munmap per large array, no trimming): an analysis allocates and frees arrays of hundreds of
// MiB in turn, and each fresh mapping's pages are faulted in and cleared again. Measured on
// `fragscope state --at end` of an un-indexed 10 M-allocation session: 6.8-7.5 s -> 5.3-5.5 s,
// peak RSS +1.7 % (docs/analysis.md "Fresh memory"). For a program's main() (the CLI): never in the
// agent, which lives in somebody else's process. Affects only the main arena's large blocks
// in practice (a thread's arena still maps what exceeds its 64 MiB heaps).
void keepFreedMemory();

} // namespace fs
