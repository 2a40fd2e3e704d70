#include "decode.h"

#include "callbacks.h"

#include <cupti.h>

#include <cstdio>
#include <cstring>

namespace fs::agent {

namespace ev = proto::ev;

static_assert(sizeof(CUpti_ActivityMemory4) == 128, "CUPTI 13 record layout changed");
static_assert(sizeof(CUpti_ActivityKernel10) == 216, "CUPTI 13 record layout changed");
static_assert(sizeof(CUpti_ActivityGraphTrace2) == 56, "CUPTI 13 record layout changed");
static_assert(sizeof(CUpti_ActivityMemoryPool3) == 80, "CUPTI 13 record layout changed");

namespace {

StringId nameId(const char* s, DecodeState& st, proto::TargetStream& out)
{
    if (!s || !*s) return kNoString;
    auto it = st.namesByPtr.find(s);
    if (it != st.namesByPtr.end()) return it->second;
    const StringId id = out.intern(s);
    // Only kernel/marker names are cached by pointer; CUPTI keeps those alive for the process.
    if (st.namesByPtr.size() < (1u << 20)) st.namesByPtr.emplace(s, id);
    return id;
}

proto::WireEvent make(uint8_t type, int64_t t)
{
    proto::WireEvent e{};
    e.type = type;
    e.time = t;
    return e;
}

void memory(const CUpti_ActivityMemory4& r, DecodeState& st, proto::TargetStream& out)
{
    if (r.memoryKind != CUPTI_ACTIVITY_MEMORY_KIND_DEVICE) {
        ++st.skipped; // pinned/managed host memory is not device address space
        return;
    }
    const int64_t t = static_cast<int64_t>(r.timestamp) + st.clockOffsetNs;
    const bool fromPool =
        r.memoryPoolConfig.memoryPoolType != CUPTI_ACTIVITY_MEMORY_POOL_TYPE_INVALID;
    const bool alloc = r.memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
    if (!alloc && r.memoryOperationType != CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE) {
        ++st.skipped;
        return;
    }
    if (!fromPool && st.vmm && st.vmm->contains(r.correlationId)) {
        ++st.vmmRecords; // a VMM mapping, already a RegionMap/RegionUnmap of its reservation
        return;
    }
    proto::WireEvent e = make(alloc ? ev::Alloc : ev::Free, t);
    e.address = r.address;
    e.size = r.bytes;
    e.stream = r.streamId;
    e.device = r.deviceId;
    e.aux = 0;
    e.aux2 = r.correlationId;
    e.level = fromPool ? ev::LevelPool : ev::LevelDriver;
    // The allocation source (cuptiActivityEnableAllocationSource) is not a stable pointer:
    // intern it by text, not by address.
    if (alloc && r.source && *r.source) e.name = out.intern(r.source).value;
    if (!fromPool && alloc) {
        // A plain cudaMalloc is its own region (RegionKind::Driver hosts nothing above it).
        proto::WireEvent reg = make(ev::RegionCreate, t);
        reg.address = r.address;
        reg.size = r.bytes;
        reg.device = r.deviceId;
        reg.stream = r.streamId;
        reg.level = ev::LevelDriver;
        reg.regionKind = ev::KindDriver;
        out.event(reg);
        out.event(e);
        return;
    }
    out.event(e);
    if (!fromPool && !alloc) {
        proto::WireEvent reg = make(ev::RegionDestroy, t);
        reg.address = r.address;
        reg.device = r.deviceId;
        reg.level = ev::LevelDriver;
        reg.regionKind = ev::KindDriver;
        out.event(reg);
    }
}

void pool(const CUpti_ActivityMemoryPool3& r, DecodeState& st, proto::TargetStream& out)
{
    const int64_t t = static_cast<int64_t>(r.timestamp) + st.clockOffsetNs;
    switch (r.memoryPoolOperationType) {
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED:
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_DESTROYED: {
        const bool created =
            r.memoryPoolOperationType == CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_CREATED;
        proto::WireEvent e = make(created ? ev::RegionCreate : ev::RegionDestroy, t);
        e.address = r.address;
        e.size = created ? r.size : 0;
        e.device = r.deviceId;
        e.level = ev::LevelPool;
        e.regionKind = ev::KindPool;
        e.aux = r.address; // pool id
        e.aux2 = r.releaseThreshold;
        out.event(e);
        return;
    }
    case CUPTI_ACTIVITY_MEMORY_POOL_OPERATION_TYPE_TRIMMED: {
        // A trim is a precursor candidate: keep it as a marker the analysis can find.
        char msg[160];
        std::snprintf(msg, sizeof msg, "cuda pool trim pool=%#llx size=%llu keep=%llu",
                      static_cast<unsigned long long>(r.address),
                      static_cast<unsigned long long>(r.size),
                      static_cast<unsigned long long>(r.minBytesToKeep));
        proto::WireEvent e = make(ev::Mark, t);
        e.name = out.intern(msg).value;
        e.device = r.deviceId;
        e.aux = r.address;
        out.event(e);
        return;
    }
    default:
        ++st.skipped;
    }
}

void kernel(const CUpti_ActivityKernel10& r, DecodeState& st, proto::TargetStream& out)
{
    proto::WireEvent e = make(ev::Kernel, static_cast<int64_t>(r.start) + st.clockOffsetNs);
    e.endTime = static_cast<int64_t>(r.end) + st.clockOffsetNs;
    e.name = nameId(r.name, st, out).value;
    e.stream = r.streamId;
    e.device = r.deviceId;
    e.aux = r.correlationId;
    e.grid[0] = static_cast<uint32_t>(r.gridX);
    e.grid[1] = static_cast<uint32_t>(r.gridY);
    e.grid[2] = static_cast<uint32_t>(r.gridZ);
    e.block[0] = static_cast<uint32_t>(r.blockX);
    e.block[1] = static_cast<uint32_t>(r.blockY);
    e.block[2] = static_cast<uint32_t>(r.blockZ);
    if (r.graphId != 0) e.aux2 = (uint64_t{r.graphId} << 32) | (r.graphNodeId & 0xffffffffu);
    out.event(e);
}

void graph(const CUpti_ActivityGraphTrace2& r, DecodeState& st, proto::TargetStream& out)
{
    proto::WireEvent e = make(ev::GraphLaunch, static_cast<int64_t>(r.start) + st.clockOffsetNs);
    e.endTime = static_cast<int64_t>(r.end) + st.clockOffsetNs;
    e.stream = r.streamId;
    e.device = r.deviceId;
    e.aux = r.graphId;
    // The record carries no exec id: the cuGraphLaunch callback left it under the correlation id.
    if (st.graphs) {
        e.aux2 = st.graphs->takeExec(r.correlationId);
        if (e.aux == 0 && e.aux2 != 0) e.aux = st.graphs->graphOf(e.aux2);
    }
    out.event(e);
}

void marker(const CUpti_ActivityMarker2& r, DecodeState& st, proto::TargetStream& out)
{
    const int64_t t = static_cast<int64_t>(r.timestamp) + st.clockOffsetNs;
    if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS) {
        proto::WireEvent e = make(ev::Mark, t);
        // NVTX messages are often built on the fly: intern by text, never by pointer.
        e.name = r.name ? out.intern(r.name).value : 0;
        out.event(e);
    } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_START) {
        if (st.openRanges.size() < (1u << 16))
            st.openRanges[r.id] = {r.name ? out.intern(r.name) : kNoString, t};
    } else if (r.flags & CUPTI_ACTIVITY_FLAG_MARKER_END) {
        auto it = st.openRanges.find(r.id);
        if (it == st.openRanges.end()) {
            ++st.skipped;
            return;
        }
        proto::WireEvent e = make(ev::Range, it->second.start);
        e.endTime = t;
        e.name = it->second.name.value;
        out.event(e);
        st.openRanges.erase(it);
    } else {
        ++st.skipped;
    }
}

void device(const CUpti_ActivityDevice5& r, proto::TargetStream& out)
{
    char uuid[40];
    const auto* b = reinterpret_cast<const unsigned char*>(r.uuid.bytes);
    std::snprintf(uuid, sizeof uuid,
                  "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                  b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                  b[14], b[15]);
    out.device(r.id, r.globalMemorySize, r.name ? r.name : "", uuid);
}

} // namespace

void decodeRecord(const void* record, DecodeState& st, proto::TargetStream& out)
{
    ++st.records;
    const auto* rec = static_cast<const CUpti_Activity*>(record);
    switch (rec->kind) {
    case CUPTI_ACTIVITY_KIND_MEMORY2:
        memory(*static_cast<const CUpti_ActivityMemory4*>(record), st, out);
        break;
    case CUPTI_ACTIVITY_KIND_MEMORY_POOL:
        pool(*static_cast<const CUpti_ActivityMemoryPool3*>(record), st, out);
        break;
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
        kernel(*static_cast<const CUpti_ActivityKernel10*>(record), st, out);
        break;
    case CUPTI_ACTIVITY_KIND_GRAPH_TRACE:
        graph(*static_cast<const CUpti_ActivityGraphTrace2*>(record), st, out);
        break;
    case CUPTI_ACTIVITY_KIND_MARKER:
        marker(*static_cast<const CUpti_ActivityMarker2*>(record), st, out);
        break;
    case CUPTI_ACTIVITY_KIND_DEVICE:
        device(*static_cast<const CUpti_ActivityDevice5*>(record), out);
        break;
    default:
        ++st.skipped;
    }
}

size_t decodeActivityBuffer(uint8_t* buffer, size_t validSize, DecodeState& st,
                            proto::TargetStream& out)
{
    size_t n = 0;
    CUpti_Activity* rec = nullptr;
    while (validSize > 0 && cuptiActivityGetNextRecord(buffer, validSize, &rec) == CUPTI_SUCCESS) {
        decodeRecord(rec, st, out);
        ++n;
    }
    return n;
}

} // namespace fs::agent
