// The per-frame cache in the session file (docs/analysis.md "Caching"): table analysis_cache,
// one row per key, valid only for this engine version and this exact session content (stamp).
#include "engine_impl.h"

#include <cstring>
#include <unistd.h>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

constexpr const char* kFrameKey = "frames";

// Everything the cached per-frame figures depend on. A live or abruptly ended session has no
// stamp: its content can still change, so nothing is cached for it.
std::string stamp(Db& db)
{
    if (db.scalarText("SELECT value FROM meta WHERE key='state'") != "complete") return {};
    // Frame times summed over their low 32 bits: full timestamps (ns since 1970 in recorded
    // sessions) overflow SQLite's integer SUM from 5 frames on.
    const char* frameTimes = "SELECT COALESCE(SUM(start_ns & 4294967295), 0) || ',' || "
                             "COALESCE(SUM(end_ns & 4294967295), 0) FROM frames";
    return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}",
                       db.scalarText("SELECT value FROM meta WHERE key='event_count'"),
                       db.scalarText("SELECT value FROM meta WHERE key='time_end_ns'"),
                       db.scalar("SELECT COUNT(*) FROM frames"), db.scalarText(frameTimes),
                       db.scalar("SELECT COUNT(*) FROM allocations"),
                       db.scalar("SELECT COUNT(*) FROM regions"),
                       db.scalar("SELECT COUNT(*) FROM region_mappings"),
                       db.scalar("SELECT COUNT(*) FROM kernels"),
                       db.scalarText("SELECT COALESCE(MAX(id), 0) FROM allocations"));
}

struct Writer
{
    std::string out;
    template <typename T> void put(T v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); }
};

struct Reader
{
    const char* p;
    const char* end;
    bool ok = true;
    template <typename T> T get()
    {
        T v{};
        if (end - p < static_cast<std::ptrdiff_t>(sizeof v)) {
            ok = false;
            return v;
        }
        std::memcpy(&v, p, sizeof v);
        p += sizeof v;
        return v;
    }
    // n values of T into out; false (nothing read) when the blob is shorter.
    template <typename T> bool array(std::vector<T>& out, uint64_t n)
    {
        if (!ok || n > static_cast<uint64_t>(end - p) / sizeof(T)) return ok = false;
        out.resize(static_cast<size_t>(n));
        if (n) std::memcpy(out.data(), p, static_cast<size_t>(n) * sizeof(T));
        p += n * sizeof(T);
        return true;
    }
};

template <typename T> void putArray(Writer& w, const std::vector<T>& v)
{
    w.put<uint64_t>(v.size());
    w.out.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

std::string indexKey(const TrackData& t)
{
    return fmt::format("index:{}:{}", t.device, static_cast<int>(t.level));
}

// Writes key -> value rows through a separate read-write connection, only when the file is
// writable: the engine's connection stays read-only and a read-only file gets no cache.
bool storeCache(const std::string& path, const std::string& stampValue,
                const std::vector<std::pair<std::string, std::string>>& rows)
{
    if (stampValue.empty() || ::access(path.c_str(), W_OK) != 0) return false;
    try {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA busy_timeout=2000");
        db.exec("CREATE TABLE IF NOT EXISTS analysis_cache(key TEXT PRIMARY KEY, engine_version "
                "INTEGER NOT NULL, stamp TEXT NOT NULL, value BLOB NOT NULL)");
        db.exec("BEGIN");
        Stmt st = db.prepare("INSERT OR REPLACE INTO analysis_cache(key, engine_version, stamp, "
                             "value) VALUES(?1,?2,?3,?4)");
        for (const auto& [key, value] : rows) {
            st.reset();
            st.bind(1, std::string_view(key)).bind(2, kEngineVersion).bind(3, stampValue);
            sqlite3_bind_blob(st.raw(), 4, value.data(), static_cast<int>(value.size()),
                              SQLITE_TRANSIENT);
            st.run();
        }
        db.exec("COMMIT");
        return true;
    } catch (const SessionError&) {
        return false; // a locked or read-only file: computed, just not kept
    }
}

// The cached value under key when this engine version stored it with this stamp.
bool fetchCache(Db& db, const std::string& key, const std::string& stampValue, std::string& out)
{
    if (stampValue.empty() || !db.hasTable("analysis_cache")) return false;
    Stmt st = db.prepare(
        "SELECT value FROM analysis_cache WHERE key=?1 AND engine_version=?2 AND stamp=?3");
    st.bind(1, std::string_view(key)).bind(2, kEngineVersion).bind(3, stampValue);
    if (!st.step()) return false;
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(st.raw(), 0));
    out.assign(blob ? blob : "", static_cast<size_t>(sqlite3_column_bytes(st.raw(), 0)));
    return true;
}

void putState(Writer& w, const State& s)
{
    w.put<int64_t>(s.regionCount);
    w.put(s.liveAllocations);
    w.put(s.reservedBytes);
    w.put(s.allocatedBytes);
    w.put(s.allocatedOutsideBytes);
    w.put(s.freeBytes);
    w.put(s.fragmentCount);
    w.put(s.largestFreeFragmentBytes);
    w.put(s.fragmentationRatio);
    w.put(s.fragmentEntropyBits);
}

void getState(Reader& r, State& s)
{
    s.regionCount = static_cast<int>(r.get<int64_t>());
    s.liveAllocations = r.get<int64_t>();
    s.reservedBytes = r.get<uint64_t>();
    s.allocatedBytes = r.get<uint64_t>();
    s.allocatedOutsideBytes = r.get<uint64_t>();
    s.freeBytes = r.get<uint64_t>();
    s.fragmentCount = r.get<int64_t>();
    s.largestFreeFragmentBytes = r.get<uint64_t>();
    s.fragmentationRatio = r.get<double>();
    s.fragmentEntropyBits = r.get<double>();
}

} // namespace

void Engine::Impl::setCacheStamp(Db& db)
{
    const std::string s = stamp(db);
    cacheStamp = s.empty() ? std::string() : fmt::format("{}|{:016x}", s, contentHash);
}

bool Engine::Impl::readIndex(Db& db, TrackData& t)
{
    std::string blob;
    if (!fetchCache(db, indexKey(t), cacheStamp, blob)) return false;
    sortAllocs(t); // the stored positions index the sorted stream
    Reader r{blob.data(), blob.data() + blob.size()};
    const size_t nA = t.allocs.size(), nR = t.regions.size();
    if (r.get<uint64_t>() != nA || r.get<uint64_t>() != nR) return false;
    std::vector<uint32_t> byFree, byEnd;
    if (!r.array(byFree, r.get<uint64_t>()) || !r.array(byEnd, r.get<uint64_t>())) return false;
    for (uint32_t i : byFree)
        if (i >= nA || t.allocs[i].freeNs == kAlive) return false;
    for (uint32_t i : byEnd)
        if (i >= nR || t.regions[i].destroyNs == kAlive) return false;
    const uint64_t nc = r.get<uint64_t>();
    if (!r.ok || nc == 0 || nc > blob.size()) return false;
    std::vector<Checkpoint> cps(static_cast<size_t>(nc));
    for (Checkpoint& c : cps) {
        c.time = r.get<int64_t>();
        c.allocPos = r.get<uint64_t>();
        c.freePos = r.get<uint64_t>();
        c.regionPos = r.get<uint64_t>();
        c.regionEndPos = r.get<uint64_t>();
        if (!r.array(c.live, r.get<uint64_t>()) || c.allocPos > nA || c.freePos > byFree.size() ||
            c.regionPos > nR || c.regionEndPos > byEnd.size())
            return false;
        for (uint32_t i : c.live)
            if (i >= nA) return false;
    }
    if (!r.ok || r.p != r.end) return false;
    t.byFree = std::move(byFree);
    t.regionsByEnd = std::move(byEnd);
    t.checkpoints = std::move(cps);
    return true;
}

void Engine::Impl::writeIndex()
{
    std::vector<std::pair<std::string, std::string>> rows;
    for (const TrackData& t : tracks) {
        Writer w;
        w.put<uint64_t>(t.allocs.size());
        w.put<uint64_t>(t.regions.size());
        putArray(w, t.byFree);
        putArray(w, t.regionsByEnd);
        w.put<uint64_t>(t.checkpoints.size());
        for (const Checkpoint& c : t.checkpoints) {
            w.put(c.time);
            w.put<uint64_t>(c.allocPos);
            w.put<uint64_t>(c.freePos);
            w.put<uint64_t>(c.regionPos);
            w.put<uint64_t>(c.regionEndPos);
            putArray(w, c.live);
        }
        rows.emplace_back(indexKey(t), std::move(w.out));
    }
    loadInfo.indexCacheWritten = storeCache(path, cacheStamp, rows);
}

bool Engine::Impl::readTimelineCache(const std::string& key, Timeline& tl) const
{
    std::lock_guard lock(dbMutex);
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(session->db(), key, cacheStamp, blob)) return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    const uint64_t n = r.get<uint64_t>();
    tl.step = r.get<int64_t>();
    tl.eventsReplayed = r.get<int64_t>();
    if (!r.array(tl.time, n)) return false;
    for (auto* v :
         {&tl.reserved, &tl.allocated, &tl.allocatedOutside, &tl.freeInRegions, &tl.fragmentCount,
          &tl.largestFragment, &tl.fragmentationRatio, &tl.eventEntropy, &tl.fragmentEntropy})
        if (!r.array(*v, n)) return false;
    return r.ok && r.p == r.end;
}

void Engine::Impl::writeTimelineCache(const std::string& key, const Timeline& tl) const
{
    Writer w;
    w.put<uint64_t>(tl.time.size());
    w.put(tl.step);
    w.put(tl.eventsReplayed);
    w.out.append(reinterpret_cast<const char*>(tl.time.data()), tl.time.size() * sizeof(int64_t));
    for (const auto* v :
         {&tl.reserved, &tl.allocated, &tl.allocatedOutside, &tl.freeInRegions, &tl.fragmentCount,
          &tl.largestFragment, &tl.fragmentationRatio, &tl.eventEntropy, &tl.fragmentEntropy})
        w.out.append(reinterpret_cast<const char*>(v->data()), v->size() * sizeof(double));
    std::lock_guard lock(dbMutex);
    storeCache(path, cacheStamp, {{key, std::move(w.out)}});
}

// Devices that ran kernels and each kernel name's first start at or after firstStart (the first
// frame's start, part of the key).
bool Engine::Impl::readKernelIndexCache(int64_t firstStart) const
{
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(session->db(), fmt::format("kernels:{}", firstStart), cacheStamp, blob))
        return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    std::vector<int64_t> devices, names, starts;
    if (!r.array(devices, r.get<uint64_t>())) return false;
    const uint64_t n = r.get<uint64_t>();
    if (!r.array(names, n) || !r.array(starts, n) || r.p != r.end) return false;
    kernelDevices = std::move(devices);
    kernelFirstStart.clear();
    for (size_t i = 0; i < names.size(); ++i)
        kernelFirstStart.emplace(names[i], starts[i]);
    return true;
}

void Engine::Impl::writeKernelIndexCache(int64_t firstStart) const
{
    if (cacheStamp.empty()) return;
    std::vector<int64_t> names, starts;
    for (const auto& [name, start] : kernelFirstStart) {
        names.push_back(name);
        starts.push_back(start);
    }
    Writer w;
    putArray(w, kernelDevices);
    w.put<uint64_t>(names.size());
    w.out.append(reinterpret_cast<const char*>(names.data()), names.size() * sizeof(int64_t));
    w.out.append(reinterpret_cast<const char*>(starts.data()), starts.size() * sizeof(int64_t));
    storeCache(path, cacheStamp, {{fmt::format("kernels:{}", firstStart), std::move(w.out)}});
}

bool Engine::Impl::readLodCache(const TrackData& t, int nt, int ny, std::vector<double>& occ,
                                std::vector<double>& reg) const
{
    std::lock_guard lock(dbMutex);
    if (cacheStamp.empty() || !session) return false;
    std::string blob;
    if (!fetchCache(session->db(), fmt::format("lod:{}:{}", t.device, static_cast<int>(t.level)),
                    cacheStamp, blob))
        return false;
    Reader r{blob.data(), blob.data() + blob.size()};
    if (r.get<int32_t>() != nt || r.get<int32_t>() != ny) return false;
    const auto cells = static_cast<uint64_t>(nt) * static_cast<uint64_t>(ny);
    std::vector<float> o, g;
    if (!r.array(o, cells) || !r.array(g, cells) || r.p != r.end) return false;
    occ.assign(o.begin(), o.end());
    reg.assign(g.begin(), g.end());
    return true;
}

void Engine::Impl::writeLodCache(const TrackData& t, int nt, int ny, const std::vector<double>& occ,
                                 const std::vector<double>& reg) const
{
    Writer w;
    w.put<int32_t>(nt);
    w.put<int32_t>(ny);
    for (const auto* v : {&occ, &reg}) {
        const std::vector<float> f(v->begin(), v->end());
        w.out.append(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
    }
    std::lock_guard lock(dbMutex);
    storeCache(path, cacheStamp,
               {{fmt::format("lod:{}:{}", t.device, static_cast<int>(t.level)), std::move(w.out)}});
}

bool Engine::Impl::readFrameCache(const std::vector<size_t>& timed)
{
    Db& db = session->db();
    if (cacheStamp.empty() || !db.hasTable("analysis_cache")) return false;
    Stmt st = db.prepare(
        "SELECT value FROM analysis_cache WHERE key=?1 AND engine_version=?2 AND stamp=?3");
    st.bind(1, std::string_view(kFrameKey)).bind(2, kEngineVersion).bind(3, cacheStamp);
    if (!st.step()) return false;
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(st.raw(), 0));
    const int n = sqlite3_column_bytes(st.raw(), 0);
    Reader r{blob, blob + n};
    if (!blob || r.get<uint64_t>() != timed.size() || r.get<uint64_t>() != tracks.size())
        return false;
    std::vector<FrameInfo> copy = frames;
    for (size_t fi : timed) {
        FrameInfo& f = copy[fi];
        if (r.get<int64_t>() != f.index) return false;
        f.kernels = r.get<int64_t>();
        f.distinctKernels = r.get<int64_t>();
        f.newKernelVariants = r.get<int64_t>();
        f.allocator.clear();
        for (const TrackData& td : tracks) {
            FrameAllocator fa;
            fa.device = td.device;
            fa.level = td.level;
            if (r.get<uint32_t>() != td.device ||
                r.get<uint32_t>() != static_cast<uint32_t>(td.level))
                return false;
            getState(r, fa.atEnd);
            fa.atEnd.device = td.device;
            fa.atEnd.level = td.level;
            fa.atEnd.time = f.end;
            fa.minLargestFragment = r.get<uint64_t>();
            fa.maxLargestFragment = r.get<uint64_t>();
            fa.minRatio = r.get<double>();
            fa.maxRatio = r.get<double>();
            fa.minFragmentCount = r.get<int64_t>();
            fa.maxFragmentCount = r.get<int64_t>();
            fa.allocs = r.get<int64_t>();
            fa.frees = r.get<int64_t>();
            fa.allocBytes = r.get<uint64_t>();
            f.allocator.push_back(std::move(fa));
        }
    }
    if (!r.ok || r.p != r.end) return false;
    frames = std::move(copy);
    loadInfo.frameCacheUsed = true;
    return true;
}

void Engine::Impl::writeFrameCache(const std::vector<size_t>& timed)
{
    Writer w;
    w.put<uint64_t>(timed.size());
    w.put<uint64_t>(tracks.size());
    for (size_t fi : timed) {
        const FrameInfo& f = frames[fi];
        w.put(f.index);
        w.put(f.kernels);
        w.put(f.distinctKernels);
        w.put(f.newKernelVariants);
        for (const FrameAllocator& fa : f.allocator) {
            w.put<uint32_t>(fa.device);
            w.put<uint32_t>(static_cast<uint32_t>(fa.level));
            putState(w, fa.atEnd);
            w.put(fa.minLargestFragment);
            w.put(fa.maxLargestFragment);
            w.put(fa.minRatio);
            w.put(fa.maxRatio);
            w.put(fa.minFragmentCount);
            w.put(fa.maxFragmentCount);
            w.put(fa.allocs);
            w.put(fa.frees);
            w.put(fa.allocBytes);
        }
    }
    loadInfo.frameCacheWritten = storeCache(path, cacheStamp, {{kFrameKey, std::move(w.out)}});
}

} // namespace fs::analysis
