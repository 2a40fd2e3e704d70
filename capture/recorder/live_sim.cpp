#include "live_sim.h"

#include "live_target.h"

#include <algorithm>
#include <chrono>
#include <fmt/format.h>
#include <optional>
#include <thread>
#include <unistd.h>

namespace fs::capture {

namespace {

// Paces a sink: forwards everything, sleeping so that at most `rate` events pass per second.
class PacedSink final : public ForwardingSink
{
public:
    PacedSink(EventSink& next, int64_t rate)
        : ForwardingSink(next), rate_(rate), t0_(std::chrono::steady_clock::now())
    {
    }
    void add(const Event& e) override
    {
        next_.add(e);
        if (rate_ > 0 && (++n_ & 255) == 0) {
            const auto due = t0_ + std::chrono::microseconds(n_ * 1'000'000 / rate_);
            std::this_thread::sleep_until(due);
        }
    }

private:
    int64_t rate_;
    int64_t n_ = 0;
    std::chrono::steady_clock::time_point t0_;
};

// Stretches the simulated clock: t -> t0 + (t - t0) * scale, end times alike.
class StretchedClock final : public ForwardingSink
{
public:
    StretchedClock(EventSink& next, int64_t t0, double scale)
        : ForwardingSink(next), t0_(t0), scale_(scale)
    {
    }
    void add(const Event& e) override
    {
        Event c = e;
        c.time = stretch(e.time);
        if (e.endTime != 0) c.endTime = stretch(e.endTime);
        next_.add(c);
    }

private:
    int64_t stretch(int64_t t) const
    {
        return t0_ + static_cast<int64_t>(static_cast<double>(t - t0_) * scale_);
    }
    int64_t t0_;
    double scale_;
};

// The stretch that puts eventsPerSec events in each simulated second: the simulator's own
// time per event, from a short run of the same configuration.
double clockStretch(const sim::Config& cfg, double eventsPerSec)
{
    sim::Config probe = cfg;
    probe.targetEvents =
        std::min<int64_t>(cfg.targetEvents > 0 ? cfg.targetEvents : 200'000, 200'000);
    NullSink none;
    const sim::Stats st = sim::Simulator(probe).run(none);
    const double own = static_cast<double>(std::max<int64_t>(st.timeEnd - st.timeBegin, 1)) /
                       static_cast<double>(std::max<int64_t>(st.events, 1));
    return 1e9 / eventsPerSec / own;
}

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
    std::optional<StretchedClock> stretched;
    if (opts.clockEventsPerSec > 0)
        stretched.emplace(paced, cfg.startTimeNs, clockStretch(cfg, opts.clockEventsPerSec));
    const sim::Stats st = simulator.run(stretched ? static_cast<EventSink&>(*stretched) : paced);
    target.finish();
    fmt::print(
        "Simulated {} events live (hash {:016x}): {} allocations, {} kernels, {} graph launches, "
        "{} frames; {} events not delivered (no recorder attached at the time). SYNTHETIC data.\n",
        st.events, st.eventHash, st.allocs, st.kernels, st.graphLaunches, st.frames,
        target.eventsDropped());
    return 0;
}

} // namespace fs::capture
