// The one writer of session files. Every source (simulator, agent stream, importers) calls
// begin(), add() for each event (out of order within a bounded window), then end().
#pragma once

#include "core/event_sink.h"
#include "core/events.h"
#include "core/mapped_pieces.h"
#include "session.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace fs {

namespace store {
class SqlPipe;
}

struct IngestOptions
{
    std::string path;                   // output .fragscope file (replaced if it exists)
    std::string sourceKind = "unknown"; // simulator, agent, pytorch-snapshot, kineto, nsys-sqlite
    std::string sourcePath;             // input file or command line, for the sources table
    bool synthetic = false;             // simulated data: never presented as measurements
    TimeAxis timeAxis = TimeAxis::Nanoseconds;
    bool addressViewAvailable = true;
    // Events may arrive out of order by up to this much (event time); older ones are released
    // in time order. 0 for sources that are already ordered.
    int64_t reorderWindowNs = 0;
    size_t reorderMaxEvents = 1 << 20; // hard bound on buffered events (memory)
    int commitIntervalMs = 1000;       // commit at least this often
    // false for one-shot conversions (importers): no journal, no fsync, one transaction. A file
    // left by a killed writer is then not a session (abort() removes it on errors); the finished
    // file is the same.
    bool durable = true;
    // Ordered one-shot sources (imports): add() hands events in batches to a second thread that
    // processes and writes them while the source decodes the next ones. Every other call waits
    // for that thread to catch up first, so the file is the same as without it. Used only with
    // durable = false and reorderWindowNs = 0.
    bool writerThread = false;
    // SQLite's work (binding and stepping every statement) runs on a thread of its own, in
    // order, while the next events are processed (core/store/sql_pipe.h). false runs it on the
    // thread that processes; the file is the same either way (tst_ingest compares them).
    bool sqlThread = true;
    bool expectRegions = true;       // allocations outside any region are anomalies
    bool aliveAtEndIsAnomaly = true; // e.g. false for allocator snapshots
    // A marker whose message matches opens that frame (the first capture group is N).
    std::string framePattern = R"(^\s*frame\s*[ =:]\s*(\d+)\s*$)";
    // end() switches a durable file back from WAL to one plain file, which SQLite allows only
    // while no other connection is open on it (a live viewer opens one per refresh): it retries
    // this long, then leaves the finished file in WAL mode.
    int leaveWalWaitMs = 10000;
};

struct IngestStats
{
    int64_t events = 0;
    int64_t allocations = 0;
    int64_t regions = 0;
    int64_t anomalies = 0;
    int64_t commits = 0;
    int64_t lateEvents = 0;
    int64_t timeBegin = 0;
    int64_t timeEnd = 0;
};

class Ingest final : public EventSink
{
public:
    explicit Ingest(IngestOptions opts);
    ~Ingest() override;
    Ingest(const Ingest&) = delete;
    Ingest& operator=(const Ingest&) = delete;

    void begin();
    StringId intern(std::string_view s) override;
    // A call stack (outermost last); returns its id for Event::aux of an Alloc.
    StackId internStack(const std::vector<StringId>& frames) override;
    void addDevice(const DeviceInfo& d) override;
    void addProcess(const ProcessInfo& p) override;
    void addSource(const std::string& kind, const std::string& path,
                   const std::string& detail = {});
    void setMeta(const std::string& key, const std::string& value) override;
    void add(const Event& e) override;
    // A per-frame metric computed elsewhere (CSV/JSON import) or decoded by a source.
    void addFrameMetric(int64_t frame, const std::string& name, double value,
                        const std::string& source) override;
    void addSimTruth(const SimTruthFrame& t) override;
    // A span a flight recorder kept (capture/recorder/flight_recorder.h): the windows table.
    void addWindow(int64_t beginNs, int64_t endNs, const std::string& trigger,
                   int64_t events) override;
    // A note for the session's capture health (incomplete input, missing tables, ...).
    void warn(const std::string& message) override;
    void health(const std::string& kind, int64_t value, const std::string& detail = {},
                int64_t time = kNoTime);
    // Commits if the commit interval has passed; live sources call it when idle.
    void tick();
    // Releases every buffered event (the source knows nothing older can still come).
    void drain();
    // Finishes the session: pairs what is left, builds indexes, marks it complete.
    void end();
    // The source died before it could say it was done (e.g. the target was SIGKILLed): end()
    // still finishes the file but leaves state 'ended_abruptly' so viewers say so.
    void markEndedAbruptly(const std::string& why);
    // Abandons the session and removes the output file (bad input: no partial file).
    void abort();

    // Complete after end(); while a writer thread runs, the figures other than events lag.
    const IngestStats& stats() const { return stats_; }
    // Called every ~64k events with the number processed so far.
    void setProgress(std::function<void(int64_t)> cb) { progress_ = std::move(cb); }

private:
    void leaveWal(); // end(): WAL -> one plain file, waiting for other connections to close
    struct LiveAlloc
    {
        int64_t id;
        uint64_t size;
        uint64_t requested;
        int64_t time;
        int64_t regionId;
        StackId stack;
        uint64_t notes; // Event::aux2 of the Alloc: user_metadata, compile_context string ids
        StringId tag;
        uint32_t stream;
        bool persisted;
    };
    struct LiveRegion
    {
        int64_t id;
        uint64_t size;
        Level level;
    };
    struct Pending
    {
        Event e;
        uint64_t seq;
    };
    void process(const Event& e, uint64_t seq);
    void release(int64_t upTo);
    void onAlloc(const Event& e, uint64_t seq);
    void onFree(const Event& e, uint64_t seq);
    void onRegion(const Event& e, uint64_t seq);
    void onMarker(const Event& e);
    void onGraph(const Event& e, uint64_t seq);
    void writeAllocation(uint32_t device, Level level, uint64_t addr, const LiveAlloc& a,
                         int64_t freeTime);
    // Allocation rows wait in allocRows_ and are inserted kAllocBatch at a time with one
    // multi-row INSERT (SQLite's per-statement cost dominated single-row inserts); flushed
    // before every commit and before the end, so the file never lacks a row it should have.
    void flushAllocations();
    // Kernel launches likewise wait in kernelRows_ (arrival order) for one kKernelBatch INSERT.
    void flushKernels();
    // The writer thread (IngestOptions::writerThread; core/store/ingest_writer.cpp).
    struct Writer;
    std::unique_ptr<Writer> writer_;
    void startWriter();
    void queueEvent(const Event& e, uint64_t seq);
    // Waits until the writer thread has processed every event queued so far; rethrows its error.
    void sync();
    // sync(), then ends the thread (discard: drops what is queued instead, after an error).
    void stopWriter(bool discard = false);
    void writerLoop();
    void anomaly(std::string_view kind, const Event& e, uint64_t seq,
                 const std::string& detail = {});
    void commit();
    void maybeCommit();
    void closeFrame(int64_t t);
    std::map<uint64_t, LiveAlloc>& live(uint32_t device, Level level);
    int64_t regionAt(uint32_t device, Level level, uint64_t addr, uint64_t size);

    IngestOptions opts_;
    std::unique_ptr<Db> db_;
    // Owns the prepared statements: declared after db_, so it goes first.
    std::unique_ptr<store::SqlPipe> pipe_;
    struct Statements;
    std::unique_ptr<Statements> st_;
    // Ends the statement pipe (sync() first unless discard); the connection is the caller's after.
    void stopPipe(bool discard = false);
    IngestStats stats_;
    bool begun_ = false;
    bool ended_ = false;
    bool abrupt_ = false;
    bool haveTime_ = false;
    uint64_t seq_ = 0;
    // Events in the reorder window: pending_[pendingHead_, end); those before pendingHead_ are
    // released and dropped in bulk; [pendingHead_, pendingSorted_) is sorted (release()).
    std::vector<Pending> pending_;
    size_t pendingHead_ = 0;
    size_t pendingSorted_ = 0;
    size_t buffered() const { return pending_.size() - pendingHead_; }
    size_t releaseAt_ = 4096; // buffered() that triggers the next release
    int64_t maxSeen_ = kNoTime;
    int64_t released_ = kNoTime;
    std::unordered_map<std::string, StringId> strings_;
    std::vector<std::string> stringText_;
    std::map<std::vector<StringId>, StackId> stacks_;
    std::map<std::pair<uint32_t, int>, std::map<uint64_t, LiveAlloc>> live_;
    // Live regions per (device, level): a level's regions host that level's allocations, and a
    // framework heap may lie inside a driver allocation without overlapping anything.
    std::map<std::pair<uint32_t, int>, std::map<uint64_t, LiveRegion>> regions_;
    // Mapped pieces of each expandable region: region id -> pieces tagged with their
    // region_mappings row.
    std::map<int64_t, MappedPieces<int64_t>> mappings_;
    void onMapping(const Event& e, uint64_t seq);
    std::unordered_map<uint64_t, uint64_t> recentlyFreed_; // addr -> seq
    // CUDA graphs: live execs ((device, exec id) -> graph_execs row), destroyed ones (a second
    // destroy is an anomaly), and the pool ids regions and captures named.
    std::map<std::pair<uint32_t, uint64_t>, int64_t> liveExecs_;
    std::set<std::pair<uint32_t, uint64_t>> destroyedExecs_;
    std::unordered_set<uint64_t> knownPools_;
    std::vector<std::tuple<uint32_t, int, uint64_t, int64_t>> sinceCommit_;
    struct AllocRow
    {
        LiveAlloc a;
        uint64_t addr;
        int64_t freeTime;
        uint32_t device;
        Level level;
    };
    std::vector<AllocRow> allocRows_;
    std::vector<Event> kernelRows_;
    int64_t allocSeq_ = 0;
    int64_t regionSeq_ = 0;
    int64_t mappingSeq_ = 0;    // region_mappings and graph_execs ids, given here: the statement
    int64_t execSeq_ = 0;       // pipe runs the INSERT later
    int64_t openFrame_ = -1;    // frame opened by a mark, waiting for its end
    int64_t currentFrame_ = -1; // frame that metric marks without frame= belong to
    std::chrono::steady_clock::time_point lastCommit_;
    std::function<void(int64_t)> progress_;
    struct FrameMatcher;
    std::unique_ptr<FrameMatcher> frameMatcher_;
};

// Parses "metric NAME=VALUE [NAME=VALUE…] [frame=N]"; returns false when msg is not a metric.
bool parseMetricMessage(std::string_view msg, std::vector<std::pair<std::string, double>>& out,
                        int64_t& frame);

} // namespace fs
