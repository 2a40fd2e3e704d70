// Starting a target with the agent (record, launch) and loading the agent into a running process
// through gdb (attach to a process started without it, as `heaptrack --pid` does).
#pragma once

#include "capture/protocol/control_client.h"

#include <atomic>
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fs::capture {

// libfragscope-inject.so: $FRAGSCOPE_AGENT, next to the executable, ../lib beside it, then the
// build tree. Empty when none exists.
std::string findAgent();

// The agent's PyTorch bridge (docs/capture.md, "PyTorch blocks"), passed to the target through
// FRAGSCOPE_PYTORCH / FRAGSCOPE_PYTORCH_STACKS.
struct PytorchOptions
{
    bool enabled = true;         // --no-pytorch: false
    std::string stacks = "none"; // --stacks python|all: call stacks of each block
};
// Reads --no-pytorch and --stacks; false with err when the --stacks value is not python or all.
bool parsePytorchOptions(bool noPytorch, const std::string* stacks, PytorchOptions& out,
                         std::string& err);

struct LaunchOptions
{
    std::vector<std::string> argv;
    bool autostart = true; // the target keeps its events until the recorder connects
    PytorchOptions pytorch;
};

// fork/exec with CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH (both the agent, unless the user
// set NVTX_INJECTION64_PATH already),
// FRAGSCOPE_LAUNCHED_BY and FRAGSCOPE_AUTOSTART set. Returns the child's pid or -1 with err.
pid_t launchTarget(const LaunchOptions& opts, std::string& err);

// Waits until `child` (or a descendant that inherited FRAGSCOPE_LAUNCHED_BY=getpid()) opens its
// control socket, and connects client to it. Gives up when keepWaiting() returns false.
bool connectToLaunched(pid_t child, proto::ControlClient& client,
                       const std::function<bool()>& keepWaiting, std::string& err);

// Loads the agent into pid with `gdb --batch -p PID` (dlopen + InitializeInjection). err explains
// ptrace refusals (kernel.yama.ptrace_scope) and a missing gdb.
// The PyTorch options are set in the target's environment (setenv) before the agent loads.
bool injectAgent(pid_t pid, std::string& err, const PytorchOptions& pytorch = {});

// SIGINT/SIGTERM set the returned flag instead of killing the recorder (which then finishes
// the session). Installed once per process.
const std::atomic<bool>& installStopSignals();
// Lowers the flag again for the next phase (after the recording, while the finished session is
// indexed): a stop signal then cancels that phase (the index is simply not stored) and the
// process still ends normally.
const std::atomic<bool>& rearmStopSignals();
// SIGUSR1 sets the returned flag (`record --paused`: start recording now).
const std::atomic<bool>& installStartSignal();

// Parses "30s", "1500ms", "2m", "1h" or plain seconds; -1 when malformed.
int64_t parseDurationMs(const std::string& s);

} // namespace fs::capture
