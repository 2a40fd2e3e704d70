#include "trace.h"

#include "core/analysis/history.h"
#include "core/store/allocations.h"
#include "core/store/catalog.h"
#include "core/store/frames.h"
#include "core/store/ooms.h"
#include "core/store/regions.h"
#include "core/store/session.h"

#include <algorithm>
#include <fmt/format.h>
#include <map>
#include <tuple>

namespace fs::alloc {

namespace {

DeviceTrace& deviceOf(Trace& t, std::map<uint32_t, size_t>& index, uint32_t dev)
{
    auto [it, inserted] = index.emplace(dev, t.devices.size());
    if (inserted) {
        t.devices.emplace_back();
        t.devices.back().device = dev;
    }
    return t.devices[it->second];
}

// Reserved bytes over time from segment creations/releases and expandable mappings: the peak, the
// final value and the value at given instants (OOMs). Releases before creations at equal times.
struct ReservedSweep
{
    std::vector<std::tuple<int64_t, int, int64_t>> steps; // time, 0 release / 1 create, delta
    void add(int64_t create, int64_t destroy, uint64_t size)
    {
        steps.emplace_back(create, 1, static_cast<int64_t>(size));
        if (destroy != kAliveNs) steps.emplace_back(destroy, 0, -static_cast<int64_t>(size));
    }
    void run(uint64_t& peak, uint64_t& final, std::vector<std::pair<int64_t, uint64_t*>> at)
    {
        std::sort(steps.begin(), steps.end());
        std::sort(at.begin(), at.end());
        int64_t cur = 0;
        size_t k = 0;
        for (const auto& [t, kind, d] : steps) {
            while (k < at.size() && at[k].first < t)
                *at[k++].second = static_cast<uint64_t>(cur);
            cur += d;
            peak = std::max(peak, static_cast<uint64_t>(std::max<int64_t>(cur, 0)));
        }
        while (k < at.size())
            *at[k++].second = static_cast<uint64_t>(cur);
        final = static_cast<uint64_t>(std::max<int64_t>(cur, 0));
    }
};

// A request in the order the replay makes it; segment events go between requests.
struct Keyed
{
    int64_t time;
    int phase; // 0 free (or wait completed), 2 failed request, 3 alloc (then a free of it), 4
               // wait completed at the instant its free was requested
    uint64_t seq;
    int sub;
    Request r;
    bool operator<(const Keyed& o) const
    {
        return std::tie(time, phase, seq, sub) < std::tie(o.time, o.phase, o.seq, o.sub);
    }
};

// Puts every recorded segment event between two requests (`k`, in order): after the frees of its
// instant, before its allocations. Releases with no request between them form a burst: the
// allocation right after it owns the burst when its cudaMalloc came after it (a creation
// between them, or the request failed: its own free-and-retry or garbage collection, or an
// empty_cache() just before it, which the replay tells apart), else the burst is an
// empty_cache() call, replayed as a request at its first release. Fills d.requests, d.bursts
// and each event's request.
void placeSegmentEvents(DeviceTrace& d, const std::vector<Keyed>& k)
{
    auto posOf = [&](int64_t t) {
        return static_cast<size_t>(std::lower_bound(k.begin(), k.end(), t,
                                                    [](const Keyed& x, int64_t v) {
                                                        return x.time < v ||
                                                               (x.time == v && x.phase == 0);
                                                    }) -
                                   k.begin());
    };
    struct Placed
    {
        size_t pos;
        int64_t time;
        bool release;
        uint64_t bytes;
        uint32_t* owner;
    };
    std::vector<Placed> ev;
    ev.reserve(d.segments.size() * 2 + d.mappingChanges.size());
    for (RecordedSegment& s : d.segments) {
        if (s.expandable) continue; // its mappings are in mappingChanges
        ev.push_back({posOf(s.createNs), s.createNs, false, s.size, &s.createdBy});
        if (s.destroyNs != kAliveNs)
            ev.push_back({posOf(s.destroyNs), s.destroyNs, true, s.size, &s.releasedBy});
    }
    for (SegmentEvent& m : d.mappingChanges)
        ev.push_back({posOf(m.time), m.time, m.kind == SegmentEvent::Unmap, m.size, &m.request});
    std::stable_sort(ev.begin(), ev.end(), [](const Placed& a, const Placed& b) {
        return std::tie(a.pos, a.time) < std::tie(b.pos, b.time);
    });

    // Owners are set once the requests have their final indices (empty_cache calls go between).
    std::vector<size_t> burstOf(ev.size(), SIZE_MAX);
    std::vector<std::pair<size_t, size_t>> emptyCaches; // pos, its burst (d.bursts index)
    for (size_t i = 0; i < ev.size();) {
        const size_t p = ev[i].pos;
        size_t j = i;
        bool created = false;
        ReleaseBurst burst;
        burst.first = static_cast<uint32_t>(d.burstTimes.size());
        for (; j < ev.size() && ev[j].pos == p; ++j) {
            if (!ev[j].release) {
                created = true;
                continue;
            }
            d.burstTimes.push_back(ev[j].time);
            burst.bytes += ev[j].bytes;
            ++burst.count;
            burstOf[j] = d.bursts.size();
        }
        const bool alloc = p < k.size() && k[p].r.kind == Request::Alloc;
        if (burst.count > 0) {
            burst.emptyCache = !(alloc && (created || k[p].r.index == kFailedRequest));
            burst.request = static_cast<uint32_t>(p); // a position until renumbered below
            if (burst.emptyCache) emptyCaches.emplace_back(p, d.bursts.size());
            d.bursts.push_back(burst);
        }
        i = j;
    }
    // The final order: each empty_cache() call before the request at its position.
    std::vector<uint32_t> index(k.size() + 1); // position -> the request's final index
    d.requests.reserve(k.size() + emptyCaches.size());
    size_t e = 0;
    std::vector<uint32_t> ecIndex(d.bursts.size(), kNoRequest);
    for (size_t p = 0; p <= k.size(); ++p) {
        for (; e < emptyCaches.size() && emptyCaches[e].first == p; ++e) {
            const ReleaseBurst& b = d.bursts[emptyCaches[e].second];
            Request r;
            r.kind = Request::EmptyCache;
            r.time = d.burstTimes[b.first];
            ecIndex[emptyCaches[e].second] = static_cast<uint32_t>(d.requests.size());
            d.requests.push_back(r);
            ++d.emptyCacheCalls;
        }
        index[p] = static_cast<uint32_t>(d.requests.size());
        if (p < k.size()) d.requests.push_back(k[p].r);
    }
    // Owners: a burst's request (its empty_cache() call or the allocation), a creation's
    // allocation (none when no allocation follows it: a source that records no request for it).
    for (size_t i = 0; i < ev.size(); ++i) {
        const size_t p = ev[i].pos;
        if (burstOf[i] != SIZE_MAX)
            *ev[i].owner = ecIndex[burstOf[i]] != kNoRequest ? ecIndex[burstOf[i]] : index[p];
        else if (p < k.size() && k[p].r.kind == Request::Alloc && k[p].r.index != kFailedRequest)
            *ev[i].owner = index[p];
    }
    for (size_t q = 0; q < d.bursts.size(); ++q) {
        ReleaseBurst& rb = d.bursts[q];
        if (ecIndex[q] != kNoRequest) {
            rb.request = ecIndex[q];
        } else {
            d.requests[index[rb.request]].flags |= Request::kReleasedFirst;
            rb.request = index[rb.request];
        }
    }
}
} // namespace

std::vector<SegmentEvent> netMappingChanges(std::vector<std::pair<int64_t, int64_t>> deltas)
{
    std::sort(deltas.begin(), deltas.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<SegmentEvent> out;
    for (size_t i = 0; i < deltas.size();) {
        const int64_t time = deltas[i].first;
        int64_t net = 0;
        for (; i < deltas.size() && deltas[i].first == time; ++i)
            net += deltas[i].second;
        if (net == 0) continue;
        SegmentEvent e;
        e.time = time;
        e.kind = net > 0 ? SegmentEvent::Map : SegmentEvent::Unmap;
        e.size = static_cast<uint64_t>(net > 0 ? net : -net);
        out.push_back(e);
    }
    return out;
}

RecordedSettings recordedSettings(Session& s)
{
    RecordedSettings r;
    // The snapshot's allocator_settings when the importer kept them.
    const std::string settings = s.meta("allocator_settings");
    if (!settings.empty()) {
        try {
            r.config = Config::fromSnapshotSettings(settings);
            r.known = true;
            r.note = "from the session's allocator_settings";
            return r;
        } catch (const std::invalid_argument& e) {
            r.note = fmt::format("allocator_settings unreadable ({}): PyTorch defaults assumed",
                                 e.what());
        }
    } else {
        r.note = "the session does not record allocator settings: PyTorch defaults assumed";
    }
    // Without them, what the trace shows: expandable segments were on if it maps any.
    if (store::levelHasExpandableRegion(s, static_cast<int>(Level::Framework),
                                        static_cast<int>(RegionKind::Vmm))) {
        r.config.expandableSegments = true;
        if (settings.empty())
            r.note = "the session does not record allocator settings: PyTorch defaults assumed, "
                     "with expandable_segments:True (the trace maps expandable segments)";
    }
    return r;
}

RecordedSettings recordedSettings(const std::string& path)
{
    Session s = Session::open(path);
    return recordedSettings(s);
}

Trace readTrace(const std::string& path)
{
    Session s = Session::open(path);
    Trace t;
    t.path = path;
    const SessionSummary sum = s.summary(false);
    t.ordinalTime = sum.timeAxis == TimeAxis::Ordinal;
    t.sourceKind = sum.sources.empty() ? "unknown" : sum.sources.front();
    // A snapshot's trace entries carry time_us (imported as ns x 1000).
    t.resolutionNs = !t.ordinalTime && t.sourceKind == "pytorch-snapshot" ? 1000 : 1;

    const RecordedSettings rs = recordedSettings(s);
    t.recorded = rs.config;
    t.settingsKnown = rs.known;
    t.settingsNote = rs.note;

    t.strings = store::strings(s, 50'000'000);
    for (const store::StackFrameRow& f : store::stackFrames(s))
        t.stacks[static_cast<uint32_t>(f.stack)].push_back(static_cast<uint32_t>(f.frame));

    std::map<uint32_t, size_t> devIndex;
    for (const store::DeviceRow& row : store::devices(s)) {
        DeviceTrace& d = deviceOf(t, devIndex, static_cast<uint32_t>(row.id));
        d.name = row.name;
        d.capacityBytes = row.capacityBytes.value_or(0);
    }

    // Private pools: the session's 64-bit pool ids, numbered from 1 (0 is the default pool).
    std::map<int64_t, int32_t> poolIds;
    auto poolOf = [&](int64_t raw) -> int32_t {
        if (raw == 0) return 0;
        auto [it, inserted] = poolIds.emplace(raw, static_cast<int32_t>(poolIds.size() + 1));
        if (inserted) t.poolIds.push_back(static_cast<uint64_t>(raw));
        return it->second;
    };

    std::map<uint32_t, ReservedSweep> sweeps;
    std::map<int64_t, std::pair<uint32_t, int32_t>> regionInfo; // region id -> device, pool
    {
        store::RegionRows rows = store::RegionRows::ofLevel(s, static_cast<int>(Level::Framework));
        store::RegionRow q;
        while (rows.next(q)) {
            const auto dev = static_cast<uint32_t>(q.device);
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            RecordedSegment r;
            r.address = q.address;
            r.size = q.size;
            r.createNs = q.createNs;
            r.destroyNs = q.destroyNs.value_or(kAliveNs);
            r.stream = static_cast<uint32_t>(q.stream.value_or(0));
            r.expandable = q.kind == static_cast<int>(RegionKind::Vmm) || q.expandable;
            regionInfo[q.id] = {dev, poolOf(q.poolId.value_or(0))};
            if (!r.expandable) sweeps[dev].add(r.createNs, r.destroyNs, r.size);
            d.segments.push_back(r);
        }
    }
    std::map<uint32_t, std::vector<std::tuple<int64_t, int, uint64_t>>> backing; // time, seq
    std::map<uint32_t, std::vector<std::pair<int64_t, int64_t>>> mapped;         // time, +-bytes
    for (const DeviceTrace& d : t.devices) {
        int seq = 0;
        for (const RecordedSegment& r : d.segments)
            if (!r.expandable) backing[d.device].emplace_back(r.createNs, seq++, r.size);
    }
    {
        int seq = 1 << 30;
        for (const store::RegionMappingRow& m :
             store::mappingsOfLevel(s, static_cast<int>(Level::Framework))) {
            const auto dev = static_cast<uint32_t>(m.device);
            const int64_t unmapNs = m.unmapNs.value_or(kAliveNs);
            sweeps[dev].add(m.mapNs, unmapNs, m.size);
            backing[dev].emplace_back(m.mapNs, seq++, m.size);
            mapped[dev].emplace_back(m.mapNs, static_cast<int64_t>(m.size));
            if (unmapNs != kAliveNs)
                mapped[dev].emplace_back(unmapNs, -static_cast<int64_t>(m.size));
        }
    }
    for (DeviceTrace& d : t.devices) {
        auto& b = backing[d.device];
        std::sort(b.begin(), b.end());
        for (const auto& [time, seq, size] : b)
            d.backingSizes.push_back(size);
        d.mappingChanges = netMappingChanges(mapped[d.device]);
    }

    std::map<uint32_t, std::vector<Keyed>> keyed;
    // Room for each device's share of the allocations (an alloc and a free request each, plus a
    // few): growing these by doubling cost a third of reading a million-replay session.
    if (!t.devices.empty()) {
        const auto share = static_cast<size_t>(sum.allocations) / t.devices.size() + 16;
        for (DeviceTrace& d : t.devices) {
            d.allocs.reserve(share);
            keyed[d.device].reserve(2 * share);
        }
    }
    store::AllocationRows::ofLevel(
        s, static_cast<int>(Level::Framework), [&](const store::AllocationRow& q) {
            const auto dev = static_cast<uint32_t>(q.device);
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            RecordedAlloc a;
            a.address = q.address;
            a.size = q.size;
            // Sources that know the caller's size store it; snapshots store it as the size of
            // every block not alive at the end (the trace's alloc entry records orig_size).
            a.requested = q.requestedSize.value_or(0) > 0 ? *q.requestedSize : a.size;
            a.stream = static_cast<uint32_t>(q.stream.value_or(0));
            t.allocationsWithoutStream += q.stream ? 0 : 1;
            a.allocNs = q.allocNs;
            a.freeNs = q.freeNs.value_or(kAliveNs);
            a.tag = static_cast<uint32_t>(q.tag.value_or(0));
            a.stack = static_cast<uint32_t>(q.stack.value_or(0));
            a.userMetadata = static_cast<uint32_t>(q.userMetadata.value_or(0));
            a.compileContext = static_cast<uint32_t>(q.compileContext.value_or(0));
            int32_t pool = 0;
            if (q.regionId) {
                auto it = regionInfo.find(*q.regionId);
                if (it != regionInfo.end()) pool = it->second.second;
            }
            const auto idx = static_cast<uint32_t>(d.allocs.size());
            d.allocs.push_back(a);
            Request r;
            r.kind = Request::Alloc;
            r.time = a.allocNs;
            r.size = a.requested;
            r.index = idx;
            r.stream = a.stream;
            r.pool = pool;
            auto& k = keyed[dev];
            k.push_back({a.allocNs, 3, idx, 0, r});
            if (a.freeNs != kAliveNs) {
                r.kind = Request::Free;
                r.time = a.freeNs;
                if (a.freeNs == a.allocNs)
                    k.push_back({a.freeNs, 3, idx, 1, r});
                else
                    k.push_back({a.freeNs, 0, idx, 0, r});
            }
            return true;
        });

    // Frees that waited on stream events (record_stream): a pending_frees row starts when an
    // allocation's free was requested; the block returns to its pool when the wait completed
    // (docs/whatif.md "What is replayed"). PyTorch completes waits at the start of a malloc
    // (process_events) or before releasing cached blocks, so a completion goes before the
    // requests of its instant; one at the instant of its own request goes after them (the row
    // exists only because another entry came between the two).
    {
        std::map<std::tuple<uint32_t, uint64_t, int64_t>, uint32_t> freedAt;
        for (const store::PendingFreeRow& q :
             store::pendingFreesOfLevel(s, static_cast<int>(Level::Framework))) {
            const auto dev = static_cast<uint32_t>(q.device);
            if (freedAt.empty())
                for (const DeviceTrace& d : t.devices)
                    for (size_t i = 0; i < d.allocs.size(); ++i)
                        if (d.allocs[i].freeNs != kAliveNs)
                            freedAt.emplace(
                                std::tuple{d.device, d.allocs[i].address, d.allocs[i].freeNs},
                                static_cast<uint32_t>(i));
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            auto it = freedAt.find({dev, q.address, q.requestNs});
            if (it == freedAt.end() || d.allocs[it->second].freeCompletedNs != kNoWait) {
                ++d.pendingFreesUnmatched; // a wait that began before the trace
                continue;
            }
            RecordedAlloc& a = d.allocs[it->second];
            a.freeCompletedNs = q.completeNs ? std::max(*q.completeNs, a.freeNs) : kAliveNs;
            ++d.pendingFrees;
            if (a.freeCompletedNs == kAliveNs) continue;
            Request r;
            r.kind = Request::FreeCompleted;
            r.time = a.freeCompletedNs;
            r.index = it->second;
            r.stream = a.stream;
            keyed[dev].push_back({r.time, r.time == a.freeNs ? 4 : 0, it->second, 2, r});
        }
    }

    std::map<uint32_t, std::vector<std::pair<int64_t, uint64_t>>> ooms; // time, device_free
    {
        // A failed request is replayed too: on its way to failing, the allocator released
        // cached blocks, and the recording shows those releases.
        uint64_t seq = 0;
        for (const store::OomRow& q : store::oomsOfLevel(s, static_cast<int>(Level::Framework))) {
            const auto dev = static_cast<uint32_t>(q.device);
            deviceOf(t, devIndex, dev);
            ooms[dev].emplace_back(q.timeNs, q.deviceFreeBytes.value_or(0));
            Request r;
            r.kind = Request::Alloc;
            r.time = q.timeNs;
            r.size = q.requestedBytes.value_or(0);
            r.index = kFailedRequest;
            r.stream = static_cast<uint32_t>(q.stream.value_or(0));
            if (r.size > 0) keyed[dev].push_back({r.time, 2, seq++, 0, r});
        }
    }

    for (DeviceTrace& d : t.devices) {
        auto& oomList = ooms[d.device];
        auto& k = keyed[d.device];
        // Keys are unique (an allocation's entries differ in phase or sub; failed requests have
        // a phase of their own), so the unstable sort gives the one order, without the stable
        // sort's copy of a million entries.
        std::sort(k.begin(), k.end());
        placeSegmentEvents(d, k);
        k.clear();
        k.shrink_to_fit();

        std::vector<std::pair<int64_t, uint64_t*>> at;
        std::vector<uint64_t> reservedAtOom(oomList.size());
        for (size_t i = 0; i < oomList.size(); ++i)
            at.emplace_back(oomList[i].first, &reservedAtOom[i]);
        sweeps[d.device].run(d.recordedPeakReserved, d.recordedFinalReserved, at);
        d.recordedOoms = static_cast<int64_t>(oomList.size());
        for (size_t i = 0; i < oomList.size(); ++i) {
            const uint64_t usable = reservedAtOom[i] + oomList[i].second;
            d.usableBytes = d.usableBytes == 0 ? usable : std::min(d.usableBytes, usable);
        }
    }

    // Devices the session lists but that hold no framework data (a snapshot's empty traces),
    // and a snapshot's pinned host memory (host_segments/host_traces, docs/importers.md): PyTorch's
    // host allocator is not the CUDA caching allocator this model follows.
    std::erase_if(t.devices, [](const DeviceTrace& d) {
        return (d.allocs.empty() && d.segments.empty() && d.requests.empty()) ||
               d.name == "host (pinned)";
    });
    // Does the trace start with the run?
    const std::string preexisting = s.meta("pytorch.preexisting_allocations");
    if (t.sourceKind == "simulator") {
        t.complete = true;
        t.completeNote = "the simulator records its run from the start";
    } else if (t.sourceKind == "pytorch-snapshot") {
        const std::string actions = s.meta("pytorch.trace_actions");
        int64_t segAllocs = 0;
        if (auto p = actions.find("\"segment_alloc\":"); p != std::string::npos)
            segAllocs = std::atoll(actions.c_str() + p + 16);
        int64_t regions = 0;
        for (const DeviceTrace& d : t.devices)
            for (const RecordedSegment& r : d.segments)
                regions += r.expandable ? 0 : 1;
        bool truncated = false;
        for (const analysis::TraceHistory& h :
             analysis::traceHistory({{"pytorch.history", s.meta("pytorch.history")}}))
            truncated |= h.truncated;
        if (truncated)
            t.completeNote = fmt::format(
                "the allocator history is truncated (the trace's ring buffer overflowed: older "
                "entries were overwritten); {} blocks were allocated before its first entry",
                preexisting.empty() ? "some" : preexisting);
        else if (preexisting != "0")
            t.completeNote = fmt::format("{} blocks were allocated before the trace's first entry "
                                         "(the ring buffer wrapped or recording started late)",
                                         preexisting.empty() ? "some" : preexisting);
        else if (segAllocs < regions)
            t.completeNote = fmt::format("{} segments existed before the trace's first entry",
                                         regions - segAllocs);
        else {
            t.complete = true;
            t.completeNote = "every segment and block was created inside the trace";
        }
    } else {
        t.completeNote =
            fmt::format("a {} session: cannot tell whether it starts with the run", t.sourceKind);
    }

    for (const store::FrameRow& f : store::framesByIndex(s))
        t.frames.push_back({f.index, f.startNs, f.endNs.value_or(f.startNs)});
    for (store::MarkerRow& m : store::markers(s))
        t.markers.push_back({m.timeNs, m.endNs.value_or(-1), std::move(m.message)});
    return t;
}

} // namespace fs::alloc
