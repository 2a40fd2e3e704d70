#include "event_writer.h"

#include <algorithm>
#include <stdexcept>

namespace fs::sim {

uint64_t EventWriter::hashText(std::string_view s)
{
    uint64_t h = 0xcbf29ce484222325ULL; // FNV-1a
    for (const char c : s) {
        h ^= static_cast<unsigned char>(c);
        h *= 0x100000001b3ULL;
    }
    return h;
}

Name EventWriter::intern(std::string_view s)
{
    return Name{sink_.intern(s), hashText(s)};
}

void EventWriter::emit(const Event& e, const Name& name)
{
    // Monotonic time is a property of the model, not of the input, so breaking it is a bug here.
    if (e.time < lastTime_) throw std::logic_error("simulator emitted an event back in time");
    lastTime_ = e.time;
    if (events_ == 0) firstTime_ = e.time;
    endTime_ = std::max({endTime_, e.time, e.endTime});
    mix(static_cast<uint64_t>(e.type) | static_cast<uint64_t>(e.level) << 8 |
        static_cast<uint64_t>(e.regionKind) << 16 | static_cast<uint64_t>(e.flags) << 24 |
        static_cast<uint64_t>(e.stream) << 32);
    mix(static_cast<uint64_t>(e.time));
    mix(static_cast<uint64_t>(e.endTime));
    mix(e.address);
    mix(e.size);
    mix(e.requestedSize);
    mix(e.aux);
    mix(e.aux2);
    mix(name.hash);
    mix(e.device);
    if (e.type == EventType::Kernel) {
        mix(static_cast<uint64_t>(e.grid[0]) | static_cast<uint64_t>(e.grid[1]) << 32);
        mix(static_cast<uint64_t>(e.grid[2]) | static_cast<uint64_t>(e.block[0]) << 32);
        mix(static_cast<uint64_t>(e.block[1]) | static_cast<uint64_t>(e.block[2]) << 32);
    }
    ++byType_[static_cast<size_t>(e.type)];
    ++events_;
    sink_.add(e);
    if (progress_ && (events_ & 0xffff) == 0) progress_(events_);
}

} // namespace fs::sim
