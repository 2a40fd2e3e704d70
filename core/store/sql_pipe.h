// Ingest's statement pipe: the thread that processes events binds and runs prepared statements
// through PipedStmt handles; the values travel in batches to a thread of the pipe's own, which
// binds and steps the real statements in the order they were queued. Processing the next events
// and SQLite's work on the last ones then use two cores. Internal to core/store.
#pragma once

#include "batch_worker.h"
#include "sqlite.h"

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace fs::store {

class SqlPipe;

// A handle with Stmt's binding interface. Binds of one run must not interleave with another
// handle's (each call chain binds, then runs).
class PipedStmt
{
public:
    PipedStmt() = default;
    PipedStmt& bind(int i, int64_t v);
    PipedStmt& bind(int i, uint64_t v) { return bind(i, static_cast<int64_t>(v)); }
    PipedStmt& bind(int i, int v) { return bind(i, static_cast<int64_t>(v)); }
    PipedStmt& bind(int i, uint32_t v) { return bind(i, static_cast<int64_t>(v)); }
    PipedStmt& bind(int i, double v);
    PipedStmt& bind(int i, std::string_view v);
    PipedStmt& bindNull(int i);
    void run();

private:
    friend class SqlPipe;
    PipedStmt(SqlPipe* pipe, uint32_t index) : pipe_(pipe), index_(index) {}
    SqlPipe* pipe_ = nullptr;
    uint32_t index_ = 0;
};

class SqlPipe
{
public:
    // threaded = false runs every statement at once, on the caller's thread.
    explicit SqlPipe(bool threaded) : threaded_(threaded) {}
    ~SqlPipe() = default; // worker_ (declared last) joins before the statements go
    SqlPipe(const SqlPipe&) = delete;
    SqlPipe& operator=(const SqlPipe&) = delete;

    // Takes a prepared statement; call before start().
    PipedStmt add(Stmt st);
    void start();
    // Waits until everything queued so far has run; rethrows the first error the pipe met.
    // After it, the caller may use the connection itself until it queues again.
    void sync();
    // sync() (unless discard: drops what is queued), then ends the thread: statements queued
    // after it run at once, on the caller's thread.
    void stop(bool discard = false);

private:
    friend class PipedStmt;
    enum class Kind : uint8_t { Int, Real, Text, Null };
    struct Param
    {
        int32_t index;
        Kind kind;
        uint32_t length; // Text: bytes at `value` in Batch::text
        int64_t value;   // Int; Real bit-cast; Text offset
    };
    struct Op
    {
        uint32_t stmt;
        uint32_t firstParam;
    };
    struct Batch
    {
        std::vector<Op> ops;
        std::vector<Param> params;
        std::string text;
        void clear()
        {
            ops.clear();
            params.clear();
            text.clear();
        }
    };
    void open(uint32_t stmt); // the op taking stmt's binds: the open one, or a new one
    void param(uint32_t stmt, const Param& p);
    void run(uint32_t stmt);
    void execute(const Batch& b);

    const bool threaded_;
    std::vector<Stmt> stmts_;
    Batch batch_;       // being filled by the queueing thread
    bool open_ = false; // batch_.ops.back() is still taking binds
    std::unique_ptr<BatchWorker<Batch>> worker_;
};

} // namespace fs::store
