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
};

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

bool Engine::Impl::readFrameCache(const std::vector<size_t>& timed)
{
    Db& db = session->db();
    cacheStamp = stamp(db);
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
    // Written through a separate read-write connection, only when the file is writable: the
    // GUI's connection stays read-only and a read-only file simply gets no cache.
    if (cacheStamp.empty() || ::access(path.c_str(), W_OK) != 0) return;
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
    try {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA busy_timeout=2000");
        db.exec("CREATE TABLE IF NOT EXISTS analysis_cache(key TEXT PRIMARY KEY, engine_version "
                "INTEGER NOT NULL,"
                " stamp TEXT NOT NULL, value BLOB NOT NULL)");
        Stmt st = db.prepare("INSERT OR REPLACE INTO analysis_cache(key, engine_version, stamp, "
                             "value) VALUES(?1,?2,?3,?4)");
        st.bind(1, std::string_view(kFrameKey)).bind(2, kEngineVersion).bind(3, cacheStamp);
        sqlite3_bind_blob(st.raw(), 4, w.out.data(), static_cast<int>(w.out.size()),
                          SQLITE_TRANSIENT);
        st.run();
        loadInfo.frameCacheWritten = true;
    } catch (const SessionError&) {
        // A locked or read-only file: the figures were computed; they are just not cached.
    }
}

} // namespace fs::analysis
