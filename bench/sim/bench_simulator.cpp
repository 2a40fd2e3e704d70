// Simulator throughput: events/s of the simulator alone (into a sink that drops everything),
// and of the simulator feeding Ingest (a real session file), measured in the same run.
// Usage: bench_simulator [EVENTS (default 5000000)] [--frames N --steps S --seed S] [--no-ingest]
//        bench_simulator --dump [EVENTS (default: one video)] [workload options]
//   --dump prints the simulator's per-frame view (coherence, fallbacks, fragmentation); the
//   workload options (--context, --ws-base, --ws-per-frame, --tokens, --mem-div, --capacity-gib)
//   are there to explore the model.
#include "capture/sim/simulator.h"
#include "core/store/ingest.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fmt/format.h>
#include <string>
#include <unistd.h>
#include <unordered_map>

namespace {

class NullSink final : public fs::EventSink
{
public:
    fs::StringId intern(std::string_view s) override
    {
        auto [it, added] =
            ids_.try_emplace(std::string(s), static_cast<fs::StringId>(ids_.size() + 1));
        return it->second;
    }
    fs::StackId internStack(const std::vector<fs::StringId>&) override { return fs::kNoStack; }
    void addDevice(const fs::DeviceInfo&) override {}
    void addProcess(const fs::ProcessInfo&) override {}
    void setMeta(const std::string&, const std::string&) override {}
    void add(const fs::Event& e) override { sum_ += e.address ^ static_cast<uint64_t>(e.time); }
    void addFrameMetric(int64_t, const std::string&, double, const std::string&) override {}
    void warn(const std::string&) override {}
    uint64_t sum_ = 0;

private:
    std::unordered_map<std::string, fs::StringId> ids_;
};

double seconds(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Process CPU time: on a shared 2-core machine the wall clock also measures the neighbours.
double cpuSeconds()
{
    timespec ts{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

} // namespace

int main(int argc, char** argv)
{
    fs::sim::Config cfg;
    int64_t events = -1;
    bool dump = false;
    bool ingest = true;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        auto next = [&] { return i + 1 < argc ? std::strtoll(argv[++i], nullptr, 10) : 0; };
        if (a == "--frames")
            cfg.frames = next();
        else if (a == "--steps")
            cfg.steps = next();
        else if (a == "--seed")
            cfg.seed = static_cast<uint64_t>(next());
        else if (a == "--capacity-gib")
            cfg.capacityBytes = static_cast<uint64_t>(next()) << 30;
        else if (a == "--context")
            cfg.contextFrames = static_cast<int>(next());
        else if (a == "--ws-base")
            cfg.workspaceBaseMiB = static_cast<uint64_t>(next());
        else if (a == "--ws-per-frame")
            cfg.workspacePerFrameMiB = static_cast<uint64_t>(next());
        else if (a == "--tokens")
            cfg.tokensPerFrame = static_cast<uint64_t>(next());
        else if (a == "--mem-div")
            cfg.memoryTokenDivisor = static_cast<uint64_t>(next());
        else if (a == "--dump")
            dump = true;
        else if (a == "--no-ingest")
            ingest = false;
        else
            events = std::strtoll(a.c_str(), nullptr, 10);
    }
    if (dump) ingest = false;
    cfg.targetEvents = events >= 0 ? events : dump ? 0 : 5'000'000;

    NullSink null;
    auto t0 = std::chrono::steady_clock::now();
    double c0 = cpuSeconds();
    const fs::sim::Stats st = fs::sim::Simulator(cfg).run(null);
    const double simSecs = seconds(t0);
    const double simCpu = cpuSeconds() - c0;
    fmt::print("simulator -> null sink: {} events in {:.3f} s = {:.2f} M events/s ({:.2f} M events "
               "per CPU-second) "
               "(frames {}, collapsed {}, fallback kernels {}, OOMs {}, segments {}, peak reserved "
               "{:.2f} GiB)\n",
               st.events, simSecs, static_cast<double>(st.events) / simSecs / 1e6,
               static_cast<double>(st.events) / simCpu / 1e6, st.frames, st.collapsedFrames,
               st.fallbackKernels, st.ooms, st.segmentsCreated,
               static_cast<double>(st.peakReserved) / (1ull << 30));
    if (dump) {
        for (size_t f = 0; f < st.perFrame.size(); ++f) {
            const auto& p = st.perFrame[f];
            fmt::print(
                "frame {:3} coherence {:.4f} fallbacks {:3}/{:3} ooms {} ws {:5} MiB reserved "
                "{:6.2f} GiB "
                "allocated {:6.2f} GiB largest free {:8.1f} MiB total free {:8.1f} MiB F {:.3f}\n",
                f, p.coherence, p.fallbacks, p.attentionCalls, p.ooms, p.workspaceBytes >> 20,
                static_cast<double>(p.reserved) / (1ull << 30),
                static_cast<double>(p.allocated) / (1ull << 30),
                static_cast<double>(p.largestFree) / (1 << 20),
                static_cast<double>(p.totalFree) / (1 << 20), p.fragmentation);
        }
        return 0;
    }
    if (!ingest) return 0;

    const std::string path = fmt::format("/tmp/bench_simulator_{}.fragscope", ::getpid());
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.synthetic = true;
    o.reorderWindowNs = 0;
    fs::Ingest in(o);
    t0 = std::chrono::steady_clock::now();
    c0 = cpuSeconds();
    in.begin();
    const fs::sim::Stats st2 = fs::sim::Simulator(cfg).run(in);
    in.end();
    const double inSecs = seconds(t0);
    const double inCpu = cpuSeconds() - c0;
    const auto bytes = std::filesystem::file_size(path);
    fmt::print("simulator -> Ingest:    {} events in {:.3f} s = {:.2f} M events/s ({:.2f} M events "
               "per CPU-second), "
               "file {:.1f} MB = {:.1f} B/event\n",
               st2.events, inSecs, static_cast<double>(st2.events) / inSecs / 1e6,
               static_cast<double>(st2.events) / inCpu / 1e6, static_cast<double>(bytes) / 1e6,
               static_cast<double>(bytes) / static_cast<double>(st2.events));
    fmt::print("simulator share of the Ingest run (CPU): {:.0f} %\n", 100.0 * simCpu / inCpu);
    std::filesystem::remove(path);
    return st.eventHash == st2.eventHash ? 0 : 1;
}
