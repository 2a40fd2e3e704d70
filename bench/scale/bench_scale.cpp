// The long-run targets (docs/analysis.md "Scale"): on `fragscope simulate --events 100M --seed 1`
// (about 33 M allocations) `fragscope collapse` answers in <= 10 s and no command needs more than
// 8 GiB of memory (exit status 1 when missed, or when a step fails).
//   bench_scale [EVENTS=1M] [SESSION]
// Simulates the session into SESSION (a temporary file when none is given; an existing SESSION is
// reused), then runs, each as its own process timed from start to exit with its peak resident
// memory (wait4's ru_maxrss): `collapse` on the last collapsed frame (first open: the stored index
// is dropped before, so the engine builds and stores it), `collapse` again (reopen), `report`,
// `state --at end`, `export heatmap`, and `fragscope-gui --measure-open` twice (its JSON line).
// Baseline in the same run: a plain SQLite scan of the allocations table (every column the
// engine reads, no work per row), the least any open of the file can cost, read the engine's
// way (the table's pages decoded: store::visitTableRows), SQLite's (Stmt::visitRows, as before)
// and the way every reader did before that (a step per row).
#include "core/store/allocations.h"
#include "core/store/analysis_cache.h"
#include "core/store/frames.h"
#include "core/store/session.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <limits>
#include <spawn.h>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace {

struct Run
{
    int code = -1;
    double seconds = 0;
    double cpuSeconds = 0; // user + system
    double peakMiB = 0;
    std::string out; // stdout
};

std::string slurp(const std::string& path)
{
    std::string s;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        char buf[65536];
        size_t n;
        while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
            s.append(buf, n);
        std::fclose(f);
    }
    return s;
}

// Runs argv with stdout to a file and stderr discarded (progress lines), and measures it.
Run run(const std::vector<std::string>& argv, const std::string& outFile)
{
    std::vector<char*> args;
    for (const std::string& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, outFile.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    Run r;
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = 0;
    const int rc = posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return r;
    int status = 0;
    rusage ru{};
    if (wait4(pid, &status, 0, &ru) < 0) return r;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    r.peakMiB = static_cast<double>(ru.ru_maxrss) / 1024.0; // KiB on Linux
    auto secs = [](const timeval& tv) {
        return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
    };
    r.cpuSeconds = secs(ru.ru_utime) + secs(ru.ru_stime);
    r.out = slurp(outFile);
    return r;
}

void print(const char* what, const Run& r)
{
    std::printf("%-36s %7.2f s wall %7.2f s CPU  peak %6.0f MiB%s\n", what, r.seconds, r.cpuSeconds,
                r.peakMiB, r.code == 0 ? "" : "  FAILED");
}

} // namespace

int main(int argc, char** argv)
{
    std::setvbuf(stdout, nullptr, _IOLBF, 0); // each figure as soon as it is measured
    const std::string cli = FRAGSCOPE_CLI, gui = FRAGSCOPE_GUI;
    const std::string events = argc > 1 ? argv[1] : "1M";
    const auto tmp =
        std::filesystem::temp_directory_path() / ("bench_scale-" + std::to_string(::getpid()));
    std::filesystem::create_directories(tmp);
    const std::string session = argc > 2 ? argv[2] : (tmp / "scale.fragscope").string();
    const std::string out = (tmp / "stdout.txt").string();
    bool failed = false;

    if (!std::filesystem::exists(session)) {
        const Run s = run({cli, "simulate", "-o", session, "--events", events, "--seed", "1"}, out);
        print(("simulate --events " + events + " --seed 1").c_str(), s);
        if (s.code != 0) return 1;
    }
    int64_t rows = 0, eventCount = 0, frame = -1;
    double scanSeconds = 0;
    {
        {
            const fs::Session s = fs::Session::open(session, false);
            eventCount = std::atoll(s.meta("event_count").c_str());
            // The frame to ask about: the last one the default rule (coherence_score < 0.05)
            // breaks.
            for (const fs::store::FrameMetricRow& m : fs::store::frameMetrics(s))
                if (m.name == "coherence_score" && m.value < 0.05) frame = std::max(frame, m.frame);
        }
        // First open: without the stored index (it is derived data, rebuilt by the next open).
        fs::store::dropValues(session);
        const fs::Session s = fs::Session::open(session, false);
        // Every column the engine reads, summed (no other work per row): read as the engine does
        // (one step, rows visited), then as before (a step and nine column calls per row).
        using Read =
            int64_t (*)(const fs::Session&, int64_t, int64_t, const fs::store::AllocationVisitor&);
        for (const auto& [what, read] :
             {std::pair<const char*, Read>{"allocations' pages read (the engine)",
                                           &fs::store::AllocationRecords::idRange},
              std::pair<const char*, Read>{"SQLite scan, visited (before)",
                                           &fs::store::AllocationRecords::idRangeBySqlite},
              std::pair<const char*, Read>{"SQLite scan, a step per row (before)",
                                           &fs::store::AllocationRecords::idRangeStepped}}) {
            int64_t sum = 0;
            const auto t0 = std::chrono::steady_clock::now();
            rows = read(s, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
                        [&](const fs::store::AllocationRecord& r) {
                            sum += r.id + r.device + r.level + r.regionId.value_or(0) +
                                   static_cast<int64_t>(r.address) + static_cast<int64_t>(r.size) +
                                   r.allocNs + r.freeNs.value_or(0);
                            return true;
                        });
            const double seconds =
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            if (scanSeconds == 0) scanSeconds = seconds; // the baseline below: the engine's way
            std::printf("baseline: %-36s %7.2f s wall  (%lld rows, %.1f M rows/s; checksum %lld)\n",
                        what, seconds, static_cast<long long>(rows),
                        static_cast<double>(rows) / seconds / 1e6,
                        static_cast<long long>(sum & 0xffff));
        }
    }
    const auto bytes = std::filesystem::file_size(session);
    std::printf(
        "session: %lld events, %lld allocations, %.2f GB, %.1f bytes/event (target <= 40)\n",
        static_cast<long long>(eventCount), static_cast<long long>(rows),
        static_cast<double>(bytes) / 1e9,
        eventCount ? static_cast<double>(bytes) / static_cast<double>(eventCount) : 0.0);

    const std::string f = std::to_string(frame < 0 ? 0 : frame);
    std::vector<std::string> collapse = {cli, "collapse", session, "--frame", f};
    if (frame < 0) collapse.push_back("--any");
    double worstPeak = 0, collapseFirst = 0;
    auto step = [&](const char* what, const std::vector<std::string>& args) {
        const Run r = run(args, out);
        print(what, r);
        failed = failed || r.code != 0;
        worstPeak = std::max(worstPeak, r.peakMiB);
        return r;
    };
    collapseFirst = step(("collapse --frame " + f + " (first open)").c_str(), collapse).seconds;
    const double collapseAgain = step("collapse (reopen)", collapse).seconds;
    step("report", {cli, "report", session});
    step("state --at end", {cli, "state", session, "--at", "end"});
    step("export heatmap", {cli, "export", "heatmap", session, "-o", (tmp / "h.png").string()});
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    for (const char* what :
         {"fragscope-gui --measure-open", "fragscope-gui --measure-open again"}) {
        const Run r = step(what, {gui, "--measure-open", session});
        std::printf("    %s", r.out.c_str());
    }
    std::printf("collapse: %.2f s first open, %.2f s reopen (target <= 10 s), reopen %.1fx the "
                "baseline scan; largest peak %.0f MiB (target <= 8192 MiB); load average %s",
                collapseFirst, collapseAgain, scanSeconds > 0 ? collapseAgain / scanSeconds : 0.0,
                worstPeak, slurp("/proc/loadavg").c_str());
    std::filesystem::remove_all(tmp); // SESSION, when given, lies elsewhere and stays
    const bool met = collapseFirst <= 10 && collapseAgain <= 10 && worstPeak <= 8192;
    if (!failed && !met)
        std::fprintf(stderr,
                     "bench_scale: goal missed: collapse %.2f s first open, %.2f s reopen (target "
                     "<= 10 s), largest peak %.0f MiB (target <= 8192 MiB)\n",
                     collapseFirst, collapseAgain, worstPeak);
    return failed || !met ? 1 : 0;
}
