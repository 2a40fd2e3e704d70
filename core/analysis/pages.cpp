#include "pages.h"

#include "parallel.h"

#include <cstdint>

#include <sys/mman.h>
#include <unistd.h>

namespace fs::analysis {

namespace {

constexpr size_t kCallBytes = size_t{512} << 10;

} // namespace

void mapPages(void* p, size_t bytes)
{
    mapPages(p, bytes, 1);
}

void mapPages(void* p, size_t bytes, size_t chunks)
{
#ifdef MADV_POPULATE_WRITE
    const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
    const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + bytes) / page * page;
    if (end <= begin) return;
    const size_t pages = (end - begin) / page;
    const size_t step = std::max<size_t>(1, kCallBytes / page);
    forEachChunk(pages, chunks, [&](size_t, size_t first, size_t last) {
        for (size_t q = first; q < last; q += step)
            madvise(reinterpret_cast<void*>(begin + q * page), std::min(step, last - q) * page,
                    MADV_POPULATE_WRITE);
    });
#else
    (void)p, (void)bytes, (void)chunks;
#endif
}

} // namespace fs::analysis
