// Background jobs of the GUI, one pattern for every view (hotspot's): a JobTracker per consumer
// numbers its jobs, and what a job hands back (its result, its progress, staged results) reaches
// the GUI thread only while it is the tracker's newest job. A superseded or cancelled job's
// results are dropped; the window keeps showing what it had. One cancellation type (Job: its
// flag is what core's `const std::atomic<bool>* cancel` options take) and one progress signature
// (percent, stage).
#pragma once

#include "worker_pool.h"

#include <QObject>
#include <QPointer>
#include <QString>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <type_traits>

namespace fs::views {

class JobTracker;

// What a job's work function is given, on its worker thread.
class Job
{
public:
    uint64_t id() const { return id_; }
    // Raised when the job is superseded (Replace; Serial and Follow: a newer one waits) or
    // cancelled: the job may stop early.
    bool cancelled() const { return cancel_->load(std::memory_order_relaxed); }
    const std::atomic<bool>* cancelFlag() const { return cancel_.get(); }
    // JobTracker::progress on the GUI thread, while the tracker delivers the job's results.
    void progress(int percent, const QString& stage) const;
    // Runs fn on the GUI thread while the tracker delivers the job's results (a staged result).
    void post(std::function<void()> fn) const;

private:
    friend class JobTracker;
    Job(QPointer<JobTracker> t, uint64_t id, std::shared_ptr<std::atomic<bool>> cancel)
        : tracker_(std::move(t)), id_(id), cancel_(std::move(cancel))
    {
    }
    QPointer<JobTracker> tracker_; // read on the GUI thread only
    uint64_t id_ = 0;
    std::shared_ptr<std::atomic<bool>> cancel_;
};

class JobTracker : public QObject
{
    Q_OBJECT
public:
    enum class Mode {
        // A new job starts at once and cancels the one running; only the newest delivers.
        Replace,
        // One job at a time: a new job waits for the running one, a newer waiting job takes
        // its place, and the running job's result is dropped once a newer one waits (for work
        // core cannot cancel: it would only pile up).
        Serial,
        // One job at a time as Serial, and a newer waiting job raises the running job's flag
        // (it may cut its work short), but what the running job hands back is still delivered:
        // a view that follows a moving request (the time cursor dragged, the heatmap zoomed)
        // shows each state it reaches on the way. Only cancel() drops results.
        Follow,
    };
    explicit JobTracker(QObject* parent, Mode mode = Mode::Replace,
                        QThreadPool* pool = &workerPool());
    ~JobTracker() override; // cancels: a job still running delivers nothing

    // Runs work(job) on the pool at a lower priority (worker_priority.h), then done(result) on
    // the GUI thread if the job is still the newest (Follow: if it was not cancelled). An
    // exception from work reaches `failed` (or the failed signal) the same way, unless the job
    // was cancelled. Returns the job's id.
    template <typename Work, typename Done>
    uint64_t start(Work work, Done done, std::function<void(const QString&)> failed = {});
    // A job that hands back its results itself (Job::post) and delivers nothing at its end.
    template <typename Work> uint64_t start(Work work)
    {
        return start([w = std::move(work)](const Job& j) { w(j); }, [] {});
    }
    // Drops the running and the waiting job's results and raises the running job's flag.
    void cancel();
    // cancel() on every tracker alive (GUI thread): the application is going away.
    static void cancelAll();
    // Raises the running job's flag, as a newer job would, and drops nothing: for a job that
    // reports its own end when stopped (a replay the user cancels says so when it has stopped).
    void interrupt();
    bool busy() const { return running_ || waiting_.has_value(); }
    // Whether what job id hands back is delivered (Replace, Serial: it is the newest job;
    // Follow: it was not cancelled).
    bool delivers(uint64_t id) const
    {
        return mode_ == Mode::Follow ? id >= dropBelow_ : id == newest_;
    }
    // During a delivery: whether a newer job was asked for since the delivering one.
    bool superseded() const { return delivering_ != newest_; }

signals:
    void progress(int percent, const QString& stage);
    void failed(const QString& message);

private:
    friend class Job;
    // The work, type-erased: returns what to run on the GUI thread.
    using Erased = std::function<std::function<void()>(const Job&)>;
    uint64_t launch(Erased work);
    void run(uint64_t id, Erased work);
    void finished(uint64_t id, const std::shared_ptr<std::atomic<bool>>& cancel,
                  std::function<void()> deliver);

    Mode mode_;
    QThreadPool* pool_;
    void deliver(uint64_t id, const std::function<void()>& fn);
    uint64_t newest_ = 0;
    uint64_t dropBelow_ = 0; // cancel(): no job before it delivers
    uint64_t delivering_ = 0;
    bool running_ = false;
    std::shared_ptr<std::atomic<bool>> cancel_; // the running job's
    struct Waiting
    {
        uint64_t id;
        Erased work;
    };
    std::optional<Waiting> waiting_;
};

template <typename Work, typename Done>
uint64_t JobTracker::start(Work work, Done done, std::function<void(const QString&)> failed)
{
    QPointer<JobTracker> self(this);
    return launch([work = std::move(work), done = std::move(done), failed = std::move(failed),
                   self](const Job& job) mutable -> std::function<void()> {
        using R = std::invoke_result_t<Work&, const Job&>;
        auto fail = [failed, self](QString message) -> std::function<void()> {
            return [failed, self, message] {
                if (failed)
                    failed(message);
                else if (self)
                    emit self->failed(message);
            };
        };
        try {
            if constexpr (std::is_void_v<R>) {
                work(job);
                return [done] { done(); };
            } else {
                auto r = std::make_shared<R>(work(job));
                return [done, r] { done(std::move(*r)); };
            }
        } catch (const std::exception& e) {
            return fail(QString::fromUtf8(e.what()));
        } catch (...) {
            return fail(QStringLiteral("unknown error"));
        }
    });
}

} // namespace fs::views
