#include "protocol.h"

#include <algorithm>
#include <cstdio>

namespace fs::proto {

const char* stateName(TargetState s)
{
    switch (s) {
    case TargetState::Idle:
        return "idle";
    case TargetState::WaitingForRecorder:
        return "waiting";
    case TargetState::Recording:
        return "recording";
    case TargetState::Disabled:
        return "disabled";
    }
    return "unknown";
}

void Encoder::header(Role role)
{
    StreamHeader h{};
    std::memcpy(h.magic, kMagic, sizeof h.magic);
    h.version = kVersion;
    h.role = static_cast<uint32_t>(role);
    put(&h, sizeof h);
}

void Encoder::put(const void* p, size_t n)
{
    // resize + memcpy: the hot path appends 96-byte events millions of times.
    if (n == 0) return; // an empty string_view may carry a null pointer: memcpy forbids it
    const size_t at = buf_.size();
    if (buf_.capacity() < at + n) buf_.reserve(std::max(at + n, buf_.capacity() * 2 + 4096));
    buf_.resize(at + n);
    std::memcpy(buf_.data() + at, p, n);
}

void Encoder::putStr0(std::string_view s)
{
    put(s.data(), s.size());
    buf_.push_back(0);
}

void Encoder::begin(MsgType t)
{
    flushEvents();
    frameStart_ = buf_.size();
    FrameHeader h{0, static_cast<uint16_t>(t), 0};
    put(&h, sizeof h);
    open_ = true;
}

void Encoder::end()
{
    if (!open_) return;
    size_t n = buf_.size() - frameStart_ - sizeof(FrameHeader);
    if (n > kMaxPayload) { // never emit a frame the reader would reject: cut the text
        buf_.resize(frameStart_ + sizeof(FrameHeader) + kMaxPayload);
        n = kMaxPayload;
    }
    const auto size = static_cast<uint32_t>(n);
    std::memcpy(buf_.data() + frameStart_, &size, sizeof size);
    open_ = false;
}

void Encoder::frame(MsgType t, const void* payload, size_t n)
{
    begin(t);
    put(payload, n);
    end();
}

void Encoder::string(uint32_t id, std::string_view text)
{
    begin(MsgType::String);
    putPod(id);
    put(text.data(), std::min(text.size(), kMaxPayload - sizeof id));
    end();
}

void Encoder::event(const WireEvent& e)
{
    constexpr size_t kPerFrame = kMaxPayload / sizeof(WireEvent) / 16; // 682 events, ~64 KiB
    if (eventCount_ == 0) {
        eventFrame_ = buf_.size();
        FrameHeader h{0, static_cast<uint16_t>(MsgType::Events), 0};
        put(&h, sizeof h);
    }
    put(&e, sizeof e);
    ++eventCount_;
    const auto size = static_cast<uint32_t>(eventCount_ * sizeof(WireEvent));
    std::memcpy(buf_.data() + eventFrame_, &size, sizeof size);
    if (eventCount_ >= kPerFrame) eventCount_ = 0;
}

void Encoder::flushEvents()
{
    eventCount_ = 0;
}

bool FrameReader::fail(std::string msg)
{
    if (error_.empty()) error_ = std::move(msg);
    return false;
}

void FrameReader::feed(const void* p, size_t n)
{
    if (!error_.empty()) return;
    if (pos_ > 0 && pos_ == buf_.size()) {
        buf_.clear();
        pos_ = 0;
    } else if (pos_ > (1u << 16) && pos_ * 2 > buf_.size()) {
        buf_.erase(buf_.begin(), buf_.begin() + static_cast<std::ptrdiff_t>(pos_));
        pos_ = 0;
    }
    const auto* b = static_cast<const uint8_t*>(p);
    buf_.insert(buf_.end(), b, b + n);
}

bool FrameReader::next(FrameHeader& h, std::string_view& payload)
{
    if (!error_.empty()) return false;
    char msg[160];
    if (!headerSeen_) {
        if (buf_.size() - pos_ < sizeof(StreamHeader)) {
            // Check the magic as soon as any byte is there, so that garbage fails fast.
            const size_t have = std::min(buf_.size() - pos_, sizeof kMagic);
            if (have > 0 && std::memcmp(buf_.data() + pos_, kMagic, have) != 0)
                return fail("offset 0: not a fragscope capture stream (bad magic)");
            return false;
        }
        StreamHeader sh;
        std::memcpy(&sh, buf_.data() + pos_, sizeof sh);
        if (std::memcmp(sh.magic, kMagic, sizeof kMagic) != 0)
            return fail("offset 0: not a fragscope capture stream (bad magic)");
        if (sh.version != kVersion) {
            std::snprintf(msg, sizeof msg,
                          "offset 8: stream version %u, this build speaks version %u", sh.version,
                          kVersion);
            return fail(msg);
        }
        if (sh.role != static_cast<uint32_t>(peer_)) {
            std::snprintf(msg, sizeof msg, "offset 12: unexpected peer role %u", sh.role);
            return fail(msg);
        }
        pos_ += sizeof sh;
        consumed_ += sizeof sh;
        headerSeen_ = true;
    }
    if (buf_.size() - pos_ < sizeof(FrameHeader)) return false;
    std::memcpy(&h, buf_.data() + pos_, sizeof h);
    if (h.size > kMaxPayload) {
        std::snprintf(msg, sizeof msg, "offset %llu: frame of %u bytes exceeds the %zu-byte limit",
                      static_cast<unsigned long long>(consumed_), h.size, kMaxPayload);
        return fail(msg);
    }
    if (h.reserved != 0) {
        std::snprintf(msg, sizeof msg, "offset %llu: malformed frame header",
                      static_cast<unsigned long long>(consumed_));
        return fail(msg);
    }
    if (buf_.size() - pos_ - sizeof h < h.size) return false;
    payload =
        std::string_view(reinterpret_cast<const char*>(buf_.data() + pos_ + sizeof h), h.size);
    pos_ += sizeof h + h.size;
    consumed_ += sizeof h + h.size;
    return true;
}

std::string_view PayloadReader::str0()
{
    if (pos_ > p_.size()) {
        ok_ = false;
        return {};
    }
    const size_t z = p_.find('\0', pos_);
    if (z == std::string_view::npos) {
        ok_ = false;
        pos_ = p_.size();
        return {};
    }
    std::string_view s = p_.substr(pos_, z - pos_);
    pos_ = z + 1;
    return s;
}

std::string_view PayloadReader::rest()
{
    std::string_view s = pos_ <= p_.size() ? p_.substr(pos_) : std::string_view();
    pos_ = p_.size();
    return s;
}

void encodeTargetInfo(Encoder& enc, const TargetInfo& info)
{
    enc.begin(MsgType::HelloAck);
    enc.putPod(info.version);
    enc.putPod(info.pid);
    enc.putPod(info.state);
    enc.putPod(info.launchedBy);
    enc.putStr0(info.kind);
    enc.putStr0(info.commandLine.substr(0, 4096));
    enc.end();
}

bool decodeTargetInfo(std::string_view payload, TargetInfo& out)
{
    PayloadReader r(payload);
    out.version = r.pod<uint32_t>();
    out.pid = r.pod<uint32_t>();
    out.state = r.pod<uint32_t>();
    out.launchedBy = r.pod<uint32_t>();
    out.kind = std::string(r.str0());
    out.commandLine = std::string(r.str0());
    return r.ok() && r.atEnd();
}

void encodeStatus(Encoder& enc, const TargetStatus& s)
{
    enc.begin(MsgType::StatusReply);
    enc.putPod(s.state);
    enc.putPod(s.eventsSent);
    enc.putPod(s.dropped);
    enc.putPod(s.bytesSent);
    enc.end();
}

bool decodeStatus(std::string_view payload, TargetStatus& out)
{
    PayloadReader r(payload);
    out.state = r.pod<uint32_t>();
    out.eventsSent = r.pod<uint64_t>();
    out.dropped = r.pod<uint64_t>();
    out.bytesSent = r.pod<uint64_t>();
    return r.ok() && r.atEnd();
}

} // namespace fs::proto
