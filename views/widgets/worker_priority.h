// Background work of the GUI (loading, rasters, rule changes) runs at a lower CPU priority than
// the GUI thread, so that on a busy machine the event loop gets a core before the workers do:
// with both cores of the build machine taken by the loader's and the heatmap's workers, a 20 ms
// paint took up to 100 ms of wall time. A small step (the workers still get most of an
// otherwise busy machine; 5 made the first heatmap twice as slow under load). Linux nice values
// are per thread; Qt's QThread priorities change nothing there except IdlePriority
// (SCHED_IDLE, which would starve the workers on a loaded machine).
#pragma once

#include <algorithm>
#include <cstdlib>

#if defined(__linux__)
#include <cerrno>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace fs::views {

// How much lower than the GUI thread (nice steps); FRAGSCOPE_WORKER_NICE=N overrides it.
constexpr int kDefaultWorkerNice = 2;

// Call at the start of a job on a worker thread: lowers that thread (and the threads it starts
// later) by the worker nice, once per thread. The GUI thread must not call it.
inline void lowerWorkerPriority()
{
#if defined(__linux__)
    thread_local bool lowered = false;
    if (lowered) return;
    lowered = true;
    static const int kWorkerNice = [] {
        const char* e = std::getenv("FRAGSCOPE_WORKER_NICE"); // 0 turns it off
        return e ? std::clamp(std::atoi(e), 0, 19) : kDefaultWorkerNice;
    }();
    if (kWorkerNice == 0) return;
    const auto tid = static_cast<id_t>(::syscall(SYS_gettid));
    errno = 0;
    const int now = ::getpriority(PRIO_PROCESS, tid);
    if (errno == 0) ::setpriority(PRIO_PROCESS, tid, now + kWorkerNice);
#endif
}

} // namespace fs::views
