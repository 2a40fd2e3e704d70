// Progress on stderr for long CLI work: one line redrawn in place, only when stderr is a terminal
// (mode Auto), never with --quiet (Never). FRAGSCOPE_NO_PROGRESS=1 silences it and
// FRAGSCOPE_PROGRESS=1 forces it on (scripts that want it in a log, tests).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace fs {

class Progress
{
public:
    // total <= 0: unknown total (shows a count and rate only).
    Progress(std::string label, int64_t total, std::string unit = "events");
    ~Progress();
    // The first update draws at once, later ones at most every 200 ms.
    void update(int64_t done);
    void update(int64_t done, int64_t total);
    void finish();
    static bool enabled();
    enum class Mode { Auto, Always, Never };
    static void setMode(Mode m); // --quiet: Never; process-wide

private:
    std::string label_;
    std::string unit_;
    int64_t total_;
    bool active_;
    bool finished_ = false;
    bool drawn_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_;
};

} // namespace fs
