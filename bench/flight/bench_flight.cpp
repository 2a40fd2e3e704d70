// The flight recorder on a simulated long run (docs/capture.md "Flight recording"): the
// simulator's realistic-mechanism workload (OOMs, collapses), its timestamps stretched so that the
// run spans HOURS at EVENTS_PER_SEC, recorded two ways in the same run, each in a child process
// of its own: whole (every event, the baseline) and with --keep/--before/--after/--max-size.
// Prints each one's peak RSS, file size, wall time and the windows kept, then the same flight
// recording at half the run's length (memory must not grow with the length).
// Usage: bench_flight [HOURS] [EVENTS_PER_SEC] [KEEP_S] [MAX_SIZE_MB] [DIR]
#include "capture/recorder/flight_recorder.h"
#include "capture/sim/simulator.h"
#include "core/analysis/types.h"
#include "core/store/ingest.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace fs;
using Clock = std::chrono::steady_clock;

namespace {

// Stretches the simulator's clock: t -> t0 + (t - t0) * scale (a run of hours at a realistic
// event rate, from a simulation that emits its events densely).
class TimeStretch final : public EventSink
{
public:
    TimeStretch(EventSink& out, int64_t t0, double scale) : out_(out), t0_(t0), scale_(scale) {}
    StringId intern(std::string_view s) override { return out_.intern(s); }
    StackId internStack(const std::vector<StringId>& f) override { return out_.internStack(f); }
    void addDevice(const DeviceInfo& d) override { out_.addDevice(d); }
    void addProcess(const ProcessInfo& p) override { out_.addProcess(p); }
    void setMeta(const std::string& k, const std::string& v) override { out_.setMeta(k, v); }
    void addFrameMetric(int64_t f, const std::string& n, double v, const std::string& s) override
    {
        out_.addFrameMetric(f, n, v, s);
    }
    void warn(const std::string& m) override { out_.warn(m); }
    void add(const Event& e) override
    {
        Event c = e;
        c.time = stretch(e.time);
        if (e.endTime != 0) c.endTime = stretch(e.endTime);
        out_.add(c);
    }

private:
    int64_t stretch(int64_t t) const
    {
        return t0_ + static_cast<int64_t>(static_cast<double>(t - t0_) * scale_);
    }
    EventSink& out_;
    int64_t t0_;
    double scale_;
};

struct Plan
{
    double hours = 24;
    double eventsPerSec = 200;
    int64_t keepNs = 60'000'000'000;
    int64_t maxBytes = 256ll << 20;
    std::string dir;
    double densePerEventNs = 0; // the simulator's own time per event
};

class NullSink final : public EventSink
{
    StringId intern(std::string_view) override { return StringId{1}; }
    StackId internStack(const std::vector<StringId>&) override { return kNoStack; }
    void addDevice(const DeviceInfo&) override {}
    void addProcess(const ProcessInfo&) override {}
    void setMeta(const std::string&, const std::string&) override {}
    void add(const Event&) override {}
    void addFrameMetric(int64_t, const std::string&, double, const std::string&) override {}
    void warn(const std::string&) override {}
};

sim::Config runConfig(int64_t events)
{
    sim::Config cfg;
    cfg.frames = 24;
    cfg.steps = 20;
    cfg.seed = 11;
    cfg.mechanisms = sim::MechanismSet::Realistic;
    cfg.targetEvents = events;
    return cfg;
}

struct Outcome
{
    double wallS = 0;
    long maxRssKiB = 0;
    int64_t fileBytes = 0;
    int64_t windows = 0;
    int64_t written = 0;
    int64_t dropped = 0;
    size_t peakKept = 0;
    size_t peakLive = 0;
    int64_t events = 0;
};

// One recording in a child process (its own peak RSS); the child writes its figures to a pipe.
Outcome record(const Plan& p, double hours, bool flight, const std::string& path)
{
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    const auto t0 = Clock::now();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        Outcome o;
        const int64_t events = static_cast<int64_t>(hours * 3600 * p.eventsPerSec);
        sim::Config cfg = runConfig(events);
        IngestOptions io;
        io.path = path;
        io.sourceKind = "simulator-live";
        io.synthetic = true;
        io.commitIntervalMs = 250; // as the recorder commits
        Ingest ingest(io);
        ingest.begin();
        const int64_t t0ns = cfg.startTimeNs;
        const double scale = (1e9 / p.eventsPerSec) / p.densePerEventNs;
        std::unique_ptr<capture::FlightRecorder> fr;
        EventSink* sink = &ingest;
        if (flight) {
            capture::FlightOptions fo;
            fo.keepNs = p.keepNs;
            fo.beforeNs = p.keepNs;
            fo.afterNs = p.keepNs / 6;
            fo.maxBytes = p.maxBytes;
            const auto rules = analysis::defaultCollapseRules();
            fo.breaks = [rules](const std::map<std::string, double>& m) {
                return analysis::breaksAnyRule(m, rules);
            };
            fr = std::make_unique<capture::FlightRecorder>(ingest,
                                                           capture::flightOptionsFor(fo, io));
            sink = fr.get();
        }
        TimeStretch stretch(*sink, t0ns, scale);
        const sim::Stats st = sim::Simulator(cfg).run(stretch);
        o.events = st.events;
        if (fr) {
            fr->finish();
            o.windows = static_cast<int64_t>(fr->windows().size());
            o.written = fr->stats().eventsWritten;
            o.dropped = fr->stats().windowsDropped;
            o.peakKept = fr->stats().peakKept;
            o.peakLive = fr->stats().peakLive;
        } else {
            o.written = st.events;
        }
        ingest.end();
        o.fileBytes = capture::sessionFileBytes(path);
        if (::write(fds[1], &o, sizeof o) != sizeof o) _exit(3);
        _exit(0);
    }
    ::close(fds[1]);
    Outcome o;
    const bool got = ::read(fds[0], &o, sizeof o) == sizeof o;
    ::close(fds[0]);
    int status = 0;
    struct rusage ru
    {
    };
    ::wait4(pid, &status, 0, &ru);
    if (!got || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fmt::print(stderr, "bench_flight: the {} recording failed\n", flight ? "flight" : "whole");
        std::exit(1);
    }
    o.wallS = std::chrono::duration<double>(Clock::now() - t0).count();
    o.maxRssKiB = ru.ru_maxrss;
    return o;
}

void row(const char* what, const Outcome& o)
{
    fmt::print("{:<28} {:>12} {:>10.1f} {:>12.1f} {:>8.1f} {:>8} {:>12}\n", what, o.events,
               o.maxRssKiB / 1024.0, static_cast<double>(o.fileBytes) / (1 << 20), o.wallS,
               o.windows, o.written);
}

} // namespace

int main(int argc, char** argv)
{
    Plan p;
    if (argc > 1) p.hours = std::atof(argv[1]);
    if (argc > 2) p.eventsPerSec = std::atof(argv[2]);
    if (argc > 3) p.keepNs = static_cast<int64_t>(std::atof(argv[3]) * 1e9);
    if (argc > 4) p.maxBytes = static_cast<int64_t>(std::atof(argv[4]) * (1 << 20));
    p.dir = argc > 5 ? argv[5] : std::filesystem::temp_directory_path().string();
    if (p.hours <= 0 || p.eventsPerSec <= 0 || p.keepNs <= 0 || p.maxBytes <= 0) {
        fmt::print(stderr, "usage: bench_flight [HOURS] [EVENTS_PER_SEC] [KEEP_S] [MAX_SIZE_MB] "
                           "[DIR]\n");
        return 2;
    }
    {
        // The simulator's own time per event on a short run of the workload: the stretch factor.
        NullSink null;
        const sim::Stats st = sim::Simulator(runConfig(200'000)).run(null);
        p.densePerEventNs = static_cast<double>(st.timeEnd - st.timeBegin) /
                            static_cast<double>(std::max<int64_t>(st.events, 1));
    }
    const std::string base = p.dir + fmt::format("/bench_flight_{}", ::getpid());
    fmt::print("simulated run: {:.1f} h at {:.0f} events/s (realistic mechanisms, 20 steps a "
               "frame, seed 11, time stretched); --keep {:.0f}s --before {:.0f}s --after {:.0f}s "
               "--max-size {} MiB\n",
               p.hours, p.eventsPerSec, p.keepNs / 1e9, p.keepNs / 1e9, p.keepNs / 6e9,
               p.maxBytes >> 20);
    fmt::print("{:<28} {:>12} {:>10} {:>12} {:>8} {:>8} {:>12}\n", "recording", "events",
               "peak MiB", "file MiB", "wall s", "windows", "written");
    const Outcome whole = record(p, p.hours, false, base + "_whole.fragscope");
    row("whole (baseline)", whole);
    std::filesystem::remove(base + "_whole.fragscope");
    const Outcome half = record(p, p.hours / 2, true, base + "_half.fragscope");
    row(fmt::format("--keep, {:.1f} h", p.hours / 2).c_str(), half);
    std::filesystem::remove(base + "_half.fragscope");
    const Outcome flight = record(p, p.hours, true, base + "_flight.fragscope");
    row(fmt::format("--keep, {:.1f} h", p.hours).c_str(), flight);
    std::filesystem::remove(base + "_flight.fragscope");
    fmt::print("flight / whole: peak RSS {:.2f}x (both hold SQLite's 128 MiB page cache), file "
               "{:.3f}x; triggers not written (file at --max-size): {}\n",
               static_cast<double>(flight.maxRssKiB) / static_cast<double>(whole.maxRssKiB),
               static_cast<double>(flight.fileBytes) / static_cast<double>(whole.fileBytes),
               flight.dropped);
    fmt::print(
        "the recorder's own memory: {} events held at once ({:.1f} MiB) and {} live "
        "blocks, segments and pieces in its state ({:.1f} h run); {} and {} ({:.1f} h run)\n",
        half.peakKept, static_cast<double>(half.peakKept * sizeof(Event)) / (1 << 20),
        half.peakLive, p.hours / 2, flight.peakKept, flight.peakLive, p.hours);
    const bool ok = flight.fileBytes <= p.maxBytes;
    if (!ok) fmt::print("FAIL: the flight recording's file exceeds --max-size\n");
    return ok ? 0 : 1;
}
