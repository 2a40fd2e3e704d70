// The session file: a plain SQLite database (format v1, docs/session-format.md).
#pragma once

#include "core/events.h"
#include "sqlite.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fs {

constexpr int kFormatVersion = 1;
constexpr int32_t kApplicationId = 0x46525347; // "FRSG"
constexpr const char* kSessionExtension = ".fragscope";

// Creates the schema of format v1 in an empty database (used by ingest only).
void createSchema(Db& db);
// Creates the tables of format v1 that a session written by an older fragscope lacks (tables
// added since, such as videos): for writers that add to a finished session.
void createMissingTables(Db& db);
// Creates the indexes that time- and address-range queries need (end of ingest).
void createIndexes(Db& db);
// Every table the format defines, in documentation order (tests check the docs cover them).
const std::vector<std::string>& schemaTables();

struct HealthSummary
{
    int64_t droppedRecords = 0;
    bool endedAbruptly = false;
    bool recording = false;                   // a writer is still appending (live session)
    std::map<std::string, int64_t> anomalies; // kind -> count
    std::vector<std::string> warnings;        // capture_health rows of kind 'warning'
    int64_t anomalyTotal() const;
};

// A span a flight recorder kept (the windows table; record/attach --keep). A session without
// windows holds the whole run.
struct RecordedWindow
{
    int64_t beginNs = 0;
    int64_t endNs = 0;
    std::string trigger;
    int64_t events = 0;
};

struct SessionSummary
{
    int formatVersion = 0;
    bool synthetic = false;
    std::vector<std::string> sources;
    std::vector<DeviceInfo> devices;
    TimeAxis timeAxis = TimeAxis::Nanoseconds;
    bool addressViewAvailable = true;
    int64_t timeBegin = 0;
    int64_t timeEnd = 0;
    int64_t events = 0;
    int64_t regions = 0;
    int64_t allocations = 0;
    int64_t kernels = 0;
    int64_t graphLaunches = 0;
    int64_t frames = 0;
    int64_t frameMetrics = 0;
    int64_t ooms = 0;
    HealthSummary health;
    std::map<std::string, std::string> meta;
    // Empty: the whole run was recorded; else only these spans (in time order).
    std::vector<RecordedWindow> windows;
};

// A session opened for reading. Opening validates the magic, the format version and the file's
// integrity; every failure is a SessionError whose what() is "FILE: problem".
class Session
{
public:
    // integrityCheck=false skips PRAGMA quick_check: for re-reading a file that a live recording
    // is still writing several times a second (its final read checks it).
    // openFlags are added to SQLITE_OPEN_READONLY: SQLITE_OPEN_NOMUTEX for a connection that
    // only ever one thread uses (no per-call mutex; loadScene reads millions of rows through it).
    static Session open(const std::string& path, bool integrityCheck = true, int openFlags = 0);
    // Another read-only connection, used by one thread, to a file this process already opened
    // with open(): no checks (the engine reads a long table on two connections at once).
    static Session openUnchecked(const std::string& path);

    const std::string& path() const { return db_.path(); }
    // A read transaction: every read until commitRead() sees the same commit, even while a
    // recorder keeps committing (WAL readers see a fixed snapshot).
    void beginRead();
    void commitRead();
    std::string meta(const std::string& key, const std::string& fallback = {}) const;
    // exact=false: for a file a recording is still writing, read several times a second. The
    // table counts stay 0 (the caller counts what it read) and the event count and time range
    // come from the last commit's meta keys instead of table scans, when the writer left them.
    SessionSummary summary(bool exact = true) const;
    // The number of allocations without counting rows: ingest numbers them 1, 2, ... in
    // allocation order, so it is the largest id (an index lookup).
    int64_t allocationCount() const;
    // Text of an interned string (empty when unknown).
    std::string string(StringId id) const;

private:
    // The connection: only core/store runs SQL (SessionAccess, session_access.h; tests read raw
    // rows through store::debugQuery).
    friend struct SessionAccess;
    Db& db() { return db_; }
    const Db& db() const { return db_; }
    explicit Session(Db db) : db_(std::move(db)) {}
    Db db_;
};

// Whether the process that wrote a session in state 'recording' is still alive.
bool writerAlive(const std::string& writerPid, const std::string& writerHost);

} // namespace fs
