// The flight recorder on a simulated long run (docs/capture.md "Flight recording"):
// `fragscope simulate --live --mechanisms realistic --live-clock RATE` (OOMs and collapses, its
// clock stretched so that the run spans HOURS at RATE events per simulated second, delivered as
// fast as read), recorded by `fragscope attach` two ways in the same run: whole (the baseline)
// and with --keep/--max-size, then the flight recording again over half the run (its memory must
// not grow with the run's length). Prints the attach process's peak RSS (wait4), the file, the
// wall time and the windows kept.
// Usage: bench_flight [HOURS] [RATE] [KEEP_S] [MAX_SIZE_MB]
#include "core/store/session.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using Clock = std::chrono::steady_clock;
namespace fsys = std::filesystem;

namespace {

pid_t spawn(const std::vector<std::string>& args)
{
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::vector<char*> argv;
        for (const auto& a : args)
            argv.push_back(const_cast<char*>(a.c_str()));
        argv.push_back(nullptr);
        if (std::FILE* devnull = std::fopen("/dev/null", "w")) {
            ::dup2(fileno(devnull), 1);
            ::dup2(fileno(devnull), 2);
        }
        ::execv(argv[0], argv.data());
        _exit(127);
    }
    return pid;
}

struct Outcome
{
    double wallS = 0;
    long peakRssKiB = 0;
    int64_t fileBytes = 0;
    int64_t events = 0; // in the session
    size_t windows = 0;
};

Outcome record(const fsys::path& dir, double hours, double rate,
               const std::vector<std::string>& keep, const std::string& name)
{
    const std::string cli = FRAGSCOPE_CLI;
    const auto events = static_cast<int64_t>(hours * 3600 * rate);
    const pid_t sim =
        spawn({cli, "simulate", "--live", "--mechanisms", "realistic", "--steps", "20", "--seed",
               "11", "--events", std::to_string(events), "--live-clock", fmt::format("{}", rate)});
    const fsys::path socket = dir / "sockets" / (std::to_string(sim) + ".sock");
    for (int i = 0; i < 1000 && !fsys::exists(socket); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    const std::string out = (dir / name).string();
    std::vector<std::string> args = {cli, "attach", std::to_string(sim), "-o", out, "--no-index"};
    args.insert(args.end(), keep.begin(), keep.end());
    const auto t0 = Clock::now();
    const pid_t rec = spawn(args);
    int status = 0;
    struct rusage ru
    {
    };
    ::wait4(rec, &status, 0, &ru);
    Outcome o;
    o.wallS = std::chrono::duration<double>(Clock::now() - t0).count();
    int simStatus = 0;
    ::waitpid(sim, &simStatus, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !WIFEXITED(simStatus) ||
        WEXITSTATUS(simStatus) != 0) {
        fmt::print(stderr, "bench_flight: recording {} failed\n", name);
        std::exit(1);
    }
    o.peakRssKiB = ru.ru_maxrss;
    o.fileBytes = static_cast<int64_t>(fsys::file_size(out));
    const fs::SessionSummary s = fs::Session::open(out, false).summary();
    o.events = s.events;
    o.windows = s.windows.size();
    fsys::remove(out);
    return o;
}

void row(const std::string& what, double hours, const Outcome& o)
{
    fmt::print("{:<30} {:>6.1f} {:>10.1f} {:>10.1f} {:>8.1f} {:>8} {:>12}\n", what, hours,
               o.peakRssKiB / 1024.0, static_cast<double>(o.fileBytes) / (1 << 20), o.wallS,
               o.windows, o.events);
}

} // namespace

int main(int argc, char** argv)
{
    const double hours = argc > 1 ? std::atof(argv[1]) : 24;
    const double rate = argc > 2 ? std::atof(argv[2]) : 200;
    const double keepS = argc > 3 ? std::atof(argv[3]) : 60;
    const double maxMiB = argc > 4 ? std::atof(argv[4]) : 256;
    if (hours <= 0 || rate <= 0 || keepS <= 0 || maxMiB < 1) {
        fmt::print(stderr, "usage: bench_flight [HOURS] [RATE] [KEEP_S] [MAX_SIZE_MB]\n");
        return 2;
    }
    const fsys::path dir =
        fsys::temp_directory_path() / ("fragscope-bench-flight-" + std::to_string(::getpid()));
    fsys::create_directories(dir / "sockets");
    ::setenv("FRAGSCOPE_SOCKET_DIR", (dir / "sockets").c_str(), 1);
    ::setenv("FRAGSCOPE_NO_PROGRESS", "1", 1);
    const std::vector<std::string> keep = {
        "--keep", fmt::format("{}s", keepS), "--max-size",
        fmt::format("{}", static_cast<int64_t>(maxMiB * 1048576))};
    fmt::print("bench_flight: simulate --live (realistic mechanisms, 20 steps a frame, seed 11), "
               "{:.0f} events per simulated second; attach {} {}s --before {}s --after 10s "
               "--max-size {:.0f} MiB\n",
               rate, keep[0], keepS, keepS, maxMiB);
    fmt::print("{:<30} {:>6} {:>10} {:>10} {:>8} {:>8} {:>12}\n", "attach", "hours", "peak MiB",
               "file MiB", "wall s", "windows", "events kept");
    const Outcome whole = record(dir, hours, rate, {}, "whole.fragscope");
    row("whole (baseline)", hours, whole);
    const Outcome half = record(dir, hours / 2, rate, keep, "half.fragscope");
    row("--keep", hours / 2, half);
    const Outcome flight = record(dir, hours, rate, keep, "flight.fragscope");
    row("--keep", hours, flight);
    fmt::print("flight / whole: peak RSS {:.2f}x, file {:.3f}x; flight {:.1f} h / {:.1f} h: peak "
               "RSS {:.2f}x\n",
               static_cast<double>(flight.peakRssKiB) / static_cast<double>(whole.peakRssKiB),
               static_cast<double>(flight.fileBytes) / static_cast<double>(whole.fileBytes), hours,
               hours / 2,
               static_cast<double>(flight.peakRssKiB) / static_cast<double>(half.peakRssKiB));
    fsys::remove_all(dir);
    const bool ok = flight.fileBytes <= static_cast<int64_t>(maxMiB * 1048576);
    if (!ok) fmt::print("FAIL: the flight recording's file exceeds --max-size\n");
    return ok ? 0 : 1;
}
