#include "sqlite.h"

#include <exception>
#include <string>

namespace fs {

namespace {

// Stmt::visitRows's state, reached by fs_rows through its pointer parameter.
struct RowVisit
{
    const std::function<bool(const RowValues&)>* visit = nullptr;
    int64_t rows = 0;
    bool stopped = false;
    std::exception_ptr error;
};

constexpr const char* kRowVisitType = "fs_row_visit";

void rowsStep(sqlite3_context* ctx, int n, sqlite3_value** values)
{
    // The pointer is looked up (a string compare of its type) at the first row only, then kept
    // in the aggregate's context: a row costs one compare less (1 % of an un-indexed open).
    auto** kept = static_cast<RowVisit**>(sqlite3_aggregate_context(ctx, sizeof(RowVisit*)));
    if (kept && !*kept && n > 0)
        *kept = static_cast<RowVisit*>(sqlite3_value_pointer(values[0], kRowVisitType));
    RowVisit* v = kept ? *kept : nullptr;
    if (!v) { // SQL of somebody else's: the pointer is bound only by visitRows
        sqlite3_result_error(ctx, "fs_rows is internal to fragscope", -1);
        return;
    }
    try {
        ++v->rows;
        if (!(*v->visit)(RowValues(values + 1))) {
            v->stopped = true;
            sqlite3_result_error(ctx, "stopped", -1); // ends the statement's only step
        }
    } catch (...) { // never through SQLite's C frames
        v->error = std::current_exception();
        sqlite3_result_error(ctx, "stopped by an error", -1);
    }
}

void rowsFinal(sqlite3_context* ctx)
{
    sqlite3_result_null(ctx);
}

} // namespace

std::string describeSqliteError(int rc, const char* msg)
{
    const std::string m = msg ? msg : sqlite3_errstr(rc);
    switch (rc & 0xff) {
    case SQLITE_CORRUPT:
        return "corrupted or truncated session file (" + m + ")";
    case SQLITE_NOTADB:
        return "not a SQLite database, so not a fragscope session (" + m + ")";
    case SQLITE_CANTOPEN:
        return "cannot open (" + m + ")";
    case SQLITE_FULL:
        return "disk full (" + m + ")";
    case SQLITE_IOERR:
        return "I/O error (" + m + ")";
    default:
        return m;
    }
}

Stmt::Stmt(sqlite3* db, std::string_view sql, const std::string& path) : path_(path)
{
    const int rc = sqlite3_prepare_v2(db, sql.data(), static_cast<int>(sql.size()), &st_, nullptr);
    if (rc != SQLITE_OK) {
        const std::string err = describeSqliteError(rc, sqlite3_errmsg(db));
        sqlite3_finalize(st_);
        st_ = nullptr;
        throw SessionError(path, err);
    }
}

Stmt::~Stmt()
{
    sqlite3_finalize(st_);
}

Stmt& Stmt::operator=(Stmt&& o) noexcept
{
    if (this != &o) {
        sqlite3_finalize(st_);
        st_ = std::exchange(o.st_, nullptr);
        path_ = std::move(o.path_);
    }
    return *this;
}

Stmt& Stmt::bind(int i, std::string_view v)
{
    // An empty view may have a null data pointer, which SQLite would store as NULL.
    check(sqlite3_bind_text(st_, i, v.data() ? v.data() : "", static_cast<int>(v.size()),
                            SQLITE_TRANSIENT));
    return *this;
}

Stmt& Stmt::bindBlob(int i, const void* data, size_t n)
{
    // A zero-length blob, not NULL: SQLite stores a null pointer as NULL.
    static const char empty = 0;
    check(sqlite3_bind_blob64(st_, i, n ? data : &empty, n, SQLITE_TRANSIENT));
    return *this;
}

std::vector<uint8_t> Stmt::blob(int col) const
{
    const auto* p = static_cast<const uint8_t*>(sqlite3_column_blob(st_, col));
    const int n = sqlite3_column_bytes(st_, col);
    return p && n > 0 ? std::vector<uint8_t>(p, p + n) : std::vector<uint8_t>();
}

void Stmt::check(int rc)
{
    if (rc != SQLITE_OK && rc != SQLITE_ROW && rc != SQLITE_DONE)
        throw SessionError(path_, describeSqliteError(rc, sqlite3_errmsg(sqlite3_db_handle(st_))));
}

bool Stmt::step()
{
    const int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    const std::string err = describeSqliteError(rc, sqlite3_errmsg(sqlite3_db_handle(st_)));
    sqlite3_reset(st_);
    throw SessionError(path_, err);
}

int64_t Stmt::visitRows(int param, const std::function<bool(const RowValues&)>& visit)
{
    RowVisit v;
    v.visit = &visit;
    check(sqlite3_bind_pointer(st_, param, &v, kRowVisitType, nullptr));
    const int rc = sqlite3_step(st_);
    const std::string err = rc == SQLITE_ROW || rc == SQLITE_DONE || v.stopped || v.error
                                ? std::string()
                                : describeSqliteError(rc, sqlite3_errmsg(sqlite3_db_handle(st_)));
    sqlite3_reset(st_);
    sqlite3_bind_null(st_, param); // no pointer to this frame stays behind
    if (v.error) std::rethrow_exception(v.error);
    if (!err.empty()) throw SessionError(path_, err);
    return v.rows;
}

void Stmt::run()
{
    while (step()) {
    }
    sqlite3_reset(st_);
    sqlite3_clear_bindings(st_);
}

std::string Stmt::text(int col) const
{
    const auto* p = sqlite3_column_text(st_, col);
    return p ? std::string(reinterpret_cast<const char*>(p),
                           static_cast<size_t>(sqlite3_column_bytes(st_, col)))
             : std::string();
}

Db::Db(const std::string& path, int flags) : path_(path)
{
    // SQLite keeps memory statistics under a global mutex on every allocation it makes; nothing
    // here reads them. Configured once, before the library initialises on the first open.
    static const bool configured = [] {
        sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
        return true;
    }();
    (void)configured;
    const int rc = sqlite3_open_v2(path.c_str(), &db_, flags, nullptr);
    if (rc != SQLITE_OK) {
        const std::string err = describeSqliteError(rc, db_ ? sqlite3_errmsg(db_) : nullptr);
        sqlite3_close(db_);
        db_ = nullptr;
        throw SessionError(path, err);
    }
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, 5000);
    // Stmt::visitRows's aggregate. Direct only: never run by a file's own triggers or views.
    sqlite3_create_function_v2(db_, "fs_rows", -1, SQLITE_UTF8 | SQLITE_DIRECTONLY, nullptr,
                               nullptr, rowsStep, rowsFinal, nullptr);
}

Db::~Db()
{
    sqlite3_close(db_);
}

Db& Db::operator=(Db&& o) noexcept
{
    if (this != &o) {
        sqlite3_close(db_);
        db_ = std::exchange(o.db_, nullptr);
        path_ = std::move(o.path_);
    }
    return *this;
}

void Db::fail(const std::string& what) const
{
    throw SessionError(path_, what);
}

void Db::exec(std::string_view sql)
{
    char* err = nullptr;
    const std::string s(sql);
    const int rc = sqlite3_exec(db_, s.c_str(), nullptr, nullptr, &err);
    if (rc != SQLITE_OK) {
        const std::string msg = describeSqliteError(rc, err ? err : sqlite3_errmsg(db_));
        sqlite3_free(err);
        throw SessionError(path_, msg);
    }
}

int64_t Db::scalar(std::string_view sql, int64_t fallback) const
{
    Stmt st = prepare(sql);
    return st.step() && !st.isNull(0) ? st.i64(0) : fallback;
}

std::string Db::scalarText(std::string_view sql, const std::string& fallback) const
{
    Stmt st = prepare(sql);
    return st.step() && !st.isNull(0) ? st.text(0) : fallback;
}

bool Db::hasTable(std::string_view name) const
{
    Stmt st = prepare("SELECT 1 FROM sqlite_schema WHERE type='table' AND name=?1");
    st.bind(1, name);
    return st.step();
}

} // namespace fs
