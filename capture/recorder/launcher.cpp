#include "launcher.h"

#include "capture/protocol/socket_dir.h"
#include "core/locate.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

extern char** environ;

namespace fs::capture {

namespace stdfs = std::filesystem;

std::string findAgent()
{
    std::vector<std::string> buildTree;
    std::error_code ec;
    const stdfs::path exe = stdfs::read_symlink("/proc/self/exe", ec);
    if (!ec)
        buildTree.push_back(
            (exe.parent_path().parent_path() / "capture" / "agent" / "libfragscope-inject.so")
                .string());
#ifdef FRAGSCOPE_AGENT_BUILD_PATH
    buildTree.emplace_back(FRAGSCOPE_AGENT_BUILD_PATH);
#endif
    return findRuntimeLibrary("libfragscope-inject.so", "FRAGSCOPE_AGENT", buildTree);
}

pid_t launchTarget(const LaunchOptions& opts, std::string& err)
{
    if (opts.argv.empty()) {
        err = "no command given (put it after --)";
        return -1;
    }
    const std::string agent = findAgent();
    if (agent.empty()) {
        err = "libfragscope-inject.so not found (set FRAGSCOPE_AGENT to its path)";
        return -1;
    }
    // The agent links libcupti from the user's CUDA installation. Load it here first so that a
    // missing libcupti is a clear error now, not a silent capture of nothing in the target. The
    // dynamic linker searches LD_LIBRARY_PATH, then the agent's RUNPATH (the CUDA toolkit it was
    // built against), then the system library cache.
    if (void* h = dlopen(agent.c_str(), RTLD_LAZY | RTLD_LOCAL)) {
        dlclose(h);
    } else {
        const char* why = dlerror();
        err = "cannot load the capture agent " + agent + ": " + (why ? why : "unknown error") +
              ". It needs libcupti from a CUDA installation: add the folder holding libcupti.so "
              "(e.g. /usr/local/cuda/extras/CUPTI/lib64) to LD_LIBRARY_PATH";
        return -1;
    }
    // Build the child's environment before fork: only async-signal-safe calls after it.
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
        const std::string_view kv(*e);
        if (kv.starts_with("CUDA_INJECTION64_PATH=") || kv.starts_with("FRAGSCOPE_LAUNCHED_BY=") ||
            kv.starts_with("FRAGSCOPE_AUTOSTART=") || kv.starts_with("FRAGSCOPE_PYTORCH=") ||
            kv.starts_with("FRAGSCOPE_PYTORCH_STACKS="))
            continue;
        env.emplace_back(kv);
    }
    env.push_back("CUDA_INJECTION64_PATH=" + agent);
    // The agent is also the NVTX tool: it records marks, ranges and the NVTX memory extension
    // (heaps and regions of custom sub-allocators) itself, with or without a GPU. A user who
    // points NVTX at another tool keeps it (libcupti: the agent decodes CUPTI's MARKER records).
    if (!std::getenv("NVTX_INJECTION64_PATH")) env.push_back("NVTX_INJECTION64_PATH=" + agent);
    env.push_back("FRAGSCOPE_LAUNCHED_BY=" + std::to_string(::getpid()));
    env.push_back(std::string("FRAGSCOPE_AUTOSTART=") + (opts.autostart ? "1" : "0"));
    if (!opts.pytorch.enabled) env.push_back("FRAGSCOPE_PYTORCH=0");
    if (opts.pytorch.stacks != "none")
        env.push_back("FRAGSCOPE_PYTORCH_STACKS=" + opts.pytorch.stacks);
    std::vector<char*> envp, argv;
    for (auto& s : env)
        envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = opts.argv;
    for (auto& s : args)
        argv.push_back(s.data());
    argv.push_back(nullptr);
    int pipefd[2];
    if (::pipe2(pipefd, O_CLOEXEC) != 0) {
        err = std::string("pipe: ") + std::strerror(errno);
        return -1;
    }
    const pid_t pid = ::fork();
    if (pid < 0) {
        err = std::string("fork: ") + std::strerror(errno);
        return -1;
    }
    if (pid == 0) {
        ::close(pipefd[0]);
        ::execvpe(argv[0], argv.data(), envp.data());
        const int e = errno;
        [[maybe_unused]] ssize_t w = ::write(pipefd[1], &e, sizeof e);
        ::_exit(127);
    }
    ::close(pipefd[1]);
    int childErr = 0;
    const ssize_t n = ::read(pipefd[0], &childErr, sizeof childErr);
    ::close(pipefd[0]);
    if (n == sizeof childErr) {
        int st;
        ::waitpid(pid, &st, 0);
        err = opts.argv[0] + ": " + std::strerror(childErr);
        return -1;
    }
    return pid;
}

bool connectToLaunched(pid_t child, proto::ControlClient& client,
                       const std::function<bool()>& keepWaiting, std::string& err)
{
    const std::string dir = proto::socketDir();
    std::set<pid_t> rejected;
    while (keepWaiting()) {
        for (pid_t pid : proto::listSocketPids(dir)) {
            if (rejected.count(pid) || !proto::processAlive(pid)) continue;
            std::string e;
            if (!client.connect(proto::socketPath(dir, pid), 2000, e)) {
                if (pid != child) // our child's socket may exist a moment before it listens
                    rejected.insert(pid);
                continue;
            }
            if (pid == child || client.info().launchedBy == static_cast<uint32_t>(::getpid()))
                return true;
            client.close();
            rejected.insert(pid);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    err = "the target ended before its agent opened a control socket";
    return false;
}

bool parsePytorchOptions(bool noPytorch, const std::string* stacks, PytorchOptions& out,
                         std::string& err)
{
    out.enabled = !noPytorch;
    if (stacks) {
        if (*stacks != "python" && *stacks != "all") {
            err = "--stacks wants python or all, not '" + *stacks + "'";
            return false;
        }
        out.stacks = *stacks;
    }
    return true;
}

namespace {
// Runs `gdb --batch --nx -p PID` with the given -ex commands; returns its exit status and
// everything it printed.
int runGdb(pid_t pid, const std::string& commands, std::string& out)
{
    const std::string log = "/tmp/fragscope-gdb-" + std::to_string(::getpid()) + ".log";
    const std::string cmd = "gdb --batch --nx -p " + std::to_string(pid) +
                            " -ex 'set confirm off'" + commands + " > " + log + " 2>&1";
    const int rc = std::system(cmd.c_str());
    std::ifstream f(log);
    out.assign(std::istreambuf_iterator<char>(f), {});
    ::unlink(log.c_str());
    return rc;
}

// Whether gdb can call a function in a process on this machine, tried on a child of ours first:
// a gdb that cannot write the CPU's extended register state (gdb 13 on a CPU with AMX: "Couldn't
// write extended state status: Bad address") leaves the process it called into broken (a
// `sleep` returns from its interrupted system call with error 516 and exits). Empty when calls
// work or the probe cannot tell (the real attach then says why it fails); otherwise gdb's words.
std::string gdbCallFailure()
{
    const pid_t child = ::fork();
    if (child < 0) return {};
    if (child == 0) {
        ::prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0); // kernel.yama.ptrace_scope 1
        for (;;)
            ::pause();
    }
    std::string out;
    runGdb(child, " -ex 'call (int)getpid()' -ex detach", out);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    if (out.find("= " + std::to_string(child)) != std::string::npos) return {};
    // Not allowed to attach, or no gdb: the same happens with the target, and is told there.
    if (out.find("Operation not permitted") != std::string::npos ||
        out.find("Could not attach") != std::string::npos ||
        out.find("not found") != std::string::npos)
        return {};
    std::istringstream lines(out);
    for (std::string line; std::getline(lines, line);)
        if (line.find("Couldn't") != std::string::npos || line.find("Cannot") != std::string::npos)
            return line;
    return "its call returned nothing";
}
} // namespace

bool injectAgent(pid_t pid, std::string& err, const PytorchOptions& pytorch)
{
    const std::string agent = findAgent();
    if (agent.empty()) {
        err = "libfragscope-inject.so not found (set FRAGSCOPE_AGENT to its path)";
        return false;
    }
    if (!proto::processAlive(pid)) {
        err = "no process with pid " + std::to_string(pid);
        return false;
    }
    int scope = 0;
    {
        std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
        f >> scope;
    }
    if (scope >= 3) {
        err =
            "kernel.yama.ptrace_scope is 3: no process may be attached to with a debugger on this "
            "system (a reboot is needed to change it). Start the target with `fragscope launch` "
            "instead.";
        return false;
    }
    if (const std::string why = gdbCallFailure(); !why.empty()) {
        err = "gdb cannot call a function in a process on this machine (tried on a process of "
              "fragscope's own; gdb said: " +
              why + "), so pid " + std::to_string(pid) +
              " was left alone. gdb 13 fails so on CPUs with AMX registers; use a newer gdb, or "
              "start the target with `fragscope launch`.";
        return false;
    }
    // dlopen(path, RTLD_NOW) then InitializeInjection(): the agent starts as if the CUDA driver
    // had loaded it. Allocations made before this point appear as pre-existing.
    // The bridge reads its options from the environment when the agent starts: set them first.
    std::string commands;
    if (!pytorch.enabled) commands += " -ex 'call (int)setenv(\"FRAGSCOPE_PYTORCH\", \"0\", 1)'";
    if (pytorch.stacks != "none")
        commands +=
            " -ex 'call (int)setenv(\"FRAGSCOPE_PYTORCH_STACKS\", \"" + pytorch.stacks + "\", 1)'";
    commands += " -ex 'call (void*)dlopen(\"" + agent +
                "\", 2)' -ex 'call (int)InitializeInjection()' -ex detach";
    std::string out;
    const int rc = runGdb(pid, commands, out);
    if (rc != 0 && out.find("not found") != std::string::npos &&
        out.find("gdb") != std::string::npos) {
        err = "gdb is not installed: install it, or start the target with `fragscope launch`";
        return false;
    }
    if (out.find("ptrace: Operation not permitted") != std::string::npos ||
        out.find("Could not attach") != std::string::npos) {
        err = "the kernel refused to let gdb attach to pid " + std::to_string(pid) + ".";
        if (scope == 1)
            err += " kernel.yama.ptrace_scope is 1: only a parent may attach. Run `sudo sysctl "
                   "kernel.yama.ptrace_scope=0`, or start the target with `fragscope launch`.";
        else if (scope == 2)
            err += " kernel.yama.ptrace_scope is 2: only root (CAP_SYS_PTRACE) may attach.";
        else
            err +=
                " Is it another user's process, or running in a container without CAP_SYS_PTRACE?";
        return false;
    }
    if (out.find("No symbol \"dlopen\"") != std::string::npos ||
        out.find("InitializeInjection") == std::string::npos) {
        // Fall through: the socket check below is the real verdict.
    }
    if (rc != 0 && out.empty()) {
        err = "gdb failed (exit " + std::to_string(rc) + ")";
        return false;
    }
    return true;
}

namespace {
std::atomic<bool> g_stop{false};
std::atomic<bool> g_start{false};
extern "C" void onStopSignal(int)
{
    g_stop.store(true);
}
extern "C" void onStartSignal(int)
{
    g_start.store(true);
}
} // namespace

const std::atomic<bool>& installStartSignal()
{
    struct sigaction sa
    {
    };
    sa.sa_handler = onStartSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGUSR1, &sa, nullptr);
    return g_start;
}

const std::atomic<bool>& installStopSignals()
{
    struct sigaction sa
    {
    };
    sa.sa_handler = onStopSignal;
    sigemptyset(&sa.sa_mask);
    ::sigaction(SIGINT, &sa, nullptr);
    ::sigaction(SIGTERM, &sa, nullptr);
    return g_stop;
}

const std::atomic<bool>& rearmStopSignals()
{
    g_stop = false;
    return g_stop;
}

int64_t parseDurationMs(const std::string& s)
{
    if (s.empty()) return -1;
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || v < 0) return -1;
    const std::string unit(p, s.data() + s.size());
    double scale;
    if (unit.empty() || unit == "s")
        scale = 1000;
    else if (unit == "ms")
        scale = 1;
    else if (unit == "m" || unit == "min")
        scale = 60000;
    else if (unit == "h")
        scale = 3600000;
    else
        return -1;
    return static_cast<int64_t>(v * scale);
}

} // namespace fs::capture
