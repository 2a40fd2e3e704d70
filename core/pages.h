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

// Before a vector grows to newSize within its reserved capacity: maps the 512 KiB steps of
// its spare capacity that the growth enters (the steps below its size are mapped already).
template <typename T> void mapSpareAhead(std::vector<T>& v, size_t newSize)
{
    constexpr size_t step = std::max<size_t>(1, (size_t{512} << 10) / sizeof(T));
    for (size_t at = (v.size() + step - 1) / step * step; at < newSize && at < v.capacity();
         at += step)
        mapPages(v.data() + at, std::min(step, v.capacity() - at) * sizeof(T));
}

// Maps an array written front to back ahead of its writer, a step at a time: call ahead(n)
// before writing element n; it maps the next step when n reaches the mapped end.
template <typename T> class PagesAhead
{
public:
    PagesAhead(T* at, size_t count) : at_(at), count_(count) {}
    void ahead(size_t n)
    {
        if (n < mapped_ || mapped_ >= count_) return;
        const size_t step = std::min(count_ - mapped_, kStep);
        mapPages(at_ + mapped_, step * sizeof(T));
        mapped_ += step;
    }

private:
    static constexpr size_t kStep = (size_t{512} << 10) / sizeof(T);
    T* at_ = nullptr;
    size_t count_ = 0, mapped_ = 0;
};

// Makes malloc serve large blocks from its heap and keep freed memory for reuse (no mmap and
// munmap per large array, no trimming): an analysis allocates and frees arrays of hundreds of
// MiB in turn, and each fresh mapping's pages are faulted in and cleared again. Measured on
// `fragscope state --at end` of an un-indexed 10 M-allocation session: 6.8-7.5 s -> 5.3-5.5 s,
// peak RSS +1.7 % (docs/analysis.md "Fresh memory"). For a program's main() (the CLI): never in the
// agent, which lives in somebody else's process. Affects only the main arena's large blocks
// in practice (a thread's arena still maps what exceeds its 64 MiB heaps).
void keepFreedMemory();

} // namespace fs
