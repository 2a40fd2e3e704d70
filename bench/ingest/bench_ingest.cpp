// Ingest throughput (events/s, bytes/event) beside a bare prepared-statement SQLite insert of the
// same allocation rows, measured in the same run. "sustained" is the rate while events arrive
// (Ingest::add), "total" includes end() (the last commit, checkpoint and switch out of WAL).
// Usage: bench_ingest [EVENTS] [DIR] [REPEATS]
#include "core/store/baseline.h"
#include "core/store/ingest.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <random>
#include <string>
#include <vector>

using namespace fs;
using Clock = std::chrono::steady_clock;

namespace {

using Row = store::BareAllocation;

// A caching-allocator-like stream: 64 regions of 64 MiB, a live set of ~2000 blocks of mixed
// sizes, alloc/free pairs at ~1 µs spacing. Produces the events and the rows ingest should write.
void makeWorkload(int64_t events, std::vector<Event>& out, std::vector<Row>& rows)
{
    std::mt19937_64 rng(7);
    const uint64_t base = 0x7f0000000000;
    const int regions = 64;
    const uint64_t regionSize = 64ull << 20;
    for (int r = 0; r < regions; ++r) {
        Event e;
        e.type = EventType::RegionCreate;
        e.level = Level::Framework;
        e.time = r;
        e.address = base + static_cast<uint64_t>(r) * (128ull << 20);
        e.size = regionSize;
        out.push_back(e);
    }
    struct Live
    {
        uint64_t addr, size;
        int64_t t0, id, region;
    };
    std::vector<Live> live;
    int64_t t = 1000, id = 0;
    // Slots of 32 KiB per region so live blocks never overlap.
    std::vector<std::vector<uint64_t>> freeSlots(regions);
    for (int r = 0; r < regions; ++r)
        for (uint64_t s = 0; s < regionSize / (32 << 10); ++s)
            freeSlots[static_cast<size_t>(r)].push_back(
                base + static_cast<uint64_t>(r) * (128ull << 20) + s * (32 << 10));
    while (static_cast<int64_t>(out.size()) < events) {
        t += 500 + static_cast<int64_t>(rng() % 1000);
        const bool doAlloc = live.size() < 1000 || (live.size() < 3000 && rng() % 2 == 0);
        Event e;
        e.level = Level::Framework;
        e.time = t;
        if (doAlloc) {
            const int r = static_cast<int>(rng() % regions);
            auto& slots = freeSlots[static_cast<size_t>(r)];
            if (slots.empty()) continue;
            const uint64_t addr = slots.back();
            slots.pop_back();
            const uint64_t size = 512ull << (rng() % 7);
            e.type = EventType::Alloc;
            e.address = addr;
            e.size = size;
            live.push_back({addr, size, t, ++id, r + 1});
        } else {
            const size_t k = rng() % live.size();
            const Live l = live[k];
            live[k] = live.back();
            live.pop_back();
            e.type = EventType::Free;
            e.address = l.addr;
            freeSlots[static_cast<size_t>(l.region - 1)].push_back(l.addr);
            rows.push_back({l.id, l.region, l.addr, l.size, l.t0, t});
        }
        out.push_back(e);
    }
}

uint64_t fileBytes(const std::string& p)
{
    std::error_code ec;
    uint64_t n = 0;
    for (const char* s : {"", "-wal"})
        if (std::filesystem::exists(p + s, ec)) n += std::filesystem::file_size(p + s, ec);
    return n;
}

struct IngestTimes
{
    double add, total;
};

IngestTimes runIngest(const std::string& path, const std::vector<Event>& events)
{
    IngestOptions o;
    o.path = path;
    o.sourceKind = "bench";
    o.aliveAtEndIsAnomaly = false;
    const auto t0 = Clock::now();
    Ingest in(o);
    in.begin();
    for (const auto& e : events)
        in.add(e);
    const auto t1 = Clock::now();
    in.end();
    return {std::chrono::duration<double>(t1 - t0).count(),
            std::chrono::duration<double>(Clock::now() - t0).count()};
}

// The baseline: the same allocation rows through one prepared INSERT in one transaction, with
// the same pragmas and the same indexes built at the end.
double runBare(const std::string& path, const std::vector<Row>& rows)
{
    std::error_code ec;
    std::filesystem::remove(path, ec);
    const auto t0 = Clock::now();
    store::writeBareAllocations(path, rows);
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv)
{
    const int64_t events = argc > 1 ? std::stoll(argv[1]) : 4000000;
    const std::string dir = argc > 2 ? argv[2] : std::filesystem::temp_directory_path().string();
    const int repeats = argc > 3 ? std::stoi(argv[3]) : 3;
    std::vector<Event> ev;
    std::vector<Row> rows;
    ev.reserve(static_cast<size_t>(events));
    makeWorkload(events, ev, rows);
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string pIngest = dir + "/bench-ingest.fragscope";
    const std::string pBare = dir + "/bench-bare.sqlite";
    std::vector<double> ta, ti, tb;
    uint64_t bytes = 0;
    for (int i = 0; i < repeats; ++i) {
        const IngestTimes t = runIngest(pIngest, ev);
        ta.push_back(t.add);
        ti.push_back(t.total);
        bytes = fileBytes(pIngest);
        tb.push_back(runBare(pBare, rows));
    }
    const double ma = median(ta), mi = median(ti), mb = median(tb);
    const auto n = static_cast<double>(ev.size());
    fmt::print("bench_ingest: {} events ({} allocation rows), {} runs, medians\n", ev.size(),
               rows.size(), repeats);
    fmt::print("  ingest sustained  {:8.3f} s  {:6.2f} M events/s  (add() of every event)\n", ma,
               n / ma / 1e6);
    fmt::print(
        "  ingest total      {:8.3f} s  {:6.2f} M events/s  {:5.1f} bytes/event ({} B file)\n", mi,
        n / mi / 1e6, static_cast<double>(bytes) / n, bytes);
    fmt::print(
        "  bare SQLite insert{:8.3f} s  {:6.2f} M events/s  ({} rows, same pragmas and indexes)\n",
        mb, n / mb / 1e6, rows.size());
    fmt::print(
        "  ratio ingest/bare {:8.2f}x   (targets: >= 1 M events/s, <= 1.5x, <= 40 B/event)\n",
        mi / mb);
    std::filesystem::remove(pIngest, ec);
    std::filesystem::remove(pBare, ec);
    return 0;
}
