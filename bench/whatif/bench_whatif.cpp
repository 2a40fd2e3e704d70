// bench_whatif [SESSION_OR_PICKLE]: replay speed of the allocator model (fs::alloc::replay, no
// session written) in requests per second, per configuration. Without an argument it generates a
// PyTorch-format snapshot of about 1 M allocations (bench/import/gen_snapshot.py, 150 MB) and
// imports it. Baseline, same run: the same requests walked through a plain std::map of live
// addresses (what any replay must at least do). Goal: >= 5 M requests/s per configuration (exit
// status 1 when a configuration misses it).
#include "core/alloc/replay.h"
#include "core/alloc/trace.h"
#include "core/import/importer.h"
#include "core/store/ingest.h"

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <unistd.h>

namespace stdfs = std::filesystem;
using namespace fs;
using namespace fs::alloc;

namespace {

double seconds(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string importPickle(const std::string& pickle, const stdfs::path& dir)
{
    const std::string out = (dir / "bench.fragscope").string();
    auto imp = fs::import::makeImporter(fs::import::Format::PytorchSnapshot, pickle);
    imp->prepare();
    IngestOptions o;
    o.path = out;
    imp->configure(o);
    Ingest ing(o);
    ing.begin();
    imp->emit(ing);
    ing.end();
    return out;
}

} // namespace

int main(int argc, char** argv)
{
    const stdfs::path tmp =
        stdfs::temp_directory_path() / fmt::format("fragscope-bench-whatif-{}", getpid());
    stdfs::create_directories(tmp);
    std::string input = argc > 1 ? argv[1] : "";
    if (input.empty()) {
        input = (tmp / "generated.pickle").string();
        const std::string cmd =
            fmt::format("python3 '{}' '{}' {}", FRAGSCOPE_GEN_SNAPSHOT, input, 150ll << 20);
        fmt::print("generating: {}\n", cmd);
        std::fflush(stdout);
        if (std::system(cmd.c_str()) != 0) {
            fmt::print("FAILED: generator\n");
            return 1;
        }
    }
    const std::string session = input.ends_with(".pickle") ? importPickle(input, tmp) : input;
    auto t0 = std::chrono::steady_clock::now();
    const Trace trace = readTrace(session);
    int64_t requests = 0, allocs = 0;
    for (const DeviceTrace& d : trace.devices) {
        requests += static_cast<int64_t>(d.requests.size());
        allocs += static_cast<int64_t>(d.allocs.size());
    }
    fmt::print("{}: {} allocations, {} requests (read in {:.2f} s)\n", session, allocs, requests,
               seconds(t0));

    // Baseline: walk the same requests through an ordered map of live allocations.
    {
        t0 = std::chrono::steady_clock::now();
        uint64_t sink = 0;
        for (const DeviceTrace& d : trace.devices) {
            std::map<uint64_t, uint64_t> live;
            for (const Request& r : d.requests) {
                if (r.kind == Request::Alloc && r.index != kFailedRequest)
                    live.emplace(d.allocs[r.index].address, r.size);
                else if (r.kind == Request::Free)
                    sink += live.erase(d.allocs[r.index].address);
            }
        }
        const double s = seconds(t0);
        fmt::print("  baseline (std::map walk)          {:8.2f} M requests/s ({:.3f} s){}\n",
                   static_cast<double>(requests) / s / 1e6, s, sink == 0 ? " (empty)" : "");
    }

    struct Conf
    {
        const char* name;
        const char* conf;
        Policy policy;
        uint64_t capacity;
    };
    const Conf confs[] = {
        {"recorded (PyTorch defaults)", "", Policy::PyTorch, 0},
        {"expandable_segments:True", "expandable_segments:True", Policy::PyTorch, 0},
        {"max_split_size_mb:128", "max_split_size_mb:128", Policy::PyTorch, 0},
        {"roundup_power2_divisions:4", "roundup_power2_divisions:4", Policy::PyTorch, 0},
        {"garbage_collection_threshold:0.6", "garbage_collection_threshold:0.6", Policy::PyTorch,
         80ull << 30},
        {"tiered (experimental)", "", Policy::Tiered, 0},
    };
    int rc = 0;
    for (const Conf& c : confs) {
        ReplayOptions o;
        o.config = Config::parse(c.conf);
        o.policy = c.policy;
        o.capacity = c.capacity;
        double best = 1e30;
        int64_t ooms = 0;
        for (int rep = 0; rep < 3; ++rep) {
            t0 = std::chrono::steady_clock::now();
            const auto r = replay(trace, o);
            best = std::min(best, seconds(t0));
            ooms = r.empty() ? 0 : r[0].counters.ooms;
        }
        const double rate = static_cast<double>(requests) / best / 1e6;
        fmt::print("  {:<34} {:8.2f} M requests/s ({:.3f} s, best of 3){}{}\n", c.name, rate, best,
                   ooms ? fmt::format(", {} OOMs", ooms) : "",
                   rate < 5.0 ? "  BELOW the 5 M/s goal" : "");
        if (rate < 5.0) {
            fmt::print(stderr, "bench_whatif: goal missed: {} at {:.2f} M requests/s (goal >= 5)\n",
                       c.name, rate);
            rc = 1;
        }
    }
    std::error_code ec;
    stdfs::remove_all(tmp, ec);
    return rc;
}
