#include "sql_pipe.h"

#include <cstring>
#include <stdexcept>

namespace fs::store {

namespace {
constexpr size_t kBatchParams = 32768; // values handed over at once (~0.8 MiB)
constexpr size_t kBatchOps = 4096;
constexpr size_t kMaxQueued = 4; // batches waiting: bounds the memory
} // namespace

PipedStmt& PipedStmt::bind(int i, int64_t v)
{
    pipe_->param(index_, {i, SqlPipe::Kind::Int, 0, v});
    return *this;
}

PipedStmt& PipedStmt::bind(int i, double v)
{
    int64_t bits = 0;
    std::memcpy(&bits, &v, sizeof bits);
    pipe_->param(index_, {i, SqlPipe::Kind::Real, 0, bits});
    return *this;
}

PipedStmt& PipedStmt::bind(int i, std::string_view v)
{
    auto& text = pipe_->batch_.text;
    const auto at = static_cast<int64_t>(text.size());
    text.append(v);
    pipe_->param(index_, {i, SqlPipe::Kind::Text, static_cast<uint32_t>(v.size()), at});
    return *this;
}

PipedStmt& PipedStmt::bindNull(int i)
{
    pipe_->param(index_, {i, SqlPipe::Kind::Null, 0, 0});
    return *this;
}

void PipedStmt::run()
{
    pipe_->run(index_);
}

PipedStmt SqlPipe::add(Stmt st)
{
    stmts_.push_back(std::move(st));
    return PipedStmt(this, static_cast<uint32_t>(stmts_.size() - 1));
}

void SqlPipe::open(uint32_t stmt)
{
    if (!open_) {
        batch_.ops.push_back({stmt, static_cast<uint32_t>(batch_.params.size())});
        open_ = true;
    } else if (batch_.ops.back().stmt != stmt) {
        throw std::logic_error("SqlPipe: binds of two statements interleave");
    }
}

void SqlPipe::param(uint32_t stmt, const Param& p)
{
    open(stmt);
    batch_.params.push_back(p);
}

void SqlPipe::run(uint32_t stmt)
{
    open(stmt);
    open_ = false;
    if (!worker_) {
        // At once: the batch holds this one run.
        try {
            execute(batch_);
        } catch (...) {
            batch_.clear();
            throw;
        }
        batch_.clear();
        return;
    }
    if (batch_.params.size() >= kBatchParams || batch_.ops.size() >= kBatchOps)
        batch_ = worker_->push(std::move(batch_));
}

void SqlPipe::execute(const Batch& b)
{
    for (size_t k = 0; k < b.ops.size(); ++k) {
        const Op& op = b.ops[k];
        Stmt& st = stmts_[op.stmt];
        const size_t end = k + 1 < b.ops.size() ? b.ops[k + 1].firstParam : b.params.size();
        for (size_t j = op.firstParam; j < end; ++j) {
            const Param& p = b.params[j];
            switch (p.kind) {
            case Kind::Int:
                st.bind(p.index, p.value);
                break;
            case Kind::Real: {
                double d = 0;
                std::memcpy(&d, &p.value, sizeof d);
                st.bind(p.index, d);
                break;
            }
            case Kind::Text:
                st.bind(p.index,
                        std::string_view(b.text).substr(static_cast<size_t>(p.value), p.length));
                break;
            case Kind::Null:
                st.bindNull(p.index);
                break;
            }
        }
        st.run();
    }
}

void SqlPipe::start()
{
    if (!threaded_ || worker_) return;
    worker_ = std::make_unique<BatchWorker<Batch>>([this](Batch& b) { execute(b); },
                                                   [](Batch& b) { b.clear(); }, kMaxQueued);
    worker_->start();
}

void SqlPipe::sync()
{
    if (open_) throw std::logic_error("SqlPipe: sync with a statement half bound");
    if (!worker_) return; // everything ran at once
    if (!batch_.ops.empty()) batch_ = worker_->push(std::move(batch_));
    worker_->sync();
}

void SqlPipe::stop(bool discard)
{
    std::exception_ptr err;
    try {
        if (!discard) sync();
    } catch (...) {
        err = std::current_exception();
    }
    worker_.reset(); // stops, dropping what is still queued; from here statements run at once
    batch_.clear();
    open_ = false;
    if (err) std::rethrow_exception(err);
}

} // namespace fs::store
