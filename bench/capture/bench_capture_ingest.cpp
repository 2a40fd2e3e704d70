// Recorder ingest rate from the capture stream: frames -> StreamIngest -> Ingest -> session file,
// in events/s. Baseline, measured in the same run: the same events handed to Ingest::add
// directly (what an in-process source pays), with the same reorder window.
// Usage: bench_capture_ingest [EVENTS]   (default 2000000)
#include "capture/protocol/protocol.h"
#include "capture/recorder/stream_ingest.h"
#include "core/store/ingest.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <unistd.h>
#include <vector>

using namespace fs;
namespace ev = fs::proto::ev;

namespace {

std::vector<proto::WireEvent> makeEvents(size_t n)
{
    std::vector<proto::WireEvent> v;
    v.reserve(n);
    proto::WireEvent region{};
    region.type = ev::RegionCreate;
    region.address = 0x7f0000000000;
    region.size = uint64_t{1} << 34;
    region.regionKind = ev::KindSegment;
    region.level = ev::LevelFramework;
    v.push_back(region);
    int64_t t = 1000;
    uint64_t slot = 0;
    while (v.size() < n) {
        t += 1000;
        proto::WireEvent k{};
        k.type = ev::Kernel;
        k.time = t;
        k.endTime = t + 800;
        k.name = 1 + static_cast<uint32_t>(slot % 4);
        v.push_back(k);
        proto::WireEvent a{};
        a.type = ev::Alloc;
        a.level = ev::LevelFramework;
        a.time = t + 10;
        a.address = 0x7f0000000000 + (slot % 8192) * 1048576;
        a.size = 512 * (1 + slot % 100);
        v.push_back(a);
        proto::WireEvent f = a;
        f.type = ev::Free;
        f.time = t + 500;
        v.push_back(f);
        ++slot;
    }
    v.resize(n);
    return v;
}

IngestOptions options(const std::string& path)
{
    IngestOptions o;
    o.path = path;
    o.sourceKind = "agent";
    o.reorderWindowNs = 3'000'000'000; // what the recorder uses for CUPTI streams
    return o;
}

} // namespace

int main(int argc, char** argv)
{
    const size_t n = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 2'000'000;
    const auto dir = std::filesystem::temp_directory_path() /
                     ("fragscope-bench-ingest-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const std::vector<proto::WireEvent> events = makeEvents(n);
    const char* names[] = {"gemm_a", "gemm_b", "attn_fwd", "norm"};

    proto::Encoder enc;
    enc.header(proto::Role::Target);
    for (uint32_t i = 0; i < 4; ++i)
        enc.string(i + 1, names[i]);
    for (const auto& e : events)
        enc.event(e);
    const uint32_t reason = 0;
    enc.frame(proto::MsgType::StreamEnd, &reason, 4);

    // Stream path.
    auto t0 = std::chrono::steady_clock::now();
    {
        Ingest ingest(options((dir / "stream.fragscope").string()));
        ingest.begin();
        capture::StreamIngest si(ingest);
        proto::FrameReader reader(proto::Role::Target);
        const auto& b = enc.bytes();
        for (size_t off = 0; off < b.size(); off += 65536) { // socket-sized reads
            reader.feed(b.data() + off, std::min<size_t>(65536, b.size() - off));
            proto::FrameHeader h{};
            std::string_view p;
            while (reader.next(h, p))
                if (!si.frame(h, p, reader.offset())) {
                    std::fprintf(stderr, "bench: %s\n", si.error().c_str());
                    return 1;
                }
        }
        ingest.end();
    }
    const double streamS =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    // Baseline: direct Ingest::add.
    t0 = std::chrono::steady_clock::now();
    {
        Ingest ingest(options((dir / "direct.fragscope").string()));
        ingest.begin();
        StringId ids[5] = {};
        for (int i = 0; i < 4; ++i)
            ids[i + 1] = ingest.intern(names[i]);
        for (const auto& w : events) {
            Event e;
            e.type = static_cast<EventType>(w.type);
            e.time = w.time;
            e.endTime = w.endTime;
            e.address = w.address;
            e.size = w.size;
            e.level = static_cast<Level>(w.level);
            e.regionKind = static_cast<RegionKind>(w.regionKind);
            e.name = ids[w.name];
            ingest.add(e);
        }
        ingest.end();
    }
    const double directS =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::filesystem::remove_all(dir);
    std::printf("bench_capture_ingest: %zu events, stream %.1f MB (%.1f B/event)\n", n,
                static_cast<double>(enc.size()) / 1e6,
                static_cast<double>(enc.size()) / static_cast<double>(n));
    std::printf("  baseline  Ingest::add directly          %8.0f events/s (%.2f s)\n",
                static_cast<double>(n) / directS, directS);
    std::printf("  recorder  stream -> StreamIngest -> Ingest %5.0f events/s (%.2f s), %.2fx the "
                "baseline time\n",
                static_cast<double>(n) / streamS, streamS, streamS / directS);
    return 0;
}
