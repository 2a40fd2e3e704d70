// Splitting a computation over the machine's cores (at most four threads).
#pragma once

#include <algorithm>
#include <cstddef>
#include <exception>
#include <thread>
#include <vector>

namespace fs::analysis {

// Runs f(chunk, begin, end) for `chunks` consecutive ranges covering [0, n), each on its own
// thread but the first (which runs on the caller's), and returns when all have; the first
// exception a chunk threw is rethrown then. chunks: parallelChunks(n, minPerChunk).
template <typename F> void forEachChunk(size_t n, size_t chunks, F&& f)
{
    chunks = std::max<size_t>(1, std::min(chunks, std::max<size_t>(n, 1)));
    std::vector<std::exception_ptr> failed(chunks);
    {
        std::vector<std::jthread> threads;
        for (size_t c = 1; c < chunks; ++c)
            threads.emplace_back([&, c] {
                try {
                    f(c, n * c / chunks, n * (c + 1) / chunks);
                } catch (...) {
                    failed[c] = std::current_exception();
                }
            });
        try {
            f(size_t{0}, size_t{0}, n / chunks);
        } catch (...) {
            failed[0] = std::current_exception();
        }
    } // joined
    for (const auto& e : failed)
        if (e) std::rethrow_exception(e);
}

// How many chunks work of `work` units is worth: one below minWork (LoadOptions::parallelFrom),
// else one per core, two at least and four at most.
inline size_t parallelChunks(size_t work, size_t minWork)
{
    if (work < minWork) return 1;
    return std::clamp<size_t>(std::thread::hardware_concurrency(), 2, 4);
}

} // namespace fs::analysis
