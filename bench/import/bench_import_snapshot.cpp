// Import throughput of PyTorch snapshots: MB/s and trace entries/s of `fragscope import`'s
// pipeline (pickle reader + reconstruction + ingest into a session file), and the peak memory of
// the importing process, beside python3's pickle.load of the same file measured in the same run.
//   bench_import_snapshot --real          the largest snapshot in $FRAGSCOPE_DATA/pytorch-snapshots
//   bench_import_snapshot --generate MB   a generated PyTorch-format snapshot of about MB MiB
//   bench_import_snapshot FILE            any snapshot
//   --runs N before any of these: N alternating runs of each side, medians compared
//   --no-index before any of these: skip storing the analysis index (`fragscope import
//              --no-index`); by default the import ends as `fragscope import` does, with
//              analysis::storeViewingIndex, and its time is counted
#include "core/import/importer.h"

#include "core/analysis/viewing_index.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;

namespace {

struct Run
{
    double seconds = 0;
    double cpuSeconds = 0; // user + system: what the process itself used, whatever the load
    long peakRssKb = 0;
    int status = -1;
};

// Runs f in a child process so that its peak RSS is its own (wait4's rusage).
template <typename F> Run inChild(F&& f)
{
    std::fflush(stdout); // the child must not print the parent's buffered output again
    const auto t0 = Clock::now();
    const pid_t pid = fork();
    if (pid == 0) {
        _exit(f());
    }
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    Run r;
    r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    r.peakRssKb = ru.ru_maxrss;
    r.cpuSeconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                   static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return r;
}

bool g_storeIndex = true; // --no-index clears it

int importFile(const std::string& in, const std::string& out, const std::string& countsFile)
{
    try {
        const auto t0 = Clock::now();
        auto imp = fs::import::makeImporter(fs::import::Format::PytorchSnapshot, in);
        imp->prepare();
        const auto t1 = Clock::now();
        fs::IngestOptions o;
        o.path = out;
        imp->configure(o);
        fs::Ingest ing(o);
        ing.begin();
        imp->emit(ing);
        const auto t2 = Clock::now();
        ing.end();
        const auto t3 = Clock::now();
        if (g_storeIndex) fs::analysis::storeViewingIndex(out);
        const auto t4 = Clock::now();
        const auto sec = [](auto d) { return std::chrono::duration<double>(d).count(); };
        // Where the time goes (wall, this process): read and reconstruct, convert and insert,
        // finish (indexes), the analysis index the GUI's first open reads.
        fmt::print("  phases: prepare {:.2f} s, emit {:.2f} s, end {:.2f} s, store index {}\n",
                   sec(t1 - t0), sec(t2 - t1), sec(t3 - t2),
                   g_storeIndex ? fmt::format("{:.2f} s", sec(t4 - t3)) : "skipped (--no-index)");
        std::fflush(stdout);
        int64_t entries = 0;
        for (const auto& [k, v] : imp->report().counts)
            if (k.rfind("trace.", 0) == 0) entries += v;
        if (FILE* f = std::fopen(countsFile.c_str(), "w")) {
            fmt::print(f, "{} {}\n", entries, ing.stats().events);
            std::fclose(f);
        }
        return 0;
    } catch (const std::exception& e) {
        fmt::print(stderr, "import failed: {}\n", e.what());
        return 1;
    }
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// runs > 1: fragscope and python alternate, so that both see the same moments of a shared
// machine's load; the ratio is of the medians.
int bench(const std::string& file, const stdfs::path& tmp, int runs)
{
    const double mb = static_cast<double>(stdfs::file_size(file)) / (1 << 20);
    fmt::print("snapshot {} ({:.1f} MiB), {} run(s) each\n", file, mb, runs);
    const std::string out = (tmp / "bench.fragscope").string();
    const std::string counts = (tmp / "counts.txt").string();
    std::vector<double> impWall, impCpu, pyWall, pyCpu;
    for (int i = 0; i < runs; ++i) {
        const Run imp = inChild([&] { return importFile(file, out, counts); });
        if (imp.status != 0) {
            fmt::print("FAILED: import exited with {}\n", imp.status);
            return 1;
        }
        long long entries = 0, events = 0;
        if (FILE* f = std::fopen(counts.c_str(), "r")) {
            if (std::fscanf(f, "%lld %lld", &entries, &events) != 2) entries = events = 0;
            std::fclose(f);
        }
        fmt::print("  fragscope import  {:8.2f} s (cpu {:.2f} s)  {:8.1f} MB/s  {:10.0f} trace "
                   "entries/s  {:10.0f} events/s  peak RSS {:.0f} MiB  ({} entries, {} events, "
                   "session {:.1f} MiB)\n",
                   imp.seconds, imp.cpuSeconds, mb / imp.seconds,
                   static_cast<double>(entries) / imp.seconds,
                   static_cast<double>(events) / imp.seconds,
                   static_cast<double>(imp.peakRssKb) / 1024, entries, events,
                   static_cast<double>(stdfs::file_size(out)) / (1 << 20));
        const Run py = inChild([&] {
            execlp("python3", "python3", "-c",
                   "import pickle,sys; pickle.load(open(sys.argv[1],'rb'))", file.c_str(),
                   static_cast<char*>(nullptr));
            return 127;
        });
        if (py.status != 0) {
            fmt::print("  python3 pickle.load FAILED (exit {})\n", py.status);
            return 1;
        }
        fmt::print("  python3 pickle.load {:6.2f} s (cpu {:.2f} s)  {:8.1f} MB/s  peak RSS {:.0f} "
                   "MiB (baseline, same run)\n",
                   py.seconds, py.cpuSeconds, mb / py.seconds,
                   static_cast<double>(py.peakRssKb) / 1024);
        impWall.push_back(imp.seconds);
        impCpu.push_back(imp.cpuSeconds);
        pyWall.push_back(py.seconds);
        pyCpu.push_back(py.cpuSeconds);
    }
    const double iw = median(impWall), pw = median(pyWall);
    fmt::print("  median of {}: import {:.2f} s (cpu {:.2f} s), pickle.load {:.2f} s (cpu {:.2f} "
               "s)\n",
               runs, iw, median(impCpu), pw, median(pyCpu));
    fmt::print("  import / pickle.load time: {:.2f}x  (cpu {:.2f}x; {})\n", iw / pw,
               median(impCpu) / median(pyCpu),
               iw < pw ? "fragscope is faster" : "fragscope is SLOWER");
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    // The python baseline runs with the environment the bench was given.
    // --runs N first (default 1): N alternating runs of each side, medians compared.
    int runs = 1;
    for (bool more = true; more;) {
        more = false;
        if (argc > 2 && std::string(argv[1]) == "--runs") {
            runs = std::max(1, std::atoi(argv[2]));
            argc -= 2;
            argv += 2;
            more = true;
        }
        if (argc > 1 && std::string(argv[1]) == "--no-index") {
            g_storeIndex = false;
            --argc;
            ++argv;
            more = true;
        }
    }
    const std::string arg = argc > 1 ? argv[1] : "--real";
    const stdfs::path tmp =
        stdfs::temp_directory_path() / fmt::format("fragscope-bench-import-{}", getpid());
    stdfs::create_directories(tmp);
    int rc = 0;
    if (arg == "--real") {
        const char* env = std::getenv("FRAGSCOPE_DATA");
        const stdfs::path dir =
            stdfs::path(env && *env ? env : FRAGSCOPE_DEFAULT_DATA) / "pytorch-snapshots";
        std::string largest;
        uintmax_t best = 0;
        std::error_code ec;
        for (const auto& e : stdfs::directory_iterator(dir, ec))
            if (e.path().extension() == ".pickle" && e.file_size() > best) {
                best = e.file_size();
                largest = e.path().string();
            }
        if (largest.empty()) {
            fmt::print("FAILED: no snapshot in {}\n", dir.string());
            rc = 1;
        } else {
            rc = bench(largest, tmp, runs);
        }
    } else if (arg == "--generate") {
        const long mib = argc > 2 ? std::atol(argv[2]) : 1024;
        const std::string file = (tmp / "generated.pickle").string();
        const std::string cmd = fmt::format("python3 '{}' '{}' {}", FRAGSCOPE_GEN_SNAPSHOT, file,
                                            static_cast<long long>(mib) << 20);
        fmt::print("generating: {}\n", cmd);
        std::fflush(stdout);
        if (std::system(cmd.c_str()) != 0) {
            fmt::print("FAILED: generator\n");
            rc = 1;
        } else {
            rc = bench(file, tmp, runs);
        }
    } else {
        rc = bench(arg, tmp, runs);
    }
    std::error_code ec;
    stdfs::remove_all(tmp, ec);
    return rc;
}
