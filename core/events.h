// The neutral event model every source (simulator, agent stream, importers) feeds into ingest.
// See docs/session-format.md for how each event lands in the session file.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <type_traits>

namespace fs {

// A 32-bit id of one kind of interned thing. Ids of different kinds do not convert to each other,
// and a plain integer becomes an id only explicitly (`StringId{n}`), at the boundary where the
// number is stored (session file, wire protocol, a generic event field); `.value` goes back.
template <class Tag> struct TypedId
{
    uint32_t value = 0;
    constexpr TypedId() = default;
    constexpr explicit TypedId(uint32_t v) : value(v) {}
    constexpr explicit operator bool() const { return value != 0; }
    friend constexpr bool operator==(TypedId, TypedId) = default;
    // Not a defaulted <=>: <compare> pulls in <concepts>, which Qt's moc cannot parse.
    friend constexpr bool operator<(TypedId a, TypedId b) { return a.value < b.value; }
};

using StringId = TypedId<struct StringTag>; // interned string; 0 is the empty string
using StackId = TypedId<struct StackTag>;   // interned call stack; 0: no stack recorded
constexpr StringId kNoString{};
constexpr StackId kNoStack{};
static_assert(sizeof(StringId) == sizeof(uint32_t) && std::is_trivially_copyable_v<StringId>,
              "ids are written to the wire and session file as plain u32");
constexpr int64_t kNoTime = std::numeric_limits<int64_t>::min();

// Allocation level (docs/session-format.md). Stored as integers in the session file.
enum class Level : uint8_t {
    Driver = 0,    // cudaMalloc / cuMemAlloc
    Pool = 1,      // cudaMallocAsync from a memory pool
    Framework = 2, // caching allocator blocks (PyTorch, NVTX memory extension)
};
constexpr int kLevelCount = 3;
std::string_view levelName(Level l);
bool parseLevel(std::string_view s, Level& out);

// Kind of reserved address range.
enum class RegionKind : uint8_t {
    Segment = 0, // a cudaMalloc'd segment owned by a caching allocator
    Pool = 1,    // CUDA memory-pool reservation
    Vmm = 2,     // cuMemAddressReserve reservation
    Driver = 3,  // a plain cudaMalloc seen by CUPTI (hosts nothing above it)
};
std::string_view regionKindName(RegionKind k);

enum class EventType : uint8_t {
    RegionCreate,  // address,size,level(=level of allocations it hosts),regionKind,stream,aux=pool
                   // id
    RegionDestroy, // address (device,level as created)
    RegionMap,     // VMM / expandable segment: [address,size) inside a region becomes backed
    RegionUnmap,   // ... and unbacked again
    Alloc,         // address,size,requestedSize,level,stream,name=tag,aux=stack id,
                   // aux2=user_metadata string id | compile_context string id << 32
    Free,          // address,level (size optional, checked when non-zero), aux=pool id when the
                   // source knows it (0: not said)
    Kernel,        // time..endTime,name,stream,aux=correlation,grid/block packed, graphId/graphNode
    GraphLaunch,   // time..endTime,stream,aux=graph id,aux2=exec id
    Mark,          // instant NVTX-like marker, name=message
    Range,         // time..endTime NVTX-like range, name=message
    Oom,           // size=requested bytes, aux=device free bytes, level
    Health,        // name=kind (dropped_records, buffer_overrun, clock_gap, ...), aux=value
    PendingFree,   // freed block waiting on a stream event: address,size,stream,level,
                   // time=free requested, endTime=free completed (kNoTime: still pending)
    GraphCapture,  // time..endTime=stream capture begin..end,stream,aux=graph id,aux2=memory pool
                   // its allocations went to (0: not said),name=the graph's name (captures with
                   // one name are re-captures of one graph; empty: the graph id names it)
    GraphInstantiate, // time,aux=graph id,aux2=exec id
    GraphExecDestroy, // time,aux2=exec id
};
constexpr int kEventTypeCount = static_cast<int>(EventType::GraphExecDestroy) + 1;

// One event. A plain fixed-size record: sources fill the fields their type uses.
struct Event
{
    int64_t time = 0;    // ns on the session clock
    int64_t endTime = 0; // Kernel, GraphLaunch, Range
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t requestedSize = 0;
    uint64_t aux = 0; // see EventType comments
    uint64_t aux2 = 0;
    StringId name = kNoString;
    uint32_t stream = 0;
    uint32_t device = 0;
    uint32_t grid[3] = {0, 0, 0};
    uint32_t block[3] = {0, 0, 0};
    EventType type = EventType::Mark;
    Level level = Level::Driver;
    RegionKind regionKind = RegionKind::Segment;
    uint8_t flags = 0;
};
static_assert(sizeof(Event) <= 112, "Event is a hot record: keep it small");

struct DeviceInfo
{
    uint32_t id = 0;
    std::string name;
    uint64_t capacityBytes = 0;
    std::string uuid;
};

struct ProcessInfo
{
    int64_t pid = 0;
    std::string commandLine;
    int64_t startTime = 0;
};

enum class TimeAxis : uint8_t { Nanoseconds = 0, Ordinal = 1 };

// Anomaly kinds recorded by ingest (anomalies.kind).
namespace anomaly {
inline constexpr std::string_view DoubleFree = "double_free";
inline constexpr std::string_view UnknownFree = "unknown_free";
inline constexpr std::string_view Overlap = "overlap";
inline constexpr std::string_view OutsideRegion = "outside_region";
inline constexpr std::string_view AliveAtEnd = "alive_at_end";
inline constexpr std::string_view LateEvent = "late_event";
inline constexpr std::string_view UnknownRegion = "unknown_region";
inline constexpr std::string_view SizeMismatch = "size_mismatch";
// CUDA graphs (docs/analysis.md "Graphs and pools"): an exec destroyed again, one destroyed
// that was never instantiated, a free naming a pool no region or capture ever named.
inline constexpr std::string_view GraphExecDestroyedTwice = "graph_exec_destroyed_twice";
inline constexpr std::string_view UnknownGraphExec = "unknown_graph_exec";
inline constexpr std::string_view UnknownPool = "unknown_pool";
} // namespace anomaly

} // namespace fs

template <class Tag> struct std::hash<fs::TypedId<Tag>>
{
    size_t operator()(fs::TypedId<Tag> id) const noexcept
    {
        return std::hash<uint32_t>{}(id.value);
    }
};
