// End-to-end cost of recording: `fragscope record -- fragscope simulate --live --events N`
// against `fragscope simulate -o FILE --events N` (the same events through Ingest in one process),
// measured in the same run. Usage: bench_capture_e2e [EVENTS]   (default 2M)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <unistd.h>

namespace {

double timed(const std::string& cmd)
{
    const auto t0 = std::chrono::steady_clock::now();
    const int rc = std::system(cmd.c_str());
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (rc != 0) {
        std::fprintf(stderr, "bench: '%s' failed (%d)\n", cmd.c_str(), rc);
        std::exit(1);
    }
    return s;
}

} // namespace

int main(int argc, char** argv)
{
    const std::string events = argc > 1 ? argv[1] : "2M";
    const auto dir = std::filesystem::temp_directory_path() /
                     ("fragscope-bench-e2e-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    ::setenv("FRAGSCOPE_SOCKET_DIR", (dir / "sockets").c_str(), 1);
    ::setenv("FRAGSCOPE_NO_PROGRESS", "1", 1);
    const std::string cli = FRAGSCOPE_CLI;
    const std::string a = (dir / "file.fragscope").string(), b = (dir / "rec.fragscope").string();
    const double file = timed(cli + " simulate -o " + a + " --events " + events + " > /dev/null");
    const double rec = timed(cli + " record -o " + b + " -- " + cli + " simulate --live --events " +
                             events + " > /dev/null 2>&1");
    std::printf("bench_capture_e2e: simulator run of %s events\n", events.c_str());
    std::printf("  baseline  simulate -o FILE (in-process ingest)          %.2f s\n", file);
    std::printf(
        "  record    record -- simulate --live (agent stream + recorder) %.2f s  (%+.0f %%)\n", rec,
        (rec / file - 1) * 100);
    std::filesystem::remove_all(dir);
    return 0;
}
