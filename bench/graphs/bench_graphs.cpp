// bench_graphs [REPLAYS] [SESSION]: the graphs analysis (fs::alloc::graphsReport, what
// `fragscope graphs` computes) on a simulated decode-graphs run with REPLAYS graph replays
// (default 1 M; written to SESSION first when it does not exist, not timed). Each measured step
// runs in a child process, so its peak memory is its own. Baseline, same run: a plain read of the
// session's graph launches and graph kernels (fs::store::readGraphRows), what any analysis of the
// replays must at least do. Goal: engine open + graphs <= 2 s, peak RSS <= 1 GiB (exit status 1
// when missed).
#include "capture/sim/simulator.h"
#include "core/alloc/graph_sharing.h"
#include "core/analysis/engine.h"
#include "core/store/graphs.h"
#include "core/store/ingest.h"
#include "core/store/session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <functional>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace stdfs = std::filesystem;
using namespace fs;

namespace {

double seconds(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Measured
{
    double seconds = 0;
    double cpuSeconds = 0; // user + system: this machine is shared, wall time is not the code's
    double rssMiB = 0;
    std::string line;
};

// Runs f in a child process: its wall time (measured there), its peak RSS, and the line it
// printed about what it computed.
Measured inChild(const std::function<std::string()>& f)
{
    int fd[2];
    if (::pipe(fd) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fd[0]);
        const auto t0 = std::chrono::steady_clock::now();
        const std::string what = f();
        const std::string out = fmt::format("{:.6f} {}", seconds(t0), what);
        if (::write(fd[1], out.data(), out.size()) < 0) std::_Exit(2);
        std::_Exit(0);
    }
    ::close(fd[1]);
    std::string out;
    char buf[512];
    for (ssize_t n; (n = ::read(fd[0], buf, sizeof buf)) > 0;)
        out.append(buf, static_cast<size_t>(n));
    ::close(fd[0]);
    int status = 0;
    rusage ru{};
    ::wait4(pid, &status, 0, &ru);
    Measured m;
    m.seconds = std::atof(out.c_str());
    m.rssMiB = static_cast<double>(ru.ru_maxrss) / 1024.0;
    auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
    m.cpuSeconds = secs(ru.ru_utime) + secs(ru.ru_stime);
    const size_t sp = out.find(' ');
    m.line = sp == std::string::npos ? out : out.substr(sp + 1);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) m.line = "FAILED: " + m.line;
    return m;
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

} // namespace

int main(int argc, char** argv)
{
    const int64_t replays = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
    std::string session = argc > 2 ? argv[2] : "";
    const stdfs::path tmp =
        stdfs::temp_directory_path() / fmt::format("fragscope-bench-graphs-{}", getpid());
    stdfs::create_directories(tmp);
    if (session.empty() || !stdfs::exists(session)) {
        if (session.empty()) session = (tmp / "decode.fragscope").string();
        sim::Config cfg;
        cfg.workload = sim::WorkloadKind::DecodeGraphs;
        cfg.replays = replays;
        IngestOptions o;
        o.path = session;
        o.sourceKind = "simulator";
        o.synthetic = true;
        o.durable = false;
        o.aliveAtEndIsAnomaly = false;
        const auto t0 = std::chrono::steady_clock::now();
        Ingest in(o);
        in.begin();
        const sim::Stats st = sim::Simulator(cfg).run(in);
        in.end();
        fmt::print("simulated decode-graphs: {} events, {} graph launches, {} kernels into {} "
                   "({:.1f} s, not timed below)\n",
                   st.events, st.graphLaunches, st.kernels, session, seconds(t0));
    }
    std::fflush(stdout);

    std::vector<double> base, full, report, baseCpu, fullCpu;
    Measured b, f, r;
    for (int run = 0; run < 3; ++run) {
        b = inChild([&] {
            const Session s = Session::open(session);
            const store::GraphRows rows = store::readGraphRows(s);
            int64_t kernels = 0;
            store::forEachGraphKernel(s, [&](const store::GraphKernelRow&) { ++kernels; });
            return fmt::format("{} launches, {} graph kernels", rows.launches.size(), kernels);
        });
        f = inChild([&] {
            const auto e = analysis::Engine::open(session);
            const analysis::GraphsReport g = alloc::graphsReport(*e);
            return fmt::format("{} graphs, {} replays, {} pools, {} sharing groups, saves {} B",
                               g.graphs.size(), g.replays.size(), g.pools.size(), g.sharing.size(),
                               g.sharingAll.peakReservedSavedBytes);
        });
        // The report alone, on an engine already open (what the GUI's panel waits for).
        r = inChild([&] {
            const auto e = analysis::Engine::open(session);
            const auto t0 = std::chrono::steady_clock::now();
            const analysis::GraphsReport g = alloc::graphsReport(*e);
            return fmt::format("{:.6f} graphs report alone", seconds(t0));
        });
        base.push_back(b.seconds);
        full.push_back(f.seconds);
        baseCpu.push_back(b.cpuSeconds);
        fullCpu.push_back(f.cpuSeconds);
        report.push_back(std::atof(r.line.c_str()));
    }
    double loadavg[1] = {0};
    ::getloadavg(loadavg, 1);
    fmt::print(
        "baseline, plain read of the graph rows: median {:.3f} s ({:.3f} s CPU), peak RSS {:.0f} "
        "MiB ({})\n",
        median(base), median(baseCpu), b.rssMiB, b.line);
    fmt::print("engine open + graphs (sharing what-if included): median {:.3f} s ({:.3f} s CPU), "
               "peak RSS {:.0f} MiB ({})\n",
               median(full), median(fullCpu), f.rssMiB, f.line);
    fmt::print("graphs report on an open engine: median {:.3f} s\n", median(report));
    fmt::print("goal: <= 2 s, <= 1024 MiB; {:.2f}x the baseline; load average {:.2f}\n",
               median(full) / std::max(median(base), 1e-9), loadavg[0]);
    std::error_code ec;
    stdfs::remove_all(tmp, ec);
    const bool failed = f.line.starts_with("FAILED") || b.line.starts_with("FAILED");
    const bool ok = median(full) <= 2.0 && f.rssMiB <= 1024;
    fmt::print("{}\n", failed ? "FAILED" : ok ? "PASS" : "OVER GOAL");
    if (!failed && !ok)
        fmt::print(stderr,
                   "bench_graphs: goal missed: engine open + graphs {:.2f} s (goal <= 2 s), "
                   "peak RSS {:.0f} MiB (goal <= 1024 MiB)\n",
                   median(full), f.rssMiB);
    return failed || !ok ? 1 : 0;
}
