// Ingest's writer thread (IngestOptions::writerThread): the source's thread decodes and calls
// add(); events go over in batches to this thread, which runs process() on them, in order, as
// the caller's thread would have. Only one thread touches the SQLite connection at a time: every
// Ingest call other than add() first waits until the queue is empty (sync()).
#include "ingest_writer.h"

namespace fs {

namespace {
constexpr size_t kBatchEvents = 4096; // events handed over at once
constexpr size_t kMaxQueued = 8;      // batches waiting: bounds the memory (~3.5 MiB)
} // namespace

void Ingest::startWriter()
{
    writer_ = std::make_unique<Writer>();
    writer_->batch.reserve(kBatchEvents);
    writer_->thread = std::thread([this] { writerLoop(); });
}

void Ingest::writerLoop()
{
    Writer& w = *writer_;
    while (true) {
        std::vector<Pending> b;
        {
            std::unique_lock lock(w.m);
            w.cv.wait(lock, [&] { return w.stop || !w.queue.empty(); });
            if (w.queue.empty()) return; // stop, and nothing left
            b = std::move(w.queue.front());
            w.queue.pop_front();
            w.busy = true;
        }
        w.cv.notify_all(); // room in the queue
        std::exception_ptr err;
        try {
            for (const Pending& p : b)
                process(p.e, p.seq);
        } catch (...) {
            err = std::current_exception();
        }
        {
            std::lock_guard lock(w.m);
            w.busy = false;
            if (err && !w.error) w.error = err;
            if (w.error) w.queue.clear(); // nothing after a failed write is worth writing
        }
        w.cv.notify_all();
    }
}

void Ingest::queueEvent(const Event& e, uint64_t seq)
{
    Writer& w = *writer_;
    w.batch.push_back({e, seq});
    if (w.batch.size() < kBatchEvents) return;
    std::unique_lock lock(w.m);
    w.cv.wait(lock, [&] { return w.queue.size() < kMaxQueued || w.error; });
    if (w.error) std::rethrow_exception(w.error);
    w.queue.push_back(std::move(w.batch));
    w.batch = {};
    w.batch.reserve(kBatchEvents);
    lock.unlock();
    w.cv.notify_all();
}

void Ingest::sync()
{
    if (!writer_ || std::this_thread::get_id() == writer_->thread.get_id()) return;
    Writer& w = *writer_;
    std::unique_lock lock(w.m);
    if (!w.batch.empty() && !w.error) {
        w.queue.push_back(std::move(w.batch));
        w.batch = {};
        w.cv.notify_all();
    }
    w.cv.wait(lock, [&] { return (w.queue.empty() && !w.busy) || w.error; });
    if (w.error) {
        // Wait for the batch in progress too: the caller may touch the connection next.
        w.cv.wait(lock, [&] { return !w.busy; });
        std::rethrow_exception(w.error);
    }
}

void Ingest::stopWriter(bool discard)
{
    if (!writer_) return;
    std::exception_ptr err;
    if (!discard) {
        try {
            sync();
        } catch (...) {
            err = std::current_exception();
        }
    }
    {
        std::lock_guard lock(writer_->m);
        writer_->stop = true;
        writer_->queue.clear();
    }
    writer_->cv.notify_all();
    if (writer_->thread.joinable()) writer_->thread.join();
    writer_.reset();
    if (err) std::rethrow_exception(err);
}

} // namespace fs
