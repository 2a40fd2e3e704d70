// Recorder side of the capture stream: decodes frames (capture/protocol) into fs::Event calls on
// an EventSink / Ingest. String and stack ids on the wire are the target's; they are mapped to
// the session's own ids here. Every frame is validated; the first bad one stops decoding with an
// error naming the stream offset.
#pragma once

#include "capture/protocol/protocol.h"
#include "core/store/ingest.h"

#include <string>
#include <unordered_map>
#include <vector>

namespace fs::capture {

class StreamIngest
{
public:
    // Events, strings and the rest go to sink when given (a flight recorder in front of ingest),
    // capture health straight to ingest.
    explicit StreamIngest(Ingest& ingest, EventSink* sink = nullptr)
        : ingest_(ingest), sink_(sink ? *sink : ingest)
    {
    }

    // Handles one frame; false (with error()) when it is malformed or unexpected.
    bool frame(const proto::FrameHeader& h, std::string_view payload, uint64_t offset);

    bool ended() const { return ended_; }
    proto::EndReason endReason() const { return endReason_; }
    const std::string& error() const { return error_; }
    int64_t events() const { return events_; }
    int64_t frames() const { return frames_; }

private:
    bool fail(uint64_t offset, const std::string& what);
    StringId str(uint32_t remote);

    Ingest& ingest_;
    EventSink& sink_;
    std::vector<StringId> strings_{kNoString};    // remote id -> session id
    std::unordered_map<StackId, StackId> stacks_; // remote stack id -> session id
    bool ended_ = false;
    proto::EndReason endReason_ = proto::EndReason::TargetFinished;
    std::string error_;
    int64_t events_ = 0;
    int64_t frames_ = 0;
};

} // namespace fs::capture
