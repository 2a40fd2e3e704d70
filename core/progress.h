// Progress on stderr for long CLI work, only when stderr is a terminal.
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
    void update(int64_t done);
    void finish();
    static bool enabled();

private:
    std::string label_;
    std::string unit_;
    int64_t total_;
    bool active_;
    bool finished_ = false;
    std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point last_;
};

} // namespace fs
