#include "jobs.h"

#include "worker_priority.h"

#include <QCoreApplication>

#include <unordered_set>
#include <utility>

namespace fs::views {

namespace {

// Qt's thread pool and event queue hand a job between threads under their own mutexes, which
// ThreadSanitizer cannot see in Debian's uninstrumented Qt (the tsan preset): each hand-off is
// told to it here, a release once the thread handing the job over has written all of it and an
// acquire where the other thread takes it, before it reads any of it (on one address for all
// jobs: more order than Qt gives, never less). Nothing in other builds.
#if defined(__SANITIZE_THREAD__)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
char g_handOff;
void handOver()
{
    __tsan_release(&g_handOff);
}
void takeOver()
{
    __tsan_acquire(&g_handOff);
}
#else
void handOver() {}
void takeOver() {}
#endif

// Every tracker alive, for cancelAll(); created and destroyed on the GUI thread only.
std::unordered_set<JobTracker*>& liveTrackers()
{
    static std::unordered_set<JobTracker*> all;
    return all;
}
// Runs fn on the GUI thread (the application's event loop), unless the application is gone.
template <typename F> void toGuiThread(F&& fn)
{
    if (QCoreApplication* app = QCoreApplication::instance())
        QMetaObject::invokeMethod(app, std::forward<F>(fn), Qt::QueuedConnection);
}
} // namespace

void Job::post(std::function<void()> fn) const
{
    toGuiThread([t = tracker_, id = id_, fn = std::move(fn)] {
        if (t) t->deliver(id, fn);
    });
}

void Job::progress(int percent, const QString& stage) const
{
    toGuiThread([t = tracker_, id = id_, percent, stage] {
        if (t) t->deliver(id, [t, percent, stage] { emit t->progress(percent, stage); });
    });
}

JobTracker::JobTracker(QObject* parent, Mode mode, QThreadPool* pool)
    : QObject(parent), mode_(mode), pool_(pool)
{
    liveTrackers().insert(this);
}

JobTracker::~JobTracker()
{
    liveTrackers().erase(this);
    if (cancel_) cancel_->store(true);
}

void JobTracker::cancelAll()
{
    for (JobTracker* t : liveTrackers())
        t->cancel();
}

uint64_t JobTracker::launch(Erased work)
{
    const uint64_t id = ++newest_;
    if (mode_ == Mode::Replace) {
        if (cancel_) cancel_->store(true);
        run(id, std::move(work));
    } else if (running_) {
        waiting_ = Waiting{id, std::move(work)}; // an older waiting job is dropped unrun
        if (cancel_) cancel_->store(true);       // Serial drops its result; Follow shows it
    } else {
        run(id, std::move(work));
    }
    return id;
}

void JobTracker::run(uint64_t id, Erased work)
{
    running_ = true;
    cancel_ = std::make_shared<std::atomic<bool>>(false);
    const Job job(QPointer<JobTracker>(this), id, cancel_);
    std::function<void()> task = [job, work = std::move(work)] {
        takeOver();
        lowerWorkerPriority();
        std::function<void()> deliver = work(job);
        std::function<void()> back = [t = job.tracker_, id = job.id_, cancel = job.cancel_,
                                      deliver = std::move(deliver)]() mutable {
            takeOver();
            if (t) t->finished(id, cancel, std::move(deliver));
        };
        handOver();
        toGuiThread(std::move(back));
    };
    handOver();
    pool_->start(std::move(task));
}

void JobTracker::deliver(uint64_t id, const std::function<void()>& fn)
{
    if (!delivers(id) || !fn) return;
    const uint64_t outer = delivering_;
    delivering_ = id;
    fn();
    delivering_ = outer;
}

void JobTracker::finished(uint64_t id, const std::shared_ptr<std::atomic<bool>>& cancel,
                          std::function<void()> result)
{
    // Replace runs several at once; only the last one started is "the running job". The next
    // job starts before the result is handed over: its work overlaps the GUI's.
    if (cancel == cancel_) running_ = false;
    if (!running_ && waiting_) {
        Waiting w = std::move(*waiting_);
        waiting_.reset();
        run(w.id, std::move(w.work));
    }
    deliver(id, result);
}

void JobTracker::interrupt()
{
    if (running_ && cancel_) cancel_->store(true);
}

void JobTracker::cancel()
{
    if (cancel_) cancel_->store(true);
    waiting_.reset();
    dropBelow_ = ++newest_; // no job has this id: every earlier one is dropped
}

} // namespace fs::views
