#include "table_scan.h"

#include "sqlite_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <sys/stat.h>
#include <vector>

// The file format read here: https://www.sqlite.org/fileformat2.html ("B-tree Pages", "Record
// Format"). Only table b-trees (page types 5 and 13) and only what a rowid scan needs.

namespace fs::store {

namespace {

constexpr int kMaxColumns = 64; // RowValues' nulls are one 64-bit word
constexpr int kAlias = -2;      // Layout::slotOf: the INTEGER PRIMARY KEY column
constexpr uint8_t kInteriorTable = 5, kLeafTable = 13;
constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

using format::be16;
using format::be32;

// A SQLite varint at p, ending before end: its value, p moved past it; false when it runs past
// end.
bool varintLong(const uint8_t*& p, const uint8_t* end, uint64_t& v)
{
    v = 0;
    for (int i = 0; i < 8; ++i) {
        if (p >= end) return false;
        const uint8_t b = *p++;
        v = v << 7 | (b & 0x7f);
        if (!(b & 0x80)) return true;
    }
    if (p >= end) return false;
    v = v << 8 | *p++; // the ninth byte gives all eight bits
    return true;
}

// Most varints here are one byte (a record's header size and its serial types): that case
// inline, the rest out of line.
inline bool varint(const uint8_t*& p, const uint8_t* end, uint64_t& v)
{
    if (p < end && *p < 0x80) {
        v = *p++;
        return true;
    }
    return varintLong(p, end, v);
}

// A big-endian two's-complement integer of serial type 1-6 (1, 2, 3, 4, 6 or 8 bytes).
inline int64_t beInt(const uint8_t* p, uint64_t type)
{
    switch (type) {
    case 1:
        return static_cast<int8_t>(p[0]);
    case 2:
        return static_cast<int16_t>(be16(p));
    case 3:
        return static_cast<int32_t>(static_cast<uint32_t>(p[0]) << 24 | be16(p + 1) << 8) >> 8;
    case 4:
        return static_cast<int32_t>(be32(p));
    case 5:
        return static_cast<int64_t>(static_cast<uint64_t>(be16(p)) << 48 |
                                    static_cast<uint64_t>(be32(p + 2)) << 16) >>
               16;
    default:
        return static_cast<int64_t>(static_cast<uint64_t>(be32(p)) << 32 | be32(p + 4));
    }
}

// Bytes of a value of a serial type, -1 for the reserved types 10 and 11.
int64_t valueBytes(uint64_t type)
{
    static constexpr std::array<int8_t, 12> small{0, 1, 2, 3, 4, 6, 8, 8, 0, 0, -1, -1};
    return type < 12 ? small[type] : static_cast<int64_t>((type - 12) / 2);
}

// How a page scan ended: every row of the range visited, the visitor stopped, a row to hand to
// SQLite, or a page that does not parse; at: the rowid to go on from.
enum class End { Done, Stopped, OddRow, Malformed };
struct ScanEnd
{
    End why;
    int64_t at = 0;
};

// The main database file through the connection's own handle, as SQLite reads it.
class PageFile
{
public:
    explicit PageFile(sqlite3* db)
    {
        if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file_) != SQLITE_OK ||
            !file_ || !file_->pMethods)
            return;
        uint8_t h[format::kHeaderBytes];
        sqlite3_int64 size = 0;
        if (file_->pMethods->xRead(file_, h, sizeof h, 0) != SQLITE_OK ||
            file_->pMethods->xFileSize(file_, &size) != SQLITE_OK)
            return;
        const std::optional<format::Header> header = format::parseHeader(h);
        if (!header) return;
        pageSize_ = header->pageSize;
        if (pageSize_ < 512 || (pageSize_ & (pageSize_ - 1)) != 0) return;
        usable_ = pageSize_ - header->reservedBytes;
        wal_ = header->wal;
        pages_ = static_cast<uint64_t>(size) / pageSize_;
        ok_ = usable_ >= 480;
    }
    bool ok() const { return ok_; }
    bool wal() const { return wal_; }
    uint32_t pageSize() const { return pageSize_; }
    uint32_t usable() const { return usable_; }
    uint64_t pages() const { return pages_; }
    // Pages [first, first + n) into out; false past the file's end or on an I/O error.
    bool read(uint64_t first, uint64_t n, uint8_t* out) const
    {
        if (first < 1 || first + n - 1 > pages_) return false;
        return file_->pMethods->xRead(file_, out, static_cast<int>(n * pageSize_),
                                      static_cast<sqlite3_int64>((first - 1) * pageSize_)) ==
               SQLITE_OK;
    }

private:
    sqlite3_file* file_ = nullptr;
    uint32_t pageSize_ = 0, usable_ = 0;
    uint64_t pages_ = 0;
    bool wal_ = false, ok_ = false;
};

// Where the requested columns sit in the table's records, from its schema.
struct Layout
{
    std::vector<int> slotOf; // by record column: the requested slot, -1 when not requested,
                             // kAlias for the rowid's alias (the record holds NULL there)
    int rowidSlot = -1;      // the slot that reads the rowid, -1 when none does
    int slots = 0;
    bool usable = false;
};

std::string trimmed(std::string_view s)
{
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
        s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
        s.remove_suffix(1);
    return std::string(s);
}

bool sameName(std::string_view a, std::string_view b)
{
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
               return std::tolower(static_cast<unsigned char>(x)) ==
                      std::tolower(static_cast<unsigned char>(y));
           });
}

Layout layoutOf(const Db& db, std::string_view table, std::string_view columns, bool withoutRowid)
{
    Layout l;
    std::vector<std::string> wanted;
    for (size_t at = 0; at <= columns.size();) {
        const size_t comma = std::min(columns.find(',', at), columns.size());
        wanted.push_back(trimmed(columns.substr(at, comma - at)));
        at = comma + 1;
    }
    if (withoutRowid || wanted.empty() || wanted.size() > kMaxColumns) return l;
    l.slots = static_cast<int>(wanted.size());
    struct Column
    {
        std::string name, type;
        bool hasDefault;
        int pk;
        bool hidden; // a generated or virtual table's hidden column: records differ
    };
    std::vector<Column> schema;
    Stmt info = db.prepare(fmt::format("SELECT name, type, dflt_value IS NOT NULL, pk, hidden"
                                       " FROM pragma_table_xinfo('{}')",
                                       table));
    while (info.step())
        schema.push_back({info.text(0), info.text(1), info.i64(2) != 0,
                          static_cast<int>(info.i64(3)), info.i64(4) != 0});
    if (std::any_of(schema.begin(), schema.end(), [](const Column& c) { return c.hidden; }))
        return l; // where each value sits in a record is SQLite's to say
    // The rowid's alias: the only primary key column, declared INTEGER.
    int aliasCol = -1;
    if (std::count_if(schema.begin(), schema.end(), [](const Column& c) { return c.pk > 0; }) == 1)
        for (size_t c = 0; c < schema.size(); ++c)
            if (schema[c].pk > 0 && sameName(schema[c].type, "INTEGER"))
                aliasCol = static_cast<int>(c);
    l.slotOf.assign(schema.size(), -1);
    for (int slot = 0; slot < l.slots; ++slot) {
        const std::string& name = wanted[static_cast<size_t>(slot)];
        auto it = std::find_if(schema.begin(), schema.end(),
                               [&](const Column& c) { return sameName(c.name, name); });
        const int col = it == schema.end() ? -1 : static_cast<int>(it - schema.begin());
        const bool rowid = col >= 0 ? col == aliasCol
                                    : sameName(name, "rowid") || sameName(name, "_rowid_") ||
                                          sameName(name, "oid");
        if (rowid && l.rowidSlot >= 0) return l; // the rowid twice: SQLite reads that
        if (rowid && col >= 0) {
            l.rowidSlot = slot;
            l.slotOf[static_cast<size_t>(col)] = kAlias;
        } else if (rowid) {
            l.rowidSlot = slot;
        } else if (col < 0 || schema[static_cast<size_t>(col)].hasDefault ||
                   l.slotOf[static_cast<size_t>(col)] != -1) {
            return l; // unknown, defaulted or repeated: SQLite reads these
        } else {
            l.slotOf[static_cast<size_t>(col)] = slot;
        }
    }
    // Columns after the last requested one need not be looked at.
    while (!l.slotOf.empty() && l.slotOf.back() == -1)
        l.slotOf.pop_back();
    l.usable = true;
    return l;
}

class PageScan
{
public:
    PageScan(const PageFile& file, const Layout& layout) : f_(file), l_(layout) {}

    // Rows of [lo, hi] from the b-tree rooted at root, visited in order; rows already visited
    // are counted into rows.
    ScanEnd run(uint32_t root, int64_t lo, int64_t hi,
                const std::function<bool(const RowValues&)>& visit, int64_t& rows)
    {
        lo_ = lo;
        leaves_.clear();
        uint64_t budget = f_.pages();
        page_.resize(f_.pageSize());
        if (!collect(root, lo, hi, 0, budget)) return {End::Malformed, lo};
        buf_.resize(static_cast<size_t>(f_.pageSize()) *
                    std::max<uint32_t>(1, (1u << 20) / f_.pageSize()));
        const size_t perRead = buf_.size() / f_.pageSize();
        int64_t next = lo; // the first rowid not yet visited
        for (size_t i = 0; i < leaves_.size();) {
            size_t n = 1; // a run of consecutive pages, one read
            while (i + n < leaves_.size() && n < perRead && leaves_[i + n] == leaves_[i] + n)
                ++n;
            if (!f_.read(leaves_[i], n, buf_.data())) return {End::Malformed, next};
            for (size_t k = 0; k < n; ++k) {
                const ScanEnd e =
                    leaf(buf_.data() + k * f_.pageSize(), leaves_[i + k], hi, visit, rows, next);
                if (e.why != End::Done) return e;
                if (next > hi) return {End::Done, next}; // a row past the range was met
            }
            i += n;
        }
        return {End::Done, next};
    }

private:
    // Appends the leaves under page that may hold rowids in [lo, hi], in key order.
    bool collect(uint32_t page, int64_t lo, int64_t hi, int depth, uint64_t& budget)
    {
        if (depth > 40 || budget == 0)
            return false; // deeper than any file SQLite writes, or a cycle
        --budget;
        if (!f_.read(page, 1, page_.data())) return false;
        const uint8_t* p = page_.data() + (page == 1 ? 100 : 0);
        if (*p == kLeafTable) {
            leaves_.push_back(page);
            return true;
        }
        if (*p != kInteriorTable) return false;
        const uint32_t cells = be16(p + 3);
        const size_t content = static_cast<size_t>(p - page_.data()) + 12 + 2 * size_t{cells};
        if (content > f_.usable()) return false;
        const uint8_t* end = page_.data() + f_.usable();
        // The children and keys first: the recursion reads other pages into page_.
        std::vector<std::pair<uint32_t, int64_t>> kids;
        kids.reserve(cells + 1);
        for (uint32_t c = 0; c < cells; ++c) {
            const uint32_t at = be16(p + 12 + 2 * c);
            if (at < content || at + 4 >= f_.usable()) return false;
            const uint8_t* q = page_.data() + at;
            uint64_t key = 0;
            const uint32_t child = be32(q);
            q += 4;
            if (!varint(q, end, key)) return false;
            kids.emplace_back(child, static_cast<int64_t>(key));
        }
        kids.emplace_back(be32(p + 8), kMax); // the right-most child: keys above the last
        int64_t below = kMin;                 // the child holds keys in (below, its key]
        for (size_t k = 0; k < kids.size(); ++k) {
            const auto [child, key] = kids[k];
            const bool last = k + 1 == kids.size();
            if ((last || key >= lo) && (k == 0 || below < hi))
                if (!collect(child, lo, hi, depth + 1, budget)) return false;
            if (!last && key < below) return false; // keys out of order
            below = key;
        }
        return true;
    }

    // One leaf's rows of [next, hi]; next becomes the rowid after the last one visited.
    ScanEnd leaf(const uint8_t* page, uint32_t pageNo, int64_t hi,
                 const std::function<bool(const RowValues&)>& visit, int64_t& rows, int64_t& next)
    {
        const uint8_t* p = page + (pageNo == 1 ? 100 : 0);
        const uint8_t* end = page + f_.usable();
        if (*p != kLeafTable) return {End::Malformed, next};
        const uint32_t cells = be16(p + 3);
        const size_t content = static_cast<size_t>(p - page) + 8 + 2 * size_t{cells};
        if (content > f_.usable()) return {End::Malformed, next};
        const uint64_t maxLocal = f_.usable() - 35;
        const auto cols = static_cast<int>(l_.slotOf.size());
        for (uint32_t c = 0; c < cells; ++c) {
            const uint32_t at = be16(p + 8 + 2 * c);
            if (at < content || at >= f_.usable()) return {End::Malformed, next};
            const uint8_t* q = page + at;
            uint64_t payload = 0, key = 0;
            if (!varint(q, end, payload) || !varint(q, end, key)) return {End::Malformed, next};
            const auto rowid = static_cast<int64_t>(key);
            if (rowid < next) {
                // Below the range, or out of order (a visited rowid again): only the first
                // leaf may hold rows before the range.
                if (next != lo_) return {End::Malformed, next};
                continue;
            }
            if (rowid > hi) {
                next = rowid; // past the range: done
                return {End::Done, next};
            }
            if (payload > maxLocal) return {End::OddRow, rowid};
            if (payload > static_cast<uint64_t>(end - q)) return {End::Malformed, next};
            const uint8_t* rec = q;
            const uint8_t* recEnd = q + payload;
            uint64_t headerBytes = 0;
            const uint8_t* t = rec;
            if (!varint(t, recEnd, headerBytes) || headerBytes > payload || rec + headerBytes < t)
                return {End::Malformed, next};
            const uint8_t* types = t;
            const uint8_t* typesEnd = rec + headerBytes;
            const uint8_t* v = typesEnd;
            uint64_t nulls = 0;
            for (int col = 0; col < cols; ++col) {
                uint64_t type = 0; // columns the record omits are NULL (no default: layoutOf)
                if (types < typesEnd && !varint(types, typesEnd, type))
                    return {End::Malformed, next};
                const int64_t bytes = valueBytes(type);
                if (bytes < 0 || bytes > recEnd - v) return {End::Malformed, next};
                if (const int slot = l_.slotOf[static_cast<size_t>(col)]; slot == kAlias) {
                    if (type != 0) return {End::Malformed, next}; // not the rowid's alias
                } else if (slot >= 0) {
                    if (type == 0) {
                        ints_[slot] = 0;
                        nulls |= uint64_t{1} << slot;
                    } else if (type <= 6) {
                        ints_[slot] = beInt(v, type);
                    } else if (type == 8 || type == 9) {
                        ints_[slot] = static_cast<int64_t>(type - 8);
                    } else {
                        return {End::OddRow, rowid}; // a real, a text or a blob: SQLite converts
                    }
                }
                v += bytes;
            }
            if (l_.rowidSlot >= 0) ints_[l_.rowidSlot] = rowid;
            ++rows;
            next = rowid == kMax ? kMax : rowid + 1;
            if (!visit(RowValues(ints_.data(), nulls))) return {End::Stopped, next};
            if (rowid == kMax) {
                next = kMax;
                return {End::Done, next};
            }
        }
        return {End::Done, next};
    }

    const PageFile& f_;
    const Layout& l_;
    std::vector<uint32_t> leaves_;
    std::vector<uint8_t> page_, buf_;
    std::array<int64_t, kMaxColumns> ints_{};
    int64_t lo_ = kMin; // run's first rowid (leaf: rows below it are skipped)
};

} // namespace

int64_t visitTableRows(const Db& db, std::string_view table, std::string_view columns, int64_t lo,
                       int64_t hi, const std::function<bool(const RowValues&)>& visit,
                       RowReading how, RowReadCounts* counts)
{
    if (lo > hi) return 0;
    // FRAGSCOPE_SQLITE_ROWS=1: every row through SQLite, as before the page reader (a way round
    // it should a file ever read differently, and the baseline of a timing in the same state).
    static const bool sqliteOnly = [] {
        const char* e = std::getenv("FRAGSCOPE_SQLITE_ROWS");
        return e && *e && std::string_view(e) != "0";
    }();
    if (sqliteOnly) how = RowReading::Sqlite;
    int64_t rows = 0;
    RowReadCounts ignored;
    RowReadCounts& n = counts ? *counts : ignored;
    bool stopped = false;
    std::optional<Stmt> bySqlite; // prepared on first use
    auto sqliteRange = [&](int64_t from, int64_t to) {
        if (!bySqlite)
            bySqlite.emplace(db.prepare(
                fmt::format("SELECT fs_rows(?3, {}) FROM {} WHERE rowid >= ?1 AND rowid <= ?2",
                            columns, table)));
        bySqlite->bind(1, from).bind(2, to);
        const int64_t read = bySqlite->visitRows(3, [&](const RowValues& v) {
            if (visit(v)) return true;
            stopped = true;
            return false;
        });
        rows += read;
        n.bySqlite += read;
    };
    if (how == RowReading::Sqlite) {
        sqliteRange(lo, hi);
        return rows;
    }
    // The read transaction: this statement, stepped to its row and not reset until the pages are
    // read, keeps every writer off the file (a rollback journal's shared lock, or a log's read
    // mark). The root page and the schema are read under it.
    Stmt hold = db.prepare("SELECT rootpage, sql LIKE '%without%rowid%' FROM sqlite_schema"
                           " WHERE type = 'table' AND name = ?1");
    hold.bind(1, table);
    if (!hold.step()) {
        sqliteRange(lo, hi); // no such table: SQLite's error
        return rows;
    }
    const auto root = static_cast<uint32_t>(hold.i64(0));
    const Layout layout = layoutOf(db, table, columns, hold.i64(1) != 0);
    const PageFile file(db.raw());
    bool pagesTell = layout.usable && file.ok() && root > 0 &&
                     sqlite3_txn_state(db.raw(), "main") == SQLITE_TXN_READ;
    if (pagesTell && file.wal()) { // pages in the log override the file's
        const char* name = sqlite3_db_filename(db.raw(), "main");
        struct stat st
        {
        };
        pagesTell =
            name && (::stat((std::string(name) + "-wal").c_str(), &st) != 0 || st.st_size == 0);
    }
    PageScan scan(file, layout);
    int oddRows = 0; // after many, SQLite reads the rest in one go
    int64_t from = lo;
    while (pagesTell && oddRows < 64) {
        const int64_t before = rows;
        const ScanEnd e = scan.run(root, from, hi, visit, rows);
        n.fromPages += rows - before;
        if (e.why == End::Done || e.why == End::Stopped) return rows;
        from = e.at;
        if (e.why == End::Malformed) break;
        ++oddRows; // End::OddRow: that row by SQLite, then on with the pages
        sqliteRange(from, from);
        if (stopped || from == hi) return rows;
        ++from;
    }
    hold.reset();
    sqliteRange(from, hi);
    return rows;
}

} // namespace fs::store
