// fragscope launch -- CMD…: run CMD with the agent loaded and idle, ready for `fragscope attach`.
#include "capture/protocol/control_client.h"
#include "capture/recorder/launcher.h"
#include "command.h"

#include <csignal>
#include <fmt/format.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace fs;
using namespace fs::cli;

namespace {

int runLaunch(Args& a)
{
    if (a.rest().empty())
        throw UsageError("launch needs a command after -- (fragscope launch -- python gen.py)");
    if (!a.positional().empty())
        throw UsageError("unexpected argument '" + a.positional()[0] +
                         "' (put the command after --)");
    const std::atomic<bool>& stop = capture::installStopSignals();
    capture::LaunchOptions lo;
    lo.argv = a.rest();
    lo.autostart = false;
    std::string err;
    const auto stacks = a.get("stacks");
    if (!capture::parsePytorchOptions(a.flag("no-pytorch"), stacks ? &*stacks : nullptr, lo.pytorch,
                                      err))
        throw UsageError(err);
    const pid_t child = capture::launchTarget(lo, err);
    if (child < 0) {
        fmt::print(stderr, "fragscope launch: {}\n", err);
        return Failure;
    }
    int status = 0;
    bool reaped = false;
    bool forwarded = false;
    auto alive = [&] {
        if (!reaped && ::waitpid(child, &status, WNOHANG) == child) reaped = true;
        if (stop.load() && !forwarded && !reaped) {
            forwarded = true; // Ctrl-C reaches the child through the terminal; SIGTERM does not
            ::kill(child, SIGTERM);
        }
        return !reaped;
    };
    proto::ControlClient client;
    if (capture::connectToLaunched(child, client, alive, err)) {
        fmt::print(stderr,
                   "fragscope launch: pid {} is ready; record it with\n  fragscope attach {} -o "
                   "run.fragscope\n",
                   client.info().pid, client.info().pid);
        client.close();
    }
    while (alive())
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : Failure;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "launch",
    .synopsis = "[--no-pytorch] [--stacks python|all] -- CMD [ARGS…]",
    .summary = "Run a command with the capture agent loaded and idle, for a later `attach`",
    .options = {{"no-pytorch", "",
                 "do not record PyTorch's caching-allocator blocks (docs/capture.md)"},
                {"stacks", "python|all", "record each PyTorch block's call stack (costs more)"}},
    .details =
        "The agent (CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH) opens its control\n"
        "socket at CMD's first CUDA or NVTX call and records nothing\n"
        "until `fragscope attach PID -o FILE` (or the GUI's Attach…) starts it; stopping the\n"
        "recording leaves CMD running. The PyTorch options apply to every later attach.\n"
        "The exit status is CMD's.",
    .run = runLaunch,
    .order = 42,
    .needsCapture = true,
});
