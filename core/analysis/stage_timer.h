#pragma once
// FRAGSCOPE_ANALYSIS_TIMING=1 prints how long each stage of long work took (stderr), e.g.
// "analysis open: regions  777.9 ms". One line per stage, the time since the previous one.
#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace fs::analysis {

struct StageTimer
{
    const char* what = "analysis open";
    bool on = std::getenv("FRAGSCOPE_ANALYSIS_TIMING") != nullptr;
    std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
    void operator()(const char* stage)
    {
        if (!on) return;
        const auto now = std::chrono::steady_clock::now();
        std::fprintf(stderr, "%s: %-28s %8.1f ms\n", what, stage,
                     std::chrono::duration<double, std::milli>(now - last).count());
        last = now;
    }
};

} // namespace fs::analysis
