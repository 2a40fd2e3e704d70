#include "stage_clock.h"

#include <cstdio>
#include <cstdlib>

namespace fs::video {

StageClock& StageClock::instance()
{
    static StageClock c;
    return c;
}

bool StageClock::enabled()
{
    static const bool on = std::getenv("FRAGSCOPE_VIDEO_TIMING") != nullptr;
    return on;
}

void StageClock::reset()
{
    for (auto& n : ns_)
        n = 0;
}

void StageClock::print(int64_t frames) const
{
    static const char* names[] = {"decode",       "reduce",        "thumbnail",
                                  "flow forward", "flow backward", "warp and check",
                                  "ssim",         "flow image",    "content hash"};
    int64_t total = 0;
    for (const auto& n : ns_)
        total += n;
    for (size_t i = 0; i < ns_.size(); ++i)
        std::fprintf(stderr, "video timing: %-15s %8.1f ms CPU  %6.2f ms/frame\n", names[i],
                     static_cast<double>(ns_[i]) / 1e6,
                     frames ? static_cast<double>(ns_[i]) / 1e6 / static_cast<double>(frames) : 0);
    std::fprintf(stderr, "video timing: %-15s %8.1f ms CPU  %6.2f ms/frame\n", "all",
                 static_cast<double>(total) / 1e6,
                 frames ? static_cast<double>(total) / 1e6 / static_cast<double>(frames) : 0);
}

} // namespace fs::video
