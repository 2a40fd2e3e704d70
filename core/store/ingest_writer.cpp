// Ingest's writer thread (IngestOptions::writerThread): the source's thread decodes and calls
// add(); events go over in batches to this thread, which runs process() on them, in order, as
// the caller's thread would have. process() queues its statements on the statement pipe
// (sql_pipe.h); every Ingest call other than add() first waits until this thread has processed
// every event handed to it (sync()), so only one thread at a time queues statements.
#include "ingest_writer.h"

namespace fs {

void Ingest::startWriter()
{
    writer_ = std::make_unique<Writer>([this](std::vector<Pending>& b) {
        for (const Pending& p : b)
            process(p.e, p.seq);
    });
    writer_->batch.reserve(Writer::kBatchEvents);
    writer_->worker.start();
}

void Ingest::queueEvent(const Event& e, uint64_t seq)
{
    Writer& w = *writer_;
    w.batch.push_back({e, seq});
    if (w.batch.size() < Writer::kBatchEvents) return;
    w.batch = w.worker.push(std::move(w.batch));
    w.batch.reserve(Writer::kBatchEvents);
}

void Ingest::sync()
{
    if (!writer_ || std::this_thread::get_id() == writer_->worker.id()) return;
    Writer& w = *writer_;
    if (!w.batch.empty()) w.batch = w.worker.push(std::move(w.batch));
    w.worker.sync();
}

void Ingest::stopWriter(bool discard)
{
    if (!writer_) return;
    std::exception_ptr err;
    try {
        if (!discard) sync();
    } catch (...) {
        err = std::current_exception();
    }
    writer_.reset(); // the worker stops, dropping what is still queued
    if (err) std::rethrow_exception(err);
}

} // namespace fs
