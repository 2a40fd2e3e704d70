// `fragscope ab`'s runs (docs/ab.md): one command at a time in its own process group, its output
// in log files, Ctrl-C killing the whole group.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace fs::cli {

struct ChildRun
{
    bool finished = false; // exited by itself (false: stopped by Ctrl-C)
    int exitStatus = 0;    // as a shell reports it: 127 not found, 128 + N killed by signal N
    double seconds = 0;
    std::vector<std::string> stderrTail; // its last lines of stderr
};

struct ChildOptions
{
    std::vector<std::string> argv;
    std::vector<std::pair<std::string, std::string>> env; // set on top of ours
    std::string stdoutLog, stderrLog;                     // files its output goes to
    // Called every few milliseconds while it runs (the progress line).
    std::function<void(double seconds)> tick;
};

// Runs the command to its end, or until stop (capture::installStopSignals()'s flag: Ctrl-C):
// then SIGTERM to its process group, SIGKILL after
// 5 s. A command that cannot be started exits 127 (not found) or 126 (not executable), with the
// reason in its stderr log, as a shell does.
ChildRun runChild(const ChildOptions& o, const std::atomic<bool>& stop);

// The last `lines` non-empty lines of a text file (at most its last 8 KiB).
std::vector<std::string> lastLines(const std::string& path, size_t lines);

} // namespace fs::cli
