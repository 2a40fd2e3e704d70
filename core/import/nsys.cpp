// Nsight Systems SQLite exports (`nsys export --type sqlite`). Tables are created lazily by nsys,
// so each one is read only when present, and only through the columns it has.
#include "importer.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace fs::import {

namespace {

// CUDA memory pools (cudaMallocAsync) as regions of the pool level, one per (device, pool
// address): created at the pool's CREATE event (or, for a pool made before the capture, at its
// first allocation), released at DESTROY, sized to cover the largest size the export reports for
// the pool and every allocation seen inside it. A TRIM is a marker, as the CUPTI agent records it.
class PoolRegions
{
public:
    void noteAllocation(uint32_t device, uint64_t pool, const Event& a, uint64_t poolSize)
    {
        Pool& p = pools_[{device, pool}];
        p.firstUse = std::min(p.firstUse, a.time);
        if (a.address >= pool) p.extent = std::max(p.extent, a.address + a.size - pool);
        p.extent = std::max(p.extent, poolSize);
    }
    void created(uint32_t device, uint64_t pool, int64_t t, uint64_t size, uint64_t threshold)
    {
        Pool& p = pools_[{device, pool}];
        p.created = std::min(p.created, t);
        p.extent = std::max(p.extent, size);
        p.threshold = threshold;
    }
    void destroyed(uint32_t device, uint64_t pool, int64_t t)
    {
        pools_[{device, pool}].destroyed = t;
    }
    // Appends the region events; returns the number of pools.
    size_t emit(std::vector<Event>& out) const
    {
        for (const auto& [key, p] : pools_) {
            Event c;
            c.type = EventType::RegionCreate;
            c.time = std::min(p.created, p.firstUse);
            if (c.time == kNever) c.time = p.destroyed; // only a DESTROY row: an empty pool
            c.device = key.first;
            c.address = key.second;
            c.size = p.extent;
            c.level = Level::Pool;
            c.regionKind = RegionKind::Pool;
            c.aux = key.second; // pool id
            c.aux2 = p.threshold;
            out.push_back(c);
            if (p.destroyed == kNever) continue;
            Event d;
            d.type = EventType::RegionDestroy;
            d.time = std::max(p.destroyed, c.time);
            d.device = key.first;
            d.address = key.second;
            d.level = Level::Pool;
            d.regionKind = RegionKind::Pool;
            out.push_back(d);
        }
        return pools_.size();
    }

private:
    static constexpr int64_t kNever = std::numeric_limits<int64_t>::max();
    struct Pool
    {
        int64_t created = kNever;
        int64_t firstUse = kNever;
        int64_t destroyed = kNever;
        uint64_t extent = 0;
        uint64_t threshold = 0;
    };
    std::map<std::pair<uint32_t, uint64_t>, Pool> pools_;
};

class NsysImporter final : public Importer
{
public:
    NsysImporter(const std::string& path, ImportOptions opts) : Importer(path, std::move(opts)) {}
    Format format() const override { return Format::NsysSqlite; }
    void prepare() override;
    void configure(IngestOptions& o) const override
    {
        o.sourceKind = "nsys-sqlite";
        o.sourcePath = path_;
        o.expectRegions = false; // cudaMalloc'd blocks are the driver level itself
        o.aliveAtEndIsAnomaly = false;
    }
    void emit(Ingest& ing) override;

private:
    std::set<std::string> columns(const std::string& table) const;
    bool has(const std::string& t) const { return tables_.count(t) != 0; }
    std::string stringOf(int64_t id) const
    {
        auto it = strings_.find(id);
        return it == strings_.end() ? std::string() : it->second;
    }
    // Label-based lookup of an enum value (ENUM_* tables), with a fallback.
    int64_t enumValue(const std::string& table, const std::string& needle, int64_t fallback) const;
    void query(const std::string& table, const std::string& sql,
               const std::function<void(Stmt&)>& row) const;

    void readPoolEvents(Ingest& ing, PoolRegions& pools, std::vector<Event>& events);

    Db db_;
    std::set<std::string> tables_;
    std::unordered_map<int64_t, std::string> strings_;
};

void NsysImporter::prepare()
{
    ByteReader probe(path_); // clear error for a missing file
    try {
        db_ = Db(path_, SQLITE_OPEN_READONLY);
        auto st = db_.prepare("SELECT name FROM sqlite_master WHERE type='table'");
        while (st.step())
            tables_.insert(st.text(0));
    } catch (const SessionError& e) {
        throw ImportError(path_, "not a readable SQLite file: " + e.problem());
    }
    if (tables_.count("meta") && tables_.count("allocations") && !tables_.count("StringIds"))
        throw ImportError(path_,
                          "this is a fragscope session, not an nsys export (open it directly)");
    static const char* known[] = {"StringIds",
                                  "CUDA_GPU_MEMORY_USAGE_EVENTS",
                                  "CUPTI_ACTIVITY_KIND_KERNEL",
                                  "CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                                  "NVTX_EVENTS",
                                  "TARGET_INFO_GPU",
                                  "CUDA_GPU_MEMORY_POOL_EVENTS",
                                  "CUPTI_ACTIVITY_KIND_RUNTIME"};
    if (std::none_of(std::begin(known), std::end(known), [&](const char* t) { return has(t); }))
        throw ImportError(
            path_,
            "table StringIds: missing, and no CUPTI/NVTX table either: not an nsys SQLite export");
    if (has("StringIds")) {
        query("StringIds", "SELECT id, value FROM StringIds",
              [&](Stmt& s) { strings_[s.i64(0)] = s.text(1); });
    }
}

std::set<std::string> NsysImporter::columns(const std::string& table) const
{
    std::set<std::string> cols;
    auto st = db_.prepare("SELECT name FROM pragma_table_info(?1)");
    st.bind(1, table);
    while (st.step())
        cols.insert(st.text(0));
    return cols;
}

void NsysImporter::query(const std::string& table, const std::string& sql,
                         const std::function<void(Stmt&)>& row) const
{
    try {
        auto st = db_.prepare(sql);
        while (st.step())
            row(st);
    } catch (const ImportError&) {
        throw;
    } catch (const SessionError& e) {
        throw ImportError(path_, "table " + table + ": " + e.problem());
    }
}

int64_t NsysImporter::enumValue(const std::string& table, const std::string& needle,
                                int64_t fallback) const
{
    if (!has(table)) return fallback;
    const auto cols = columns(table);
    if (!cols.count("id") || !(cols.count("name") || cols.count("label"))) return fallback;
    int64_t found = fallback;
    const std::string col = cols.count("name") ? "name" : "label";
    query(table, "SELECT id, " + col + " FROM " + table, [&](Stmt& s) {
        std::string label = s.text(1);
        std::transform(label.begin(), label.end(), label.begin(),
                       [](unsigned char c) { return std::toupper(c); });
        // "DEALLOCATION" contains "ALLOCATION": match the whole word at the end.
        if (label == needle || label.ends_with("_" + needle) || label.ends_with(" " + needle))
            found = s.i64(0);
    });
    return found;
}

void NsysImporter::readPoolEvents(Ingest& ing, PoolRegions& pools, std::vector<Event>& events)
{
    const std::string table = "CUDA_GPU_MEMORY_POOL_EVENTS";
    const auto cols = columns(table);
    auto first = [&](std::initializer_list<const char*> names) -> std::string {
        for (const char* n : names)
            if (cols.count(n)) return n;
        return {};
    };
    const std::string op = first({"operationType", "memoryPoolOperationType", "poolOperationType"});
    for (const char* c : {"start", "address"})
        if (!cols.count(c))
            throw ImportError(path_, fmt::format("table {}: column '{}' is missing (expected the "
                                                 "nsys export schema)",
                                                 table, c));
    if (op.empty())
        throw ImportError(path_, "table " + table +
                                     ": no operation column (operationType) (expected the nsys "
                                     "export schema)");
    auto orZero = [&](std::initializer_list<const char*> names) {
        const std::string c = first(names);
        return c.empty() ? std::string("0") : c;
    };
    // Operation ids from the enum table's labels; without it, nsys's own order.
    const std::string en = "ENUM_CUDA_MEMPOOL_OPER";
    const int64_t opCreate = enumValue(en, "CREATED", enumValue(en, "CREATE", 0));
    const int64_t opDestroy = enumValue(en, "DESTROYED", enumValue(en, "DESTROY", 1));
    const int64_t opTrim = enumValue(en, "TRIMMED", enumValue(en, "TRIM", 2));
    const std::string sql =
        fmt::format("SELECT start, address, {}, {}, {}, {}, {} FROM {} ORDER BY start", op,
                    orZero({"deviceId"}), orZero({"localMemoryPoolSize", "size", "bytes"}),
                    orZero({"minBytesToKeep"}),
                    orZero({"localMemoryPoolReleaseThreshold", "releaseThreshold"}), table);
    int64_t rows = 0, trims = 0;
    query(table, sql, [&](Stmt& s) {
        const int64_t t = s.i64(0);
        const uint64_t pool = s.u64(1);
        const int64_t kind = s.i64(2);
        const auto device = static_cast<uint32_t>(s.i64(3));
        ++rows;
        if (kind == opCreate) {
            pools.created(device, pool, t, s.u64(4), s.u64(6));
        } else if (kind == opDestroy) {
            pools.destroyed(device, pool, t);
        } else if (kind == opTrim) {
            Event m;
            m.type = EventType::Mark;
            m.time = t;
            m.device = device;
            m.aux = pool;
            m.name = ing.intern(
                fmt::format("cuda pool trim pool={:#x} size={} keep={}", pool, s.u64(4), s.u64(5)));
            events.push_back(m);
            ++trims;
        }
    });
    report_.counts["pool_events"] = rows;
    report_.counts["pool_trims"] = trims;
}

void NsysImporter::emit(Ingest& ing)
{
    std::vector<Event> events;
    PoolRegions pools;
    auto need = [&](const std::string& table, std::initializer_list<const char*> cols) {
        const auto have = columns(table);
        for (const char* c : cols)
            if (!have.count(c))
                throw ImportError(
                    path_, fmt::format(
                               "table {}: column '{}' is missing (expected the nsys export schema)",
                               table, c));
        return have;
    };

    if (has("TARGET_INFO_GPU")) {
        const auto cols = columns("TARGET_INFO_GPU");
        if (cols.count("id")) {
            const std::string sql = fmt::format("SELECT id, {}, {} FROM TARGET_INFO_GPU",
                                                cols.count("name") ? "name" : "''",
                                                cols.count("totalMemory") ? "totalMemory" : "0");
            query("TARGET_INFO_GPU", sql, [&](Stmt& s) {
                DeviceInfo d;
                d.id = static_cast<uint32_t>(s.i64(0));
                d.name = s.text(1);
                d.capacityBytes = s.u64(2);
                ing.addDevice(d);
            });
        }
    }

    int64_t memEvents = 0;
    if (has("CUDA_GPU_MEMORY_USAGE_EVENTS")) {
        const auto cols = need("CUDA_GPU_MEMORY_USAGE_EVENTS",
                               {"start", "address", "bytes", "memoryOperationType"});
        const int64_t opAlloc = enumValue("ENUM_CUDA_DEV_MEM_EVENT_OPER", "ALLOCATION", 0);
        const int64_t opFree = enumValue("ENUM_CUDA_DEV_MEM_EVENT_OPER", "DEALLOCATION", 1);
        const std::string sql = fmt::format(
            "SELECT start, address, bytes, memoryOperationType, {}, {}, {}, {} FROM "
            "CUDA_GPU_MEMORY_USAGE_EVENTS",
            cols.count("deviceId") ? "deviceId" : "0", cols.count("streamId") ? "streamId" : "0",
            cols.count("localMemoryPoolAddress") ? "localMemoryPoolAddress" : "0",
            cols.count("localMemoryPoolSize") ? "localMemoryPoolSize" : "0");
        query("CUDA_GPU_MEMORY_USAGE_EVENTS", sql, [&](Stmt& s) {
            Event e;
            const int64_t op = s.i64(3);
            if (op == opAlloc)
                e.type = EventType::Alloc;
            else if (op == opFree)
                e.type = EventType::Free;
            else
                return;
            ++memEvents;
            e.time = s.i64(0);
            e.address = s.u64(1);
            e.size = s.u64(2);
            e.device = static_cast<uint32_t>(s.i64(4));
            e.stream = static_cast<uint32_t>(s.i64(5));
            // cudaMallocAsync blocks come from a memory pool; the others are plain cudaMalloc.
            e.level = s.i64(6) != 0 ? Level::Pool : Level::Driver;
            if (e.level == Level::Pool && e.type == EventType::Alloc)
                pools.noteAllocation(e.device, s.u64(6), e, s.u64(7));
            events.push_back(e);
        });
    }
    report_.counts["memory_events"] = memEvents;
    if (memEvents == 0)
        warn(&ing, "memory usage events were not captured: the export has no "
                   "CUDA_GPU_MEMORY_USAGE_EVENTS rows "
                   "(profile with `nsys profile --cuda-memory-usage=true`); kernels, graphs and "
                   "NVTX are imported");

    int64_t kernels = 0;
    if (has("CUPTI_ACTIVITY_KIND_KERNEL")) {
        const auto cols = need("CUPTI_ACTIVITY_KIND_KERNEL", {"start", "end"});
        auto col = [&](const char* c) { return cols.count(c) ? std::string(c) : std::string("0"); };
        const std::string nameCol = cols.count("demangledName") ? "demangledName"
                                    : cols.count("shortName")   ? "shortName"
                                                                : "0";
        const std::string sql =
            fmt::format("SELECT start, end, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {} FROM "
                        "CUPTI_ACTIVITY_KIND_KERNEL",
                        col("deviceId"), col("streamId"), col("correlationId"), nameCol,
                        col("gridX"), col("gridY"), col("gridZ"), col("blockX"), col("blockY"),
                        col("blockZ"), col("graphId"), col("graphNodeId"));
        query("CUPTI_ACTIVITY_KIND_KERNEL", sql, [&](Stmt& s) {
            Event e;
            e.type = EventType::Kernel;
            e.time = s.i64(0);
            e.endTime = s.i64(1);
            e.device = static_cast<uint32_t>(s.i64(2));
            e.stream = static_cast<uint32_t>(s.i64(3));
            e.aux = s.u64(4);
            e.name = ing.intern(stringOf(s.i64(5)));
            for (int i = 0; i < 3; ++i) {
                e.grid[i] = static_cast<uint32_t>(s.i64(6 + i));
                e.block[i] = static_cast<uint32_t>(s.i64(9 + i));
            }
            if (s.u64(12) != 0 || s.u64(13) != 0)
                e.aux2 = (s.u64(12) << 32) | (s.u64(13) & 0xffffffffu);
            events.push_back(e);
            ++kernels;
        });
    }
    report_.counts["kernels"] = kernels;

    int64_t graphs = 0;
    if (has("CUPTI_ACTIVITY_KIND_GRAPH_TRACE")) {
        const auto cols = need("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", {"start", "end"});
        auto col = [&](const char* c) { return cols.count(c) ? std::string(c) : std::string("0"); };
        const std::string sql =
            fmt::format("SELECT start, end, {}, {}, {}, {} FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE",
                        col("deviceId"), col("streamId"), col("graphId"), col("graphExecId"));
        query("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", sql, [&](Stmt& s) {
            Event e;
            e.type = EventType::GraphLaunch;
            e.time = s.i64(0);
            e.endTime = s.i64(1);
            e.device = static_cast<uint32_t>(s.i64(2));
            e.stream = static_cast<uint32_t>(s.i64(3));
            e.aux = s.u64(4);
            e.aux2 = s.u64(5);
            events.push_back(e);
            ++graphs;
        });
    }
    report_.counts["graph_launches"] = graphs;

    int64_t nvtx = 0;
    if (has("NVTX_EVENTS")) {
        const auto cols = need("NVTX_EVENTS", {"start"});
        const std::string sql = fmt::format(
            "SELECT start, {}, {}, {}, {} FROM NVTX_EVENTS", cols.count("end") ? "end" : "NULL",
            cols.count("eventType") ? "eventType" : "34", cols.count("text") ? "text" : "NULL",
            cols.count("textId") ? "textId" : "NULL");
        query("NVTX_EVENTS", sql, [&](Stmt& s) {
            // 34 mark, 59 push/pop range, 60 start/end range; the others (domains, names) carry no
            // time.
            const int64_t type = s.i64(2);
            if (type != 34 && type != 59 && type != 60) return;
            std::string text = s.isNull(3) ? stringOf(s.isNull(4) ? -1 : s.i64(4)) : s.text(3);
            Event e;
            e.time = s.i64(0);
            const bool range = type != 34 && !s.isNull(1) && s.i64(1) >= e.time;
            e.type = range ? EventType::Range : EventType::Mark;
            e.endTime = range ? s.i64(1) : 0;
            e.name = ing.intern(text);
            events.push_back(e);
            ++nvtx;
        });
    }
    report_.counts["nvtx_events"] = nvtx;
    if (has("CUDA_GPU_MEMORY_POOL_EVENTS")) readPoolEvents(ing, pools, events);
    report_.counts["pool_regions"] = pools.emit(events);

    // At equal times a pool exists before the blocks placed in it and outlives their frees.
    auto rank = [](const Event& e) {
        return e.type == EventType::RegionCreate ? 0 : e.type == EventType::RegionDestroy ? 2 : 1;
    };
    std::stable_sort(events.begin(), events.end(), [&](const Event& a, const Event& b) {
        return a.time != b.time ? a.time < b.time : rank(a) < rank(b);
    });
    for (const Event& e : events)
        ing.add(e);
}

} // namespace

std::unique_ptr<Importer> makeNsysImporter(const std::string& path, ImportOptions opts)
{
    return std::make_unique<NsysImporter>(path, std::move(opts));
}

} // namespace fs::import
