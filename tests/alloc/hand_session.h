// Hand-built event streams for the what-if tests: a session of a source known to start with the
// run (so the replay may treat it as complete), and one framework-level event.
#pragma once

#include "core/store/ingest.h"

#include <memory>
#include <string>

namespace fstest {

// An open ingest of a "simulator" session at path: add devices and events, then end().
inline std::unique_ptr<fs::Ingest> handSession(const std::string& path)
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    auto ing = std::make_unique<fs::Ingest>(o);
    ing->begin();
    return ing;
}

// A framework-level event; an allocation requests exactly its size.
inline fs::Event handEvent(fs::EventType t, int64_t time, uint64_t addr, uint64_t size)
{
    fs::Event e;
    e.type = t;
    e.time = time;
    e.address = addr;
    e.size = size;
    e.requestedSize = t == fs::EventType::Alloc ? size : 0;
    e.level = fs::Level::Framework;
    return e;
}

} // namespace fstest
