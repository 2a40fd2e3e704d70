// Transparent huge pages for the analysis's large arrays, measured both ways in one run
// (README.md, "Huge pages"): a region the size of a long run's arrays is mapped, asked for huge
// pages with madvise(MADV_HUGEPAGE) or not, filled once (the page faults), then read at random
// (the TLB misses), as the engine's replays do. Rounds alternate so that both ways see the same
// machine; medians are printed with their ratio and the kernel's own count of huge pages given.
//
// Usage: bench_huge_pages [MiB=1024] [rounds=5]
#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>
#include <sys/mman.h>
#include <vector>

namespace {

double since(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// AnonHugePages of this process, in KiB (/proc/self/smaps_rollup).
long anonHugeKiB()
{
    std::ifstream f("/proc/self/smaps_rollup");
    std::string key;
    long value = 0;
    while (f >> key) {
        if (key == "AnonHugePages:") {
            f >> value;
            return value;
        }
        f.ignore(1 << 20, '\n');
    }
    return -1;
}

std::string thpMode()
{
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string line;
    std::getline(f, line);
    const auto a = line.find('['), b = line.find(']');
    return a != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : "unknown";
}

struct Round
{
    double fill = 0, gather = 0;
    long hugeKiB = 0;
};

Round once(size_t bytes, bool huge)
{
    Round r;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        fmt::print(stderr, "bench_huge_pages: mmap of {} bytes failed\n", bytes);
        std::exit(1);
    }
    if (huge) ::madvise(p, bytes, MADV_HUGEPAGE);
    auto* a = static_cast<uint64_t*>(p);
    const size_t n = bytes / sizeof(uint64_t);
    auto t0 = std::chrono::steady_clock::now();
    for (size_t i = 0; i < n; ++i)
        a[i] = i * 0x9E3779B97F4A7C15ull;
    r.fill = since(t0);
    r.hugeKiB = anonHugeKiB();
    t0 = std::chrono::steady_clock::now();
    uint64_t x = 88172645463325252ull, sum = 0;
    const size_t reads = 32u << 20;
    for (size_t i = 0; i < reads; ++i) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17; // xorshift64
        sum += a[x % n];
    }
    r.gather = since(t0);
    if (sum == 42) fmt::print(" "); // keep the reads
    ::munmap(p, bytes);
    return r;
}

} // namespace

int main(int argc, char** argv)
{
    const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1024;
    const int rounds = argc > 2 ? std::atoi(argv[2]) : 5;
    const size_t bytes = mib << 20;
    fmt::print("transparent_hugepage: {}; {} MiB region, {} rounds each way, alternating\n",
               thpMode(), mib, rounds);
    std::vector<double> fill[2], gather[2];
    long huge[2] = {0, 0};
    for (int i = 0; i < rounds; ++i)
        for (int way = 0; way < 2; ++way) {
            const Round r = once(bytes, way == 1);
            fill[way].push_back(r.fill);
            gather[way].push_back(r.gather);
            huge[way] = std::max(huge[way], r.hugeKiB);
        }
    const char* names[2] = {"4 KiB pages (baseline)", "madvise(MADV_HUGEPAGE)"};
    for (int way = 0; way < 2; ++way)
        fmt::print("{:<24} fill median {:.3f} s, 32 Mi random reads median {:.3f} s, total {:.3f} "
                   "s; AnonHugePages {} MiB\n",
                   names[way], median(fill[way]), median(gather[way]),
                   median(fill[way]) + median(gather[way]), huge[way] / 1024);
    const double base = median(fill[0]) + median(gather[0]);
    const double hp = median(fill[1]) + median(gather[1]);
    fmt::print("huge pages / baseline: fill {:.2f}x, reads {:.2f}x, total {:.2f}x: {}\n",
               median(fill[1]) / median(fill[0]), median(gather[1]) / median(gather[0]), hp / base,
               hp < base * 0.95   ? "huge pages help here"
               : hp > base * 1.05 ? "huge pages cost here"
                                  : "no difference here");
    return 0;
}
