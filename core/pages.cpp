#include "pages.h"

#include <cstdint>
#include <system_error>

#include <malloc.h>

#include <sys/mman.h>
#include <unistd.h>

namespace fs {

void mapPages(void* p, size_t bytes)
{
#ifdef MADV_POPULATE_WRITE
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    const uintptr_t step = std::max<uintptr_t>(page, kMapStepBytes / page * page);
    for (uintptr_t q = begin; q < end; q += step)
        madvise(reinterpret_cast<void*>(q), std::min(step, end - q), MADV_POPULATE_WRITE);
#else
    (void)p, (void)bytes;
#endif
}

PagesAhead::~PagesAhead()
{
    stop();
}

void PagesAhead::stop()
{
    if (!thread_.joinable()) return;
    stop_.store(true);
    kick();
    thread_.join();
}

int PagesAhead::addLane(const void* base, size_t capacityBytes)
{
    Lane& l = lanes_.at(laneCount_);
    l.base = static_cast<const char*>(base);
    l.capacity = capacityBytes;
    return static_cast<int>(laneCount_++);
}

void PagesAhead::start()
{
    try {
        thread_ = std::thread([this] { run(); });
    } catch (const std::system_error&) {
        // The filler maps its pages itself, as before.
    }
}

void PagesAhead::kick()
{
    kicks_.fetch_add(1, std::memory_order_release);
    kicks_.notify_one();
}

void PagesAhead::slowReach(Lane& l, size_t end)
{
    end = std::min(end, l.capacity);
    if (end > l.wanted.load(std::memory_order_relaxed)) // the filler is its only writer
        l.wanted.store(end, std::memory_order_relaxed);
    kick();
    for (size_t r = l.ready.load(std::memory_order_acquire); r < end;
         r = l.ready.load(std::memory_order_acquire))
        l.ready.wait(r, std::memory_order_acquire);
}

bool PagesAhead::touchSome()
{
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    // The lane whose touched part is nearest its filler's request.
    Lane* best = nullptr;
    size_t bestSlack = 0;
    for (size_t i = 0; i < laneCount_; ++i) {
        Lane& l = lanes_[i];
        const size_t r = l.ready.load(std::memory_order_relaxed);
        const size_t goal = std::min(l.capacity, l.wanted.load(std::memory_order_relaxed) + lead_);
        if (r >= goal) continue;
        const size_t slack = r - std::min(r, l.wanted.load(std::memory_order_relaxed));
        if (!best || slack < bestSlack) best = &l, bestSlack = slack;
    }
    if (!best) return false;
    const size_t r = best->ready.load(std::memory_order_relaxed);
    const size_t n = std::min(kMapStepBytes, best->capacity - r);
    char* at = const_cast<char*>(best->base) + r;
    mapPages(at, n);
    // Mapped pages still cost the host's backing at their first access: read one byte of each
    // (a read: the filler may write these pages as soon as `ready` passes them).
    const uintptr_t first = (reinterpret_cast<uintptr_t>(at) + page - 1) / page * page;
    unsigned char sum = 0;
    for (uintptr_t q = first; q < reinterpret_cast<uintptr_t>(at) + n; q += page)
        sum += *reinterpret_cast<volatile const unsigned char*>(q);
    asm volatile("" : : "r"(sum));
    best->ready.store(r + n, std::memory_order_release);
    best->ready.notify_all();
    return true;
}

void PagesAhead::run()
{
    while (!stop_.load()) {
        const uint32_t k = kicks_.load(std::memory_order_acquire);
        if (touchSome()) continue;
        if (idle_ && idle_()) continue;
        kicks_.wait(k, std::memory_order_acquire);
    }
}

void keepFreedMemory()
{
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

} // namespace fs
