// Engine: loading the session into the replay index, state queries and allocation lookups.
#include "categories.h"
#include "engine_impl.h"
#include "history.h"
#include "parallel.h"
#include "stage_timer.h"

#include "core/format.h"
#include "core/pages.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include <sys/stat.h>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

void checkCancel(const LoadOptions& o)
{
    if (o.cancel && o.cancel->load(std::memory_order_relaxed)) throw Cancelled();
}

} // namespace

RegionRec readRegionRow(const store::RegionRow& row, const std::string& path, uint32_t& device,
                        int& level, bool& expandable)
{
    level = static_cast<int>(row.level);
    if (level < 0 || level >= kLevelCount)
        throw SessionError(path, fmt::format("regions row {}: invalid level {}", row.id, level));
    device = static_cast<uint32_t>(row.device);
    expandable = row.expandable;
    RegionRec r{row.id,
                row.address,
                row.size,
                row.createNs,
                row.destroyNs.value_or(kAlive),
                static_cast<RegionKind>(row.kind)};
    if (r.destroyNs < r.createNs) r.destroyNs = r.createNs;
    if (r.address + r.size < r.address) r.size = ~uint64_t{0} - r.address;
    return r;
}

Alloc readAllocRow(const store::AllocationRecord& row, const std::string& path, uint32_t& device,
                   int& level, int64_t& regionId)
{
    level = static_cast<int>(row.level);
    if (level < 0 || level >= kLevelCount)
        throw SessionError(path,
                           fmt::format("allocations row {}: invalid level {}", row.id, level));
    device = static_cast<uint32_t>(row.device);
    regionId = row.regionId.value_or(-1);
    Alloc a{row.address, row.size, row.allocNs, row.freeNs.value_or(kAlive), row.id, kNoRegion, 0};
    if (row.tag) // an id that does not fit is read by the allocation's id (Impl::tagOf)
        a.tag = *row.tag > 0 && *row.tag < kTagById ? static_cast<uint32_t>(*row.tag) : kTagById;
    if (a.freeNs < a.allocNs) a.freeNs = a.allocNs;
    if (a.address + a.size < a.address) // hostile size: clip at the top of the space
        a.size = ~uint64_t{0} - a.address;
    return a;
}

Engine::Engine() : d_(std::make_unique<Impl>()) {}
Engine::~Engine() = default;

std::shared_ptr<const Engine> Engine::open(const std::string& path, LoadOptions opts)
{
    std::shared_ptr<Engine> e(new Engine());
    e->d_->path = path;
    e->d_->options = opts;
    e->d_->load(opts);
    if (struct stat st{}; ::stat(path.c_str(), &st) == 0) {
        e->d_->fileId = {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino)};
        e->d_->readersAllowed = true;
    }
    return e;
}

void Engine::Impl::load(const LoadOptions& o, bool snapshot)
{
    StageTimer stage;
    tracks.clear();
    regionById.clear();
    cacheStamp.clear();
    rowsReady.store(true);
    rowsError = nullptr;
    loadInfo.rowsDeferred = false;
    {
        std::lock_guard lock(lodMutex);
        lods.clear();
    }
    frames.clear();
    collapses.clear();
    kernelIndexReady = false;
    oomRows.reset();
    kernelDevices.clear();
    kernelFirstStart.clear();
    {
        std::lock_guard lock(dbMutex);
        session.reset();
        session.setPath(path);
    }
    // No SQLite mutex on this connection: loading uses it from one thread, and every later
    // lookup holds dbMutex. SQLite's own locking cost ~7 % of a large load.
    Session s = Session::open(path, o.integrityCheck, SQLITE_OPEN_NOMUTEX);
    stage("validate (Session::open)");
    // One read transaction: every table below comes from the same commit even while a recorder
    // keeps committing (WAL readers see a fixed snapshot).
    if (snapshot) s.beginRead();
    applySummary(s.summary());
    if (o.summary) o.summary(summary);

    // Regions, grouped into tracks by (device, hosted level).
    std::map<std::pair<uint32_t, int>, size_t> trackIndex;
    auto trackFor = [&](uint32_t device, int level) -> size_t {
        auto [it, inserted] = trackIndex.emplace(std::make_pair(device, level), tracks.size());
        if (inserted) {
            TrackData t;
            t.device = device;
            t.level = static_cast<Level>(level);
            tracks.push_back(std::move(t));
        }
        return it->second;
    };
    // The guard first: whatever is read after it and stored under it is the content as long as
    // the guard is still there when storing (storeCache checks).
    if (o.useCache && !snapshot) setCacheStamp(s);
    readStoredLods(s);
    // Expandable segments (PyTorch expandable_segments, VMM) are backed only where mapped: each
    // mapping counts as its own range, alive from map to unmap, and fragments never span two.
    std::unordered_map<int64_t, std::vector<RegionRec>> mapped;
    for (const store::RegionMappingRow& m : store::expandableMappings(s))
        mapped[m.regionId].push_back({m.regionId, m.address, m.size, m.mapNs,
                                      m.unmapNs.value_or(kAlive), RegionKind::Segment});
    {
        store::RegionRows rows = store::RegionRows::byCreation(s);
        std::vector<std::pair<size_t, RegionRec>> recs;
        store::RegionRow row;
        while (rows.next(row)) {
            uint32_t device = 0;
            int level = 0;
            bool expandable = false;
            const RegionRec r = readRegionRow(row, path, device, level, expandable);
            const size_t ti = trackFor(device, level);
            if (expandable) {
                for (RegionRec m : mapped[r.id]) {
                    m.kind = r.kind;
                    m.createNs = std::max(m.createNs, r.createNs);
                    m.destroyNs = std::max(std::min(m.destroyNs, r.destroyNs), m.createNs);
                    recs.emplace_back(ti, m);
                }
            } else {
                recs.emplace_back(ti, r);
            }
        }
        std::stable_sort(recs.begin(), recs.end(), [](const auto& a, const auto& b) {
            return a.second.createNs < b.second.createNs;
        });
        for (const auto& [ti, r] : recs) {
            regionById[r.id].emplace_back(ti, static_cast<uint32_t>(tracks[ti].regions.size()));
            tracks[ti].regions.push_back(r);
        }
    }
    checkCancel(o);
    stage("regions");
    // A first picture (LoadOptions::preview) is the default track's stored grid; when the index
    // was stored without it (by a command that drew nothing), the records are read now and the
    // grid built from them: a deferred load would wait for the records anyway, later (10 M
    // allocations: 3.9 s to the first picture instead of 1.9 s).
    bool gridStored = true;
    if (o.preview && summary.allocations >= o.previewFrom)
        if (const auto pick = defaultTrackIndex(trackList(), 0)) {
            std::lock_guard lock(lodMutex);
            gridStored = storedLods.count(lodKey(tracks[*pick])) > 0;
        }
    // The stored index, when this engine version built it from this very content (checked
    // without reading a row: docs/analysis.md "Caching"; the guard was read before the regions,
    // so any change since shows). When every value is there, the allocation records stay in the
    // file until a query needs them.
    bool deferred = false;
    if (!cacheStamp.empty() && !keepBuilders && gridStored) {
        const size_t before = tracks.size();
        const auto indexBefore = trackIndex;
        deferred = prepareDeferred(s, trackFor);
        if (!deferred) { // back to the tracks the regions made
            tracks.resize(before);
            trackIndex = indexBefore;
            for (TrackData& t : tracks)
                t.storedAllocs = 0;
        }
    }
    stage(deferred ? "stored index checked" : "cache stamp");
    const int64_t total = std::max<int64_t>(summary.allocations, 1); // counted by summary()
    if (!deferred)
        loadInfo.allocationRowsRead += readAllocations(s, trackFor, &o, total, !snapshot);
    stage("allocations");
    std::sort(tracks.begin(), tracks.end(), [](const TrackData& a, const TrackData& b) {
        return a.device != b.device ? a.device < b.device : a.level < b.level;
    });
    // Track indices changed with the sort: regionById follows (a LiveEngine keeps using it).
    regionById.clear();
    for (size_t ti = 0; ti < tracks.size(); ++ti)
        for (uint32_t i = 0; i < tracks[ti].regions.size(); ++i)
            regionById[tracks[ti].regions[i].id].emplace_back(ti, i);
    // Expandable regions with several mapped pieces: blocks move between them (TrackData::pieces).
    for (const auto& [id, where] : regionById)
        if (where.size() > 1)
            for (const auto& [ti, i] : where)
                tracks[ti].pieces[id].push_back(i);
    readPendingFrees(s);
    if (keepBuilders) builders.assign(tracks.size(), {});
    {
        std::lock_guard lock(lodMutex);
        lodsToStore.clear();
    }
    if (o.preview && !deferred && !keepBuilders) {
        publishPreview(o);
        stage("preview");
    }
    // A long open that computes its frames' figures counts their kernels now, on a connection
    // of its own, while the tracks are sorted and indexed below (the kernel pass reads no
    // allocation record; the sort leaves one core idle). Not inside a read transaction (the
    // second connection would see another commit) nor for a deferred load.
    FrameWork frameWork;
    const bool framesBeside = !deferred && !snapshot;
    bool framesThere = true;
    if (framesBeside) {
        framesThere = readFrames(s, o, frameWork);
        if (framesThere) startFrameKernels(frameWork, o, nullptr); // a connection of its own
    }
    bool allCached = !cacheStamp.empty();
    int64_t done = 0;
    if (deferred) {
        for (TrackData& t : tracks)
            buildLayout(t);
        rowsReady.store(false);
        loadInfo.rowsDeferred = true;
    }
    for (TrackData& t : tracks) {
        if (deferred) break;
        checkCancel(o);
        if (!cacheStamp.empty() && readIndex(s, t)) {
            buildLayout(t);
        } else {
            allCached = false;
            indexTrack(t);
        }
        done += static_cast<int64_t>(t.allocs.size());
        if (o.progress) o.progress(total + done, total * 2);
    }
    // Done with what open() reads (a deferred load reads nothing more here): the caller's
    // progress line ends at 100 % either way.
    if (o.progress) o.progress(total * 2, total * 2);
    stage("sort, checkpoints, layout");
    loadInfo.indexCacheUsed = allCached && !tracks.empty();
    {
        std::lock_guard lock(dbMutex);
        session.emplace(std::move(s));
    }
    indexPending = gridsPending = false;
    const bool storeIndex = !cacheStamp.empty() && !loadInfo.indexCacheUsed;
    // Storing the index writes on a connection of its own, beside the frames' replay. A kernel
    // pass still running on its thread (it holds a read lock that the index's commit would wait
    // for) is then joined by the writer, before it writes: the replay starts at once instead of
    // leaving a core idle for the rest of the pass.
    const bool writeBeside =
        storeIndex && o.storeIndexAtOpen && framesBeside && framesThere && frameWork.compute;
    const bool kernelsBeside = writeBeside && frameWork.kernels.joinable();
    if (framesBeside && framesThere && !kernelsBeside) {
        std::lock_guard lock(dbMutex);
        endFrameKernels(frameWork, o, *session);
        stage("kernels per frame (rest)");
    }
    bool written = false;
    std::exception_ptr writeError;
    std::jthread writer; // after what it writes: joined first when an exception unwinds
    if (writeBeside) {
        writer = std::jthread([&] {
            try {
                if (kernelsBeside) frameWork.kernels.join();
                if (!frameWork.kernelError) written = writeIndex(); // not after a failed pass
            } catch (...) {
                writeError = std::current_exception();
            }
        });
    } else if (storeIndex) {
        if (!o.storeIndexAtOpen) {
            indexPending = true;
        } else {
            loadInfo.indexCacheWritten = writeIndex();
            stage("index stored");
        }
    } else if (!cacheStamp.empty() && !gridStored) { // the index was there, the grid was not
        if (o.storeIndexAtOpen)
            writeGrids();
        else
            gridsPending = true;
    }
    if (!framesBeside) {
        loadFrames(o);
    } else if (framesThere) {
        if (frameWork.compute) replayFrames(o, frameWork, writer.joinable() ? 1 : 0);
        if (writer.joinable()) {
            stage(kernelsBeside ? "frames replayed (beside the kernels' pass, then the index's "
                                  "storing)"
                                : "frames replayed (beside the index's storing)");
            writer.join();
            if (kernelsBeside) {
                std::lock_guard lock(dbMutex);
                endFrameKernels(frameWork, o, *session); // rethrows the pass's error
            }
            if (writeError) std::rethrow_exception(writeError);
            loadInfo.indexCacheWritten = written;
        }
        std::lock_guard lock(dbMutex);
        finishFrames(o, frameWork);
    }
    if (snapshot) session->commitRead();
    stage(loadInfo.frameCacheUsed ? "frames (from cache)"
          : writeBeside           ? "index stored beside the frames"
                                  : "frames (computed)");
}

int64_t Engine::Impl::readAllocations(const Session& db,
                                      const std::function<size_t(uint32_t, int)>& trackFor,
                                      const LoadOptions* o, int64_t total, bool parallel)
{
    // A long table is read in two id ranges at once, the second on a connection of its own
    // (decoding SQLite rows is most of an un-indexed open). The tracks the regions made are
    // known; while two ranges are read, the rows of any other track wait apart and their tracks
    // are made (trackFor) only after both: the second range's reader looks up regions while
    // this thread fills tracks[].allocs, so tracks must not move meanwhile.
    //
    // The two ranges fill one array per known track, each its own part, sized before the read:
    // a range holds at most as many rows as it has ids. The parts then close up in place.
    // Before, the second range's rows were copied after the first's: a pass over fresh memory
    // (the kernel clears each page) on one thread, a sixth of the read. A table whose ids are
    // sparse (more than twice its rows) is read as one range.
    using Key = std::pair<uint32_t, int>;
    const bool split2 = parallel && parallelChunks(static_cast<size_t>(std::max<int64_t>(total, 0)),
                                                   options.parallelFrom) > 1;
    std::map<Key, size_t> known;
    for (size_t ti = 0; ti < tracks.size(); ++ti)
        known[{tracks[ti].device, static_cast<int>(tracks[ti].level)}] = ti;
    // Region ids are small and dense in every writer's files: a flat table finds a row's
    // region without hashing (regionOf, 4 % of the read); other ids take regionOf.
    int64_t regionBase = 0;
    std::vector<const std::vector<std::pair<size_t, uint32_t>>*> regionTable;
    if (!regionById.empty()) {
        auto [least, most] =
            std::minmax_element(regionById.begin(), regionById.end(),
                                [](const auto& a, const auto& b) { return a.first < b.first; });
        const auto span = static_cast<uint64_t>(most->first) - static_cast<uint64_t>(least->first);
        if (span < 4 * regionById.size() + 1024) {
            regionBase = least->first;
            regionTable.assign(span + 1, nullptr);
            for (const auto& [id, where] : regionById)
                regionTable[static_cast<size_t>(id - regionBase)] = &where;
        }
    }
    auto regionIndex = [&](int64_t regionId, size_t ti, const Alloc& a) -> uint32_t {
        if (regionTable.empty()) return regionOf(regionId, ti, a);
        const uint64_t k = static_cast<uint64_t>(regionId) - static_cast<uint64_t>(regionBase);
        if (k >= regionTable.size() || !regionTable[k]) return kNoRegion;
        return regionAmong(*regionTable[k], ti, a);
    };
    // Each range's counters on cache lines of their own: the two readers write them at every
    // row, and sharing a line between the cores cost more than the rest of the visitor (a
    // third of an un-indexed open's reading time, and twice the CPU on some runs).
    struct alignas(64) Part // one range's rows of one known track
    {
        Alloc* at = nullptr;
        size_t n = 0, cap = 0;
    };
    struct alignas(64) Range
    {
        std::vector<Part> parts;                   // two ranges: by known track
        std::map<Key, std::vector<Alloc>> unknown; // rows of tracks without regions
        int64_t rows = 0;
    };
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
    int64_t lo = kMin, split = kMax, hi = kMax; // the second range: ids [split, hi]
    Range first, second;
    if (split2) {
        const auto [minId, maxId] = store::allocationIdBounds(db);
        const uint64_t span = static_cast<uint64_t>(maxId) - static_cast<uint64_t>(minId);
        if (maxId > minId && span < 2 * static_cast<uint64_t>(total) + 1024) {
            lo = minId;
            hi = maxId;
            split = lo + (hi - lo) / 2 + 1;
            const auto cap1 = static_cast<size_t>(split - lo),
                       cap2 = static_cast<size_t>(hi - split) + 1;
            first.parts.resize(tracks.size());
            second.parts.resize(tracks.size());
            for (size_t ti = 0; ti < tracks.size(); ++ti) {
                AllocRecords& v = tracks[ti].allocs;
                v.resize(v.size() + cap1 + cap2); // UninitAllocator: no page is touched here
                Alloc* end = v.data() + v.size();
                first.parts[ti] = {end - cap1 - cap2, 0, cap1};
                second.parts[ti] = {end - cap2, 0, cap2};
            }
        }
    }
    // The rows of ids [fromId, toId] in id order: a known track's into its part (or, on one range,
    // its records), another's into r.unknown. stop: the second range's reader.
    auto readRange = [&](const Session& from, int64_t fromId, int64_t toId, Range& r,
                         const std::atomic<bool>* stop) {
        store::AllocationRecords::idRange(
            from, fromId, toId, [&](const store::AllocationRecord& row) {
                uint32_t device = 0;
                int level = 0;
                int64_t regionId = -1;
                Alloc a = readAllocRow(row, path, device, level, regionId);
                auto it = known.find({device, level});
                if (it == known.end()) {
                    r.unknown[{device, level}].push_back(a);
                } else {
                    const size_t ti = it->second;
                    if (regionId >= 0) a.region = regionIndex(regionId, ti, a);
                    if (r.parts.empty()) {
                        AllocRecords& v = tracks[ti].allocs;
                        // Reserved pages that stay untouched cost nothing; regrowing millions does.
                        if (v.empty()) v.reserve(static_cast<size_t>(std::max<int64_t>(total, 1)));
                        v.push_back(a);
                    } else if (Part& p = r.parts[ti]; p.n < p.cap) {
                        mapAhead(p.at, p.n, p.n + 1, p.cap); // core/pages.h
                        p.at[p.n++] = a;
                    } else { // more rows than ids: only a broken file (ids are the primary key)
                        throw SessionError(path, fmt::format("allocations: more rows than ids "
                                                             "below id {}",
                                                             row.id));
                    }
                }
                if ((++r.rows & 0xfffff) == 0) {
                    if (stop && stop->load(std::memory_order_relaxed)) return false;
                    if (o) checkCancel(*o);
                    if (o && o->progress && !stop) // the first range's share of the whole
                        o->progress(r.rows * (split != kMax ? 2 : 1), total * 2);
                }
                return true;
            });
    };
    std::exception_ptr secondError;
    std::atomic<bool> stop{false};
    {
        std::jthread reader;
        if (split != kMax)
            reader = std::jthread([&] {
                try {
                    const Session other = Session::openUnchecked(path);
                    readRange(other, split, hi, second, &stop);
                } catch (...) {
                    secondError = std::current_exception();
                }
            });
        try {
            readRange(db, lo, split == kMax ? kMax : split - 1, first, nullptr);
        } catch (...) {
            stop.store(true);
            throw; // the reader stops at its next check and is joined
        }
    } // joined
    if (secondError) std::rethrow_exception(secondError);
    // Each known track's parts close up: the first range's rows, then the second's.
    for (size_t ti = 0; ti < first.parts.size(); ++ti) {
        AllocRecords& v = tracks[ti].allocs;
        const Part &p1 = first.parts[ti], &p2 = second.parts[ti];
        Alloc* out = p1.at + p1.n;
        if (p2.at != out) std::memmove(out, p2.at, p2.n * sizeof(Alloc));
        v.resize(static_cast<size_t>(out + p2.n - v.data()));
        if (v.empty()) AllocRecords().swap(v);
    }
    // Tracks with allocations only (no region): first range's rows, then the second's.
    for (Range* r : {&first, &second})
        for (auto& [key, rows] : r->unknown) {
            auto& dst = tracks[trackFor(key.first, key.second)].allocs;
            dst.insert(dst.end(), rows.begin(), rows.end());
        }
    return first.rows + second.rows;
}

void Engine::Impl::applySummary(SessionSummary sum)
{
    summary = std::move(sum);
    timeBegin = summary.timeBegin;
    timeEnd = summary.timeEnd;
    caveats = Caveats{};
    caveats.synthetic = summary.synthetic;
    caveats.droppedRecords = summary.health.droppedRecords;
    caveats.anomalies = summary.health.anomalyTotal();
    caveats.endedAbruptly = summary.health.endedAbruptly;
    caveats.ordinalTime = summary.timeAxis == TimeAxis::Ordinal;
    caveats.noAddresses = !summary.addressViewAvailable;
    if (caveats.synthetic) caveats.notes.push_back("synthetic data: simulated, not a measurement");
    if (caveats.droppedRecords > 0)
        caveats.notes.push_back(fmt::format("{} records were dropped during capture: figures are "
                                            "computed over incomplete data",
                                            caveats.droppedRecords));
    if (caveats.anomalies > 0)
        caveats.notes.push_back(fmt::format("{} anomalies were repaired at ingest (see the "
                                            "anomalies table)",
                                            caveats.anomalies));
    if (caveats.endedAbruptly)
        caveats.notes.push_back("the capture ended abruptly: data stops at the last commit");
    if (summary.health.recording)
        caveats.notes.push_back("the session is still being recorded: figures cover what was "
                                "committed so far");
    if (caveats.ordinalTime)
        caveats.notes.push_back("ordinal time axis: times are event ordinals, not nanoseconds");
    if (caveats.noAddresses)
        caveats.notes.push_back("the source has no addresses: no address-space figures");
    for (const TraceHistory& h : traceHistory(summary.meta))
        if (const std::string n = historyNote(h); !n.empty()) caveats.notes.push_back(n);
    if (const std::string n = windowsNote(summary.windows); !n.empty()) caveats.notes.push_back(n);
}

uint32_t Engine::Impl::regionOf(int64_t regionId, size_t ti, const Alloc& a) const
{
    // The range of a block's region that holds it (several for an expandable segment).
    auto it = regionById.find(regionId);
    return it == regionById.end() ? kNoRegion : regionAmong(it->second, ti, a);
}

uint32_t Engine::Impl::regionAmong(const std::vector<std::pair<size_t, uint32_t>>& where, size_t ti,
                                   const Alloc& a) const
{
    uint32_t best = kNoRegion;
    for (const auto& [t, i] : where) {
        if (t != ti) continue;
        const RegionRec& r = tracks[t].regions[i];
        if (a.address < r.address || a.address >= r.address + r.size) continue;
        if (r.createNs <= a.allocNs && r.destroyNs > a.allocNs) return i;
        best = i;
    }
    return best;
}

void Engine::Impl::readPendingFrees(const Session& s)
{
    for (TrackData& t : tracks) {
        t.pending.clear();
        t.pendingByEnd.clear();
        t.pendingStream.clear();
    }
    std::vector<std::vector<std::pair<Alloc, uint32_t>>> rows(tracks.size()); // (wait, stream)
    std::vector<std::vector<uint32_t>> byAddress(tracks.size()); // region indices by address
    std::vector<uint64_t> widest(tracks.size(), 0);
    int64_t id = 0; // the row's place in the table (pending_frees.id order)
    for (const store::PendingFreeRow& p : store::pendingFrees(s)) {
        ++id;
        const auto level = static_cast<int>(p.level.value_or(static_cast<int>(Level::Framework)));
        size_t ti = 0;
        while (ti < tracks.size() && (static_cast<int64_t>(tracks[ti].device) != p.device ||
                                      static_cast<int>(tracks[ti].level) != level))
            ++ti;
        if (ti == tracks.size()) continue; // a device and level with no region or block
        const TrackData& t = tracks[ti];
        auto& order = byAddress[ti];
        if (order.empty() && !t.regions.empty()) {
            order.resize(t.regions.size());
            for (uint32_t r = 0; r < order.size(); ++r) {
                order[r] = r;
                widest[ti] = std::max(widest[ti], t.regions[r].size);
            }
            std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
                return t.regions[a].address < t.regions[b].address;
            });
        }
        Alloc a{
            p.address, p.size,    p.requestNs, std::max(p.completeNs.value_or(kAlive), p.requestNs),
            id,        kNoRegion, kNoTag};
        // The region (mapped piece) that held the range when the wait began.
        auto it =
            std::upper_bound(order.begin(), order.end(), p.address,
                             [&](uint64_t v, uint32_t r) { return v < t.regions[r].address; });
        while (it != order.begin()) {
            const RegionRec& r = t.regions[*--it];
            if (r.address + widest[ti] <= p.address) break;
            if (p.address < r.address + r.size && r.createNs <= a.allocNs &&
                r.destroyNs > a.allocNs) {
                a.region = *it;
                break;
            }
        }
        rows[ti].emplace_back(a, static_cast<uint32_t>(p.stream.value_or(0)));
    }
    for (size_t ti = 0; ti < tracks.size(); ++ti) {
        TrackData& t = tracks[ti];
        auto& v = rows[ti];
        std::sort(v.begin(), v.end(), [](const auto& x, const auto& y) {
            return x.first.allocNs != y.first.allocNs ? x.first.allocNs < y.first.allocNs
                                                      : x.first.id < y.first.id;
        });
        for (const auto& [a, stream] : v) {
            if (a.freeNs != kAlive)
                t.pendingByEnd.push_back(static_cast<uint32_t>(t.pending.size()));
            t.pending.push_back(a);
            t.pendingStream.push_back(stream);
        }
        std::stable_sort(t.pendingByEnd.begin(), t.pendingByEnd.end(), [&](uint32_t x, uint32_t y) {
            return t.pending[x].freeNs < t.pending[y].freeNs;
        });
    }
}

void sortAllocs(TrackData& t)
{
    auto byAlloc = [](const Alloc& a, const Alloc& b) {
        return a.allocNs != b.allocNs ? a.allocNs < b.allocNs : a.id < b.id;
    };
    if (!std::is_sorted(t.allocs.begin(), t.allocs.end(), byAlloc)) {
        // Region indices stay valid: they index t.regions, which is not reordered here.
        std::sort(t.allocs.begin(), t.allocs.end(), byAlloc);
    }
}

namespace {

// The freed blocks by free time, ties in allocation order (t.byFree), and, with checkpoints,
// t.checkpoints as CheckpointBuilder places them (t.regionsByEnd must be built already).
void sortByFree(TrackData& t, bool checkpoints)
{
    struct Key
    {
        int64_t freeNs;
        uint32_t i;
        bool occupies; // the block holds memory while pending (CheckpointBuilder's live set)
        bool operator<(const Key& o) const
        {
            return freeNs != o.freeNs ? freeNs < o.freeNs : i < o.i;
        }
        bool operator>(const Key& o) const { return o < *this; }
    };
    const auto& A = t.allocs;
    t.byFree.clear();
    t.byFree.reserve(A.size());
    mapPages(t.byFree.data(), A.size() * sizeof(uint32_t)); // fresh pages, mapped ahead
    // The blocks are in allocation order and none is freed before it was allocated (TrackData),
    // so once the allocations reach a time, every free up to it is known: no later block is
    // freed earlier (a later block freed at the same time comes after it in the ties too). A
    // heap holds the frees still to come, about the blocks alive at the time (thousands: in
    // cache), instead of a sort of all of them (2.6 s for 33 M blocks on one core, a pass over
    // memory per level, and 0.5 GB of fresh pages for the pairs).
    //
    // The same walk visits every instant in time order, its frees before its allocations, so it
    // also places the checkpoints: the heap's blocks that hold memory, with those never freed,
    // are the live set. CheckpointBuilder (which a LiveEngine keeps to carry on later) walked the
    // four streams again, reading each freed block's record out of order and keeping a position
    // per block (0.8 s and 132 MB of fresh memory for 33 M blocks); the checkpoints are the same
    // (docs/analysis.md "Free order without a sort").
    std::vector<Key> pending;      // min-heap
    std::vector<uint32_t> forever; // blocks that hold memory and are never freed, so far
    size_t live = 0;               // blocks that hold memory now
    int64_t sinceLast = 0;         // events since the last checkpoint
    if (checkpoints) {
        t.checkpoints.clear();
        t.checkpoints.push_back(Checkpoint{std::numeric_limits<int64_t>::min(), 0, 0, 0, 0, {}});
    }
    auto freeFront = [&] { // the next free in time order
        t.byFree.push_back(pending.front().i);
        live -= pending.front().occupies ? 1 : 0;
        ++sinceLast;
        std::pop_heap(pending.begin(), pending.end(), std::greater<>());
        pending.pop_back();
    };
    auto instantEnds = [&](int64_t at, size_t allocPos) { // every event at `at` is done
        if (!checkpoints || !checkpointDue(sinceLast, live)) return;
        Checkpoint c{at, allocPos, t.byFree.size(), 0, 0, forever};
        c.regionPos = static_cast<size_t>(
            std::upper_bound(t.regions.begin(), t.regions.end(), at,
                             [](int64_t v, const RegionRec& r) { return v < r.createNs; }) -
            t.regions.begin());
        c.regionEndPos = static_cast<size_t>(
            std::upper_bound(t.regionsByEnd.begin(), t.regionsByEnd.end(), at,
                             [&](int64_t v, uint32_t r) { return v < t.regions[r].destroyNs; }) -
            t.regionsByEnd.begin());
        for (const Key& k : pending)
            if (k.occupies) c.live.push_back(k.i);
        std::sort(c.live.begin(), c.live.end());
        t.checkpoints.push_back(std::move(c));
        sinceLast = 0;
    };
    // Frees before `time`, each distinct free time an instant of its own.
    auto freesBefore = [&](int64_t time, size_t allocPos) {
        while (!pending.empty() && pending.front().freeNs < time) {
            const int64_t at = pending.front().freeNs;
            while (!pending.empty() && pending.front().freeNs == at)
                freeFront();
            instantEnds(at, allocPos);
        }
    };
    auto freesAt = [&](int64_t time) {
        while (!pending.empty() && pending.front().freeNs == time)
            freeFront();
    };
    uint32_t i = 0;
    while (i < A.size()) {
        const int64_t now = A[i].allocNs;
        freesBefore(now, i);
        freesAt(now); // an instant's frees come before its allocations
        for (; i < A.size() && A[i].allocNs == now; ++i) {
            ++sinceLast;
            const bool occupies = A[i].occupies();
            live += occupies ? 1 : 0;
            if (A[i].freeNs == kAlive) {
                if (occupies) forever.push_back(i);
                continue;
            }
            assert(A[i].freeNs >= A[i].allocNs);
            pending.push_back({A[i].freeNs, i, occupies});
            std::push_heap(pending.begin(), pending.end(), std::greater<>());
        }
        freesAt(now); // blocks freed when they were allocated
        instantEnds(now, i);
    }
    freesBefore(kAlive, i);
}

} // namespace

void Engine::Impl::indexTrack(TrackData& t)
{
    sortAllocs(t);
    t.regionsByEnd.clear();
    for (uint32_t i = 0; i < t.regions.size(); ++i)
        if (t.regions[i].destroyNs != kAlive) t.regionsByEnd.push_back(i);
    std::stable_sort(t.regionsByEnd.begin(), t.regionsByEnd.end(), [&](uint32_t a, uint32_t b) {
        return t.regions[a].destroyNs < t.regions[b].destroyNs;
    });
    sortByFree(t, !keepBuilders);
    if (keepBuilders) buildCheckpoints(t);
    buildLayout(t);
}

void Engine::Impl::buildCheckpoints(TrackData& t)
{
    CheckpointBuilder local;
    CheckpointBuilder& b = keepBuilders ? builders[static_cast<size_t>(&t - tracks.data())] : local;
    b.start(t);
    b.run(t);
}

const TrackData* Engine::Impl::trackInfo(uint32_t device, Level level) const
{
    for (const TrackData& t : tracks)
        if (t.device == device && t.level == level) return &t;
    return nullptr;
}

const TrackData* Engine::Impl::track(uint32_t device, Level level) const
{
    ensureRows();
    for (const TrackData& t : tracks)
        if (t.device == device && t.level == level) return &t;
    return nullptr;
}

const TrackData& Engine::Impl::trackOrThrow(uint32_t device, Level level) const
{
    ensureRows();
    if (const TrackData* t = track(device, level)) return *t;
    static const TrackData empty;
    return empty;
}

Caveats Engine::Impl::resultCaveats(const std::string& extra) const
{
    Caveats c = caveats;
    if (!extra.empty()) c.notes.push_back(extra);
    return c;
}

AllocationInfo Engine::Impl::info(const TrackData& t, const Alloc& a) const
{
    AllocationInfo i;
    i.id = a.id;
    i.device = t.device;
    i.level = t.level;
    i.regionId = a.region == kNoRegion ? -1 : t.regions[a.region].id;
    i.address = a.address;
    i.size = a.size;
    i.allocNs = a.allocNs;
    i.freeNs = a.freeNs;
    std::lock_guard lock(dbMutex);
    if (!session) return i;
    if (const auto d = store::allocationDetails(*session, a.id)) {
        i.requestedSize = d->requestedSize.value_or(0);
        i.stream = static_cast<uint32_t>(d->stream);
        if (d->tag) i.tag = *d->tag;
        i.stack = d->stack;
        if (d->userMetadata) i.userMetadata = *d->userMetadata;
        if (d->compileContext) i.compileContext = *d->compileContext;
    }
    return i;
}

const std::string& Engine::path() const
{
    return d_->path;
}
const SessionSummary& Engine::summary() const
{
    return d_->summary;
}
const Caveats& Engine::caveats() const
{
    return d_->caveats;
}
std::shared_lock<std::shared_mutex> Engine::readLock() const
{
    return std::shared_lock<std::shared_mutex>(d_->liveMutex);
}
LoadInfo Engine::loadInfo() const
{
    LoadInfo i = d_->loadInfo;
    i.indexCacheWritten = i.indexCacheWritten || d_->indexStoredLater.load();
    if (i.rowsDeferred && d_->rowsReady.load() && !d_->rowsError) {
        // What the deferred load found (engine_impl.h): the stored columns, or malformed
        // stored values and the rows read and indexed again.
        const int64_t rows = d_->deferredRowsRead.load();
        i.rowsFromCache = rows == 0;
        i.indexCacheUsed = rows == 0;
        i.allocationRowsRead += rows;
    }
    i.timelinesFromCache = d_->timelinesFromCache.load();
    return i;
}
int64_t Engine::timeBegin() const
{
    return d_->timeBegin;
}
int64_t Engine::timeEnd() const
{
    return d_->timeEnd;
}

std::vector<Track> Engine::Impl::trackList() const
{
    std::vector<Track> out;
    const bool loaded = rowsReady.load();
    for (const TrackData& t : tracks)
        out.push_back({t.device, t.level,
                       static_cast<int64_t>(loaded ? t.allocs.size() : t.storedAllocs),
                       static_cast<int64_t>(t.regions.size())});
    return out;
}

std::optional<size_t> Engine::Impl::defaultTrackIndex(const std::vector<Track>& list,
                                                      uint32_t device)
{
    std::optional<size_t> withRegions, withAllocs;
    for (size_t i = 0; i < list.size(); ++i) {
        if (list[i].device != device) continue;
        if (list[i].regions > 0) withRegions = i; // ascending level: the last one is the highest
        if (list[i].allocations > 0) withAllocs = i;
    }
    return withRegions ? withRegions : withAllocs;
}

std::vector<Track> Engine::tracks() const
{
    return d_->trackList();
}

std::optional<Track> Engine::defaultTrack(uint32_t device) const
{
    const std::vector<Track> list = d_->trackList();
    const auto i = Impl::defaultTrackIndex(list, device);
    return i ? std::optional<Track>(list[*i]) : std::nullopt;
}

std::vector<RegionInfo> Engine::regions(uint32_t device, Level level) const
{
    std::vector<RegionInfo> out;
    if (const TrackData* t = d_->trackInfo(device, level))
        for (const RegionRec& r : t->regions)
            out.push_back(
                {r.id, device, level, r.kind, r.address, r.size, r.createNs, r.destroyNs});
    return out;
}

State Engine::stateAt(uint32_t device, Level level, int64_t t) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    Replayer r(td);
    r.seek(t);
    return d_->stateOf(*this, td, r.state(), t);
}

State Engine::Impl::stateOf(const Engine& e, const TrackData& td, const FragState& st,
                            int64_t t) const
{
    State s = st.snapshot(t, true);
    s.device = td.device;
    s.level = td.level;
    s.entropyWindowNs = std::max<int64_t>(options.entropyWindowNs, 1);
    s.eventSizeEntropyBits = e.eventEntropyAt(td.device, td.level, t, s.entropyWindowNs);
    return s;
}

State Engine::stateAtFullReplay(uint32_t device, Level level, int64_t t) const
{
    // Independent of FragState and the checkpoints: scan every region and block, sort the live
    // blocks of each region by address and measure the gaps.
    const TrackData& td = d_->trackOrThrow(device, level);
    State s;
    s.device = device;
    s.level = level;
    s.time = t;
    std::vector<bool> alive(td.regions.size());
    for (size_t r = 0; r < td.regions.size(); ++r) {
        const RegionRec& rr = td.regions[r];
        alive[r] = rr.createNs <= t && rr.destroyNs > t;
        if (alive[r]) {
            ++s.regionCount;
            s.reservedBytes += rr.size;
        }
    }
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> inRegion(td.regions.size());
    for (const Alloc& a : td.allocs) {
        if (!a.occupies() || a.allocNs > t || a.freeNs <= t) continue;
        ++s.liveAllocations;
        if (a.region == kNoRegion) {
            s.allocatedOutsideBytes += a.size;
            continue;
        }
        const uint32_t r = td.placeAt(a, t);
        const RegionRec& rr = td.regions[r];
        const uint64_t end = std::min(a.end(), rr.address + rr.size);
        if (alive[r])
            s.allocatedBytes += end - a.address;
        else
            s.allocatedOutsideBytes += end - a.address;
        inRegion[r].emplace_back(a.address, end);
    }
    // Pending frees cover their range as blocks do; once they complete, only the blocks do.
    std::vector<std::vector<std::pair<uint64_t, uint64_t>>> blocksOnly = inRegion;
    for (const Alloc& a : td.pending) {
        if (!a.occupies() || a.allocNs > t || a.freeNs <= t) continue;
        ++s.pendingFreeBlocks;
        if (a.region == kNoRegion) continue;
        const uint32_t r = td.placeAt(a, t);
        const RegionRec& rr = td.regions[r];
        const uint64_t end = std::min(a.end(), rr.address + rr.size);
        if (alive[r]) s.pendingFreeBytes += end - a.address;
        inRegion[r].emplace_back(a.address, end);
    }
    // The gaps between the ranges of each live region.
    auto gaps = [&](std::vector<std::vector<std::pair<uint64_t, uint64_t>>>& ranges) {
        std::vector<uint64_t> frags;
        for (size_t r = 0; r < td.regions.size(); ++r) {
            if (!alive[r]) continue;
            auto& v = ranges[r];
            std::sort(v.begin(), v.end());
            const RegionRec& rr = td.regions[r];
            uint64_t pos = rr.address;
            for (const auto& [a, e] : v) {
                if (a > pos) frags.push_back(a - pos);
                pos = std::max(pos, e);
            }
            if (rr.address + rr.size > pos) frags.push_back(rr.address + rr.size - pos);
        }
        return frags;
    };
    setFragmentFigures(s, gaps(inRegion));
    State once;
    setFragmentFigures(once, gaps(blocksOnly));
    setOncePendingComplete(s, once.largestFreeFragmentBytes);
    return s;
}

std::vector<Fragment> Engine::fragmentsAt(uint32_t device, Level level, int64_t t) const
{
    Replayer r(d_->trackOrThrow(device, level));
    r.seek(t);
    return r.state().fragments();
}

std::vector<Fragment> Engine::pendingFreesAt(uint32_t device, Level level, int64_t t) const
{
    Replayer r(d_->trackOrThrow(device, level));
    r.seek(t);
    return r.state().pendingBlocks();
}

std::vector<AllocationInfo> Engine::liveAllocationsAt(uint32_t device, Level level, int64_t t) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    std::vector<AllocationInfo> out;
    for (uint32_t i : d_->liveAt(td, t, t)) {
        const Alloc& a = td.allocs[i];
        AllocationInfo info;
        info.id = a.id;
        info.device = device;
        info.level = level;
        info.regionId = a.region == kNoRegion ? -1 : td.regions[a.region].id;
        info.address = a.address;
        info.size = a.size;
        info.allocNs = a.allocNs;
        info.freeNs = a.freeNs;
        out.push_back(std::move(info));
    }
    std::sort(out.begin(), out.end(), [](const AllocationInfo& a, const AllocationInfo& b) {
        return a.address < b.address;
    });
    return out;
}

std::optional<AllocationInfo> Engine::allocationAt(uint32_t device, Level level, int64_t t,
                                                   uint64_t address) const
{
    const TrackData& td = d_->trackOrThrow(device, level);
    for (uint32_t i : d_->liveAt(td, t, t)) {
        const Alloc& a = td.allocs[i];
        if (a.address <= address && address < a.end()) return d_->info(td, a);
    }
    return std::nullopt;
}

std::optional<AllocationInfo> Engine::allocation(int64_t id) const
{
    uint32_t device = 0;
    int level = 0;
    int64_t allocNs = 0;
    {
        std::lock_guard lock(d_->dbMutex);
        if (!d_->session) return std::nullopt;
        const auto place = store::allocationPlace(*d_->session, id);
        if (!place) return std::nullopt;
        device = static_cast<uint32_t>(place->device);
        level = static_cast<int>(place->level);
        allocNs = place->allocNs;
    }
    const TrackData* td = d_->track(device, static_cast<Level>(level));
    if (!td) return std::nullopt;
    auto it =
        std::lower_bound(td->allocs.begin(), td->allocs.end(), std::make_pair(allocNs, id),
                         [](const Alloc& a, const std::pair<int64_t, int64_t>& k) {
                             return a.allocNs != k.first ? a.allocNs < k.first : a.id < k.second;
                         });
    if (it == td->allocs.end() || it->id != id) return std::nullopt;
    return d_->info(*td, *it);
}

void Engine::loadRows() const
{
    d_->ensureRows();
}

bool Engine::rowsLoaded() const
{
    return d_->rowsReady.load();
}

bool Engine::storeIndex() const
{
    std::lock_guard lock(d_->storeMutex);
    if (d_->gridsPending) {
        d_->gridsPending = false;
        return d_->writeGrids();
    }
    if (!d_->indexPending) return false;
    d_->indexPending = false;
    const bool stored = d_->writeIndex();
    d_->indexStoredLater.store(stored);
    return stored;
}

int64_t parseTime(const Engine& e, const std::string& text)
{
    std::string s = text;
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.pop_back();
    if (s == "end") return e.timeEnd();
    if (s == "begin" || s == "start") return e.timeBegin();
    if (s == "peak") { // the default track's allocated-bytes peak (categories.h)
        const std::optional<Track> t = e.defaultTrack(0);
        const int64_t peak = t ? allocatedPeakTime(e, t->device, t->level) : kNoTime;
        if (peak == kNoTime) throw std::invalid_argument("'peak': nothing is ever allocated");
        return peak;
    }
    if (s.starts_with("frame:")) {
        int64_t n = 0;
        const std::string num = s.substr(6);
        auto [p, ec] = std::from_chars(num.data(), num.data() + num.size(), n);
        if (ec != std::errc() || p != num.data() + num.size() || num.empty())
            throw std::invalid_argument("invalid frame number in '" + text + "'");
        for (const FrameInfo& f : e.frames())
            if (f.index == n) return f.end;
        throw std::invalid_argument(
            fmt::format("the session has no frame {} ({} frames)", n, e.frames().size()));
    }
    // Plain integer: absolute session time (ns, or the ordinal).
    {
        int64_t v = 0;
        auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        if (ec == std::errc() && p == s.data() + s.size() && !s.empty()) return v;
    }
    // Number with a unit: an offset from the session's beginning.
    double v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p == s.data())
        throw std::invalid_argument("invalid time '" + text +
                                    "' (expected ns, a number with a unit such as 12.5s or 300ms, "
                                    "'end', or frame:N)");
    const std::string unit(p, static_cast<const char*>(s.data() + s.size()));
    if (e.summary().timeAxis == TimeAxis::Ordinal)
        throw std::invalid_argument("'" + text +
                                    "': this session has an ordinal time axis (no timestamps); "
                                    "give the ordinal as a plain integer");
    const double scale = nsPerTimeUnit(unit);
    if (scale == 0)
        throw std::invalid_argument("unknown time unit '" + unit + "' in '" + text +
                                    "' (ns, us, ms, s, min, h)");
    const double ns = v * scale;
    if (!std::isfinite(ns) || std::fabs(ns) > 9.2e18)
        throw std::invalid_argument("time out of range: '" + text + "'");
    return e.timeBegin() + static_cast<int64_t>(std::llround(ns));
}

} // namespace fs::analysis
