// Cost of the agent's NVTX tool in the calling thread: nvtx_bench_target's loop (region
// register/unregister batches, frame ranges, metric marks, heap resets) timed by the target
// itself, four ways in the same run: with no NVTX tool (every call a no-op: the baseline), with
// the agent loaded but idle (as under `fragscope launch` before an attach), with the agent
// recording but no recorder connected (FRAGSCOPE_AUTOSTART=1: the handlers' and the flush
// thread's own cost), and under `fragscope record` (the events are streamed and ingested live;
// on a small machine the recorder competes with the target for the cores).
// Usage: bench_capture_nvtx [ITERATIONS]
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

// Runs cmd and returns the target's own figures from its NVTXBENCH line.
bool measure(const std::string& cmd, long& calls, double& seconds)
{
    FILE* p = ::popen(cmd.c_str(), "r");
    if (!p) return false;
    char line[256];
    bool found = false;
    while (std::fgets(line, sizeof line, p))
        if (std::sscanf(line, "NVTXBENCH calls=%ld seconds=%lf", &calls, &seconds) == 2)
            found = true;
    return ::pclose(p) == 0 && found;
}

} // namespace

int main(int argc, char** argv)
{
    const std::string iterations = argc > 1 ? argv[1] : "200000";
    const auto dir = std::filesystem::temp_directory_path() /
                     ("fragscope-bench-nvtx-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ::setenv("FRAGSCOPE_SOCKET_DIR", (dir / "sockets").c_str(), 1);
    ::setenv("FRAGSCOPE_NO_PROGRESS", "1", 1);
    ::unsetenv("NVTX_INJECTION64_PATH");
    ::unsetenv("FRAGSCOPE_AUTOSTART");
    const std::string target = std::string(FRAGSCOPE_NVTX_TARGET) + " " + iterations;
    // $FRAGSCOPE_AGENT (a Release agent, say) replaces the build's for both agent runs.
    const char* agentEnv = std::getenv("FRAGSCOPE_AGENT");
    const std::string agent = agentEnv && *agentEnv ? agentEnv : FRAGSCOPE_AGENT_PATH;
    long calls = 0, callsIdle = 0, callsKeep = 0, callsRec = 0;
    double base = 0, idle = 0, keep = 0, rec = 0;
    if (!measure(target, calls, base) ||
        !measure("NVTX_INJECTION64_PATH=" + agent + " " + target + " 2>/dev/null", callsIdle,
                 idle) ||
        !measure("FRAGSCOPE_AUTOSTART=1 NVTX_INJECTION64_PATH=" + agent + " " + target +
                     " 2>/dev/null",
                 callsKeep, keep) ||
        !measure(std::string(FRAGSCOPE_CLI) + " record -o " + (dir / "nvtx.fragscope").string() +
                     " -- " + target + " 2>/dev/null",
                 callsRec, rec)) {
        std::fprintf(stderr, "bench_capture_nvtx: a run failed\n");
        return 1;
    }
    std::printf("bench_capture_nvtx: %ld NVTX calls (%s iterations)\n", calls, iterations.c_str());
    std::printf("  baseline  no NVTX tool (no-op calls)           %7.1f ns/call\n",
                base * 1e9 / static_cast<double>(calls));
    std::printf("  idle      agent loaded, idle (launch)          %7.1f ns/call\n",
                idle * 1e9 / static_cast<double>(callsIdle));
    std::printf("  handlers  agent recording, no recorder         %7.1f ns/call\n",
                keep * 1e9 / static_cast<double>(callsKeep));
    std::printf("  record    under fragscope record (live stream) %7.1f ns/call\n",
                rec * 1e9 / static_cast<double>(callsRec));
    std::printf("  (a call here reports 1 to 4 regions: see nvtx_bench_target.cpp)\n");
    std::filesystem::remove_all(dir);
    return 0;
}
