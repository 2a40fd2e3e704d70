// A thread that runs batches in the order they were handed to it (ingest's two threads: the
// events of IngestOptions::writerThread, the statements of SqlPipe). The queue is bounded;
// after the first error the queued batches are dropped and every later call rethrows it.
// Internal to core/store.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace fs::store {

template <class Batch> class BatchWorker
{
public:
    // run: called on the worker's thread for each batch; clear: empties a batch for reuse.
    BatchWorker(std::function<void(Batch&)> run, std::function<void(Batch&)> clear,
                size_t maxQueued)
        : run_(std::move(run)), clear_(std::move(clear)), maxQueued_(maxQueued)
    {
    }
    // Ends the thread, dropping what is still queued (sync() first to run it).
    ~BatchWorker()
    {
        if (!thread_.joinable()) return;
        {
            std::lock_guard lock(m_);
            stop_ = true;
            queue_.clear();
        }
        cv_.notify_all();
        thread_.join();
    }
    BatchWorker(const BatchWorker&) = delete;
    BatchWorker& operator=(const BatchWorker&) = delete;

    void start()
    {
        thread_ = std::thread([this] { loop(); });
    }
    std::thread::id id() const { return thread_.get_id(); }

    // Queues b (waiting for room) and gives back an emptied batch to fill next.
    Batch push(Batch&& b)
    {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return queue_.size() < maxQueued_ || error_; });
        if (error_) std::rethrow_exception(error_);
        queue_.push_back(std::move(b));
        Batch next{};
        if (!spare_.empty()) {
            next = std::move(spare_.back());
            spare_.pop_back();
        }
        lock.unlock();
        cv_.notify_all();
        return next;
    }

    // Waits until every queued batch has run (or failed: then for the one in progress too).
    void sync()
    {
        std::unique_lock lock(m_);
        cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
        if (error_) std::rethrow_exception(error_);
    }

private:
    void loop()
    {
        while (true) {
            Batch b;
            {
                std::unique_lock lock(m_);
                cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
                if (queue_.empty()) return; // stopped, and nothing left
                b = std::move(queue_.front());
                queue_.pop_front();
                busy_ = true;
            }
            cv_.notify_all(); // room in the queue
            std::exception_ptr err;
            try {
                run_(b);
            } catch (...) {
                err = std::current_exception();
            }
            clear_(b);
            {
                std::lock_guard lock(m_);
                busy_ = false;
                if (err && !error_) error_ = err;
                if (error_) queue_.clear(); // nothing after a failure is worth running
                spare_.push_back(std::move(b));
            }
            cv_.notify_all();
        }
    }

    std::function<void(Batch&)> run_, clear_;
    const size_t maxQueued_;
    std::thread thread_;
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<Batch> queue_;
    std::vector<Batch> spare_; // emptied batches, to reuse their memory
    bool busy_ = false;        // the thread is running a batch it took off the queue
    bool stop_ = false;
    std::exception_ptr error_;
};

} // namespace fs::store
