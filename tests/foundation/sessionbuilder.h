// Builds small sessions through fs::Ingest for the foundation tests.
#pragma once

#include "core/store/ingest.h"

#include <QTemporaryDir>
#include <string>

namespace fstest {

inline fs::Event ev(fs::EventType t, int64_t time, uint64_t addr, uint64_t size = 0,
                    fs::Level level = fs::Level::Framework)
{
    fs::Event e;
    e.type = t;
    e.time = time;
    e.address = addr;
    e.size = size;
    e.level = level;
    return e;
}

// A valid session with one 2 MiB segment and n alloc/free pairs inside it.
inline void writeSmallSession(const std::string& path, int n = 100)
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "test";
    fs::Ingest in(o);
    in.begin();
    in.addDevice({0, "Test GPU", 80ull << 30, ""});
    in.add(ev(fs::EventType::RegionCreate, 0, 0x7f0000000000, 2 << 20));
    for (int i = 0; i < n; ++i) {
        in.add(ev(fs::EventType::Alloc, 10 + 2 * i, 0x7f0000000000 + 4096ull * (i % 64), 4096));
        in.add(ev(fs::EventType::Free, 11 + 2 * i, 0x7f0000000000 + 4096ull * (i % 64)));
    }
    in.end();
}

} // namespace fstest
