// fragscope record -o OUT [--paused] -- CMD ARGS…: run CMD with the capture agent and ingest its
// stream into a session file live.
#include "capture/protocol/socket_dir.h"
#include "capture/recorder/launcher.h"
#include "capture/recorder/recorder.h"
#include "cli_settings.h"
#include "command.h"
#include "core/progress.h"
#include "core/store/sqlite.h"
#include "flight_options.h"

#include <chrono>
#include <csignal>
#include <fmt/format.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace fs;
using namespace fs::cli;

namespace {

std::string joinArgs(const std::vector<std::string>& v)
{
    std::string s;
    for (const auto& a : v)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

// Exit status of the child the way a shell reports it.
int childExit(int status)
{
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return Failure;
}

int runRecord(Args& a)
{
    const auto out = a.get("output");
    if (!out || out->empty()) throw UsageError("record needs -o OUT.fragscope");
    if (a.rest().empty())
        throw UsageError(
            "record needs a command after -- (fragscope record -o run.fragscope -- python gen.py)");
    if (!a.positional().empty())
        throw UsageError("unexpected argument '" + a.positional()[0] +
                         "' (put the command after --)");
    const auto flight = flightOptions(a);
    const std::atomic<bool>& stop = capture::installStopSignals();
    capture::LaunchOptions lo;
    lo.argv = a.rest();
    lo.autostart = !a.flag("paused");
    std::string err;
    const auto stacks = a.get("stacks");
    if (!capture::parsePytorchOptions(a.flag("no-pytorch"), stacks ? &*stacks : nullptr, lo.pytorch,
                                      err))
        throw UsageError(err);
    const pid_t child = capture::launchTarget(lo, err);
    if (child < 0) {
        fmt::print(stderr, "fragscope record: {}\n", err);
        return Failure;
    }
    int status = 0;
    bool reaped = false;
    auto childAlive = [&] {
        if (reaped) return false;
        if (::waitpid(child, &status, WNOHANG) == child) {
            reaped = true;
            return false;
        }
        return true;
    };
    proto::ControlClient client;
    const auto t0 = std::chrono::steady_clock::now();
    bool told = false;
    const bool ok = capture::connectToLaunched(
        child, client,
        [&] {
            if (!told && std::chrono::steady_clock::now() - t0 > std::chrono::seconds(10)) {
                told = true;
                fmt::print(stderr,
                           "fragscope record: waiting for pid {} to initialise CUDA (the agent "
                           "starts at the first CUDA call)…\n",
                           child);
            }
            return childAlive() && !stop.load();
        },
        err);
    if (!ok) {
        if (!reaped && stop.load()) {
            ::kill(child, SIGINT);
            ::waitpid(child, &status, 0);
            reaped = true;
        }
        fmt::print(stderr, "fragscope record: no session written: {}{}\n",
                   stop.load() ? "interrupted before the agent started" : err,
                   stop.load() ? ""
                               : " (did the command use CUDA or NVTX? a process with neither never "
                                 "loads the agent)");
        const int code = reaped ? childExit(status) : Failure;
        return code == 0 ? Failure : code;
    }
    if (a.flag("paused")) {
        const std::atomic<bool>& go = capture::installStartSignal();
        fmt::print(stderr,
                   "fragscope record: pid {} runs with the agent idle; start recording with "
                   "`kill -USR1 {}`\n",
                   client.info().pid, ::getpid());
        while (!go.load() && !stop.load() && childAlive())
            std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (!go.load()) {
            fmt::print(stderr,
                       "fragscope record: no session written: the recording was never started\n");
            const int code = reaped ? childExit(status) : Failure;
            return code == 0 ? Failure : code;
        }
    }
    capture::RecordOptions ro;
    ro.output = *out;
    ro.flight = flight;
    ro.sourcePath = joinArgs(a.rest());
    Progress progress("recording", 0);
    ro.progress = [&](int64_t n) { progress.update(n); };
    capture::RecordResult res;
    res = capture::recordFrom(client, ro, stop);
    progress.finish();
    if (!res.ok) {
        fmt::print(stderr, "fragscope record: {}\n", res.error);
        if (!reaped) {
            ::kill(child, SIGTERM);
            ::waitpid(child, &status, 0);
        }
        return Failure;
    }
    // The stream is over: the target exits on its own (or was stopped by Ctrl-C).
    for (int i = 0; i < 100 && childAlive(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    fmt::print(stderr, "fragscope record: {} events {} {}{}\n", res.events,
               flight ? fmt::format("seen, {} in {} window(s) written to", res.flight.eventsWritten,
                                    res.windows.size())
                      : std::string("written to"),
               *out, res.endedAbruptly ? fmt::format(" (ended abruptly: {})", res.error) : "");
    printWindows("record", res);
    // As simulate and import do: the index stored now, so that the first open is a reopen.
    // Ctrl-C or SIGTERM meanwhile (the GUI's Stop after the target ended by itself) cancels
    // only the index: the session is already complete, and the exit status says so.
    storeAnalysisIndex(*out, a, &capture::rearmStopSignals());
    if (res.badStream) return BadInput;
    if (!reaped) {
        fmt::print(stderr, "fragscope record: recording stopped; pid {} is still running\n", child);
        return Ok;
    }
    return childExit(status);
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "record",
    .synopsis = "-o OUT.fragscope [--paused] [--no-pytorch] [--stacks python|all] [--keep TIME "
                "[--before TIME] [--after TIME] [--max-size BYTES]] [--index|--no-index] -- "
                "CMD [ARGS…]",
    .summary = "Run a command with the capture agent and record its GPU memory events",
    .options = withIndexOptions(withFlightOptions({
        {"output", "FILE", "session file to write (also -o)"},
        {"paused", "", "load the agent idle; recording starts when the recorder gets SIGUSR1"},
        {"no-pytorch", "", "do not record PyTorch's caching-allocator blocks (docs/capture.md)"},
        {"stacks", "python|all", "record each PyTorch block's call stack (costs more)"},
    })),
    .details =
        "CMD runs with CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH pointing at\n"
        "libfragscope-inject.so: the agent records CUDA allocations, pools, VMM, kernels,\n"
        "graph launches and OOMs through CUPTI, and NVTX marks, ranges, frames, metric marks and\n"
        "NVTX memory-extension heaps itself (also in a process without a GPU). In a PyTorch\n"
        "process it also records the caching allocator's blocks, segments and record_function\n"
        "ranges (torch >= 2.1 with CUDA; --no-pytorch turns it off). It starts at\n"
        "CMD's first CUDA or NVTX call; events are ingested live, committed at least once a\n"
        "second. The session is finished when CMD exits; Ctrl-C stops the recording. Then the\n"
        "analysis index is built and stored in the file (--no-index skips it), so that the\n"
        "first open reads no allocation row (docs/analysis.md \"Caching\").\n"
        "Exit status: CMD's own (128+N when killed by signal N); 1 when nothing was recorded;\n"
        "2 when the capture stream was malformed. A target killed midway still leaves a\n"
        "session that opens, marked 'ended abruptly'. --keep makes it a flight recorder for runs\n"
        "of hours: only the last TIME of events is held, and a window around each trigger (an\n"
        "OOM, a frame whose metrics start a collapse, `fragscope mark PID`) is written, from\n"
        "--before to --after it, with the allocator's whole state at its start; `fragscope info\n"
        "--json` lists the windows. See docs/capture.md.",
    .run = runRecord,
    .order = 40,
    .needsCapture = true,
});
