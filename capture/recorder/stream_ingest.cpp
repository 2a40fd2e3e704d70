#include "stream_ingest.h"

#include <cmath>
#include <fmt/format.h>

namespace fs::capture {

namespace ev = proto::ev;

static_assert(ev::RegionCreate == static_cast<uint8_t>(EventType::RegionCreate));
static_assert(ev::Health == static_cast<uint8_t>(EventType::Health));
static_assert(ev::Mark == static_cast<uint8_t>(EventType::Mark));
static_assert(ev::GraphExecDestroy == static_cast<uint8_t>(EventType::GraphExecDestroy));
static_assert(ev::Count == kEventTypeCount);
static_assert(ev::LevelFramework == static_cast<uint8_t>(Level::Framework));
static_assert(ev::KindDriver == static_cast<uint8_t>(RegionKind::Driver));

namespace {

// Meta keys the session writer owns; a target cannot overwrite them.
bool reservedMeta(std::string_view k)
{
    for (std::string_view r : {"magic", "format_version", "created_at", "created_by", "state",
                               "writer_pid", "writer_host", "event_count", "time_begin_ns",
                               "time_end_ns", "time_axis", "address_view"})
        if (k == r) return true;
    return false;
}

} // namespace

bool StreamIngest::fail(uint64_t offset, const std::string& what)
{
    if (error_.empty()) error_ = fmt::format("capture stream offset {}: {}", offset, what);
    return false;
}

StringId StreamIngest::str(uint32_t remote)
{
    return remote < strings_.size() ? strings_[remote] : kNoString;
}

bool StreamIngest::frame(const proto::FrameHeader& h, std::string_view payload, uint64_t offset)
{
    using proto::MsgType;
    ++frames_;
    proto::PayloadReader r(payload);
    switch (static_cast<MsgType>(h.type)) {
    case MsgType::StreamBegin:
        r.pod<int64_t>();
        r.pod<uint64_t>();
        break;
    case MsgType::String: {
        const auto id = r.pod<uint32_t>();
        const std::string_view text = r.rest();
        if (!r.ok() || id == 0 || id > (1u << 28))
            return fail(offset, "malformed string definition");
        if (id >= strings_.size()) strings_.resize(id + 1, kNoString);
        strings_[id] = sink_.intern(text);
        return true;
    }
    case MsgType::Events: {
        if (payload.size() % sizeof(proto::WireEvent) != 0)
            return fail(
                offset,
                fmt::format("event frame of {} bytes is not a whole number of {}-byte events",
                            payload.size(), sizeof(proto::WireEvent)));
        const size_t n = payload.size() / sizeof(proto::WireEvent);
        for (size_t i = 0; i < n; ++i) {
            proto::WireEvent w;
            std::memcpy(&w, payload.data() + i * sizeof w, sizeof w);
            if (w.type >= ev::Count || w.level >= ev::LevelCount || w.regionKind >= ev::KindCount)
                return fail(
                    offset,
                    fmt::format("event {} of the frame has an invalid type/level/kind ({}/{}/{})",
                                i, w.type, w.level, w.regionKind));
            if (w.name != 0 && (w.name >= strings_.size() || (strings_[w.name] == kNoString)))
                return fail(offset, fmt::format("event {} names string id {} before defining it", i,
                                                w.name));
            Event e;
            e.time = w.time;
            e.endTime = w.endTime;
            e.address = w.address;
            e.size = w.size;
            e.requestedSize = w.requestedSize;
            e.aux = w.aux;
            e.aux2 = w.aux2;
            e.name = str(w.name);
            e.stream = w.stream;
            e.device = w.device;
            for (int k = 0; k < 3; ++k) {
                e.grid[k] = w.grid[k];
                e.block[k] = w.block[k];
            }
            e.type = static_cast<EventType>(w.type);
            e.level = static_cast<Level>(w.level);
            e.regionKind = static_cast<RegionKind>(w.regionKind);
            e.flags = w.flags;
            if (e.type == EventType::Alloc && e.aux != 0) {
                // Event::aux of an Alloc carries the stack id; one the stream never defined
                // (or wider than a stack id) becomes "no stack".
                auto it = e.aux > UINT32_MAX ? stacks_.end()
                                             : stacks_.find(StackId{static_cast<uint32_t>(e.aux)});
                e.aux = it == stacks_.end() ? 0 : it->second.value;
            }
            sink_.add(e);
            ++events_;
        }
        return true;
    }
    case MsgType::Stack: {
        const auto id = r.pod<uint64_t>();
        const std::string_view rest = r.rest();
        if (!r.ok() || rest.size() % 4 != 0 || id == 0 || id > UINT32_MAX)
            return fail(offset, "malformed stack definition");
        std::vector<StringId> frames(rest.size() / 4);
        for (size_t i = 0; i < frames.size(); ++i) {
            uint32_t f;
            std::memcpy(&f, rest.data() + i * 4, 4);
            frames[i] = str(f);
        }
        stacks_[StackId{static_cast<uint32_t>(id)}] = sink_.internStack(frames);
        return true;
    }
    case MsgType::Device: {
        DeviceInfo d;
        d.id = r.pod<uint32_t>();
        d.capacityBytes = r.pod<uint64_t>();
        d.name = std::string(r.str0());
        d.uuid = std::string(r.str0());
        if (!r.ok() || !r.atEnd()) return fail(offset, "malformed device frame");
        sink_.addDevice(d);
        return true;
    }
    case MsgType::Process: {
        ProcessInfo p;
        p.pid = r.pod<int64_t>();
        p.startTime = r.pod<int64_t>();
        p.commandLine = std::string(r.rest());
        if (!r.ok()) return fail(offset, "malformed process frame");
        sink_.addProcess(p);
        return true;
    }
    case MsgType::Meta: {
        const std::string_view k = r.str0();
        const std::string_view v = r.rest();
        if (!r.ok() || k.empty()) return fail(offset, "malformed meta frame");
        sink_.setMeta(reservedMeta(k) ? "target." + std::string(k) : std::string(k),
                      std::string(v));
        return true;
    }
    case MsgType::FrameMetric: {
        const auto frame = r.pod<int64_t>();
        const auto value = r.pod<double>();
        const std::string_view name = r.str0();
        const std::string_view source = r.rest();
        if (!r.ok() || name.empty()) return fail(offset, "malformed frame-metric frame");
        sink_.addFrameMetric(frame, std::string(name), value, std::string(source));
        return true;
    }
    case MsgType::Warn:
        sink_.warn(std::string(payload));
        return true;
    case MsgType::Health: {
        const auto time = r.pod<int64_t>();
        const auto value = r.pod<int64_t>();
        const std::string_view kind = r.str0();
        const std::string_view detail = r.rest();
        if (!r.ok() || kind.empty()) return fail(offset, "malformed health frame");
        ingest_.health(std::string(kind), value, std::string(detail), time);
        return true;
    }
    case MsgType::StreamEnd: {
        const auto reason = r.pod<uint32_t>();
        if (!r.ok() || reason > 2) return fail(offset, "malformed end-of-stream frame");
        ended_ = true;
        endReason_ = static_cast<proto::EndReason>(reason);
        return true;
    }
    case MsgType::Ack:
    case MsgType::StatusReply:
        return true; // replies to our own commands, read on the data path
    case MsgType::Error:
        return fail(offset, "the target reported: " + std::string(payload));
    default:
        return fail(offset, fmt::format("unexpected frame type {}", h.type));
    }
    if (!r.ok()) return fail(offset, "malformed stream-begin frame");
    return true;
}

} // namespace fs::capture
