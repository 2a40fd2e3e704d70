// The capture stream and control protocol shared by the agent (inside the target process), the
// simulator's live mode and the recorder. Plain C++ and libc only: the agent links it.
//
// A connection (Unix socket) starts with a 16-byte header in each direction (magic + version,
// checked first), then carries frames: a 8-byte FrameHeader {payload size, type} and the payload.
// Every payload is length-checked against kMaxPayload and against its type's layout; a frame that
// fails either check is malformed and drops that connection only. docs/capture.md has the table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace fs::proto {

inline constexpr char kMagic[8] = {'F', 'S', 'C', 'A', 'P', 'T', 'R', '1'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kMaxPayload = 1u << 20; // 1 MiB: larger frames are malformed

enum class Role : uint32_t { Target = 1, Client = 2 };

struct StreamHeader
{
    char magic[8];
    uint32_t version;
    uint32_t role;
};
static_assert(sizeof(StreamHeader) == 16);

struct FrameHeader
{
    uint32_t size; // payload bytes after this header
    uint16_t type; // MsgType
    uint16_t reserved;
};
static_assert(sizeof(FrameHeader) == 8);

enum class MsgType : uint16_t {
    // client -> target
    Hello = 1,  // u32 version, u32 client pid
    Start = 2,  // (empty)
    Stop = 3,   // (empty)
    Status = 4, // (empty)
    Mark = 5,   // message text
    // target -> client
    HelloAck = 16,    // TargetInfo
    Error = 17,       // text
    StatusReply = 18, // TargetStatus
    Ack = 19,         // u16 command type
    // target -> client stream, after Start
    StreamBegin = 32, // i64 clock offset applied (ns), u64 epoch
    String = 33,      // u32 id, text
    Events = 34,      // WireEvent[n]
    Device = 35,      // u32 id, u64 capacity, name \0 uuid
    Process = 36,     // i64 pid, i64 start ns, command line
    Meta = 37,        // key \0 value
    FrameMetric = 38, // i64 frame, f64 value, name \0 source
    Warn = 39,        // text
    Stack = 40,       // u64 id, u32 frames[n]
    Health = 41,      // i64 time (or INT64_MIN), i64 value, kind \0 detail
    StreamEnd = 42,   // u32 EndReason
};

enum class EndReason : uint32_t { TargetFinished = 0, Stopped = 1, AgentDisabled = 2 };

enum class TargetState : uint32_t { Idle = 0, WaitingForRecorder = 1, Recording = 2, Disabled = 3 };
const char* stateName(TargetState s);

// Wire form of fs::Event (core/events.h): the same fields in a fixed, packed layout so that the
// agent need not include core. Hot record: 96 bytes.
struct WireEvent
{
    int64_t time;
    int64_t endTime;
    uint64_t address;
    uint64_t size;
    uint64_t requestedSize;
    uint64_t aux;
    uint64_t aux2;
    uint32_t name; // id from a String frame of the same stream
    uint32_t stream;
    uint32_t device;
    uint32_t grid[3];
    uint32_t block[3];
    uint8_t type; // fs::EventType
    uint8_t level;
    uint8_t regionKind;
    uint8_t flags;
};
static_assert(sizeof(WireEvent) == 96, "WireEvent is the hot record on the wire");

// Mirrors of fs::EventType / Level / RegionKind values (checked against core in the recorder).
namespace ev {
enum : uint8_t {
    RegionCreate = 0,
    RegionDestroy,
    RegionMap,
    RegionUnmap,
    Alloc,
    Free,
    Kernel,
    GraphLaunch,
    Mark,
    Range,
    Oom,
    Health,
    PendingFree,
    GraphCapture,
    GraphInstantiate,
    GraphExecDestroy,
    Count
};
enum : uint8_t { LevelDriver = 0, LevelPool = 1, LevelFramework = 2, LevelCount = 3 };
enum : uint8_t { KindSegment = 0, KindPool = 1, KindVmm = 2, KindDriver = 3, KindCount = 4 };
} // namespace ev

struct TargetInfo
{
    uint32_t version = kVersion;
    uint32_t pid = 0;
    uint32_t state = 0;      // TargetState
    uint32_t launchedBy = 0; // pid of the `fragscope record` that started it, else 0
    std::string kind;        // "agent" or "simulator"
    std::string commandLine;
};

struct TargetStatus
{
    uint32_t state = 0;
    uint64_t eventsSent = 0;
    uint64_t dropped = 0;
    uint64_t bytesSent = 0;
};

// Appends frames to a byte vector (one writer per stream; not thread-safe).
class Encoder
{
public:
    std::vector<uint8_t>& bytes() { return buf_; }
    size_t size() const { return buf_.size(); }
    void clear() { buf_.clear(); }

    void header(Role role);
    void frame(MsgType t, const void* payload, size_t n);
    void frame(MsgType t, std::string_view text) { frame(t, text.data(), text.size()); }
    // Starts a frame whose payload is written with put*(); finish with end().
    void begin(MsgType t);
    void put(const void* p, size_t n);
    template <class T> void putPod(const T& v) { put(&v, sizeof v); }
    void putStr0(std::string_view s); // text followed by a NUL
    void end();

    void string(uint32_t id, std::string_view text);
    // Events are batched into one Events frame until flushEvents() or a non-event frame.
    void event(const WireEvent& e);
    void flushEvents();
    size_t pendingEvents() const { return eventCount_; }

private:
    std::vector<uint8_t> buf_;
    size_t frameStart_ = 0;
    bool open_ = false;
    size_t eventFrame_ = 0; // start of the open Events frame, if eventCount_ > 0
    size_t eventCount_ = 0;
};

// Incremental frame parser over a byte stream: feed() bytes, then next() frames until it returns
// false. The header is checked first; any violation sets error() and the stream is unusable.
class FrameReader
{
public:
    explicit FrameReader(Role expectPeer) : peer_(expectPeer) {}
    void feed(const void* p, size_t n);
    // Returns true with a frame; false when more bytes are needed or on error (see error()).
    bool next(FrameHeader& h, std::string_view& payload);
    const std::string& error() const { return error_; }
    bool headerSeen() const { return headerSeen_; }
    uint64_t offset() const { return consumed_; } // stream offset of the next unread byte
    size_t buffered() const { return buf_.size() - pos_; }

private:
    bool fail(std::string msg);
    Role peer_;
    std::vector<uint8_t> buf_;
    size_t pos_ = 0;
    uint64_t consumed_ = 0;
    bool headerSeen_ = false;
    std::string error_;
};

// Reads fields out of a payload with bounds checks (ok() false after any overrun).
class PayloadReader
{
public:
    explicit PayloadReader(std::string_view p) : p_(p) {}
    template <class T> T pod()
    {
        T v{};
        if (pos_ > p_.size() || p_.size() - pos_ < sizeof v) {
            ok_ = false;
            pos_ = p_.size();
            return v;
        }
        std::memcpy(&v, p_.data() + pos_, sizeof v);
        pos_ += sizeof v;
        return v;
    }
    std::string_view str0(); // up to the next NUL (required)
    std::string_view rest(); // everything left
    bool ok() const { return ok_; }
    bool atEnd() const { return pos_ == p_.size(); }

private:
    std::string_view p_;
    size_t pos_ = 0;
    bool ok_ = true;
};

void encodeTargetInfo(Encoder& enc, const TargetInfo& info);
bool decodeTargetInfo(std::string_view payload, TargetInfo& out);
void encodeStatus(Encoder& enc, const TargetStatus& s);
bool decodeStatus(std::string_view payload, TargetStatus& out);

} // namespace fs::proto
