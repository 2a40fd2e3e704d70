// Hand-built sessions for the analysis tests: events written through fs::Ingest, so the engine
// reads exactly what every real source produces.
#pragma once

#include "core/store/ingest.h"

#include <string>

namespace antest {

constexpr uint64_t kBase = 0x7f0000000000;
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;

inline fs::Event ev(fs::EventType type, int64_t t, uint64_t addr = 0, uint64_t size = 0,
                    fs::Level level = fs::Level::Framework)
{
    fs::Event e;
    e.type = type;
    e.time = t;
    e.address = addr;
    e.size = size;
    e.level = level;
    return e;
}

inline fs::IngestOptions options(const std::string& path)
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "test";
    o.aliveAtEndIsAnomaly = false;
    return o;
}

inline void mark(fs::Ingest& in, int64_t t, const std::string& msg)
{
    fs::Event e = ev(fs::EventType::Mark, t);
    e.name = in.intern(msg);
    in.add(e);
}

inline void kernel(fs::Ingest& in, int64_t t, int64_t end, const std::string& name)
{
    fs::Event e = ev(fs::EventType::Kernel, t);
    e.endTime = end;
    e.name = in.intern(name);
    in.add(e);
}

// A kernel launched by CUDA graph `graph` as its node `node` (ingest splits aux2 into graph_id
// and graph_node_id).
inline void graphKernel(fs::Ingest& in, int64_t t, int64_t end, const std::string& name,
                        uint32_t graph, uint32_t node)
{
    fs::Event e = ev(fs::EventType::Kernel, t);
    e.endTime = end;
    e.name = in.intern(name);
    e.aux2 = uint64_t{graph} << 32 | node;
    in.add(e);
}

// The engine tests' known session: one 1 MiB segment at 0; A [0, 256K) at 10, B [256K, 512K) at
// 20, C [512K, 896K) at 30, B freed at 40, D (4 KiB) outside any region at 50; the session ends
// at the mark at 100.
inline void writeKnownSession(const std::string& path)
{
    fs::Ingest in(options(path));
    in.begin();
    in.add(ev(fs::EventType::RegionCreate, 0, kBase, 1 * MiB));
    in.add(ev(fs::EventType::Alloc, 10, kBase, 256 * KiB));
    in.add(ev(fs::EventType::Alloc, 20, kBase + 256 * KiB, 256 * KiB));
    in.add(ev(fs::EventType::Alloc, 30, kBase + 512 * KiB, 384 * KiB));
    in.add(ev(fs::EventType::Free, 40, kBase + 256 * KiB));
    in.add(ev(fs::EventType::Alloc, 50, kBase + 2 * MiB, 4 * KiB));
    mark(in, 100, "done");
    in.end();
}

} // namespace antest
