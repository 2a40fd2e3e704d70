// The simulator's only way out: every event goes through EventWriter into an fs::EventSink.
// It counts events by type, keeps a running 64-bit hash of everything emitted (strings hashed by
// their text, so the hash does not depend on how a sink numbers interned strings) and checks
// that event times never go backwards (a live stream may rely on it).
#pragma once

#include "core/event_sink.h"
#include "core/events.h"

#include <array>
#include <cstdint>
#include <functional>
#include <string_view>

namespace fs::sim {

// An interned string together with the hash of its text.
struct Name
{
    StringId id = kNoString;
    uint64_t hash = 0;
};

class EventWriter
{
public:
    using ProgressFn = std::function<void(int64_t done)>;
    static constexpr int kTypeCount = kEventTypeCount;

    explicit EventWriter(EventSink& sink) : sink_(sink) {}

    EventSink& sink() { return sink_; }
    Name intern(std::string_view s);
    // Hashes and forwards one event; e.name must be the id of `name`.
    void emit(const Event& e, const Name& name);
    void setProgress(ProgressFn fn) { progress_ = std::move(fn); }

    int64_t events() const { return events_; }
    int64_t count(EventType t) const { return byType_[static_cast<size_t>(t)]; }
    uint64_t hash() const { return hash_; }
    int64_t lastTime() const { return lastTime_; }
    // Session time span: first event time, latest time or end time of any event.
    int64_t firstTime() const { return firstTime_; }
    int64_t endTime() const { return endTime_; }

    static uint64_t hashText(std::string_view s);

private:
    void mix(uint64_t v)
    {
        hash_ ^= v;
        hash_ *= 0x100000001b3ULL;
        hash_ ^= hash_ >> 29;
    }

    EventSink& sink_;
    ProgressFn progress_;
    int64_t events_ = 0;
    std::array<int64_t, kTypeCount> byType_{};
    uint64_t hash_ = 0xcbf29ce484222325ULL;
    int64_t lastTime_ = 0;
    int64_t firstTime_ = 0;
    int64_t endTime_ = 0;
};

} // namespace fs::sim
