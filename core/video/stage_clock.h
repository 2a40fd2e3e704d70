// FRAGSCOPE_VIDEO_TIMING=1: analyzeVideo prints, per stage, the CPU time its threads spent there
// (stderr). Thread CPU time, so that the figures mean something on a shared, loaded machine.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>

namespace fs::video {

enum class Stage {
    Decode,
    Reduce,
    Thumbnail,
    FlowForward,
    FlowBackward,
    Warp,
    Ssim,
    FlowImage,
    Hash,
    Count
};

class StageClock
{
public:
    static StageClock& instance();
    static bool enabled();
    void add(Stage s, int64_t ns) { ns_[static_cast<size_t>(s)] += ns; }
    void reset();
    void print(int64_t frames) const;

private:
    std::array<std::atomic<int64_t>, static_cast<size_t>(Stage::Count)> ns_{};
};

// Adds the calling thread's CPU time between construction and destruction to a stage.
class StageTimer
{
public:
    explicit StageTimer(Stage s) : stage_(s), on_(StageClock::enabled())
    {
        if (on_) start_ = now();
    }
    ~StageTimer()
    {
        if (on_) StageClock::instance().add(stage_, now() - start_);
    }
    StageTimer(const StageTimer&) = delete;
    StageTimer& operator=(const StageTimer&) = delete;

private:
    static int64_t now()
    {
        timespec t{};
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
        return int64_t{t.tv_sec} * 1'000'000'000 + t.tv_nsec;
    }
    Stage stage_;
    bool on_;
    int64_t start_ = 0;
};

} // namespace fs::video
