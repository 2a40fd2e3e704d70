// Kineto JSON parse (issue 54): fragscope's streaming JsonReader (what core/import/kineto.cpp
// walks: one event at a time as a small JsonDoc) against simdjson ondemand (Debian
// libsimdjson-dev) doing the same extraction over the same decompressed bytes, and the
// decompression alone as the floor. Each measurement runs in its own child process (its peak
// RSS is its own); the sides alternate, medians compared. Both sides extract what the importer
// uses ([memory] args Bytes/Addr/Device Id/Device Type/Total Allocated; kernels' ts/dur and args
// device/stream/correlation/grid/block) into checksums that must agree.
//   bench_kineto_json [--runs N] [--generate MiB] [FILE...]
//     no FILE: the traces in $FRAGSCOPE_DATA/kineto (../shared/data by default), skipped with a
//     message when absent, then a generated trace of MiB MiB (default 300; 0: none).
#include "core/import/byte_reader.h"
#include "core/import/json_reader.h"

#include "bench_kineto_json.h"

#include <simdjson.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>
#include <zlib.h>

#include <fmt/format.h>

namespace stdfs = std::filesystem;
using Clock = std::chrono::steady_clock;

using namespace kbench;

namespace {

double since(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

struct Run
{
    Result r;
    long peakRssKb = 0;
    int status = -1;
};

// f fills a Result in a child process; the parent gets it through a pipe, and the child's peak
// RSS from wait4.
template <typename F> Run inChild(F&& f)
{
    std::fflush(stdout);
    int fd[2];
    if (pipe(fd) != 0) return {};
    const pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        Result r;
        try {
            f(r);
            r.ok = 1;
        } catch (const std::exception& e) {
            fmt::print(stderr, "  failed: {}\n", e.what());
        }
        const ssize_t n = write(fd[1], &r, sizeof r);
        _exit(n == static_cast<ssize_t>(sizeof r) && r.ok ? 0 : 1);
    }
    close(fd[1]);
    Run run;
    if (read(fd[0], &run.r, sizeof run.r) != static_cast<ssize_t>(sizeof run.r)) run.r.ok = 0;
    close(fd[0]);
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    run.peakRssKb = ru.ru_maxrss;
    run.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    return run;
}

// (a) fragscope's JsonReader, walking as KinetoImporter::emit does.
void walkOurs(const std::string& path, Result& r)
{
    using namespace fs::import;
    const auto t0 = Clock::now();
    ByteReader br(path);
    JsonReader j(br);
    JsonDoc d;
    auto onEvent = [&] {
        const uint32_t root = d.root();
        Fields f;
        if (d.node(root).type != JType::Object) {
            ++r.events; // a memory-timeline row: not part of this comparison
            return;
        }
        f.name = d.str(d.member(root, "name"));
        f.cat = d.str(d.member(root, "cat"));
        const uint32_t args = d.member(root, "args");
        f.hasTs = d.toNanosFromMicros(d.member(root, "ts"), f.ts);
        if (f.hasTs && f.name == "[memory]") {
            d.toInt(d.member(args, "Device Type"), f.type);
            d.toInt(d.member(args, "Device Id"), f.device);
            d.toInt(d.member(args, "Bytes"), f.bytes);
            f.hasAddr = d.toInt(d.member(args, "Addr"), f.addr);
            f.hasTotal = d.toInt(d.member(args, "Total Allocated"), f.total);
        } else if (f.hasTs) {
            d.toNanosFromMicros(d.member(root, "dur"), f.dur);
            if (f.cat == "kernel" || f.cat == "Kernel") {
                d.toInt(d.member(args, "device"), f.kdevice);
                d.toInt(d.member(args, "stream"), f.stream);
                d.toInt(d.member(args, "correlation"), f.correlation);
                const uint32_t grid = d.member(args, "grid"), block = d.member(args, "block");
                for (size_t i = 0; i < 3; ++i) {
                    d.toInt(d.child(grid, i), f.grid[i]);
                    d.toInt(d.child(block, i), f.block[i]);
                }
            }
        }
        account(f, r);
    };
    auto readEvents = [&] {
        j.expect('[', "'[' starting the traceEvents array");
        if (j.accept(']')) return;
        while (true) {
            j.readValue(d);
            onEvent();
            if (j.accept(',')) continue;
            j.expect(']', "',' or ']' in the traceEvents array");
            return;
        }
    };
    if (j.peekToken() == '[') {
        readEvents();
    } else {
        j.expect('{', "a Chrome-trace JSON object");
        if (!j.accept('}')) {
            while (true) {
                const std::string key = j.readString();
                j.expect(':', "':' after an object key");
                if (key == "traceEvents")
                    readEvents();
                else
                    j.skipValue();
                if (j.accept(',')) continue;
                j.expect('}', "',' or '}' in the top-level object");
                break;
            }
        }
    }
    j.expectEnd();
    r.bytes = br.offset();
    r.seconds = since(t0);
}

// The whole decompressed document in one buffer with simdjson's padding after it. The gzip
// trailer's ISIZE (size mod 4 GiB) sizes the first allocation; realloc grows it (mremap for
// large blocks: no copy).
struct Document
{
    char* data = nullptr;
    size_t size = 0, capacity = 0;
    ~Document() { std::free(data); }
};

void loadWhole(const std::string& path, Document& doc)
{
    std::error_code ec;
    const uint64_t onDisk = stdfs::file_size(path, ec);
    size_t hint = onDisk;
    if (FILE* f = std::fopen(path.c_str(), "rb")) {
        unsigned char m[2] = {0, 0};
        if (std::fread(m, 1, 2, f) == 2 && m[0] == 0x1f && m[1] == 0x8b && onDisk > 4 &&
            std::fseek(f, -4, SEEK_END) == 0) {
            unsigned char s[4];
            if (std::fread(s, 1, 4, f) == 4) {
                const size_t isize = s[0] | (s[1] << 8) | (s[2] << 16) | (size_t(s[3]) << 24);
                hint = std::max<size_t>(isize, onDisk);
            }
        }
        std::fclose(f);
    }
    gzFile gz = gzopen(path.c_str(), "rb");
    if (!gz) throw std::runtime_error(path + ": cannot open");
    gzbuffer(gz, 1 << 18);
    // One byte more than the hint: a read that returns 0 there ends it without growing.
    doc.capacity = hint + simdjson::SIMDJSON_PADDING + 1;
    doc.data = static_cast<char*>(std::malloc(doc.capacity));
    while (true) {
        if (doc.capacity - doc.size == simdjson::SIMDJSON_PADDING) {
            doc.capacity = doc.capacity * 2;
            doc.data = static_cast<char*>(std::realloc(doc.data, doc.capacity));
        }
        const size_t room = doc.capacity - doc.size - simdjson::SIMDJSON_PADDING;
        const int n = gzread(gz, doc.data + doc.size,
                             static_cast<unsigned>(std::min<size_t>(room, 1u << 30)));
        if (n < 0) {
            gzclose(gz);
            throw std::runtime_error(path + ": corrupt compressed data");
        }
        if (n == 0) break;
        doc.size += static_cast<size_t>(n);
    }
    gzclose(gz);
    std::memset(doc.data + doc.size, 0, simdjson::SIMDJSON_PADDING);
}

// (c) decompression alone, in the streaming reader's 1 MiB chunks.
void decompressOnly(const std::string& path, Result& r)
{
    const auto t0 = Clock::now();
    gzFile gz = gzopen(path.c_str(), "rb");
    if (!gz) throw std::runtime_error(path + ": cannot open");
    gzbuffer(gz, 1 << 18);
    std::vector<char> buf(1 << 20);
    while (true) {
        const int n = gzread(gz, buf.data(), static_cast<unsigned>(buf.size()));
        if (n <= 0) break;
        r.bytes += static_cast<uint64_t>(n);
    }
    gzclose(gz);
    r.seconds = since(t0);
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The sides, in the order each round runs them.
enum Side { kOurs, kOdBaseline, kOdHaswell, kFloor, kSides };
const char* sideName(int side)
{
    static const std::string names[kSides] = {
        "(a) JsonReader (streaming)",
        fmt::format("(b) simdjson ondemand, {}", ondemandBaselineName()),
        fmt::format("(b') simdjson ondemand, {}", ondemandHaswellName()),
        "(c) decompression alone"};
    return names[side].c_str();
}

// (b) simdjson: the whole document decompressed into memory, then walked.
void walkSimdjson(const std::string& path, int side, Result& r)
{
    const auto t0 = Clock::now();
    Document doc;
    loadWhole(path, doc);
    r.loadSeconds = since(t0);
    r.bufferBytes = doc.capacity;
    if (side == kOdBaseline)
        walkOndemandBaseline(doc.data, doc.size, doc.capacity, r);
    else
        walkOndemandHaswell(doc.data, doc.size, doc.capacity, r);
    r.bytes = doc.size;
    r.seconds = since(t0);
}

struct Summary
{
    std::string name;
    double mb = 0;
    uint64_t events = 0;
    double seconds[kSides] = {}, load[kSides] = {}, rssMib[kSides] = {};
    double buffer = 0; // MiB
};

std::string sums(const Result& r)
{
    return fmt::format("{} events, {} memory ({} CUDA), {} kernels, sums {} {} {} {} {} {} {}",
                       r.events, r.memory, r.cudaMemory, r.kernels, r.sumBytes, r.sumAddr,
                       r.sumTotal, r.sumDevice, r.sumTs, r.sumDur, r.sumKernelArgs);
}

bool bench(const std::string& file, int runs, Summary& s)
{
    s.name = stdfs::path(file).filename().string();
    std::error_code ec;
    if (!stdfs::is_regular_file(file, ec)) {
        fmt::print("FAILED: {} is not a readable file\n", file);
        return false;
    }
    fmt::print("{} ({:.1f} MiB on disk), {} alternating run(s) of each side\n", file,
               static_cast<double>(stdfs::file_size(file)) / (1 << 20), runs);
    std::vector<double> secs[kSides], loads[kSides], rss[kSides];
    Result ref;
    for (int i = 0; i < runs; ++i) {
        Run run[kSides];
        for (int side = 0; side < kSides; ++side) {
            run[side] = inChild([&](Result& r) {
                if (side == kOurs)
                    walkOurs(file, r);
                else if (side == kFloor)
                    decompressOnly(file, r);
                else
                    walkSimdjson(file, side, r);
            });
            if (run[side].status != 0) {
                fmt::print("FAILED: {} exited with {}\n", sideName(side), run[side].status);
                return false;
            }
        }
        ref = run[kOurs].r;
        for (int side : {kOdBaseline, kOdHaswell})
            if (!ref.sameAs(run[side].r)) {
                fmt::print("FAILED: different figures: ours {}; {} {}\n", sums(ref), sideName(side),
                           sums(run[side].r));
                return false;
            }
        if (run[kFloor].r.bytes != ref.bytes) {
            fmt::print("FAILED: decompression gave {} bytes, the reader {}\n", run[kFloor].r.bytes,
                       ref.bytes);
            return false;
        }
        const double mb = static_cast<double>(ref.bytes) / (1 << 20);
        const double ev = static_cast<double>(ref.events);
        for (int side = 0; side < kSides; ++side) {
            const Run& r = run[side];
            fmt::print("  run {} {:42} {:6.2f} s {:7.1f} MB/s", i + 1, sideName(side), r.r.seconds,
                       mb / r.r.seconds);
            if (side != kFloor) fmt::print(" {:9.0f} events/s", ev / r.r.seconds);
            fmt::print(" peak RSS {:5.0f} MiB", static_cast<double>(r.peakRssKb) / 1024);
            if (side == kOdBaseline || side == kOdHaswell)
                fmt::print(" (load {:.2f} s + parse {:.2f} s; buffer {:.0f} MiB)", r.r.loadSeconds,
                           r.r.seconds - r.r.loadSeconds,
                           static_cast<double>(r.r.bufferBytes) / (1 << 20));
            fmt::print("\n");
            secs[side].push_back(r.r.seconds);
            loads[side].push_back(r.r.loadSeconds);
            rss[side].push_back(static_cast<double>(r.peakRssKb) / 1024);
        }
        s.buffer = static_cast<double>(run[kOdBaseline].r.bufferBytes) / (1 << 20);
    }
    s.mb = static_cast<double>(ref.bytes) / (1 << 20);
    s.events = ref.events;
    for (int side = 0; side < kSides; ++side) {
        s.seconds[side] = median(secs[side]);
        s.load[side] = median(loads[side]);
        s.rssMib[side] = median(rss[side]);
    }
    fmt::print("  {:.1f} MiB decompressed, {} events ({} [memory], {} on CUDA, {} kernels); all "
               "readers extracted the same figures\n",
               s.mb, ref.events, ref.memory, ref.cudaMemory, ref.kernels);
    const double ev = static_cast<double>(s.events);
    for (int side = 0; side < kSides; ++side) {
        fmt::print("  median {:42} {:6.2f} s {:7.1f} MB/s", sideName(side), s.seconds[side],
                   s.mb / s.seconds[side]);
        if (side != kFloor) fmt::print(" {:9.0f} events/s", ev / s.seconds[side]);
        fmt::print(" peak RSS {:5.0f} MiB", s.rssMib[side]);
        if (side == kOdBaseline || side == kOdHaswell)
            fmt::print("  time {:.2f}x of (a); parse alone {:.2f}x of (a) less (c)",
                       s.seconds[side] / s.seconds[kOurs],
                       (s.seconds[side] - s.load[side]) /
                           std::max(1e-9, s.seconds[kOurs] - s.seconds[kFloor]));
        fmt::print("\n");
    }
    return true;
}

// A Kineto-like trace: per step, a CPU op, its cudaLaunchKernel, the kernel (args as Kineto
// writes them), the flow event, and a CUDA [memory] alloc and free, in Kineto's layout.
std::string generate(const stdfs::path& dir, long mib)
{
    const std::string path = (dir / "generated.pt.trace.json").string();
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return {};
    const uint64_t target = static_cast<uint64_t>(mib) << 20;
    fmt::print(f, "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [\n    {{\"id\": 0, "
                  "\"name\": \"NVIDIA H100\", \"totalGlobalMem\": 85045231616}}\n  ],\n"
                  "  \"traceEvents\": [\n");
    uint64_t written = 0, ts = 1669783687389324ull, total = 5435638784ull;
    const char* names[] = {
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, "
        "at::detail::Array<char*, 1>)",
        "ampere_sgemm_128x64_tn",
        "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 512, true, 1>(cudnnTensorStruct, "
        "float const*, cudnnTensorStruct, float*, float const*, float const*, float, float)"};
    for (uint64_t i = 0; written < target; ++i) {
        const uint64_t addr = 139926520725504ull + (i % 4096) * 5242880ull;
        const uint64_t bytes = 512ull << (i % 13);
        total += bytes;
        const std::string chunk = fmt::format(
            R"(  {{
    "ph": "X", "cat": "cpu_op", "name": "aten::add_", "pid": 783658, "tid": 783658,
    "ts": {0}, "dur": 35,
    "args": {{
      "External id": {1},"Ev Idx": {1}, "Sequence number": {1}, "Fwd thread id": 0
    }}
  }},
  {{
    "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 783658, "tid": 783658,
    "ts": {2}, "dur": 32,
    "args": {{
      "External id": {1},
      "cbid": 211, "correlation": {1}
    }}
  }},
  {{
    "ph": "X", "cat": "kernel", "name": "{3}", "pid": 0, "tid": 7,
    "ts": {4}.{5}, "dur": {6},
    "args": {{
      "External id": {1},
      "queued": 0, "device": 0, "context": 1,
      "stream": 7, "correlation": {1},
      "registers per thread": 16,
      "shared memory": 0,
      "blocks per SM": 0.3,
      "warps per SM": 1.2,
      "grid": [{7}, 1, 1],
      "block": [128, 1, 1],
      "est. achieved occupancy %": 2
    }}
  }},
  {{
    "ph": "f", "id": {1}, "pid": 0, "tid": 7, "ts": {4},
    "cat": "ac2g", "name": "ac2g", "bp": "e"
  }},
  {{
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": 783658, "tid": 785244,
    "ts": {8},
    "args": {{
      "Ev Idx": {1}, "Device Type": 1, "Device Id": 0, "Addr": {9}, "Bytes": {10}, "Total Allocated": {11}, "Total Reserved": 12782141440
    }}
  }},
  {{
    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",
    "pid": 783658, "tid": 785244,
    "ts": {12},
    "args": {{
      "Ev Idx": {1}, "Device Type": 1, "Device Id": 0, "Addr": {9}, "Bytes": -{10}, "Total Allocated": {13}, "Total Reserved": 12782141440
    }}
  }},
)",
            ts, i, ts + 3, names[i % 3], ts + 40, i % 1000, 3 + i % 50, 24 + i % 200, ts + 2, addr,
            bytes, total, ts + 60, total - bytes);
        total -= bytes;
        std::fwrite(chunk.data(), 1, chunk.size(), f);
        written += chunk.size();
        ts += 100;
    }
    // The last element closes the array (a metadata event without ts, as Kineto ends).
    fmt::print(f,
               "  {{\n    \"name\": \"Record Window End\", \"ph\": \"i\", \"s\": \"g\", "
               "\"pid\": \"\", \"tid\": \"\"\n  }}\n  ],\n  \"traceName\": \"{}\"\n}}\n",
               path);
    std::fclose(f);
    return path;
}

} // namespace

int main(int argc, char** argv)
{
    int runs = 3;
    long genMib = 300;
    std::vector<std::string> files;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc)
            runs = std::max(1, std::atoi(argv[++i]));
        else if (a == "--generate" && i + 1 < argc)
            genMib = std::atol(argv[++i]);
        else
            files.push_back(a);
    }
    const stdfs::path tmp =
        stdfs::temp_directory_path() / fmt::format("fragscope-bench-kineto-{}", getpid());
    stdfs::create_directories(tmp);
    if (files.empty()) {
        const char* env = std::getenv("FRAGSCOPE_DATA");
        const stdfs::path dir = stdfs::path(env && *env ? env : FRAGSCOPE_DEFAULT_DATA) / "kineto";
        std::error_code ec;
        for (const auto& e : stdfs::directory_iterator(dir, ec))
            if (e.path().string().ends_with(".json.gz") || e.path().extension() == ".json")
                files.push_back(e.path().string());
        std::sort(files.begin(), files.end());
        if (files.empty())
            fmt::print("SKIP: no Kineto traces in {} (set FRAGSCOPE_DATA); the generated trace "
                       "only\n",
                       dir.string());
        if (genMib > 0) {
            fmt::print("generating a ~{} MiB Kineto trace...\n", genMib);
            std::fflush(stdout);
            const std::string g = generate(tmp, genMib);
            if (g.empty()) {
                fmt::print("FAILED: cannot write the generated trace in {}\n", tmp.string());
                return 1;
            }
            files.push_back(g);
        }
    }
    fmt::print("simdjson {}.{}.{}: ondemand kernels compiled in: {} (the build's baseline "
               "target) and {} (-march=haswell); this CPU's best: {}\n",
               int(simdjson::SIMDJSON_VERSION_MAJOR), int(simdjson::SIMDJSON_VERSION_MINOR),
               int(simdjson::SIMDJSON_VERSION_REVISION), ondemandBaselineName(),
               ondemandHaswellName(), simdjson::get_active_implementation()->name());
    std::vector<Summary> all;
    int rc = 0;
    for (const std::string& f : files) {
        Summary s;
        if (!bench(f, runs, s)) {
            rc = 1;
            break;
        }
        all.push_back(s);
    }
    std::error_code ec;
    stdfs::remove_all(tmp, ec);
    if (rc != 0 || all.empty()) return rc;

    fmt::print("\nsummary (medians of {}; time ratio = simdjson / JsonReader, end to end):\n",
               runs);
    double total[kSides] = {}, maxRss[kSides] = {}, worstPerMib = 0;
    bool faster[kSides] = {true, true, true, true};
    for (const Summary& s : all) {
        fmt::print(
            "  {:38} {:7.1f} MiB | JsonReader {:6.1f} MB/s {:4.0f} MiB | ondemand {} {:6.1f} "
            "MB/s {:4.0f} MiB {:.2f}x | ondemand {} {:6.1f} MB/s {:4.0f} MiB {:.2f}x | "
            "decompress {:6.1f} MB/s\n",
            s.name, s.mb, s.mb / s.seconds[kOurs], s.rssMib[kOurs], ondemandBaselineName(),
            s.mb / s.seconds[kOdBaseline], s.rssMib[kOdBaseline],
            s.seconds[kOdBaseline] / s.seconds[kOurs], ondemandHaswellName(),
            s.mb / s.seconds[kOdHaswell], s.rssMib[kOdHaswell],
            s.seconds[kOdHaswell] / s.seconds[kOurs], s.mb / s.seconds[kFloor]);
        for (int side = 0; side < kSides; ++side) {
            total[side] += s.seconds[side];
            maxRss[side] = std::max(maxRss[side], s.rssMib[side]);
            if (s.seconds[side] > s.seconds[kOurs]) faster[side] = false;
        }
        worstPerMib = std::max(worstPerMib, s.rssMib[kOdHaswell] / std::max(1.0, s.mb));
    }
    const char* base = ondemandBaselineName();
    const char* simd = ondemandHaswellName();
    const bool asFast = faster[kOdBaseline] && faster[kOdHaswell];
    fmt::print("VERDICT: simdjson ondemand is {} end to end: {:.2f} s against JsonReader's {:.2f} "
               "s on all inputs ({:.2f}x) as a product build compiles it ({}: ondemand has no "
               "runtime dispatch), {:.2f} s ({:.2f}x) compiled for {} (AVX2 required of every "
               "user's CPU); decompression alone {:.2f} s. ",
               asFast ? "at least as fast" : "NOT at least as fast on every input",
               total[kOdBaseline], total[kOurs], total[kOdBaseline] / total[kOurs], base,
               total[kOdHaswell], total[kOdHaswell] / total[kOurs], simd, total[kFloor]);
    fmt::print("{}: it holds the whole decompressed document plus padding and its structural "
               "index, peak RSS up to {:.0f} MiB ({:.2f} MiB per MiB of JSON) against the "
               "streaming reader's {:.0f} MiB whatever the size; simdjson 3.0.1 refuses documents "
               "over 4 GiB, so the largest traces (where the time matters) would still need "
               "JsonReader; and ondemand accepts malformed values it skips and its errors name "
               "no offset, so bad input's diagnostics would still come from JsonReader. Keep the "
               "streaming "
               "JsonReader (docs/importers.md, Benchmarks).\n",
               asFast ? "Not adopted all the same" : "Not adopted", maxRss[kOdHaswell], worstPerMib,
               maxRss[kOurs]);
    return 0;
}
