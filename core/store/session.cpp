#include "session.h"

#include "foreign_input.h"
#include "sqlite_format.h"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <future>
#include <sys/stat.h>
#include <unistd.h>

namespace fs {

namespace {

// One statement per table; docs/session-format.md documents every column.
constexpr std::array kSchema = {
    "CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID",
    "CREATE TABLE strings(id INTEGER PRIMARY KEY, text TEXT NOT NULL)",
    "CREATE TABLE sources(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, path TEXT, detail TEXT)",
    "CREATE TABLE devices(id INTEGER PRIMARY KEY, name TEXT, capacity_bytes INTEGER, uuid TEXT)",
    "CREATE TABLE processes(pid INTEGER PRIMARY KEY, command_line TEXT, start_ns INTEGER)",
    "CREATE TABLE regions(id INTEGER PRIMARY KEY, device INTEGER NOT NULL, level INTEGER NOT NULL,"
    " kind INTEGER NOT NULL, address INTEGER NOT NULL, size INTEGER NOT NULL,"
    " create_ns INTEGER NOT NULL, destroy_ns INTEGER, stream INTEGER, pool_id INTEGER,"
    " segment_type INTEGER, expandable INTEGER NOT NULL DEFAULT 0)",
    "CREATE TABLE region_mappings(id INTEGER PRIMARY KEY, region_id INTEGER NOT NULL,"
    " address INTEGER NOT NULL, size INTEGER NOT NULL, map_ns INTEGER NOT NULL, unmap_ns INTEGER)",
    "CREATE TABLE allocations(id INTEGER PRIMARY KEY, device INTEGER NOT NULL,"
    " level INTEGER NOT NULL, region_id INTEGER, address INTEGER NOT NULL, size INTEGER NOT NULL,"
    " requested_size INTEGER, stream INTEGER, alloc_ns INTEGER NOT NULL, free_ns INTEGER,"
    " tag INTEGER, stack INTEGER, user_metadata INTEGER, compile_context INTEGER)",
    "CREATE TABLE stacks(id INTEGER NOT NULL, depth INTEGER NOT NULL, frame INTEGER NOT NULL,"
    " PRIMARY KEY(id, depth)) WITHOUT ROWID",
    "CREATE TABLE kernels(id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER,"
    " start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL, name INTEGER NOT NULL,"
    " correlation_id INTEGER, grid_x INTEGER, grid_y INTEGER, grid_z INTEGER,"
    " block_x INTEGER, block_y INTEGER, block_z INTEGER, graph_id INTEGER, graph_node_id INTEGER)",
    "CREATE TABLE graph_launches(id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER,"
    " graph_id INTEGER, exec_id INTEGER, start_ns INTEGER NOT NULL, end_ns INTEGER NOT NULL)",
    // CUDA graphs' captures and executable instances (sessions written before have neither).
    "CREATE TABLE graph_captures(id INTEGER PRIMARY KEY, device INTEGER NOT NULL, stream INTEGER,"
    " graph_id INTEGER, name INTEGER, pool_id INTEGER, begin_ns INTEGER NOT NULL,"
    " end_ns INTEGER NOT NULL)",
    "CREATE TABLE graph_execs(id INTEGER PRIMARY KEY, device INTEGER NOT NULL, graph_id INTEGER,"
    " exec_id INTEGER NOT NULL, instantiate_ns INTEGER NOT NULL, destroy_ns INTEGER)",
    "CREATE TABLE markers(id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, end_ns INTEGER,"
    " message INTEGER NOT NULL, device INTEGER)",
    "CREATE TABLE frames(idx INTEGER PRIMARY KEY, start_ns INTEGER NOT NULL, end_ns INTEGER)",
    "CREATE TABLE frame_metrics(frame INTEGER NOT NULL, name TEXT NOT NULL, value REAL NOT NULL,"
    " source TEXT NOT NULL, PRIMARY KEY(frame, name)) WITHOUT ROWID",
    "CREATE TABLE ooms(id INTEGER PRIMARY KEY, time_ns INTEGER NOT NULL, device INTEGER NOT NULL,"
    " level INTEGER, stream INTEGER, requested_bytes INTEGER, device_free_bytes INTEGER)",
    "CREATE TABLE pending_frees(id INTEGER PRIMARY KEY, device INTEGER NOT NULL,"
    " level INTEGER NOT NULL, address INTEGER NOT NULL, size INTEGER NOT NULL, stream INTEGER,"
    " request_ns INTEGER NOT NULL, complete_ns INTEGER)",
    "CREATE TABLE capture_health(id INTEGER PRIMARY KEY, time_ns INTEGER, kind TEXT NOT NULL,"
    " value INTEGER, detail TEXT)",
    // Flight recordings only (`record --keep`): the spans kept; nothing between them.
    "CREATE TABLE windows(id INTEGER PRIMARY KEY, begin_ns INTEGER NOT NULL, end_ns INTEGER NOT"
    " NULL, trigger TEXT NOT NULL, events INTEGER NOT NULL)",
    "CREATE TABLE anomalies(id INTEGER PRIMARY KEY, time_ns INTEGER, kind TEXT NOT NULL,"
    " device INTEGER, level INTEGER, address INTEGER, size INTEGER, event_seq INTEGER, detail "
    "TEXT)",
    // Synthetic sessions only (empty elsewhere): what the simulator knows per frame.
    "CREATE TABLE sim_truth_frames(frame INTEGER PRIMARY KEY, attention_calls INTEGER NOT NULL,"
    " workspace_failures INTEGER NOT NULL, ooms INTEGER NOT NULL)",
    "CREATE TABLE sim_truth_kernels(frame INTEGER NOT NULL, kernel TEXT NOT NULL,"
    " calls INTEGER NOT NULL, lowers_coherence INTEGER NOT NULL, PRIMARY KEY(frame, kernel))"
    " WITHOUT ROWID",
    // The generated video the frame metrics of source 'video: NAME' came from (`metrics
    // compute`), its thumbnails and its per-video-frame metrics. Added after v1's first release:
    // an older session gets them when a video is added (createMissingTables).
    "CREATE TABLE videos(id INTEGER PRIMARY KEY, path TEXT NOT NULL, source TEXT NOT NULL,"
    " sha256 TEXT NOT NULL, bytes INTEGER, is_folder INTEGER NOT NULL, width INTEGER NOT NULL,"
    " height INTEGER NOT NULL, fps REAL, frame_count INTEGER NOT NULL,"
    " frames_per_session_frame INTEGER NOT NULL, session_frame_offset INTEGER NOT NULL,"
    " work_width INTEGER, work_height INTEGER, ssim_width INTEGER, ssim_height INTEGER,"
    " thumb_width INTEGER, thumb_height INTEGER, computed_at TEXT, computed_by TEXT)",
    // A rowid table: rows hold kilobytes of thumbnail, which WITHOUT ROWID tables store badly.
    "CREATE TABLE video_frames(video INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " session_frame INTEGER NOT NULL, reference INTEGER, thumbnail BLOB, flow_thumbnail BLOB,"
    " PRIMARY KEY(video, idx))",
    "CREATE TABLE video_frame_metrics(video INTEGER NOT NULL, idx INTEGER NOT NULL,"
    " name TEXT NOT NULL, value REAL NOT NULL, PRIMARY KEY(video, idx, name)) WITHOUT ROWID",
    "CREATE TABLE sim_truth_causes(frame INTEGER NOT NULL, mechanism TEXT NOT NULL,"
    " cause_frame INTEGER NOT NULL, quality_factor REAL NOT NULL, PRIMARY KEY(frame, mechanism))"
    " WITHOUT ROWID",
};

// No index on allocations(device, address): nothing in fragscope queries by address (the engine
// keeps its own index), and on a snapshot import it cost ~20 % of the time and of the file.
constexpr std::array kIndexes = {
    "CREATE INDEX IF NOT EXISTS allocations_time ON allocations(device, level, alloc_ns)",
    "CREATE INDEX IF NOT EXISTS regions_address ON regions(device, address)",
    "CREATE INDEX IF NOT EXISTS kernels_time ON kernels(device, start_ns)",
    "CREATE INDEX IF NOT EXISTS graph_launches_time ON graph_launches(start_ns)",
    "CREATE INDEX IF NOT EXISTS markers_time ON markers(time_ns)",
    "CREATE INDEX IF NOT EXISTS anomalies_time ON anomalies(time_ns)",
};

std::string tableNameOf(const char* create)
{
    const char* p = std::strstr(create, "TABLE ") + 6;
    return std::string(p, std::strchr(p, '('));
}

bool pidAlive(int64_t pid)
{
    if (pid <= 0) return false;
    return ::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM;
}

} // namespace

void createSchema(Db& db)
{
    db.exec("PRAGMA application_id=" + std::to_string(kApplicationId));
    db.exec("PRAGMA user_version=" + std::to_string(kFormatVersion));
    for (const char* sql : kSchema)
        db.exec(sql);
}

void createMissingTables(Db& db)
{
    for (const char* sql : kSchema)
        if (!db.hasTable(tableNameOf(sql))) db.exec(sql);
}

void createIndexes(Db& db)
{
    for (const char* sql : kIndexes)
        db.exec(sql);
}

const std::vector<std::string>& schemaTables()
{
    static const std::vector<std::string> names = [] {
        std::vector<std::string> v;
        for (const char* sql : kSchema)
            v.push_back(tableNameOf(sql));
        return v;
    }();
    return names;
}

int64_t HealthSummary::anomalyTotal() const
{
    int64_t n = 0;
    for (const auto& [k, v] : anomalies)
        n += v;
    return n;
}

bool writerAlive(const std::string& writerPid, const std::string& writerHost)
{
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    if (!writerHost.empty() && writerHost != host)
        return true; // cannot tell from here; assume a live remote writer
    try {
        return pidAlive(std::stoll(writerPid));
    } catch (...) {
        return false;
    }
}

Session Session::open(const std::string& path, bool integrityCheck, int openFlags)
{
    struct stat st
    {
    };
    if (::stat(path.c_str(), &st) != 0)
        throw SessionError(path, std::string("cannot open: ") + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) throw SessionError(path, "is a directory, not a session file");

    // Check the header ourselves first: SQLite opens any file lazily and would report a
    // non-database only at the first query.
    auto readHeader = [&path]() {
        std::ifstream in(path, std::ios::binary);
        std::array<unsigned char, store::format::kHeaderBytes> hdr{};
        in.read(reinterpret_cast<char*>(hdr.data()), hdr.size());
        if (in.gcount() == 0) throw SessionError(path, "empty file, not a fragscope session");
        const std::optional<store::format::Header> parsed =
            in.gcount() < static_cast<std::streamsize>(hdr.size())
                ? std::nullopt
                : store::format::parseHeader(hdr.data());
        if (!parsed) {
            // Another tool's trace given where a session is expected: say how to import it.
            const std::string foreign = store::foreignInputProblem(path);
            throw SessionError(path, foreign.empty()
                                         ? "not a fragscope session (not an SQLite database)"
                                         : foreign);
        }
        return *parsed;
    };
    // A writer elsewhere (the GUI storing its analysis index, a checkpoint) writes page 1 with
    // the new page count before it extends the file, so a file being written can look truncated
    // for a moment. Only a shortfall that outlasts any writer (2 s, when a journal or WAL file
    // says one may be active) is reported.
    const bool writerMayBeActive = ::access((path + "-journal").c_str(), F_OK) == 0 ||
                                   ::access((path + "-wal").c_str(), F_OK) == 0;
    for (int attempt = 0;; ++attempt) {
        const store::format::Header h = readHeader();
        if (::stat(path.c_str(), &st) != 0)
            throw SessionError(path, std::string("cannot open: ") + std::strerror(errno));
        const uint64_t expected = static_cast<uint64_t>(h.pages) * h.pageSize;
        const bool sizeValid = h.pages != 0 && h.changeCounter == h.validFor;
        if (!sizeValid || expected <= static_cast<uint64_t>(st.st_size)) break;
        if (!writerMayBeActive || attempt >= 40)
            throw SessionError(path, "truncated: header says " + std::to_string(expected) +
                                         " bytes, file has " + std::to_string(st.st_size));
        ::usleep(50000);
    }

    Db db(path, SQLITE_OPEN_READONLY | openFlags);
    const int64_t appId = db.scalar("PRAGMA application_id");
    if (appId != kApplicationId) {
        const std::string foreign =
            store::foreignInputProblem(path, true,
                                       db.hasTable("StringIds") || db.hasTable("TARGET_INFO_GPU") ||
                                           db.hasTable("CUPTI_ACTIVITY_KIND_KERNEL") ||
                                           db.hasTable("CUPTI_ACTIVITY_KIND_RUNTIME"));
        throw SessionError(path, foreign.empty() ? "not a fragscope session (SQLite database "
                                                   "without the fragscope application id)"
                                                 : foreign);
    }
    const int64_t version = db.scalar("PRAGMA user_version");
    if (version > kFormatVersion)
        throw SessionError(path, "session format version " + std::to_string(version) +
                                     " is newer than this fragscope supports (" +
                                     std::to_string(kFormatVersion) + "); upgrade fragscope");
    if (version < 1)
        throw SessionError(path, "invalid session format version " + std::to_string(version));
    // quick_check reads every page: it finds corruption before any view does. It costs about
    // 3 s per 500 MB, so larger files skip it: truncation is still caught by the header check
    // above, and a corrupt page met later fails that query with a SessionError naming the file.
    if (integrityCheck && st.st_size < (64LL << 20)) {
        const std::string qc = db.scalarText("PRAGMA quick_check(1)", "ok");
        if (qc != "ok") throw SessionError(path, "corrupted session file (" + qc + ")");
    }
    if (!db.hasTable("meta") ||
        db.scalarText("SELECT value FROM meta WHERE key='magic'") != "fragscope")
        throw SessionError(path, "not a fragscope session (meta table missing or without magic)");
    return Session(std::move(db));
}

Session Session::openUnchecked(const std::string& path)
{
    return Session(Db(path, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX));
}

void Session::beginRead()
{
    db_.exec("BEGIN");
}

void Session::commitRead()
{
    db_.exec("COMMIT");
}

int64_t Session::allocationCount() const
{
    return db_.scalar("SELECT COALESCE(MAX(id), 0) FROM allocations");
}

std::string Session::meta(const std::string& key, const std::string& fallback) const
{
    Stmt st = db_.prepare("SELECT value FROM meta WHERE key=?1");
    st.bind(1, key);
    return st.step() ? st.text(0) : fallback;
}

std::string Session::string(StringId id) const
{
    Stmt st = db_.prepare("SELECT text FROM strings WHERE id=?1");
    st.bind(1, id.value);
    return st.step() ? st.text(0) : std::string();
}

namespace {

// Kernels rows (by the largest id) from which summary() counts them on a thread of their own.
constexpr int64_t kCountApartFrom = 1'000'000;

} // namespace

SessionSummary Session::summary(bool exact) const
{
    SessionSummary s;
    {
        Stmt st = db_.prepare("SELECT key, value FROM meta");
        while (st.step())
            s.meta[st.text(0)] = st.text(1);
    }
    auto m = [&](const std::string& k, const std::string& d = {}) {
        auto it = s.meta.find(k);
        return it == s.meta.end() ? d : it->second;
    };
    s.formatVersion = std::stoi(m("format_version", "1"));
    s.synthetic = m("synthetic") == "1";
    s.timeAxis = m("time_axis") == "ordinal" ? TimeAxis::Ordinal : TimeAxis::Nanoseconds;
    s.addressViewAvailable = m("address_view", "available") == "available";
    {
        Stmt st = db_.prepare("SELECT kind FROM sources ORDER BY id");
        while (st.step())
            s.sources.push_back(st.text(0));
    }
    {
        Stmt st = db_.prepare("SELECT id, name, capacity_bytes, uuid FROM devices ORDER BY id");
        while (st.step())
            s.devices.push_back(
                {static_cast<uint32_t>(st.i64(0)), st.text(1), st.u64(2), st.text(3)});
    }
    if (!exact && m("time_end_ns").empty() && !m("committed_time_end_ns").empty()) {
        s.events = std::stoll(m("committed_event_count", "0"));
        s.timeBegin = std::stoll(m("committed_time_begin_ns"));
        s.timeEnd = std::stoll(m("committed_time_end_ns"));
    } else {
        exact = true;
    }
    if (exact) {
        // The long tables' counts are a pass over an index each (70 ms at 10 M rows here): a
        // long kernels table is counted on a connection of its own, on another thread, while
        // this one counts the rest. Not inside a read transaction, which that connection would
        // not share.
        std::future<int64_t> kernels;
        if (sqlite3_get_autocommit(db_.raw()) &&
            db_.scalar("SELECT max(id) FROM kernels") >= kCountApartFrom)
            kernels = std::async(std::launch::async, [p = path()] {
                return openUnchecked(p).db_.scalar("SELECT COUNT(*) FROM kernels");
            });
        s.regions = db_.scalar("SELECT COUNT(*) FROM regions");
        s.allocations = db_.scalar("SELECT COUNT(*) FROM allocations");
        s.kernels = kernels.valid() ? kernels.get() : db_.scalar("SELECT COUNT(*) FROM kernels");
        s.graphLaunches = db_.scalar("SELECT COUNT(*) FROM graph_launches");
        s.frames = db_.scalar("SELECT COUNT(*) FROM frames");
        s.frameMetrics = db_.scalar("SELECT COUNT(*) FROM frame_metrics");
        s.ooms = db_.scalar("SELECT COUNT(*) FROM ooms");
        const std::string ev = m("event_count");
        if (!ev.empty()) {
            s.events = std::stoll(ev);
        } else {
            // Abrupt end: count what was committed (two events per freed allocation).
            s.events =
                db_.scalar("SELECT COUNT(*) + COUNT(free_ns) FROM allocations") + 2 * s.regions -
                db_.scalar("SELECT COUNT(*) FROM regions WHERE destroy_ns IS NULL") + s.kernels +
                s.graphLaunches + db_.scalar("SELECT COUNT(*) FROM markers") + s.ooms;
        }
        s.timeBegin = std::stoll(m("time_begin_ns", "0"));
        s.timeEnd = std::stoll(m("time_end_ns", "0"));
        if (m("time_end_ns").empty()) {
            s.timeBegin =
                db_.scalar("SELECT MIN(t) FROM (SELECT MIN(create_ns) t FROM regions UNION ALL "
                           "SELECT MIN(alloc_ns) FROM allocations UNION ALL SELECT MIN(start_ns) "
                           "FROM kernels)");
            s.timeEnd = db_.scalar("SELECT MAX(t) FROM (SELECT MAX(COALESCE(destroy_ns, "
                                   "create_ns)) t FROM regions UNION ALL "
                                   "SELECT MAX(COALESCE(free_ns, alloc_ns)) FROM allocations UNION "
                                   "ALL SELECT MAX(end_ns) FROM kernels)");
        }
    }
    const std::string state = m("state");
    s.health.recording = state == "recording" && writerAlive(m("writer_pid"), m("writer_host"));
    s.health.endedAbruptly = state != "complete" && !s.health.recording;
    {
        Stmt st = db_.prepare("SELECT kind, COUNT(*) FROM anomalies GROUP BY kind ORDER BY kind");
        while (st.step())
            s.health.anomalies[st.text(0)] = st.i64(1);
    }
    s.health.droppedRecords = db_.scalar(
        "SELECT COALESCE(SUM(value),0) FROM capture_health WHERE kind='dropped_records'");
    {
        Stmt st = db_.prepare("SELECT detail FROM capture_health WHERE kind='warning' ORDER BY id");
        while (st.step())
            s.health.warnings.push_back(st.text(0));
    }
    if (db_.hasTable("windows")) { // sessions before flight recording lack it
        Stmt st =
            db_.prepare("SELECT begin_ns, end_ns, trigger, events FROM windows ORDER BY begin_ns");
        while (st.step())
            s.windows.push_back({st.i64(0), st.i64(1), st.text(2), st.i64(3)});
    }
    return s;
}

} // namespace fs
