#include "progress.h"

#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <unistd.h>

namespace fs {

bool Progress::enabled()
{
    static const bool on = ::isatty(STDERR_FILENO) && !std::getenv("FRAGSCOPE_NO_PROGRESS");
    return on;
}

Progress::Progress(std::string label, int64_t total, std::string unit)
    : label_(std::move(label)), unit_(std::move(unit)), total_(total), active_(enabled()),
      start_(std::chrono::steady_clock::now()), last_(start_)
{
}

Progress::~Progress()
{
    finish();
}

void Progress::update(int64_t done)
{
    if (!active_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_ < std::chrono::milliseconds(200)) return;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    if (total_ > 0)
        fmt::print(stderr, "\r{}: {:5.1f}%  {} / {} {}  ({:.2f} M/s)\033[K", label_,
                   100.0 * static_cast<double>(done) / static_cast<double>(total_), done, total_,
                   unit_, rate / 1e6);
    else
        fmt::print(stderr, "\r{}: {} {}  ({:.2f} M/s)\033[K", label_, done, unit_, rate / 1e6);
    std::fflush(stderr);
}

void Progress::finish()
{
    if (!active_ || finished_) return;
    finished_ = true;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
}

} // namespace fs
