// A small, fully known session for the GUI and renderer tests, written through fs::Ingest (the
// same path every source takes). 24 frames of 100 ms; four 64 MiB segments from the start and a
// fifth created in frame 16; frame 17 runs a fallback kernel and its coherence_score drops to
// 0.009 (frames 17-18 break the default rule "coherence_score < 0.05": one collapse, 17-18).
#pragma once

#include "core/store/ingest.h"

#include <functional>
#include <string>
#include <vector>

namespace fstest {

constexpr int kFixtureFrames = 24;
constexpr int64_t kFrameNs = 100'000'000;
constexpr int64_t kFixtureBegin = 1'000'000'000;
constexpr uint64_t kSegment = 64ull << 20;
constexpr uint64_t kBase = 0x7f0000000000ull;

inline int64_t fixtureFrameStart(int f)
{
    return kFixtureBegin + f * kFrameNs;
}

// afterFrame: called after each frame's events have been committed (as a live viewer sees a
// recording); empty: one commit at the end.
inline void makeFixtureSession(const std::string& path,
                               const std::function<void(int frame)>& afterFrame = {})
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.synthetic = true;
    if (afterFrame) o.commitIntervalMs = 0;
    fs::Ingest in(o);
    in.begin();
    in.addDevice({0, "Fixture GPU", 80ull << 30, "GPU-fixture"});
    auto ev = [&](fs::EventType t, int64_t time) {
        fs::Event e;
        e.type = t;
        e.time = time;
        e.level = fs::Level::Framework;
        return e;
    };
    const fs::StringId gemm = in.intern("gemm_workspace_kernel");
    const fs::StringId fallback = in.intern("gemm_fallback_kernel");
    const fs::StringId act = in.intern("activation");
    const fs::StringId keep = in.intern("kv_cache");
    // Persistent blocks carry a call stack (innermost frame first, as sources record them).
    const fs::StackId keepStack =
        in.internStack({in.intern("cache_block (kv.py:88)"), in.intern("forward (model.py:412)")});
    for (int s = 0; s < 4; ++s) {
        fs::Event r = ev(fs::EventType::RegionCreate, kFixtureBegin);
        r.address = kBase + s * (256ull << 20); // holes between segments: separators on the axis
        r.size = kSegment;
        in.add(r);
    }
    uint32_t lcg = 17;
    auto rnd = [&](uint32_t n) {
        lcg = lcg * 1664525u + 1013904223u;
        return (lcg >> 8) % n;
    };
    std::vector<std::pair<uint64_t, uint64_t>> kept; // persistent blocks, never freed
    uint64_t keepCursor[5] = {0, 0, 0, 0, 0};
    for (int f = 0; f < kFixtureFrames; ++f) {
        const int64_t t0 = fixtureFrameStart(f);
        fs::Event fr = ev(fs::EventType::Range, t0);
        fr.endTime = t0 + kFrameNs;
        fr.name = in.intern("frame " + std::to_string(f));
        in.add(fr);
        if (f == 16) {
            fs::Event r = ev(fs::EventType::RegionCreate, t0 + 1'000'000);
            r.address = kBase + 4 * (256ull << 20);
            r.size = kSegment;
            in.add(r);
        }
        const int segs = f >= 16 ? 5 : 4;
        // Short-lived activations: allocated and freed inside the frame, bottom of each segment.
        for (int i = 0; i < 12; ++i) {
            const int s = static_cast<int>(rnd(static_cast<uint32_t>(segs)));
            const uint64_t size = (64ull << 10) << rnd(6); // 64 KiB .. 2 MiB
            fs::Event a = ev(fs::EventType::Alloc, t0 + 2'000'000 + i * 6'000'000);
            a.address = kBase + s * (256ull << 20) + (32ull << 20) + i * (2ull << 20);
            a.size = size;
            a.requestedSize = size - 512;
            a.name = act;
            a.stream = 7;
            in.add(a);
            fs::Event fe = ev(fs::EventType::Free, a.time + 3'000'000);
            fe.address = a.address;
            in.add(fe);
        }
        // Persistent blocks at the top of each segment with gaps between them: fragmentation
        // grows frame by frame.
        for (int s = 0; s < segs; ++s) {
            const uint64_t size = (256ull << 10) + rnd(4) * (128ull << 10);
            const uint64_t addr = kBase + s * (256ull << 20) + keepCursor[s];
            keepCursor[s] += size + (512ull << 10);
            if (keepCursor[s] > (30ull << 20)) continue;
            fs::Event a = ev(fs::EventType::Alloc, t0 + 90'000'000 + s * 1'000'000);
            a.address = addr;
            a.size = size;
            a.requestedSize = size;
            a.name = keep;
            a.aux = keepStack.value;
            in.add(a);
            kept.emplace_back(addr, size);
        }
        fs::Event k = ev(fs::EventType::Kernel, t0 + 10'000'000);
        k.endTime = k.time + 20'000'000;
        k.name = f == 17 ? fallback : gemm;
        k.stream = 7;
        in.add(k);
        const double coherence = f == 17   ? 0.009
                                 : f == 18 ? 0.03
                                 : f == 16 ? 0.124
                                           : 0.9 - f * 0.01;
        in.addFrameMetric(f, "coherence_score", coherence, "fixture");
        in.addFrameMetric(f, "flow_l2_px", f == 17 ? 11.5 : 2.0 + f * 0.1, "fixture");
        if (afterFrame) {
            in.tick();
            afterFrame(f);
        }
    }
    in.end();
}

} // namespace fstest
