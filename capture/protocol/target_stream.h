// The producer half of a capture target: interns strings and stacks, batches events into frames
// and pushes them to the recording client through a ControlServer. At every new recording
// (epoch) it first sends StreamBegin and replays its tables (strings, stacks, devices, processes,
// meta), so a recorder that attaches late can decode everything that follows.
// Not thread-safe: the owner serialises calls (the agent holds its own lock per CUPTI buffer).
#pragma once

#include "control_server.h"
#include "core/events.h"
#include "protocol.h"

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::proto {

class TargetStream
{
public:
    struct Options
    {
        // Keep what is produced before the first Start (up to bufferCap bytes) instead of
        // dropping it: `fragscope record` starts the target this way so nothing is lost.
        bool keepUntilFirstStart = false;
        size_t bufferCap = 64u << 20;
        size_t flushBytes = 256u << 10; // send when this much is buffered
        int64_t clockOffsetNs = 0;      // reported in StreamBegin
    };
    TargetStream(ControlServer& server, Options opts);

    // Ids of this stream (the recorder maps them to session ids).
    StringId intern(std::string_view s);
    StackId internStack(const std::vector<StringId>& frames);
    void device(uint32_t id, uint64_t capacity, std::string_view name, std::string_view uuid);
    void process(int64_t pid, int64_t startNs, std::string_view commandLine);
    void meta(const std::string& key, const std::string& value);
    void event(const WireEvent& e);
    void frameMetric(int64_t frame, std::string_view name, double value, std::string_view source);
    void warn(std::string_view text);
    void health(int64_t time, int64_t value, std::string_view kind, std::string_view detail);
    // Sends what is buffered (when a recorder is attached).
    void flush();
    // Flushes and sends StreamEnd.
    void finish(EndReason reason);

    uint64_t eventsProduced() const { return produced_; }
    uint64_t eventsDropped() const { return dropped_; }
    bool active(); // a recorder is attached (or we keep events until the first one)

private:
    void checkEpoch();
    void replay(Encoder& enc);
    bool wanted(); // whether produced data has anywhere to go

    ControlServer& server_;
    Options opts_;
    Encoder enc_;
    uint64_t epoch_ = 0;
    bool everStarted_ = false;
    uint64_t produced_ = 0, dropped_ = 0, pendingEvents_ = 0;
    std::unordered_map<std::string, StringId> strings_;
    std::vector<std::string> stringText_;
    std::map<std::vector<StringId>, StackId> stacks_;
    std::vector<std::string> tables_; // encoded Device/Process/Meta frames, replayed per epoch
    std::map<std::string, size_t> metaIndex_;
};

} // namespace fs::proto
