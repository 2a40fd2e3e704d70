// Analysis benchmarks (docs/analysis.md, "Measured figures"): cold open, heatmap 1920x1080 warm and
// cold, full metrics timeline events/s, state query time, peak RSS. Each figure is printed with
// a baseline measured in the same run. Usage:
//   bench_analysis [--events N] [--session PATH] [--keep]
// With --session PATH and an existing file, that session is used (no simulation).
#include "capture/sim/simulator.h"
#include "core/analysis/engine.h"
#include "core/store/baseline.h"
#include "core/store/ingest.h"
#include "core/store/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <sys/resource.h>
#include <vector>

using namespace fs;
using namespace fs::analysis;
using Clock = std::chrono::steady_clock;

namespace {

double msSince(Clock::time_point t0)
{
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

// CPU time of this process: on a machine shared with other builds, wall time alone misleads.
double cpuMs()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

double peakRssMiB()
{
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<double>(ru.ru_maxrss) / 1024.0;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0 : v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv)
{
    int64_t events = 10'000'000;
    std::string path =
        (std::filesystem::temp_directory_path() / "bench_analysis.fragscope").string();
    bool keep = false;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "--events") && i + 1 < argc)
            events = std::stoll(argv[++i]);
        else if (!std::strcmp(argv[i], "--session") && i + 1 < argc)
            path = argv[++i];
        else if (!std::strcmp(argv[i], "--keep"))
            keep = true;
    }
    if (!std::filesystem::exists(path)) {
        const auto t0 = Clock::now();
        IngestOptions o;
        o.path = path;
        o.sourceKind = "simulator";
        o.synthetic = true;
        Ingest in(o);
        in.begin();
        sim::Config cfg;
        cfg.targetEvents = events;
        sim::Simulator s(cfg);
        const auto st = s.run(in);
        in.end();
        std::printf("simulated %lld events into %s in %.1f s\n", static_cast<long long>(st.events),
                    path.c_str(), msSince(t0) / 1000);
        keep = keep || false;
    }
    const double rssBefore = peakRssMiB();

    // Baseline for the cold open: a plain SQLite scan of the allocation rows the engine loads.
    double bareMs = 0;
    int64_t rows = 0;
    {
        const auto t0 = Clock::now();
        Session s = Session::open(path);
        uint64_t sink = 0;
        rows = store::scanAllocations(s, sink);
        bareMs = msSince(t0);
        std::printf(
            "baseline: plain SQLite scan of %lld allocation rows: %.0f ms (checksum %llu)\n",
            static_cast<long long>(rows), bareMs, static_cast<unsigned long long>(sink & 0xff));
    }

    // Cold open to the first heatmap.
    auto t0 = Clock::now();
    double c0 = cpuMs();
    const auto e = Engine::open(path);
    const double openMs = msSince(t0);
    const double openCpu = cpuMs() - c0;
    const auto track = e->defaultTrack(0);
    if (!track) {
        std::printf("no allocator track\n");
        return 1;
    }
    HeatmapRequest hr;
    hr.device = track->device;
    hr.level = track->level;
    t0 = Clock::now();
    c0 = cpuMs();
    const HeatmapRaster first = e->heatmap(hr);
    const double firstHeat = msSince(t0);
    const double firstCpu = cpuMs() - c0;
    std::printf(
        "cold open: Engine::open %.0f ms (cpu %.0f ms, per-frame cache %s) + first 1920x1080 "
        "heatmap "
        "%.0f ms (cpu %.0f ms) = %.0f ms (target <= 2000 ms; %lld allocations, %lld in view)\n",
        openMs, openCpu, e->loadInfo().frameCacheUsed ? "used" : "computed", firstHeat, firstCpu,
        openMs + firstHeat, static_cast<long long>(track->allocations),
        static_cast<long long>(first.allocationsInView));
    std::printf("peak RSS after open: %.0f MiB (before: %.0f MiB)\n", peakRssMiB(), rssBefore);

    // Warm heatmaps: full view, and zoomed windows of 10% and 1% of the span (pan positions).
    const int64_t span = e->timeEnd() - e->timeBegin();
    for (double frac : {1.0, 0.1, 0.01}) {
        std::vector<double> ms, cpu;
        int64_t inView = 0;
        for (int k = 0; k < 7; ++k) {
            HeatmapRequest r = hr;
            const int64_t w = static_cast<int64_t>(static_cast<double>(span) * frac);
            r.t0 = e->timeBegin() + static_cast<int64_t>(static_cast<double>(span - w) * (k / 6.0));
            r.t1 = r.t0 + std::max<int64_t>(w, 1);
            t0 = Clock::now();
            c0 = cpuMs();
            const HeatmapRaster h = e->heatmap(r);
            ms.push_back(msSince(t0));
            cpu.push_back(cpuMs() - c0);
            inView += h.allocationsInView;
        }
        std::printf(
            "warm heatmap 1920x1080, %.0f%% of the span: median %.1f ms (cpu %.1f ms) over 7 pans "
            "(target <= 50 ms; %lld allocations in view on average)\n",
            frac * 100, median(ms), median(cpu), static_cast<long long>(inView / 7));
    }

    // Full metrics timeline.
    TimelineOptions to;
    to.device = track->device;
    to.level = track->level;
    to.step = std::max<int64_t>(1, span / 2000);
    t0 = Clock::now();
    c0 = cpuMs();
    const Timeline tl = e->timeline(to);
    const double tlMs = msSince(t0);
    const double tlCpu = cpuMs() - c0;
    std::printf("full metrics timeline: %lld events replayed in %.0f ms = %.2f M events/s "
                "(cpu %.0f ms = %.2f M events/s; target >= 5 M/s), %zu samples\n",
                static_cast<long long>(tl.eventsReplayed), tlMs,
                static_cast<double>(tl.eventsReplayed) / tlMs / 1000.0, tlCpu,
                static_cast<double>(tl.eventsReplayed) / tlCpu / 1000.0, tl.time.size());

    // State queries at random times vs the brute-force full replay.
    std::mt19937_64 rng(7);
    std::vector<double> q, full;
    for (int k = 0; k < 50; ++k) {
        const int64_t t =
            e->timeBegin() +
            static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(span, 1)));
        t0 = Clock::now();
        const State s = e->stateAt(track->device, track->level, t);
        q.push_back(msSince(t0));
        if (k < 3) {
            t0 = Clock::now();
            const State b = e->stateAtFullReplay(track->device, track->level, t);
            full.push_back(msSince(t0));
            if (b.fragmentCount != s.fragmentCount || b.freeBytes != s.freeBytes)
                std::printf("MISMATCH at %lld\n", static_cast<long long>(t));
        }
    }
    std::printf("state --at query: median %.2f ms, max %.2f ms over 50 random times "
                "(baseline full replay: median %.0f ms)\n",
                median(q), *std::max_element(q.begin(), q.end()), median(full));
    std::printf("peak RSS: %.0f MiB\n", peakRssMiB());
    if (!keep) std::filesystem::remove(path);
    return 0;
}
