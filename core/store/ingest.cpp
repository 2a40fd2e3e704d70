#include "ingest.h"
#include "ingest_writer.h"
#include "sql_pipe.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <regex>
#include <thread>
#include <unistd.h>

#include <fmt/format.h>

#include "fragscope_version.h"

namespace fs {

struct Ingest::Statements
{
    using S = store::PipedStmt;
    S allocBatch;  // kAllocBatch rows of allocations in one INSERT
    S kernelBatch; // kKernelBatch kernel launches in one INSERT
    S string, region, regionDestroy, mapping, unmapping, alloc, allocFree, stack, kernel, graph,
        marker, frame, frameEnd, metric, oom, health, anomaly, meta, pendingFree, graphCapture,
        graphExec, graphExecDestroy, source, device, process, simFrame, simKernel, simCause, window,
        commit, begin;
};

struct Ingest::FrameMatcher
{
    std::regex re;
};

namespace {

// The two tables that take most rows get them in multi-row INSERTs (SQLite's per-statement
// cost dominated single-row inserts): a full batch in one statement, a partial one row by row.
constexpr int kAllocColumns = 14;
constexpr size_t kAllocBatch = 1024;
constexpr int kKernelColumns = 14;
constexpr size_t kKernelBatch = 256;

const char* const kAllocInsert = "INSERT INTO allocations(id, device, level, region_id, address,"
                                 " size, requested_size, stream, alloc_ns, free_ns, tag, stack,"
                                 " user_metadata, compile_context) VALUES";
const char* const kKernelInsert =
    "INSERT INTO kernels(device, stream, start_ns, end_ns, name, correlation_id, grid_x, grid_y,"
    " grid_z, block_x, block_y, block_z, graph_id, graph_node_id) VALUES";

std::string multiRowInsert(const char* head, int columns, size_t rows)
{
    std::string sql = head;
    for (size_t r = 0; r < rows; ++r) {
        sql += r ? ",(" : "(";
        for (int c = 0; c < columns; ++c)
            sql += c ? ",?" : "?";
        sql += ')';
    }
    return sql;
}

// Binds rows (bindRow(stmt, first parameter - 1, row)) and runs them: one statement when there
// are batch rows, else one run per row; then empties rows.
template <class Row, class Bind>
void insertRows(std::vector<Row>& rows, store::PipedStmt& one, store::PipedStmt& many, size_t batch,
                int columns, Bind bindRow)
{
    if (rows.size() == batch) {
        for (size_t i = 0; i < rows.size(); ++i)
            bindRow(many, static_cast<int>(i) * columns, rows[i]);
        many.run();
    } else {
        for (const Row& r : rows) {
            bindRow(one, 0, r);
            one.run();
        }
    }
    rows.clear();
}

std::string nowIso()
{
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    return buf;
}

} // namespace

bool parseMetricMessage(std::string_view msg, std::vector<std::pair<std::string, double>>& out,
                        int64_t& frame)
{
    out.clear();
    frame = -1;
    auto skip = [&] {
        while (!msg.empty() && (msg.front() == ' ' || msg.front() == '\t'))
            msg.remove_prefix(1);
    };
    skip();
    if (!msg.starts_with("metric") || msg.size() < 7 || (msg[6] != ' ' && msg[6] != '\t'))
        return false;
    msg.remove_prefix(6);
    while (true) {
        skip();
        if (msg.empty()) break;
        const size_t sp = msg.find_first_of(" \t");
        const std::string_view tok = msg.substr(0, sp);
        msg.remove_prefix(sp == std::string_view::npos ? msg.size() : sp);
        const size_t eq = tok.find('=');
        if (eq == std::string_view::npos || eq == 0 || eq + 1 == tok.size()) return false;
        const std::string_view name = tok.substr(0, eq);
        const std::string_view val = tok.substr(eq + 1);
        if (name == "frame") {
            int64_t f = 0;
            auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), f);
            if (ec != std::errc() || p != val.data() + val.size() || f < 0) return false;
            frame = f;
            continue;
        }
        double v = 0;
        auto [p, ec] = std::from_chars(val.data(), val.data() + val.size(), v);
        if (ec != std::errc() || p != val.data() + val.size()) return false;
        out.emplace_back(std::string(name), v);
    }
    return !out.empty();
}

Ingest::Ingest(IngestOptions opts) : opts_(std::move(opts)) {}

Ingest::~Ingest()
{
    // A source that throws without calling end() or abort() leaves a session marked
    // 'recording'; commit what was processed so the file keeps it.
    if (begun_ && !ended_ && db_) {
        try {
            stopWriter();
            commit();
            stopPipe();
        } catch (...) {
        }
    }
    stopWriter(true); // an error above may have left it running
    stopPipe(true);
}

void Ingest::stopPipe(bool discard)
{
    if (pipe_) pipe_->stop(discard);
}

void Ingest::begin()
{
    namespace stdfs = std::filesystem;
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        stdfs::remove(opts_.path + suffix, ec);
    // One thread at a time uses the connection (the statement pipe's, or the caller's after
    // SqlPipe::sync()): no SQLite mutex.
    db_ = std::make_unique<Db>(opts_.path,
                               SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX);
    Db& db = *db_;
    db.exec("PRAGMA page_size=8192");
    db.exec(opts_.durable ? "PRAGMA journal_mode=WAL" : "PRAGMA journal_mode=OFF");
    db.exec(opts_.durable ? "PRAGMA synchronous=NORMAL" : "PRAGMA synchronous=OFF");
    db.exec("PRAGMA cache_size=-131072");
    db.exec("PRAGMA wal_autocheckpoint=16384");
    // After each checkpoint the log shrinks back to 16 MiB instead of keeping its 128 MiB
    // high-water mark: the file and its log on disk then say how large the session is (a flight
    // recorder's --max-size reads them).
    db.exec("PRAGMA journal_size_limit=16777216");
    db.exec("PRAGMA temp_store=MEMORY");
    db.exec("PRAGMA threads=2");
    db.exec("BEGIN");
    createSchema(db);
    // Rows arrive in about time order: keeping the (time-ordered) indexes as they arrive
    // appends to them, on the statement pipe's thread, instead of sorting every row again in
    // end() on the caller's (153 MiB snapshot import: -8 % time, +4 % file; a recording's stop
    // no longer waits for the sort: bench_ingest's end 0.8 s -> 0.25 s at 2 M events).
    createIndexes(db);
    frameMatcher_ = std::make_unique<FrameMatcher>();
    try {
        frameMatcher_->re =
            std::regex(opts_.framePattern, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error& e) {
        throw SessionError(opts_.path,
                           "invalid frame pattern '" + opts_.framePattern + "': " + e.what());
    }
    pipe_ = std::make_unique<store::SqlPipe>(opts_.sqlThread);
    auto prepare = [&](std::string_view sql) { return pipe_->add(db.prepare(sql)); };
    st_ = std::make_unique<Statements>();
    auto& s = *st_;
    s.string = prepare("INSERT INTO strings(id, text) VALUES(?1, ?2)");
    s.region = prepare(
        "INSERT INTO regions(id, device, level, kind, address, size, create_ns,"
        " stream, pool_id, segment_type, expandable) VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11)");
    s.regionDestroy = prepare("UPDATE regions SET destroy_ns=?2 WHERE id=?1");
    s.mapping = prepare(
        "INSERT INTO region_mappings(region_id, address, size, map_ns, id) VALUES(?1,?2,?3,?4,?5)");
    s.unmapping = prepare("UPDATE region_mappings SET unmap_ns=?2 WHERE id=?1");
    s.alloc = prepare(multiRowInsert(kAllocInsert, kAllocColumns, 1));
    s.allocBatch = prepare(multiRowInsert(kAllocInsert, kAllocColumns, kAllocBatch));
    allocRows_.reserve(kAllocBatch);
    s.allocFree = prepare("UPDATE allocations SET free_ns=?2 WHERE id=?1");
    s.stack = prepare("INSERT INTO stacks(id, depth, frame) VALUES(?1,?2,?3)");
    s.kernel = prepare(multiRowInsert(kKernelInsert, kKernelColumns, 1));
    s.kernelBatch = prepare(multiRowInsert(kKernelInsert, kKernelColumns, kKernelBatch));
    kernelRows_.reserve(kKernelBatch);
    s.graph =
        prepare("INSERT INTO graph_launches(device, stream, graph_id, exec_id, start_ns, end_ns)"
                " VALUES(?1,?2,?3,?4,?5,?6)");
    s.graphCapture = prepare("INSERT INTO graph_captures(device, stream, graph_id, name,"
                             " pool_id, begin_ns, end_ns) VALUES(?1,?2,?3,?4,?5,?6,?7)");
    s.graphExec = prepare("INSERT INTO graph_execs(device, graph_id, exec_id, instantiate_ns, id)"
                          " VALUES(?1,?2,?3,?4,?5)");
    s.graphExecDestroy = prepare("UPDATE graph_execs SET destroy_ns=?2 WHERE id=?1");
    s.marker = prepare("INSERT INTO markers(time_ns, end_ns, message, device) VALUES(?1,?2,?3,?4)");
    s.frame = prepare("INSERT OR REPLACE INTO frames(idx, start_ns, end_ns) VALUES(?1,?2,?3)");
    s.frameEnd = prepare("UPDATE frames SET end_ns=?2 WHERE idx=?1");
    s.metric = prepare(
        "INSERT OR REPLACE INTO frame_metrics(frame, name, value, source) VALUES(?1,?2,?3,?4)");
    s.oom = prepare(
        "INSERT INTO ooms(time_ns, device, level, stream, requested_bytes, device_free_bytes)"
        " VALUES(?1,?2,?3,?4,?5,?6)");
    s.pendingFree = prepare("INSERT INTO pending_frees(device, level, address, size, stream,"
                            " request_ns, complete_ns) VALUES(?1,?2,?3,?4,?5,?6,?7)");
    s.health =
        prepare("INSERT INTO capture_health(time_ns, kind, value, detail) VALUES(?1,?2,?3,?4)");
    s.window =
        prepare("INSERT INTO windows(begin_ns, end_ns, trigger, events) VALUES(?1,?2,?3,?4)");
    s.anomaly = prepare(
        "INSERT INTO anomalies(time_ns, kind, device, level, address, size, event_seq, detail)"
        " VALUES(?1,?2,?3,?4,?5,?6,?7,?8)");
    s.meta = prepare("INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
    s.source = prepare("INSERT INTO sources(kind, path, detail) VALUES(?1,?2,?3)");
    s.device = prepare(
        "INSERT OR REPLACE INTO devices(id, name, capacity_bytes, uuid) VALUES(?1,?2,?3,?4)");
    s.process =
        prepare("INSERT OR REPLACE INTO processes(pid, command_line, start_ns) VALUES(?1,?2,?3)");
    s.simFrame = prepare("INSERT OR REPLACE INTO sim_truth_frames(frame, attention_calls,"
                         " workspace_failures, ooms) VALUES(?1,?2,?3,?4)");
    s.simKernel = prepare("INSERT OR REPLACE INTO sim_truth_kernels(frame, kernel, calls,"
                          " lowers_coherence) VALUES(?1,?2,?3,?4)");
    s.simCause = prepare("INSERT OR REPLACE INTO sim_truth_causes(frame, mechanism, cause_frame,"
                         " quality_factor) VALUES(?1,?2,?3,?4)");
    s.commit = prepare("COMMIT");
    s.begin = prepare("BEGIN");
    pipe_->start();
    strings_.emplace(std::string(), kNoString);
    stringText_.emplace_back();
    s.string.bind(1, int64_t{0}).bind(2, std::string_view()).run();

    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    setMeta("magic", "fragscope");
    setMeta("format_version", std::to_string(kFormatVersion));
    setMeta("created_at", nowIso());
    setMeta("created_by", std::string("fragscope ") + FRAGSCOPE_VERSION);
    setMeta("synthetic", opts_.synthetic ? "1" : "0");
    setMeta("time_axis", opts_.timeAxis == TimeAxis::Ordinal ? "ordinal" : "ns");
    setMeta("address_view", opts_.addressViewAvailable ? "available" : "unavailable");
    setMeta("state", "recording");
    setMeta("writer_pid", std::to_string(::getpid()));
    setMeta("writer_host", host);
    addSource(opts_.sourceKind, opts_.sourcePath);
    begun_ = true;
    commit();
    if (opts_.writerThread && !opts_.durable && opts_.reorderWindowNs <= 0) startWriter();
}

void Ingest::setMeta(const std::string& key, const std::string& value)
{
    sync();
    st_->meta.bind(1, key).bind(2, value).run();
}

void Ingest::addSource(const std::string& kind, const std::string& path, const std::string& detail)
{
    sync();
    st_->source.bind(1, kind).bind(2, path).bind(3, detail).run();
}

StringId Ingest::intern(std::string_view s)
{
    auto it = strings_.find(std::string(s));
    if (it != strings_.end()) return it->second;
    sync(); // the writer thread reads stringText_ and uses the connection
    const StringId id{static_cast<uint32_t>(strings_.size())};
    strings_.emplace(std::string(s), id);
    stringText_.emplace_back(s);
    st_->string.bind(1, id.value).bind(2, s).run();
    return id;
}

StackId Ingest::internStack(const std::vector<StringId>& frames)
{
    auto it = stacks_.find(frames);
    if (it != stacks_.end()) return it->second;
    sync();
    const StackId id{static_cast<uint32_t>(stacks_.size() + 1)};
    stacks_.emplace(frames, id);
    for (size_t i = 0; i < frames.size(); ++i)
        st_->stack.bind(1, id.value)
            .bind(2, static_cast<int64_t>(i))
            .bind(3, frames[i].value)
            .run();
    return id;
}

void Ingest::addDevice(const DeviceInfo& d)
{
    sync();
    st_->device.bind(1, d.id).bind(2, d.name).bind(3, d.capacityBytes).bind(4, d.uuid).run();
}

void Ingest::addProcess(const ProcessInfo& p)
{
    sync();
    st_->process.bind(1, p.pid).bind(2, p.commandLine).bind(3, p.startTime).run();
}

void Ingest::warn(const std::string& message)
{
    sync();
    health("warning", 0, message);
}

void Ingest::health(const std::string& kind, int64_t value, const std::string& detail, int64_t time)
{
    sync();
    auto& st = st_->health;
    if (time == kNoTime)
        st.bindNull(1);
    else
        st.bind(1, time);
    st.bind(2, kind).bind(3, value).bind(4, detail).run();
}

void Ingest::addWindow(int64_t beginNs, int64_t endNs, const std::string& trigger, int64_t events)
{
    sync();
    st_->window.bind(1, beginNs).bind(2, endNs).bind(3, trigger).bind(4, events).run();
}

void Ingest::addFrameMetric(int64_t frame, const std::string& name, double value,
                            const std::string& source)
{
    sync();
    st_->metric.bind(1, frame).bind(2, name).bind(3, value).bind(4, source).run();
}

void Ingest::addSimTruth(const SimTruthFrame& t)
{
    sync();
    auto& s = *st_;
    s.simFrame.bind(1, t.frame)
        .bind(2, t.attentionCalls)
        .bind(3, t.workspaceFailures)
        .bind(4, t.ooms)
        .run();
    for (const SimTruthFrame::Kernel& x : t.fallbackKernels) {
        s.simKernel.bind(1, t.frame)
            .bind(2, x.name)
            .bind(3, x.calls)
            .bind(4, x.lowersCoherence ? 1 : 0)
            .run();
    }
    for (const SimTruthFrame::Cause& x : t.causes) {
        s.simCause.bind(1, t.frame)
            .bind(2, x.mechanism)
            .bind(3, x.causeFrame)
            .bind(4, x.qualityFactor)
            .run();
    }
}

void Ingest::add(const Event& e)
{
    ++stats_.events;
    if (progress_ && (stats_.events & 0xffff) == 0) progress_(stats_.events);
    const uint64_t seq = seq_++;
    if (writer_) {
        queueEvent(e, seq);
        return;
    }
    if (opts_.reorderWindowNs <= 0) {
        process(e, seq);
        maybeCommit();
        return;
    }
    if (maxSeen_ == kNoTime || e.time > maxSeen_) maxSeen_ = e.time;
    pending_.push_back({e, seq});
    if (buffered() >= releaseAt_) {
        release(maxSeen_ - opts_.reorderWindowNs);
        if (buffered() >= opts_.reorderMaxEvents) // bounded memory: release the older half
            release(pending_[pendingHead_ + buffered() / 2].e.time);
        // When the window holds more than 4096 events, sorting on every add would be quadratic:
        // wait until the buffer has doubled (amortised O(log n) per event).
        releaseAt_ = std::min(std::max<size_t>(4096, buffered() * 2),
                              std::max<size_t>(opts_.reorderMaxEvents, 1));
    }
    maybeCommit();
}

void Ingest::release(int64_t upTo)
{
    // pending_[pendingHead_, pendingSorted_) is in (time, seq) order from the last release; only
    // what arrived since is sorted, then merged in where it overlaps (events arrive nearly in
    // order). seq is unique, so this is the one (time, seq) order a full sort would give. Sorting
    // and shifting the whole buffer on every release was half of a recording's ingest time.
    auto before = [](const Pending& a, const Pending& b) {
        return a.e.time != b.e.time ? a.e.time < b.e.time : a.seq < b.seq;
    };
    const auto head = pending_.begin() + static_cast<std::ptrdiff_t>(pendingHead_);
    const auto mid = pending_.begin() + static_cast<std::ptrdiff_t>(pendingSorted_);
    std::sort(mid, pending_.end(), before);
    if (mid != head && mid != pending_.end() && before(*mid, *std::prev(mid)))
        std::inplace_merge(std::upper_bound(head, mid, *mid, before), mid, pending_.end(), before);
    pendingSorted_ = pending_.size();
    size_t n = pendingHead_;
    while (n < pending_.size() && pending_[n].e.time <= upTo) {
        process(pending_[n].e, pending_[n].seq);
        ++n;
    }
    pendingHead_ = n;
    // Released events leave the front in bulk, once they are at least half the vector.
    if (pendingHead_ * 2 >= pending_.size()) {
        pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(n));
        pendingSorted_ -= n;
        pendingHead_ = 0;
    }
}

void Ingest::drain()
{
    sync();
    if (buffered() > 0) release(std::numeric_limits<int64_t>::max());
}

void Ingest::process(const Event& e, uint64_t seq)
{
    if (released_ != kNoTime && e.time < released_ && opts_.reorderWindowNs > 0) {
        ++stats_.lateEvents;
        anomaly(anomaly::LateEvent, e, seq, "arrived after the reorder window had passed it");
    }
    if (released_ == kNoTime || e.time > released_) released_ = e.time;
    if (!haveTime_) {
        stats_.timeBegin = stats_.timeEnd = e.time;
        haveTime_ = true;
    }
    stats_.timeBegin = std::min(stats_.timeBegin, e.time);
    stats_.timeEnd = std::max({stats_.timeEnd, e.time, e.endTime});
    auto& s = *st_;
    switch (e.type) {
    case EventType::Alloc:
        onAlloc(e, seq);
        break;
    case EventType::Free:
        onFree(e, seq);
        break;
    case EventType::RegionCreate:
    case EventType::RegionDestroy:
    case EventType::RegionMap:
    case EventType::RegionUnmap:
        onRegion(e, seq);
        break;
    case EventType::Kernel:
        kernelRows_.push_back(e);
        if (kernelRows_.size() == kKernelBatch) flushKernels();
        break;
    case EventType::GraphLaunch:
        s.graph.bind(1, e.device)
            .bind(2, e.stream)
            .bind(3, e.aux)
            .bind(4, e.aux2)
            .bind(5, e.time)
            .bind(6, e.endTime)
            .run();
        break;
    case EventType::Mark:
    case EventType::Range:
        onMarker(e);
        break;
    case EventType::GraphCapture:
    case EventType::GraphInstantiate:
    case EventType::GraphExecDestroy:
        onGraph(e, seq);
        break;
    case EventType::Oom:
        s.oom.bind(1, e.time)
            .bind(2, e.device)
            .bind(3, static_cast<int>(e.level))
            .bind(4, e.stream)
            .bind(5, e.size)
            .bind(6, e.aux)
            .run();
        break;
    case EventType::PendingFree:
        s.pendingFree.bind(1, e.device)
            .bind(2, static_cast<int>(e.level))
            .bind(3, e.address)
            .bind(4, e.size)
            .bind(5, e.stream)
            .bind(6, e.time);
        if (e.endTime != kNoTime) s.pendingFree.bind(7, e.endTime);
        s.pendingFree.run();
        break;
    case EventType::Health:
        health(e.name.value < stringText_.size() ? stringText_[e.name.value] : "unknown",
               static_cast<int64_t>(e.aux), {}, e.time);
        break;
    }
}

std::map<uint64_t, Ingest::LiveAlloc>& Ingest::live(uint32_t device, Level level)
{
    return live_[{device, static_cast<int>(level)}];
}

int64_t Ingest::regionAt(uint32_t device, Level level, uint64_t addr, uint64_t size)
{
    auto dit = regions_.find({device, static_cast<int>(level)});
    if (dit == regions_.end() || dit->second.empty()) return -1;
    auto it = dit->second.upper_bound(addr);
    if (it == dit->second.begin()) return -1;
    --it;
    if (addr >= it->first && addr + size <= it->first + it->second.size) return it->second.id;
    return -1;
}

void Ingest::onAlloc(const Event& e, uint64_t seq)
{
    auto& m = live(e.device, e.level);
    // Event::aux of an Alloc carries the stack id (Ingest::internStack).
    LiveAlloc a{
        ++allocSeq_, e.size, e.requestedSize, e.time, -1, StackId{static_cast<uint32_t>(e.aux)},
        e.aux2,      e.name, e.stream,        false};
    ++stats_.allocations;
    // Overlap with a live allocation of the same level: record it, end the old one here.
    auto it = m.lower_bound(e.address);
    auto overlaps = [&](std::map<uint64_t, LiveAlloc>::iterator j) {
        return j != m.end() && j->first < e.address + std::max<uint64_t>(e.size, 1) &&
               e.address < j->first + std::max<uint64_t>(j->second.size, 1);
    };
    std::vector<std::map<uint64_t, LiveAlloc>::iterator> hits;
    if (it != m.begin() && overlaps(std::prev(it))) hits.push_back(std::prev(it));
    for (auto j = it; overlaps(j); ++j)
        hits.push_back(j);
    for (auto j : hits) {
        anomaly(anomaly::Overlap, e, seq,
                fmt::format("overlaps live allocation at {:#x} of {} B", j->first, j->second.size));
        writeAllocation(e.device, e.level, j->first, j->second, e.time);
        m.erase(j);
    }
    // A block inside a region always belongs to it (an nsys export has pool regions but plain
    // cudaMalloc blocks outside any); only sources that expect regions flag the others.
    a.regionId = regionAt(e.device, e.level, e.address, e.size);
    if (a.regionId < 0 && opts_.expectRegions) anomaly(anomaly::OutsideRegion, e, seq);
    m.emplace(e.address, a);
    if (opts_.durable)
        sinceCommit_.emplace_back(e.device, static_cast<int>(e.level), e.address, a.id);
    recentlyFreed_.erase(e.address);
}

void Ingest::onFree(const Event& e, uint64_t seq)
{
    auto& m = live(e.device, e.level);
    auto it = m.find(e.address);
    if (it == m.end()) {
        if (e.aux != 0 && !knownPools_.count(e.aux))
            anomaly(anomaly::UnknownPool, e, seq,
                    fmt::format("pool {:#x} appears only in frees", e.aux));
        else
            anomaly(recentlyFreed_.count(e.address) ? anomaly::DoubleFree : anomaly::UnknownFree, e,
                    seq);
        return;
    }
    if (e.size != 0 && e.size != it->second.size)
        anomaly(anomaly::SizeMismatch, e, seq,
                "allocated " + std::to_string(it->second.size) + " B, freed " +
                    std::to_string(e.size) + " B");
    writeAllocation(e.device, e.level, e.address, it->second, e.time);
    m.erase(it);
    if (recentlyFreed_.size() > (1u << 16)) recentlyFreed_.clear();
    recentlyFreed_[e.address] = seq;
}

void Ingest::writeAllocation(uint32_t device, Level level, uint64_t addr, const LiveAlloc& a,
                             int64_t freeTime)
{
    if (a.persisted) {
        if (freeTime != kNoTime) st_->allocFree.bind(1, a.id).bind(2, freeTime).run();
        return;
    }
    allocRows_.push_back({a, addr, freeTime, device, level});
    if (allocRows_.size() == kAllocBatch) flushAllocations();
}

void Ingest::flushAllocations()
{
    // In id order: the rows then mostly append to the table's b-tree.
    std::sort(allocRows_.begin(), allocRows_.end(),
              [](const AllocRow& x, const AllocRow& y) { return x.a.id < y.a.id; });
    insertRows(allocRows_, st_->alloc, st_->allocBatch, kAllocBatch, kAllocColumns,
               [](store::PipedStmt& s, int base, const AllocRow& r) {
                   const LiveAlloc& a = r.a;
                   s.bind(base + 1, a.id)
                       .bind(base + 2, r.device)
                       .bind(base + 3, static_cast<int>(r.level));
                   if (a.regionId >= 0) s.bind(base + 4, a.regionId);
                   s.bind(base + 5, r.addr).bind(base + 6, a.size);
                   if (a.requested) s.bind(base + 7, a.requested);
                   s.bind(base + 8, a.stream).bind(base + 9, a.time);
                   if (r.freeTime != kNoTime) s.bind(base + 10, r.freeTime);
                   if (a.tag) s.bind(base + 11, a.tag.value);
                   if (a.stack) s.bind(base + 12, a.stack.value);
                   if (a.notes & 0xffffffffu) s.bind(base + 13, a.notes & 0xffffffffu);
                   if (a.notes >> 32) s.bind(base + 14, a.notes >> 32);
               });
}

void Ingest::flushKernels()
{
    insertRows(kernelRows_, st_->kernel, st_->kernelBatch, kKernelBatch, kKernelColumns,
               [](store::PipedStmt& s, int base, const Event& e) {
                   s.bind(base + 1, e.device)
                       .bind(base + 2, e.stream)
                       .bind(base + 3, e.time)
                       .bind(base + 4, e.endTime)
                       .bind(base + 5, e.name.value)
                       .bind(base + 6, e.aux)
                       .bind(base + 7, e.grid[0])
                       .bind(base + 8, e.grid[1])
                       .bind(base + 9, e.grid[2])
                       .bind(base + 10, e.block[0])
                       .bind(base + 11, e.block[1])
                       .bind(base + 12, e.block[2]);
                   if (e.aux2 != 0)
                       s.bind(base + 13, e.aux2 >> 32).bind(base + 14, e.aux2 & 0xffffffffu);
               });
}

void Ingest::onRegion(const Event& e, uint64_t seq)
{
    auto& regs = regions_[{e.device, static_cast<int>(e.level)}];
    auto& s = *st_;
    switch (e.type) {
    case EventType::RegionCreate: {
        auto it = regs.lower_bound(e.address);
        const bool overlapNext = it != regs.end() && it->first < e.address + e.size;
        const bool overlapPrev =
            it != regs.begin() && std::prev(it)->first + std::prev(it)->second.size > e.address;
        if (overlapNext || overlapPrev) {
            anomaly(anomaly::Overlap, e, seq, "region overlaps a live region");
            if (overlapNext && it->first == e.address) regs.erase(it);
        }
        const int64_t id = ++regionSeq_;
        ++stats_.regions;
        if (e.aux != 0) knownPools_.insert(e.aux);
        regs[e.address] = {id, e.size, e.level};
        s.region.bind(1, id)
            .bind(2, e.device)
            .bind(3, static_cast<int>(e.level))
            .bind(4, static_cast<int>(e.regionKind))
            .bind(5, e.address)
            .bind(6, e.size)
            .bind(7, e.time)
            .bind(8, e.stream)
            .bind(9, e.aux);
        if (e.name) s.region.bind(10, e.name.value);
        s.region.bind(11, static_cast<int>(e.flags & 1)).run();
        break;
    }
    case EventType::RegionDestroy: {
        auto it = regs.find(e.address);
        if (it == regs.end()) {
            anomaly(anomaly::UnknownRegion, e, seq, "release of an unknown region");
            return;
        }
        s.regionDestroy.bind(1, it->second.id).bind(2, e.time).run();
        mappings_.erase(it->second.id); // its pieces end with it (the analysis clamps them)
        regs.erase(it);
        break;
    }
    case EventType::RegionMap:
    case EventType::RegionUnmap:
        onMapping(e, seq);
        break;
    default:
        break;
    }
}

// Mapped ranges of an expandable region are kept maximal (core/mapped_pieces.h): each piece is
// one region_mappings row.
void Ingest::onMapping(const Event& e, uint64_t seq)
{
    auto& s = *st_;
    const int64_t rid = regionAt(e.device, e.level, e.address, e.size);
    if (rid < 0) {
        anomaly(anomaly::UnknownRegion, e, seq, "mapping outside any region");
        return;
    }
    auto ended = [&](uint64_t, const MappedPieces<int64_t>::Piece& p) {
        s.unmapping.bind(1, p.tag).bind(2, e.time).run();
    };
    auto started = [&](uint64_t a, uint64_t size) {
        const int64_t id = ++mappingSeq_;
        s.mapping.bind(1, rid).bind(2, a).bind(3, size).bind(4, e.time).bind(5, id).run();
        return id;
    };
    if (e.type == EventType::RegionMap)
        mappings_[rid].map(e.address, e.size, ended, started);
    else if (!mappings_[rid].unmap(e.address, e.size, ended, started))
        anomaly(anomaly::UnknownRegion, e, seq, "unmap of an unknown mapping");
}

// Graph captures are rows as they come; execs are paired instantiate -> destroy like allocations,
// and a destroy with no live exec is an anomaly (docs/session-format.md "graph_execs").
void Ingest::onGraph(const Event& e, uint64_t seq)
{
    auto& s = *st_;
    if (e.type == EventType::GraphCapture) {
        if (e.aux2 != 0) knownPools_.insert(e.aux2);
        s.graphCapture.bind(1, e.device)
            .bind(2, e.stream)
            .bind(3, e.aux)
            .bind(4, e.name.value)
            .bind(5, e.aux2)
            .bind(6, e.time)
            .bind(7, std::max(e.endTime, e.time))
            .run();
        return;
    }
    const std::pair<uint32_t, uint64_t> key{e.device, e.aux2};
    if (e.type == EventType::GraphInstantiate) {
        const int64_t id = ++execSeq_;
        s.graphExec.bind(1, e.device).bind(2, e.aux).bind(3, e.aux2).bind(4, e.time).bind(5, id);
        s.graphExec.run();
        liveExecs_[key] = id;
        destroyedExecs_.erase(key);
        return;
    }
    auto it = liveExecs_.find(key);
    if (it == liveExecs_.end()) {
        const bool twice = destroyedExecs_.count(key) != 0;
        anomaly(twice ? anomaly::GraphExecDestroyedTwice : anomaly::UnknownGraphExec, e, seq,
                fmt::format("exec {} {}", e.aux2,
                            twice ? "was destroyed before" : "was never instantiated"));
        return;
    }
    s.graphExecDestroy.bind(1, it->second).bind(2, e.time).run();
    liveExecs_.erase(it);
    destroyedExecs_.insert(key);
}

void Ingest::closeFrame(int64_t t)
{
    if (openFrame_ >= 0) {
        st_->frameEnd.bind(1, openFrame_).bind(2, t).run();
        openFrame_ = -1;
    }
}

void Ingest::onMarker(const Event& e)
{
    auto& s = *st_;
    s.marker.bind(1, e.time);
    if (e.type == EventType::Range) s.marker.bind(2, e.endTime);
    s.marker.bind(3, e.name.value).bind(4, e.device).run();
    // Frames and metrics are read from the message (docs/user-guide.md, "Marking frames and
    // metrics").
    const std::string& msg =
        e.name.value < stringText_.size() ? stringText_[e.name.value] : stringText_[0];
    std::smatch m;
    if (std::regex_match(msg, m, frameMatcher_->re) && m.size() > 1) {
        int64_t idx = 0;
        try {
            idx = std::stoll(m[1].str());
        } catch (...) {
            return;
        }
        closeFrame(e.time);
        s.frame.bind(1, idx).bind(2, e.time);
        if (e.type == EventType::Range) s.frame.bind(3, e.endTime);
        s.frame.run();
        if (e.type == EventType::Mark) openFrame_ = idx;
        currentFrame_ = idx;
        return;
    }
    std::vector<std::pair<std::string, double>> metrics;
    int64_t frame = -1;
    if (parseMetricMessage(msg, metrics, frame)) {
        if (frame < 0) frame = currentFrame_;
        if (frame < 0) return; // a metric before any frame has nothing to belong to
        for (const auto& [name, v] : metrics)
            addFrameMetric(frame, name, v, "nvtx");
    }
}

void Ingest::anomaly(std::string_view kind, const Event& e, uint64_t seq, const std::string& detail)
{
    ++stats_.anomalies;
    st_->anomaly.bind(1, e.time)
        .bind(2, kind)
        .bind(3, e.device)
        .bind(4, static_cast<int>(e.level))
        .bind(5, e.address)
        .bind(6, e.size)
        .bind(7, seq)
        .bind(8, detail)
        .run();
}

void Ingest::maybeCommit()
{
    if ((stats_.events & 0xfff) != 0) return;
    tick();
}

void Ingest::tick()
{
    if (!opts_.durable) return; // one transaction, committed by end()
    if (std::chrono::steady_clock::now() - lastCommit_ >=
        std::chrono::milliseconds(opts_.commitIntervalMs)) {
        // A live source may go quiet with events still buffered: those older than the reorder
        // window can no longer be overtaken, so release them into this commit.
        if (opts_.reorderWindowNs > 0 && buffered() > 0 && maxSeen_ != kNoTime)
            release(maxSeen_ - opts_.reorderWindowNs);
        commit();
    }
}

void Ingest::commit()
{
    // Allocations made since the last commit and still live are written now, so that a writer
    // killed later still leaves them in the file; their free becomes an UPDATE.
    for (const auto& [dev, lvl, addr, id] : sinceCommit_) {
        auto& m = live_[{dev, lvl}];
        auto it = m.find(addr);
        if (it != m.end() && it->second.id == id && !it->second.persisted) {
            writeAllocation(dev, static_cast<Level>(lvl), addr, it->second, kNoTime);
            it->second.persisted = true;
        }
    }
    sinceCommit_.clear();
    flushAllocations();
    flushKernels();
    setMeta("last_commit_event_ns", std::to_string(released_ == kNoTime ? 0 : released_));
    // Live viewers read these instead of scanning whole tables several times a second.
    setMeta("committed_event_count", std::to_string(stats_.events - buffered()));
    if (haveTime_) {
        setMeta("committed_time_begin_ns", std::to_string(stats_.timeBegin));
        setMeta("committed_time_end_ns", std::to_string(stats_.timeEnd));
    }
    st_->commit.run();
    st_->begin.run();
    pipe_->sync(); // committed when this returns, as a viewer or a kill right after expects
    ++stats_.commits;
    lastCommit_ = std::chrono::steady_clock::now();
}

void Ingest::end()
{
    if (!begun_ || ended_) return;
    stopWriter();
    drain();
    closeFrame(stats_.timeEnd);
    // Live allocations stay in the file with free_ns NULL.
    for (auto& [key, m] : live_) {
        for (auto& [addr, a] : m) {
            writeAllocation(key.first, static_cast<Level>(key.second), addr, a, kNoTime);
            if (opts_.aliveAtEndIsAnomaly) {
                Event e;
                e.time = stats_.timeEnd;
                e.device = key.first;
                e.level = static_cast<Level>(key.second);
                e.address = addr;
                e.size = a.size;
                anomaly(anomaly::AliveAtEnd, e, 0,
                        "allocated at " + std::to_string(a.time) + " ns");
            }
        }
    }
    live_.clear();
    sinceCommit_.clear();
    flushAllocations();
    flushKernels();
    setMeta("event_count", std::to_string(stats_.events));
    setMeta("time_begin_ns", std::to_string(stats_.timeBegin));
    setMeta("time_end_ns", std::to_string(stats_.timeEnd));
    setMeta("state", abrupt_ ? "ended_abruptly" : "complete");
    stopPipe(); // the connection is this thread's from here
    db_->exec("COMMIT");
    if (opts_.durable) db_->exec("PRAGMA wal_checkpoint(TRUNCATE)");
    leaveWal();
    st_.reset();
    pipe_.reset();
    db_.reset();
    ended_ = true;
}

void Ingest::leaveWal()
{
    // Back to one plain file. SQLite refuses to leave WAL mode while any other connection is
    // open on the file, at once and without calling the busy handler; a live viewer (the GUI
    // following the recording) holds one for the few milliseconds of each refresh, so a stop
    // that lands inside a refresh used to fail the whole recording ("database is locked"; the
    // GUI then kept the live view). Everything is committed by now: retry for a while, and a
    // file still shared after that stays in WAL mode, an equally valid session.
    using clock = std::chrono::steady_clock;
    const auto deadline = clock::now() + std::chrono::milliseconds(opts_.leaveWalWaitMs);
    for (;;) {
        try {
            db_->exec("PRAGMA journal_mode=DELETE");
            return;
        } catch (const SessionError&) {
            const int rc = sqlite3_errcode(db_->raw()) & 0xff;
            if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED) throw;
            if (clock::now() >= deadline) return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
}

void Ingest::markEndedAbruptly(const std::string& why)
{
    if (!begun_ || ended_ || abrupt_) return;
    sync();
    abrupt_ = true;
    health("ended_abruptly", 1, why);
}

void Ingest::abort()
{
    stopWriter(true);
    stopPipe(true);
    st_.reset();
    pipe_.reset();
    db_.reset();
    ended_ = true;
    std::error_code ec;
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
        std::filesystem::remove(opts_.path + suffix, ec);
}

} // namespace fs
