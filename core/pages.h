// Mapping fresh memory ahead of writing it.
//
// The kernel maps an anonymous page on its first write, one fault per 4 KiB page, and clears it.
// On the 2-core development VM a fault costs more than the clearing (its exception and the
// hypervisor's part in it): filling fresh memory ran at 0.25-0.4 GiB/s one page at a time against
// 0.6-0.8 GiB/s mapped ahead with MADV_POPULATE_WRITE (docs/analysis.md "Fresh memory"). Only a
// hint: before Linux 5.14 the pages are mapped as they are first written, as before.
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstddef>
#include <functional>
#include <thread>
#include <vector>

namespace fs {

// The most mapPages maps in one call, and the step in which the helpers below map and touch.
constexpr size_t kMapStepBytes = size_t{512} << 10;

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
    constexpr size_t step = std::max<size_t>(1, kMapStepBytes / sizeof(T));
    for (size_t i = (written + step - 1) / step * step; i < upTo && i < capacity; i += step)
        mapPages(at + i, std::min(step, capacity - i) * sizeof(T));
}

// mapAhead for a vector growing to newSize within its reserved capacity.
template <typename T> void mapSpareAhead(std::vector<T>& v, size_t newSize)
{
    mapAhead(v.data(), v.size(), newSize, v.capacity());
}

// Touches the pages of arrays on a thread of its own, ahead of the thread that fills them. On the
// development VM the host backs a page at the guest's first access to it, ~5 us per 4 KiB page
// even after MADV_POPULATE_WRITE (docs/importers.md "Pages touched beside the parse"): a
// snapshot's parse spent a third of its time there while the second core had nothing to do.
// Each array is a lane, reserved ahead (capacity) and filled front to back: its filler calls
// reach(lane, end) before it writes below byte `end`, and writes only below what this thread has
// touched; this thread touches only above that, up to `lead` bytes beyond the filler's last
// request, so no byte is written by one thread while the other reads it. With nothing to touch
// it runs the idle task, if any (e.g. preparing the filler's next block), until that says it has
// nothing left to do; kick() wakes it for that. Lanes are added before start().
class PagesAhead
{
public:
    explicit PagesAhead(size_t leadBytes = size_t{8} << 20) : lead_(leadBytes) {}
    ~PagesAhead();
    PagesAhead(const PagesAhead&) = delete;
    PagesAhead& operator=(const PagesAhead&) = delete;

    // An array [base, base + capacityBytes); returns its lane. At most 4.
    int addLane(const void* base, size_t capacityBytes);
    // Runs `task` on the thread when no lane needs touching; it returns false when idle.
    void setIdleTask(std::function<bool()> task) { idle_ = std::move(task); }
    // Starts the thread; without one (none to be had) running() stays false.
    void start();
    // Ends the thread (a lane's array is about to move): no lane is touched after it returns.
    void stop();
    bool running() const { return thread_.joinable(); }
    // The filler is about to write below byte `end` of the lane's array (only while running()).
    void reach(int lane, size_t end)
    {
        Lane& l = lanes_[static_cast<size_t>(lane)];
        const size_t r = l.ready.load(std::memory_order_acquire);
        if (end <= r && (end + lead_ / 2 <= r || r == l.capacity)) return;
        slowReach(l, end);
    }
    void kick();

private:
    struct alignas(64) Lane
    {
        const char* base = nullptr;
        size_t capacity = 0;
        std::atomic<size_t> ready{0};  // touched below this (this thread's, then the filler's)
        std::atomic<size_t> wanted{0}; // the filler's last request
    };
    void slowReach(Lane& l, size_t end);
    bool touchSome(); // one step in the lane that needs it most; false when none does
    void run();

    size_t lead_;
    std::array<Lane, 4> lanes_;
    size_t laneCount_ = 0;
    std::function<bool()> idle_;
    alignas(64) std::atomic<uint32_t> kicks_{0};
    std::atomic<bool> stop_{false};
    std::thread thread_;
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
