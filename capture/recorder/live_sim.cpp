#include "live_sim.h"

#include "live_target.h"

#include <chrono>
#include <fmt/format.h>
#include <thread>
#include <unistd.h>

namespace fs::capture {

namespace {

// Paces a sink: forwards everything, sleeping so that at most `rate` events pass per second.
class PacedSink final : public EventSink
{
public:
    PacedSink(EventSink& inner, int64_t rate)
        : inner_(inner), rate_(rate), t0_(std::chrono::steady_clock::now())
    {
    }
    StringId intern(std::string_view s) override { return inner_.intern(s); }
    StackId internStack(const std::vector<StringId>& f) override { return inner_.internStack(f); }
    void addDevice(const DeviceInfo& d) override { inner_.addDevice(d); }
    void addProcess(const ProcessInfo& p) override { inner_.addProcess(p); }
    void setMeta(const std::string& k, const std::string& v) override { inner_.setMeta(k, v); }
    void addFrameMetric(int64_t f, const std::string& n, double v, const std::string& s) override
    {
        inner_.addFrameMetric(f, n, v, s);
    }
    void warn(const std::string& m) override { inner_.warn(m); }
    void add(const Event& e) override
    {
        inner_.add(e);
        if (rate_ > 0 && (++n_ & 255) == 0) {
            const auto due = t0_ + std::chrono::microseconds(n_ * 1'000'000 / rate_);
            std::this_thread::sleep_until(due);
        }
    }

private:
    EventSink& inner_;
    int64_t rate_;
    int64_t n_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

} // namespace

int runSimulatorLive(const sim::Config& cfg, const LiveSimOptions& opts)
{
    LiveTarget::Options lo;
    lo.kind = "simulator";
    lo.commandLine = opts.commandLine;
    lo = LiveTarget::fromEnvironment(lo);
    LiveTarget target(lo);
    std::string err;
    if (!target.open(err)) {
        fmt::print(stderr, "fragscope simulate --live: {}\n", err);
        return 1;
    }
    fmt::print(stderr,
               "fragscope simulate --live: pid {} serves {}; waiting for a recorder "
               "(fragscope attach {} -o FILE)\n",
               ::getpid(), target.socketPath(), ::getpid());
    // Nothing is worth simulating before someone records it: wait for the first Start.
    if (!target.waitForRecorder(opts.waitTimeoutMs)) {
        fmt::print(stderr, "fragscope simulate --live: no recorder started the run within {} s\n",
                   opts.waitTimeoutMs / 1000);
        return 1;
    }
    sim::Simulator simulator(cfg);
    PacedSink paced(target, opts.rateEventsPerSec);
    const sim::Stats st = simulator.run(paced);
    target.finish();
    fmt::print(
        "Simulated {} events live (hash {:016x}): {} allocations, {} kernels, {} graph launches, "
        "{} frames; {} events not delivered (no recorder attached at the time). SYNTHETIC data.\n",
        st.events, st.eventHash, st.allocs, st.kernels, st.graphLaunches, st.frames,
        target.eventsDropped());
    return 0;
}

} // namespace fs::capture
