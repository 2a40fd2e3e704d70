// The synthetic session the GUI benchmarks load: realistic churn at any size.
#pragma once

#include "core/store/ingest.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>

namespace fsbench {

// A session of n allocations (two events each) on 64 segments of 1 GiB, a frame every 20,000
// allocations. When every > 0, Ingest commits every 4096 events and onCommitted(i) is called
// after allocation i whenever i % every == every - 1 (a recording seen from a live viewer).
inline void writeSession(const std::string& path, int64_t n, int64_t every = 0,
                         const std::function<void(int64_t)>& onCommitted = {})
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.synthetic = true;
    if (every > 0) o.commitIntervalMs = 0;
    fs::Ingest in(o);
    in.begin();
    in.addDevice({0, "bench GPU", 80ull << 30, "GPU-bench"});
    constexpr int kSegments = 64;
    constexpr uint64_t kSeg = 1ull << 30;
    for (int s = 0; s < kSegments; ++s) {
        fs::Event r;
        r.type = fs::EventType::RegionCreate;
        r.level = fs::Level::Framework;
        r.address = 0x7f0000000000ull + s * (2 * kSeg);
        r.size = kSeg;
        in.add(r);
    }
    // Each segment is a ring of slots; allocation i lives for 50 allocations' time, so about
    // 50 are live at once per segment: realistic churn at any n.
    uint32_t lcg = 1;
    int64_t t = 1000;
    const int64_t frames = std::max<int64_t>(1, n / 20000);
    int64_t frame = -1;
    for (int64_t i = 0; i < n; ++i) {
        t += 1000;
        const int64_t f = i * frames / n;
        if (f != frame) {
            frame = f;
            fs::Event m;
            m.type = fs::EventType::Mark;
            m.time = t;
            m.name = in.intern("frame " + std::to_string(f));
            in.add(m);
            in.addFrameMetric(f, "coherence_score", f % 17 == 16 ? 0.01 : 0.9, "bench");
        }
        lcg = lcg * 1664525u + 1013904223u;
        const int s = static_cast<int>((lcg >> 8) % kSegments);
        const uint64_t slot = static_cast<uint64_t>(i % 4096);
        fs::Event a;
        a.type = fs::EventType::Alloc;
        a.level = fs::Level::Framework;
        a.time = t;
        a.address = 0x7f0000000000ull + s * (2 * kSeg) + slot * (256ull << 10);
        a.size = (4096ull << ((lcg >> 4) % 6));
        in.add(a);
        fs::Event fr;
        fr.type = fs::EventType::Free;
        fr.level = fs::Level::Framework;
        fr.time = t + 500;
        fr.address = a.address;
        in.add(fr);
        if (every > 0 && i % every == every - 1) {
            in.tick();
            onCommitted(i);
        }
    }
    in.end();
}

} // namespace fsbench
