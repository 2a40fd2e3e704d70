// Cost of the agent's PyTorch bridge per allocator action, on the torch double
// (tests/capture/torch_double): the same allocator-heavy Python loop run plainly, under
// `fragscope record --no-pytorch` (agent loaded, bridge off: the baseline) and under
// `fragscope record` (bridge on), each measured inside the loop, best of 3; and with the
// allocator's history enabled by the program itself (what the allocator pays, not the bridge). Also
// the drain rate: trace entries the bridge turns into events per second of GIL it holds. Usage:
// bench_capture_pytorch [ROUNDS]   (default 3000 rounds = 48 000 allocator calls), run twice: no
// other work between allocations, then 20 us of Python work after each.
#include "core/store/session.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>

namespace {

struct Run
{
    double seconds = 1e30;
    long actions = 0;
};

Run timed(const std::string& cmd)
{
    Run best;
    for (int i = 0; i < 3; ++i) {
        std::unique_ptr<FILE, int (*)(FILE*)> p(popen((cmd + " 2>/dev/null").c_str(), "r"), pclose);
        if (!p) std::exit(1);
        std::array<char, 512> line{};
        bool found = false;
        while (fgets(line.data(), line.size(), p.get())) {
            long n = 0;
            double s = 0;
            if (std::sscanf(line.data(), "ACTIONS %ld SECONDS %lf", &n, &s) == 2) {
                best.actions = n;
                best.seconds = std::min(best.seconds, s);
                found = true;
            }
        }
        if (!found) {
            std::fprintf(stderr, "bench: '%s' printed no figure\n", cmd.c_str());
            std::exit(1);
        }
    }
    return best;
}

void measure(const std::filesystem::path& dir, const std::string& rounds, const std::string& workUs)
{
    const std::string cli = FRAGSCOPE_CLI, script = FRAGSCOPE_PYTORCH_BENCH_WORKLOAD;
    const std::string args = " " + rounds + " " + workUs;
    const std::string on = (dir / ("on-" + workUs + ".fragscope")).string();
    const Run plain = timed("python3 " + script + args);
    const Run off = timed(cli + " record --no-pytorch -o " + (dir / "off.fragscope").string() +
                          " -- python3 " + script + args);
    const Run history = timed("BENCH_HISTORY=1 python3 " + script + args);
    const Run bridge = timed(cli + " record -o " + on + " -- python3 " + script + args);
    const double n = static_cast<double>(plain.actions);
    std::printf("bench_capture_pytorch: %ld allocator calls (torch double), %s us of other work "
                "after each allocation, best of 3\n",
                plain.actions, workUs.c_str());
    std::printf("  plain python3                          %8.0f ns/call\n",
                plain.seconds / n * 1e9);
    std::printf("  baseline  record --no-pytorch          %8.0f ns/call\n", off.seconds / n * 1e9);
    std::printf("  history on, no bridge (python3)        %8.0f ns/call  (%+.0f ns/call: the "
                "allocator keeping it)\n",
                history.seconds / n * 1e9, (history.seconds - plain.seconds) / n * 1e9);
    std::printf(
        "  bridge on record                       %8.0f ns/call  (%+.0f ns/call, %+.1f %%)\n",
        bridge.seconds / n * 1e9, (bridge.seconds - off.seconds) / n * 1e9,
        (bridge.seconds / off.seconds - 1) * 100);
    const fs::Session session = fs::Session::open(on, false);
    auto meta = [&](const char* key) -> int64_t {
        const std::string v = session.meta(key);
        return v.empty() ? -1 : std::atoll(v.c_str());
    };
    const double entries = static_cast<double>(meta("pytorch.bridge_entries"));
    const double gilNs = static_cast<double>(meta("pytorch.bridge_gil_ns"));
    std::printf("  drain     %.0f trace entries in %lld drains, %.1f ms holding the GIL: %.2f M "
                "entries/s, %.0f ns/entry; lost %lld\n",
                entries, static_cast<long long>(meta("pytorch.bridge_drains")), gilNs / 1e6,
                gilNs > 0 ? entries / gilNs * 1e3 : 0.0, entries > 0 ? gilNs / entries : 0.0,
                static_cast<long long>(meta("pytorch.bridge_lost_entries")));
}

} // namespace

int main(int argc, char** argv)
{
    const std::string rounds = argc > 1 ? argv[1] : "3000";
    const auto dir = std::filesystem::temp_directory_path() /
                     ("fragscope-bench-pytorch-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ::setenv("FRAGSCOPE_SOCKET_DIR", (dir / "sockets").c_str(), 1);
    ::setenv("FRAGSCOPE_NO_PROGRESS", "1", 1);
    ::setenv("PYTHONPATH", FRAGSCOPE_TORCH_DOUBLE, 1);
    measure(dir, rounds, "0");  // as allocator-heavy as Python gets
    measure(dir, rounds, "20"); // a tensor with some kernels' worth of work
    std::filesystem::remove_all(dir);
    return 0;
}
