// fragscope attach PID -o OUT [--duration 30s] [--no-inject]: record a running process.
#include "capture/protocol/socket_dir.h"
#include "capture/recorder/launcher.h"
#include "capture/recorder/recorder.h"
#include "cli_settings.h"
#include "command.h"
#include "core/progress.h"
#include "flight_options.h"

#include <charconv>
#include <chrono>
#include <fmt/format.h>
#include <thread>
#include <unistd.h>

using namespace fs;
using namespace fs::cli;

namespace {

int runAttach(Args& a)
{
    a.expectPositional(1, "PID");
    const std::string& ps = a.positional()[0];
    int pidValue = 0;
    auto [p, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), pidValue);
    if (ec != std::errc() || p != ps.data() + ps.size() || pidValue <= 0)
        throw UsageError("PID must be a process id, not '" + ps + "'");
    const pid_t pid = pidValue;
    const auto out = a.get("output");
    if (!out || out->empty()) throw UsageError("attach needs -o OUT.fragscope");
    int64_t durationMs = 0;
    if (auto d = a.get("duration")) {
        durationMs = capture::parseDurationMs(*d);
        if (durationMs <= 0)
            throw UsageError(
                "--duration wants a positive time such as 30s, 500ms, 2m or 1h, not '" + *d + "'");
    }
    const auto flight = flightOptions(a);
    if (!proto::processAlive(pid)) {
        fmt::print(stderr, "fragscope attach: no process with pid {}\n", pid);
        return Failure;
    }
    const std::atomic<bool>& stop = capture::installStopSignals();
    const std::string dir = proto::socketDir();
    const std::string path = proto::socketPath(dir, pid);
    proto::ControlClient client;
    std::string err;
    if (::access(path.c_str(), F_OK) != 0) {
        if (a.flag("no-inject")) {
            fmt::print(
                stderr,
                "fragscope attach: pid {} has no fragscope control socket ({}) and --no-inject "
                "was given\n",
                pid, path);
            return Failure;
        }
        fmt::print(stderr,
                   "fragscope attach: pid {} was not started with the agent; loading it with gdb "
                   "(allocations made before now will appear as pre-existing or be missing)…\n",
                   pid);
        capture::PytorchOptions po;
        const auto stacks = a.get("stacks");
        if (!capture::parsePytorchOptions(a.flag("no-pytorch"), stacks ? &*stacks : nullptr, po,
                                          err))
            throw UsageError(err);
        if (!capture::injectAgent(pid, err, po)) {
            fmt::print(stderr, "fragscope attach: {}\n", err);
            return Failure;
        }
        // InitializeInjection ran to completion inside gdb's call: the socket exists by now if
        // the agent started at all. Allow a moment for a slow filesystem.
        for (int i = 0; i < 20 && ::access(path.c_str(), F_OK) != 0 && !stop.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (::access(path.c_str(), F_OK) != 0) {
            fmt::print(
                stderr,
                "fragscope attach: the agent was loaded into pid {} but opened no control socket: "
                "it disabled itself (no CUDA driver or CUPTI refused; see the target's stderr)\n",
                pid);
            return Failure;
        }
    }
    if (!client.connect(path, 5000, err)) {
        fmt::print(stderr, "fragscope attach: {}\n", err);
        return Failure;
    }
    capture::RecordOptions ro;
    ro.output = *out;
    ro.flight = flight;
    ro.durationMs = durationMs;
    Progress progress("recording", 0);
    ro.progress = [&](int64_t n) { progress.update(n); };
    const capture::RecordResult res = capture::recordFrom(client, ro, stop);
    progress.finish();
    if (!res.ok) {
        fmt::print(stderr, "fragscope attach: {}\n", res.error);
        return Failure;
    }
    fmt::print(stderr, "fragscope attach: {} events {} {}{}\n", res.events,
               flight ? fmt::format("seen, {} in {} window(s) written to", res.flight.eventsWritten,
                                    res.windows.size())
                      : std::string("written to"),
               *out, res.endedAbruptly ? fmt::format(" (ended abruptly: {})", res.error) : "");
    printWindows("attach", res);
    // As simulate and import do: the index stored now, so that the first open is a reopen.
    // Ctrl-C or SIGTERM meanwhile (the GUI's Stop after the target ended by itself) cancels
    // only the index: the session is already complete, and the exit status says so.
    storeAnalysisIndex(*out, a, &capture::rearmStopSignals());
    return res.badStream ? BadInput : Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "attach",
    .synopsis = "PID -o OUT.fragscope [--duration TIME] [--no-inject] [--no-pytorch] [--stacks "
                "python|all] [--keep TIME [--before TIME] [--after TIME] [--max-size BYTES]] "
                "[--index|--no-index]",
    .summary = "Record a running process (started with `fragscope launch`, or injected with gdb)",
    .options = withIndexOptions(withFlightOptions({
        {"output", "FILE", "session file to write (also -o)"},
        {"duration", "TIME",
         "stop after this long (30s, 500ms, 2m, 1h); default: until Ctrl-C or exit"},
        {"no-inject", "",
         "fail instead of loading the agent with gdb when PID has no control socket"},
        {"no-pytorch", "", "do not record PyTorch's caching-allocator blocks (docs/capture.md)"},
        {"stacks", "python|all", "record each PyTorch block's call stack (costs more)"},
    })),
    .details =
        "A process started with `fragscope launch` (or `simulate --live`) has a control socket\n"
        "in $XDG_RUNTIME_DIR/fragscope (else /tmp/fragscope-UID); attach connects to it and\n"
        "starts recording. Any other process gets the agent through `gdb --batch -p PID`\n"
        "calling dlopen (like `heaptrack --pid`): this needs ptrace permission\n"
        "(kernel.yama.ptrace_scope 0, or root), and allocations made before the attach are not\n"
        "seen. gdb first calls a function in a process of fragscope's own: where that fails\n"
        "(gdb 13 on a CPU with AMX registers), attach refuses and leaves PID alone. In a\n"
        "PyTorch process the blocks alive at the attach come from one snapshot of the\n"
        "caching allocator, marked pre-existing; --no-pytorch and --stacks apply when\n"
        "attach loads the agent (a launched process keeps its launch options).\n"
        "Only the owner of a process may attach to it. When the recording ends, the analysis\n"
        "index is stored in the file (--no-index skips it; docs/analysis.md \"Caching\").\n"
        "--keep makes it a flight recorder for runs of hours: only the last TIME of events is\n"
        "held, and a window around each trigger is written (docs/capture.md \"Flight\n"
        "recording\"); `fragscope info --json` lists the windows. See docs/capture.md.",
    .run = runAttach,
    .order = 41,
    .needsCapture = true,
});
