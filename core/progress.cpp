#include "progress.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fmt/format.h>
#include <string_view>
#include <unistd.h>

namespace fs {

namespace {

std::atomic<Progress::Mode> g_mode{Progress::Mode::Auto};

bool envSet(const char* name)
{
    const char* v = std::getenv(name);
    return v && *v && std::string_view(v) != "0";
}

} // namespace

void Progress::setMode(Mode m)
{
    g_mode = m;
}

bool Progress::enabled()
{
    switch (g_mode.load()) {
    case Mode::Always:
        return true;
    case Mode::Never:
        return false;
    case Mode::Auto:
        break;
    }
    if (envSet("FRAGSCOPE_NO_PROGRESS")) return false;
    return envSet("FRAGSCOPE_PROGRESS") || ::isatty(STDERR_FILENO);
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

void Progress::update(int64_t done, int64_t total)
{
    total_ = total;
    update(done);
}

void Progress::update(int64_t done)
{
    if (!active_ || finished_) return;
    const auto now = std::chrono::steady_clock::now();
    if (drawn_ && now - last_ < std::chrono::milliseconds(200)) return;
    drawn_ = true;
    last_ = now;
    const double secs = std::chrono::duration<double>(now - start_).count();
    const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
    if (total_ > 0 && unit_ == "%")
        fmt::print(stderr, "\r{}: {:3d}%\033[K", label_, static_cast<int>(done));
    else if (total_ > 0)
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
    if (!drawn_) return;
    fmt::print(stderr, "\r\033[K");
    std::fflush(stderr);
}

} // namespace fs
