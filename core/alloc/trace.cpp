#include "trace.h"

#include "core/session.h"

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
    Stmt q = s.db().prepare("SELECT EXISTS(SELECT 1 FROM regions WHERE level = 2 AND"
                            " (kind = ?1 OR expandable != 0))");
    q.bind(1, static_cast<int>(RegionKind::Vmm));
    if (q.step() && q.i64(0) != 0) {
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
    Db& db = s.db();
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

    {
        Stmt q = db.prepare("SELECT id, text FROM strings ORDER BY id");
        while (q.step()) {
            const auto id = static_cast<size_t>(q.i64(0));
            if (id > 50'000'000) break;
            if (t.strings.size() <= id) t.strings.resize(id + 1);
            t.strings[id] = q.text(1);
        }
    }

    {
        Stmt q = db.prepare("SELECT id, frame FROM stacks ORDER BY id, depth");
        while (q.step())
            t.stacks[static_cast<uint32_t>(q.i64(0))].push_back(static_cast<uint32_t>(q.i64(1)));
    }

    std::map<uint32_t, size_t> devIndex;
    {
        Stmt q = db.prepare("SELECT id, name, capacity_bytes FROM devices ORDER BY id");
        while (q.step()) {
            DeviceTrace& d = deviceOf(t, devIndex, static_cast<uint32_t>(q.i64(0)));
            d.name = q.text(1);
            d.capacityBytes = q.isNull(2) ? 0 : q.u64(2);
        }
    }

    // Private pools: the session's 64-bit pool ids, numbered from 1 (0 is the default pool).
    std::map<int64_t, int32_t> poolIds;
    auto poolOf = [&](int64_t raw) -> int32_t {
        if (raw == 0) return 0;
        auto [it, inserted] = poolIds.emplace(raw, static_cast<int32_t>(poolIds.size() + 1));
        return it->second;
    };

    std::map<uint32_t, ReservedSweep> sweeps;
    std::map<int64_t, std::pair<uint32_t, int32_t>> regionInfo; // region id -> device, pool
    {
        Stmt q = db.prepare("SELECT id, device, address, size, create_ns, destroy_ns, stream, kind,"
                            " expandable, pool_id FROM regions WHERE level = 2 ORDER BY id");
        while (q.step()) {
            const auto dev = static_cast<uint32_t>(q.i64(1));
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            RecordedSegment r;
            r.address = q.u64(2);
            r.size = q.u64(3);
            r.createNs = q.i64(4);
            r.destroyNs = q.isNull(5) ? kAliveNs : q.i64(5);
            r.stream = q.isNull(6) ? 0 : static_cast<uint32_t>(q.i64(6));
            r.expandable = q.i64(7) == static_cast<int>(RegionKind::Vmm) || q.i64(8) != 0;
            regionInfo[q.i64(0)] = {dev, poolOf(q.isNull(9) ? 0 : q.i64(9))};
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
        Stmt q = db.prepare("SELECT r.device, m.size, m.map_ns, m.unmap_ns FROM region_mappings m"
                            " JOIN regions r ON r.id = m.region_id WHERE r.level = 2"
                            " ORDER BY m.id");
        int seq = 1 << 30;
        while (q.step()) {
            const auto dev = static_cast<uint32_t>(q.i64(0));
            const int64_t unmapNs = q.isNull(3) ? kAliveNs : q.i64(3);
            sweeps[dev].add(q.i64(2), unmapNs, q.u64(1));
            backing[dev].emplace_back(q.i64(2), seq++, q.u64(1));
            mapped[dev].emplace_back(q.i64(2), static_cast<int64_t>(q.u64(1)));
            if (unmapNs != kAliveNs)
                mapped[dev].emplace_back(unmapNs, -static_cast<int64_t>(q.u64(1)));
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
    {
        Stmt q = db.prepare("SELECT device, address, size, requested_size, stream, alloc_ns,"
                            " free_ns, tag, region_id, stack, user_metadata, compile_context"
                            " FROM allocations WHERE level = 2 ORDER BY id");
        while (q.step()) {
            const auto dev = static_cast<uint32_t>(q.i64(0));
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            RecordedAlloc a;
            a.address = q.u64(1);
            a.size = q.u64(2);
            // Sources that know the caller's size store it; snapshots store it as the size of
            // every block not alive at the end (the trace's alloc entry records orig_size).
            a.requested = !q.isNull(3) && q.u64(3) > 0 ? q.u64(3) : a.size;
            a.stream = q.isNull(4) ? 0 : static_cast<uint32_t>(q.i64(4));
            t.allocationsWithoutStream += q.isNull(4) ? 1 : 0;
            a.allocNs = q.i64(5);
            a.freeNs = q.isNull(6) ? kAliveNs : q.i64(6);
            a.tag = q.isNull(7) ? 0 : static_cast<uint32_t>(q.i64(7));
            a.stack = q.isNull(9) ? 0 : static_cast<uint32_t>(q.i64(9));
            a.userMetadata = q.isNull(10) ? 0 : static_cast<uint32_t>(q.i64(10));
            a.compileContext = q.isNull(11) ? 0 : static_cast<uint32_t>(q.i64(11));
            int32_t pool = 0;
            if (!q.isNull(8)) {
                auto it = regionInfo.find(q.i64(8));
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
        }
    }

    // Frees that waited on stream events (record_stream): a pending_frees row starts when an
    // allocation's free was requested; the block returns to its pool when the wait completed
    // (docs/whatif.md "What is replayed"). PyTorch completes waits at the start of a malloc
    // (process_events) or before releasing cached blocks, so a completion goes before the
    // requests of its instant; one at the instant of its own request goes after them (the row
    // exists only because another entry came between the two).
    if (db.hasTable("pending_frees")) {
        std::map<std::tuple<uint32_t, uint64_t, int64_t>, uint32_t> freedAt;
        Stmt q = db.prepare("SELECT device, address, request_ns, complete_ns FROM pending_frees"
                            " WHERE level IS NULL OR level = 2 ORDER BY id");
        while (q.step()) {
            const auto dev = static_cast<uint32_t>(q.i64(0));
            if (freedAt.empty())
                for (const DeviceTrace& d : t.devices)
                    for (size_t i = 0; i < d.allocs.size(); ++i)
                        if (d.allocs[i].freeNs != kAliveNs)
                            freedAt.emplace(
                                std::tuple{d.device, d.allocs[i].address, d.allocs[i].freeNs},
                                static_cast<uint32_t>(i));
            DeviceTrace& d = deviceOf(t, devIndex, dev);
            auto it = freedAt.find({dev, q.u64(1), q.i64(2)});
            if (it == freedAt.end() || d.allocs[it->second].freeCompletedNs != kNoWait) {
                ++d.pendingFreesUnmatched; // a wait that began before the trace
                continue;
            }
            RecordedAlloc& a = d.allocs[it->second];
            a.freeCompletedNs = q.isNull(3) ? kAliveNs : std::max(q.i64(3), a.freeNs);
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
        Stmt q = db.prepare("SELECT device, time_ns, device_free_bytes, requested_bytes, stream"
                            " FROM ooms WHERE level IS NULL OR level = 2 ORDER BY id");
        uint64_t seq = 0;
        while (q.step()) {
            const auto dev = static_cast<uint32_t>(q.i64(0));
            deviceOf(t, devIndex, dev);
            ooms[dev].emplace_back(q.i64(1), q.isNull(2) ? 0 : q.u64(2));
            Request r;
            r.kind = Request::Alloc;
            r.time = q.i64(1);
            r.size = q.isNull(3) ? 0 : q.u64(3);
            r.index = kFailedRequest;
            r.stream = q.isNull(4) ? 0 : static_cast<uint32_t>(q.i64(4));
            if (r.size > 0) keyed[dev].push_back({r.time, 2, seq++, 0, r});
        }
    }

    for (DeviceTrace& d : t.devices) {
        auto& oomList = ooms[d.device];
        auto& k = keyed[d.device];
        std::stable_sort(k.begin(), k.end());
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

    // Devices the session lists but that hold no framework data (a snapshot's empty traces).
    std::erase_if(t.devices, [](const DeviceTrace& d) {
        return d.allocs.empty() && d.segments.empty() && d.requests.empty();
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
        if (preexisting != "0")
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

    {
        Stmt q = db.prepare("SELECT idx, start_ns, end_ns FROM frames ORDER BY idx");
        while (q.step())
            t.frames.push_back({q.i64(0), q.i64(1), q.isNull(2) ? q.i64(1) : q.i64(2)});
        Stmt m = db.prepare("SELECT m.time_ns, m.end_ns, s.text FROM markers m"
                            " JOIN strings s ON s.id = m.message ORDER BY m.id");
        while (m.step())
            t.markers.push_back({m.i64(0), m.isNull(1) ? -1 : m.i64(1), m.text(2)});
    }
    return t;
}

} // namespace fs::alloc
