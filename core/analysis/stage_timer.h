#pragma once
// FRAGSCOPE_ANALYSIS_TIMING=1 prints how long each stage of long work took (stderr), e.g.
// "analysis open: regions  777.9 ms  cpu 1210.4 ms". One line per stage, the wall time since
// the previous one and the CPU time the process spent meanwhile (user and system, every
// thread: more than the wall time when the stage ran on several cores).
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>

namespace fs::analysis {

struct StageTimer
{
    const char* what = "analysis open";
    bool on = std::getenv("FRAGSCOPE_ANALYSIS_TIMING") != nullptr;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    double lastCpu = cpuMs();
    void operator()(const char* stage)
    {
        if (!on) return;
        const auto now = std::chrono::steady_clock::now();
        const double cpu = cpuMs();
        std::fprintf(stderr, "%s: %-28s %8.1f ms  cpu %8.1f ms\n", what, stage,
                     std::chrono::duration<double, std::milli>(now - last).count(), cpu - lastCpu);
        last = now;
        lastCpu = cpu;
    }
    static double cpuMs()
    {
        timespec ts{};
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
        return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
    }
};

} // namespace fs::analysis
