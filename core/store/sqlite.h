// Thin RAII wrapper over the SQLite C API, used by the session store, ingest and analysis.
#pragma once

#include <cstdint>
#include <functional>
#include <sqlite3.h>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "session_error.h"

namespace fs {

// One row's values as Stmt::visitRows hands them over (column 0 is the first value after the
// visit parameter), or as store::visitTableRows decoded them from the file's pages: integers,
// a NULL as a bit of nulls.
class RowValues
{
public:
    explicit RowValues(sqlite3_value** v) : v_(v) {}
    RowValues(const int64_t* ints, uint64_t nulls) : ints_(ints), nulls_(nulls) {}
    int64_t i64(int col) const { return ints_ ? ints_[col] : sqlite3_value_int64(v_[col]); }
    uint64_t u64(int col) const { return static_cast<uint64_t>(i64(col)); }
    bool isNull(int col) const
    {
        return ints_ ? (nulls_ >> col & 1) != 0 : sqlite3_value_type(v_[col]) == SQLITE_NULL;
    }
    // The values from column first on, numbered from 0.
    RowValues from(int first) const
    {
        return ints_ ? RowValues(ints_ + first, nulls_ >> first) : RowValues(v_ + first);
    }

private:
    sqlite3_value** v_ = nullptr;
    const int64_t* ints_ = nullptr;
    uint64_t nulls_ = 0;
};

class Stmt
{
public:
    Stmt() = default;
    Stmt(sqlite3* db, std::string_view sql, const std::string& path);
    ~Stmt();
    Stmt(Stmt&& o) noexcept : st_(std::exchange(o.st_, nullptr)), path_(std::move(o.path_)) {}
    Stmt& operator=(Stmt&& o) noexcept;
    Stmt(const Stmt&) = delete;
    Stmt& operator=(const Stmt&) = delete;

    Stmt& bind(int i, int64_t v)
    {
        check(sqlite3_bind_int64(st_, i, v));
        return *this;
    }
    Stmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, uint32_t v) { return bind(i, static_cast<int64_t>(v)); }
    Stmt& bind(int i, double v)
    {
        check(sqlite3_bind_double(st_, i, v));
        return *this;
    }
    Stmt& bind(int i, std::string_view v);
    Stmt& bindBlob(int i, const void* data, size_t n);
    Stmt& bindNull(int i)
    {
        check(sqlite3_bind_null(st_, i));
        return *this;
    }

    // Returns true while a row is available; throws SessionError on failure.
    bool step();
    // Runs a statement that returns no rows, then resets it for reuse.
    void run();
    // Runs a statement of the form "SELECT fs_rows(?N, a, b, ...) FROM ...", binding parameter N
    // here: fs_rows, an aggregate every Db registers, hands each row's values (a, b, ...) to
    // visit within one sqlite3_step, in the order the query visits its rows. No step and no
    // column calls per row: a third less CPU than step() and i64() on a long table
    // (docs/store.md "Long reads"). visit returns false to stop; an exception it throws stops
    // the read and is rethrown here. Resets the statement; returns the rows visited.
    int64_t visitRows(int param, const std::function<bool(const RowValues&)>& visit);
    void reset() { sqlite3_reset(st_); }

    int64_t i64(int col) const { return sqlite3_column_int64(st_, col); }
    uint64_t u64(int col) const { return static_cast<uint64_t>(sqlite3_column_int64(st_, col)); }
    double f64(int col) const { return sqlite3_column_double(st_, col); }
    bool isNull(int col) const { return sqlite3_column_type(st_, col) == SQLITE_NULL; }
    std::string text(int col) const;
    std::vector<uint8_t> blob(int col) const;
    sqlite3_stmt* raw() const { return st_; }

private:
    void check(int rc);
    sqlite3_stmt* st_ = nullptr;
    std::string path_;
};

class Db
{
public:
    Db() = default;
    // flags: SQLITE_OPEN_READONLY or SQLITE_OPEN_READWRITE|SQLITE_OPEN_CREATE.
    Db(const std::string& path, int flags);
    ~Db();
    Db(Db&& o) noexcept : db_(std::exchange(o.db_, nullptr)), path_(std::move(o.path_)) {}
    Db& operator=(Db&& o) noexcept;
    Db(const Db&) = delete;
    Db& operator=(const Db&) = delete;

    void exec(std::string_view sql);
    Stmt prepare(std::string_view sql) const { return Stmt(db_, sql, path_); }
    // First column of the first row as integer, or fallback when there is no row.
    int64_t scalar(std::string_view sql, int64_t fallback = 0) const;
    std::string scalarText(std::string_view sql, const std::string& fallback = {}) const;
    bool hasTable(std::string_view name) const;
    sqlite3* raw() const { return db_; }
    const std::string& path() const { return path_; }
    [[noreturn]] void fail(const std::string& what) const;

private:
    sqlite3* db_ = nullptr;
    std::string path_;
};

// Translates SQLite's messages into words a user can act on ("database disk image is
// malformed" -> "corrupted or truncated (database disk image is malformed)").
std::string describeSqliteError(int rc, const char* msg);

} // namespace fs
