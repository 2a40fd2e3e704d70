// OOM diagnosis (docs/analysis.md "OOM diagnosis"): for each recorded OOM, the allocator's state
// at that instant in the request's pool and stream, the pending frees that would have fitted, and
// the cause by the first rule that holds, with advice that takes the recorded settings into
// account.
#include "oom.h"
#include "parallel.h"

#include "engine_impl.h"
#include "serialize.h"

#include "core/format.h"
#include "core/json.h"
#include "core/store/catalog.h"
#include "core/store/ooms.h"

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

// The text after "key": in a flat JSON object (allocator settings are one level deep for the
// keys read here); empty when absent.
std::string_view jsonValue(std::string_view json, std::string_view key)
{
    const std::string quoted = "\"" + std::string(key) + "\"";
    size_t at = json.find(quoted);
    if (at == std::string_view::npos) return {};
    at = json.find(':', at + quoted.size());
    if (at == std::string_view::npos) return {};
    ++at;
    while (at < json.size() && std::isspace(static_cast<unsigned char>(json[at])))
        ++at;
    size_t end = at;
    if (end < json.size() && json[end] == '"') {
        end = json.find('"', end + 1);
        return end == std::string_view::npos ? std::string_view{}
                                             : json.substr(at + 1, end - at - 1);
    }
    while (end < json.size() && json[end] != ',' && json[end] != '}')
        ++end;
    std::string_view v = json.substr(at, end - at);
    while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back())))
        v.remove_suffix(1);
    return v;
}

std::string lower(std::string_view s)
{
    std::string r(s);
    for (char& c : r)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return r;
}

} // namespace

AllocatorSettings parseAllocatorSettings(const std::string& json)
{
    AllocatorSettings s;
    s.text = json;
    if (json.empty()) return s;
    // PyTorch's snapshot: "expandable_segments": bool, "max_split_size": bytes (-1 or SIZE_MAX:
    // unlimited), and "PYTORCH_CUDA_ALLOC_CONF": the environment string.
    const std::string exp = lower(jsonValue(json, "expandable_segments"));
    if (exp == "true" || exp == "false") {
        s.expandableKnown = true;
        s.expandableSegments = exp == "true";
    }
    const std::string conf = lower(jsonValue(json, "PYTORCH_CUDA_ALLOC_CONF"));
    if (!s.expandableKnown && conf.find("expandable_segments:") != std::string::npos) {
        s.expandableKnown = true;
        s.expandableSegments = conf.find("expandable_segments:true") != std::string::npos;
    }
    const std::string split(jsonValue(json, "max_split_size"));
    if (!split.empty()) {
        try {
            const long double v = std::stold(split);
            s.maxSplitKnown = true;
            s.maxSplitBytes = v <= 0 || v >= 1.8e19L ? 0 : static_cast<uint64_t>(v);
        } catch (...) {
        }
    }
    return s;
}

AllocatorSettings Engine::allocatorSettings() const
{
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return {};
    return parseAllocatorSettings(d_->session->meta("allocator_settings"));
}

namespace {

struct RegionRow
{
    int64_t id;
    uint64_t address, size;
    int64_t create, destroy;
    uint32_t stream;
    uint64_t pool;
    int level;
};

void diagnose(OomDiagnosis& o, const AllocatorSettings& set)
{
    const uint64_t R = o.requestedBytes;
    const std::string req = humanBytes(R);
    // Free memory is kept per (pool, stream): where a block that fits was, when it was not in
    // the request's pool and stream (said with every cause it can go with).
    std::string elsewhere;
    if (o.elsewhereFitBytes > 0)
        elsewhere = fmt::format(
            "; a free block of {} at {:#x} {} would have fitted, but the allocator serves a "
            "request only from its own pool and stream",
            humanBytes(o.elsewhereFitBytes), o.elsewhereFitAddress,
            o.elsewhereFitPool == 0
                ? fmt::format("on stream {} (default pool)", o.elsewhereFitStream)
                : fmt::format("in private pool {} (stream {})", o.elsewhereFitPool,
                              o.elsewhereFitStream));
    if (o.pendingFreeFits > 0) {
        o.cause = "pending_free";
        o.reason = fmt::format("{} freed block(s) of at least {} in the request's pool and stream "
                               "were still waiting on other streams' work",
                               o.pendingFreeFits, req) +
                   elsewhere;
        o.suggestion = "a block that fits was freed but is still in use by another stream "
                       "(tensor.record_stream or cross-stream use): synchronize that stream, or "
                       "free the tensor after its last use on the other stream, before this "
                       "allocation";
        return;
    }
    if (o.poolStreamFreeBytes >= R || o.cachedFreeBytes >= R) {
        o.cause = "fragmentation";
        const bool here = o.poolStreamFreeBytes >= R;
        o.reason = fmt::format(
            "{} free in the allocator's cache ({} in the request's pool and stream), largest free "
            "block there {}: enough bytes, no block that fits {}",
            humanBytes(o.cachedFreeBytes), humanBytes(o.poolStreamFreeBytes),
            humanBytes(o.poolStreamLargestFreeBytes), req);
        std::string advice;
        if (!here || o.elsewhereFitBytes > 0)
            advice = "the free cached memory is held by other streams or private pools (CUDA "
                     "graphs)";
        if (o.elsewhereFitBytes > 0) {
            o.reason += elsewhere;
            advice += o.elsewhereFitPool == 0
                          ? fmt::format(": the block that fits is cached for stream {}: allocate "
                                        "on that stream, or free its tensors on the stream that "
                                        "allocated them; ",
                                        o.elsewhereFitStream)
                          : fmt::format(": the block that fits belongs to private pool {}: "
                                        "create that torch.cuda.MemPool with use_on_oom=True so "
                                        "that a request about to OOM may take its free blocks, "
                                        "or release the pool once it is no longer replayed; ",
                                        o.elsewhereFitPool);
        } else if (!here) {
            advice += ": allocate on one stream, or release pools you no longer replay; ";
        }
        if (set.expandableKnown && set.expandableSegments) {
            advice += "expandable segments are already on, yet the free memory is in pieces "
                      "smaller than the request: allocate long-lived large tensors first, or "
                      "call torch.cuda.empty_cache() between phases";
            if (set.maxSplitKnown && set.maxSplitBytes == 0)
                advice += ", or set max_split_size_mb below the request so that large cached "
                          "blocks are not split";
        } else {
            advice += "set PYTORCH_ALLOC_CONF=expandable_segments:True (or in "
                      "PYTORCH_CUDA_ALLOC_CONF, which wins when both are set) so that segments "
                      "grow in place instead of leaving free pieces smaller than the request";
            if (!set.expandableKnown) advice += " (the session does not record this setting)";
        }
        o.suggestion = advice;
        return;
    }
    if (o.capacityBytes > 0 && o.deviceFreeKnown && o.externalBytes > 0 &&
        o.deviceFreeBytes + o.externalBytes >= R) {
        o.cause = "external";
        o.reason = fmt::format("{} of the device's {} are used outside this allocator; without "
                               "them {} would have been free for a request of {}",
                               humanBytes(o.externalBytes), humanBytes(o.capacityBytes),
                               humanBytes(o.deviceFreeBytes + o.externalBytes), req);
        o.suggestion = "memory outside this allocator (other processes on the GPU, the CUDA "
                       "context, NCCL buffers, other libraries' allocators) took what the request "
                       "needed: free it, or run fewer processes per GPU";
        return;
    }
    o.cause = "capacity";
    o.reason = fmt::format(
        "{} requested, {} free on the device{}, {} free in the allocator's cache: not enough "
        "memory anywhere",
        req, o.deviceFreeKnown ? humanBytes(o.deviceFreeBytes) : std::string("unknown"),
        o.capacityBytes ? fmt::format(" (capacity {})", humanBytes(o.capacityBytes))
                        : std::string(),
        humanBytes(o.cachedFreeBytes));
    o.suggestion = fmt::format(
        "the run needs more memory than the device has ({} allocated when it failed): reduce the "
        "batch, resolution or sequence length, use activation checkpointing or offloading",
        humanBytes(o.allocatedBytes));
}

} // namespace

std::vector<OomDiagnosis> Engine::oomsBetween(int64_t from, int64_t to) const
{
    std::vector<OomDiagnosis> out;
    for (OomDiagnosis& o : ooms())
        if (o.time >= from && o.time <= to) out.push_back(std::move(o));
    return out;
}

std::vector<OomDiagnosis> Engine::ooms() const
{
    std::vector<OomDiagnosis> out;
    std::vector<RegionRow> regions;
    struct PendingRow
    {
        uint32_t device;
        int level;
        uint64_t address, size;
        uint32_t stream;
        int64_t request, complete;
    };
    std::vector<PendingRow> pending;
    std::map<uint32_t, uint64_t> capacity;
    AllocatorSettings set;
    {
        std::lock_guard lock(d_->dbMutex);
        if (!d_->session) return out;
        const Session& db = *d_->session;
        set = parseAllocatorSettings(db.meta("allocator_settings"));
        for (const store::OomRow& row : store::oomsByTime(db)) {
            OomDiagnosis o;
            o.time = row.timeNs;
            o.device = static_cast<uint32_t>(row.device);
            const int64_t lv = row.level.value_or(2);
            o.level = lv >= 0 && lv < kLevelCount ? static_cast<Level>(lv) : Level::Framework;
            o.stream = static_cast<uint32_t>(row.stream.value_or(0));
            o.requestedBytes = row.requestedBytes.value_or(0);
            o.deviceFreeKnown = row.deviceFreeBytes.has_value();
            o.deviceFreeBytes = row.deviceFreeBytes.value_or(0);
            out.push_back(o);
        }
        if (out.empty()) return out;
        store::RegionRows rg = store::RegionRows::all(db);
        store::RegionRow r;
        while (rg.next(r))
            regions.push_back({r.id, r.address, r.size, r.createNs, r.destroyNs.value_or(kAlive),
                               static_cast<uint32_t>(r.stream.value_or(0)),
                               static_cast<uint64_t>(r.poolId.value_or(0)),
                               static_cast<int>(r.level | (r.device << 8))});
        for (const store::PendingFreeRow& pf : store::pendingFrees(db))
            pending.push_back({static_cast<uint32_t>(pf.device),
                               static_cast<int>(pf.level.value_or(0)), pf.address, pf.size,
                               static_cast<uint32_t>(pf.stream.value_or(0)), pf.requestNs,
                               pf.completeNs.value_or(kAlive)});
        for (const store::DeviceRow& dv : store::devices(db))
            if (dv.capacityBytes) capacity[static_cast<uint32_t>(dv.id)] = *dv.capacityBytes;
    }
    // Regions by id, for the fragments' (ids are the table's keys).
    std::unordered_map<int64_t, const RegionRow*> regionById;
    for (const RegionRow& r : regions)
        regionById.emplace(r.id, &r);
    // Each OOM on its own (a replay to its instant): over the cores, a long run has hundreds.
    // OOMs come in time order, so each chunk's replayer per track goes on from the last one.
    auto one = [&](OomDiagnosis& o, std::map<const TrackData*, std::unique_ptr<Replayer>>& at) {
        const int key = static_cast<int>(o.level) | static_cast<int>(o.device << 8);
        // The request's pool is the default pool (0): an OOM entry does not name one.
        auto inPoolStream = [&](const RegionRow& r) {
            return r.level == key && r.stream == o.stream && r.pool == 0;
        };
        auto liveAt = [&](const RegionRow& r) {
            return r.level == key && r.create <= o.time && r.destroy > o.time;
        };
        const TrackData& td = d_->trackOrThrow(o.device, o.level);
        auto& r = at[&td];
        if (!r) r = std::make_unique<Replayer>(td);
        r->seek(o.time);
        const State s = d_->stateOf(*this, td, r->state(), o.time);
        o.reservedBytes = s.reservedBytes;
        o.allocatedBytes = s.allocatedBytes;
        o.cachedFreeBytes = s.freeBytes;
        for (const Fragment& f : r->state().fragments()) {
            auto it = regionById.find(f.regionId);
            if (it == regionById.end() || !liveAt(*it->second)) continue;
            if (!inPoolStream(*it->second)) {
                // A block that fits, held by another stream or pool: best fit, lowest address.
                if (f.size >= o.requestedBytes && o.requestedBytes > 0 &&
                    (o.elsewhereFitBytes == 0 || f.size < o.elsewhereFitBytes ||
                     (f.size == o.elsewhereFitBytes && f.address < o.elsewhereFitAddress))) {
                    o.elsewhereFitBytes = f.size;
                    o.elsewhereFitAddress = f.address;
                    o.elsewhereFitStream = it->second->stream;
                    o.elsewhereFitPool = it->second->pool;
                }
                continue;
            }
            o.poolStreamFreeBytes += f.size;
            o.poolStreamLargestFreeBytes = std::max(o.poolStreamLargestFreeBytes, f.size);
        }
        // The live regions of the track, when a pending free needs them.
        std::vector<const RegionRow*> live;
        bool liveRead = false;
        for (const PendingRow& p : pending) {
            if (p.device != o.device || p.level != static_cast<int>(o.level) ||
                p.request > o.time || p.complete <= o.time || p.size < o.requestedBytes)
                continue;
            if (!liveRead) {
                for (const RegionRow& g : regions)
                    if (liveAt(g)) live.push_back(&g);
                liveRead = true;
            }
            const auto in = std::find_if(live.begin(), live.end(), [&](const RegionRow* g) {
                return p.address >= g->address && p.address < g->address + g->size;
            });
            if (in == live.end() || !inPoolStream(**in)) continue;
            ++o.pendingFreeFits;
            o.pendingFreeFitBytes += p.size;
        }
        if (auto c = capacity.find(o.device); c != capacity.end() && c->second > 0) {
            o.capacityBytes = c->second;
            const uint64_t used = o.deviceFreeBytes + o.reservedBytes;
            o.externalBytes = o.deviceFreeKnown && c->second > used ? c->second - used : 0;
        }
        diagnose(o, set);
    };
    forEachChunk(out.size(), parallelChunks(out.size(), 8), [&](size_t, size_t b, size_t e) {
        std::map<const TrackData*, std::unique_ptr<Replayer>> replayers;
        for (size_t i = b; i < e; ++i)
            one(out[i], replayers);
    });
    return out;
}

} // namespace fs::analysis

namespace fs::analysis {

void writeOom(JsonWriter& j, const OomDiagnosis& o)
{
    j.beginObject();
    j.field("time_ns", o.time);
    j.field("device", o.device);
    j.field("level", std::string(levelName(o.level)));
    j.field("stream", o.stream);
    j.field("requested_bytes", o.requestedBytes);
    j.key("device_free_bytes");
    if (o.deviceFreeKnown)
        j.value(o.deviceFreeBytes);
    else
        j.null();
    j.field("reserved_bytes", o.reservedBytes);
    j.field("allocated_bytes", o.allocatedBytes);
    j.field("cached_free_bytes", o.cachedFreeBytes);
    j.field("pool_stream_free_bytes", o.poolStreamFreeBytes);
    j.field("pool_stream_largest_free_bytes", o.poolStreamLargestFreeBytes);
    j.field("pending_free_fits", o.pendingFreeFits);
    j.field("pending_free_fit_bytes", o.pendingFreeFitBytes);
    j.key("capacity_bytes");
    if (o.capacityBytes)
        j.value(o.capacityBytes);
    else
        j.null();
    j.field("external_bytes", o.externalBytes);
    j.key("elsewhere_fit");
    if (o.elsewhereFitBytes > 0) {
        j.beginObject();
        j.field("size_bytes", o.elsewhereFitBytes).field("address", o.elsewhereFitAddress);
        j.field("stream", o.elsewhereFitStream).field("pool", o.elsewhereFitPool);
        j.endObject();
    } else {
        j.null();
    }
    j.field("cause", o.cause);
    j.field("reason", o.reason);
    j.field("suggestion", o.suggestion);
    j.endObject();
}

std::string oomText(const OomDiagnosis& o, int64_t begin, bool ordinal)
{
    std::string t = fmt::format(
        "  OOM at {} device {} stream {}: {} requested, device free {}\n",
        formatTime(o.time, begin, ordinal), o.device, o.stream, humanBytes(o.requestedBytes),
        o.deviceFreeKnown ? humanBytes(o.deviceFreeBytes) : std::string("unknown"));
    t += fmt::format("    reserved {}, allocated {}, cached free {} ({} in the request's pool and "
                     "stream, largest block {})\n",
                     humanBytes(o.reservedBytes), humanBytes(o.allocatedBytes),
                     humanBytes(o.cachedFreeBytes), humanBytes(o.poolStreamFreeBytes),
                     humanBytes(o.poolStreamLargestFreeBytes));
    if (o.pendingFreeFits > 0)
        t += fmt::format("    pending frees that would have fitted: {} ({})\n", o.pendingFreeFits,
                         humanBytes(o.pendingFreeFitBytes));
    if (o.elsewhereFitBytes > 0)
        t += fmt::format("    a block that fits, elsewhere: {} at {:#x} on stream {}, pool {}\n",
                         humanBytes(o.elsewhereFitBytes), o.elsewhereFitAddress,
                         o.elsewhereFitStream, o.elsewhereFitPool);
    if (o.capacityBytes > 0)
        t += fmt::format("    device capacity {}, used outside this allocator {}\n",
                         humanBytes(o.capacityBytes), humanBytes(o.externalBytes));
    t += fmt::format("    cause: {}: {}\n    suggestion: {}\n", o.cause, o.reason, o.suggestion);
    return t;
}

} // namespace fs::analysis
