#include "analysis_cache.h"

#include "session_access.h"

#include <cctype>
#include <chrono>
#include <random>
#include <unistd.h>

#include <fmt/format.h>

namespace fs::store {

namespace {

constexpr const char* kGuardKey = "analysis_guard";
// The tables the cached values are computed from.
constexpr const char* kGuardedTables[] = {"allocations", "regions", "region_mappings", "frames",
                                          "kernels"};
constexpr const char* kGuardOps[] = {"INSERT", "UPDATE", "DELETE"};

std::string guardTrigger(const char* table, const char* op)
{
    std::string name = fmt::format("fs_analysis_guard_{}_{}", table, op);
    for (char& c : name)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return name;
}

std::string guardOf(const Db& db)
{
    int64_t expected = 0;
    std::string names;
    for (const char* table : kGuardedTables) {
        if (!db.hasTable(table)) continue;
        for (const char* op : kGuardOps) {
            names += fmt::format("{}'{}'", names.empty() ? "" : ",", guardTrigger(table, op));
            ++expected;
        }
    }
    if (db.scalar(fmt::format("SELECT COUNT(*) FROM sqlite_master WHERE type='trigger' AND name "
                              "IN ({})",
                              names)) != expected)
        return {};
    return db.scalarText(fmt::format("SELECT value FROM meta WHERE key='{}'", kGuardKey));
}

} // namespace

std::string contentStamp(const Session& s, const SessionSummary& sum)
{
    const Db& db = SessionAccess::db(s);
    if (db.scalarText("SELECT value FROM meta WHERE key='state'") != "complete") return {};
    // Frame times summed over their low 32 bits: full timestamps (ns since 1970 in recorded
    // sessions) overflow SQLite's integer SUM from 5 frames on.
    const char* frameTimes = "SELECT COALESCE(SUM(start_ns & 4294967295), 0) || ',' || "
                             "COALESCE(SUM(end_ns & 4294967295), 0) FROM frames";
    return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}",
                       db.scalarText("SELECT value FROM meta WHERE key='event_count'"),
                       db.scalarText("SELECT value FROM meta WHERE key='time_end_ns'"),
                       db.scalar("SELECT COUNT(*) FROM frames"), db.scalarText(frameTimes),
                       // The summary the engine just read counted these (exactly: the open
                       // asks for exact counts): no second pass over the large tables.
                       sum.allocations, sum.regions,
                       db.scalar("SELECT COUNT(*) FROM region_mappings"), sum.kernels,
                       db.scalarText("SELECT COALESCE(MAX(id), 0) FROM allocations"));
}

std::string readGuard(const Session& s)
{
    return guardOf(SessionAccess::db(s));
}

std::string installGuard(const std::string& path)
{
    if (::access(path.c_str(), W_OK) != 0) return {};
    try {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA busy_timeout=2000");
        db.exec("BEGIN IMMEDIATE");
        for (const char* table : kGuardedTables) {
            if (!db.hasTable(table)) continue;
            for (const char* op : kGuardOps)
                db.exec(fmt::format("CREATE TRIGGER IF NOT EXISTS {} AFTER {} ON {} BEGIN DELETE "
                                    "FROM meta WHERE key='{}'; END",
                                    guardTrigger(table, op), op, table, kGuardKey));
        }
        std::random_device rd;
        const uint64_t nonce =
            (uint64_t{rd()} << 32) ^ rd() ^
            static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
        // Always a new nonce: values stored under an older one may describe content changed
        // while a trigger was missing.
        db.exec(fmt::format("INSERT OR REPLACE INTO meta(key, value) VALUES('{}', '{:016x}')",
                            kGuardKey, nonce));
        db.exec("COMMIT");
        return guardOf(db);
    } catch (const SessionError&) {
        return {}; // locked or read-only: nothing is cached
    }
}

bool storeValues(const std::string& path, const std::string& stamp, int engineVersion,
                 const std::vector<std::pair<std::string, std::string_view>>& rows,
                 const std::function<void(const PutValue&)>& more)
{
    if (stamp.empty() || ::access(path.c_str(), W_OK) != 0) return false;
    const auto g = stamp.rfind("|g");
    if (g == std::string::npos) return false;
    try {
        Db db(path, SQLITE_OPEN_READWRITE);
        db.exec("PRAGMA busy_timeout=2000");
        db.exec("BEGIN IMMEDIATE");
        if (guardOf(db) != stamp.substr(g + 2)) {
            db.exec("ROLLBACK");
            return false; // changed behind the engine since it read the rows
        }
        db.exec("CREATE TABLE IF NOT EXISTS analysis_cache(key TEXT PRIMARY KEY, engine_version "
                "INTEGER NOT NULL, stamp TEXT NOT NULL, value BLOB NOT NULL)");
        Stmt st = db.prepare("INSERT OR REPLACE INTO analysis_cache(key, engine_version, stamp, "
                             "value) VALUES(?1,?2,?3,?4)");
        const PutValue put = [&](const std::string& key, std::string_view value) {
            st.reset();
            st.bind(1, std::string_view(key)).bind(2, engineVersion).bind(3, stamp);
            sqlite3_bind_blob64(st.raw(), 4, value.data(), value.size(), SQLITE_STATIC);
            st.run();
        };
        for (const auto& [key, value] : rows)
            put(key, value);
        if (more) more(put);
        db.exec("COMMIT");
        return true;
    } catch (const SessionError&) {
        return false; // a locked or read-only file: computed, just not kept
    }
}

bool fetchValue(const Session& s, const std::string& key, const std::string& stamp,
                int engineVersion, std::string& out)
{
    const Db& db = SessionAccess::db(s);
    if (stamp.empty() || !db.hasTable("analysis_cache")) return false;
    Stmt st = db.prepare(
        "SELECT value FROM analysis_cache WHERE key=?1 AND engine_version=?2 AND stamp=?3");
    st.bind(1, std::string_view(key)).bind(2, engineVersion).bind(3, stamp);
    if (!st.step()) return false;
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(st.raw(), 0));
    out.assign(blob ? blob : "", static_cast<size_t>(sqlite3_column_bytes(st.raw(), 0)));
    return true;
}

std::set<std::string> storedKeys(const Session& s, const std::string& stamp, int engineVersion,
                                 std::string_view prefix)
{
    const Db& db = SessionAccess::db(s);
    std::set<std::string> keys;
    if (stamp.empty() || !db.hasTable("analysis_cache")) return keys;
    Stmt st = db.prepare("SELECT key FROM analysis_cache WHERE engine_version=?1 AND stamp=?2");
    st.bind(1, engineVersion).bind(2, stamp);
    while (st.step()) {
        std::string key = st.text(0);
        if (key.starts_with(prefix)) keys.insert(std::move(key));
    }
    return keys;
}

bool dropValues(const std::string& path)
{
    Db db(path, SQLITE_OPEN_READWRITE);
    if (!db.hasTable("analysis_cache")) return false;
    db.exec("DELETE FROM analysis_cache");
    return true;
}

} // namespace fs::store
