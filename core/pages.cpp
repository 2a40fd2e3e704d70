#include "pages.h"

#include <cstdint>

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
    const uintptr_t step = std::max<uintptr_t>(page, (uintptr_t{512} << 10) / page * page);
    for (uintptr_t q = begin; q < end; q += step)
        madvise(reinterpret_cast<void*>(q), std::min(step, end - q), MADV_POPULATE_WRITE);
#else
    (void)p, (void)bytes;
#endif
}

void keepFreedMemory()
{
    mallopt(M_MMAP_THRESHOLD, 1 << 30);
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

} // namespace fs
