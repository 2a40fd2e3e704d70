#include "worker_pool.h"

#include "jobs.h"

#include <QCoreApplication>

namespace fs::views {

namespace {

// workerPool(), longJobPool(), picturePool(): once created
QThreadPool* g_pools[3] = {nullptr, nullptr, nullptr};

// Runs in QApplication's destructor, on the GUI thread, before QCoreApplication::instance()
// becomes null and before Qt's fonts, styles and other globals go: no job may outlive it.
void finishJobsAtQuit()
{
    JobTracker::cancelAll(); // a cancellable job stops early instead of running to its end
    for (QThreadPool* p : g_pools)
        if (p) p->waitForDone();
}

QThreadPool* makePool(int slot, const char* name, int threads)
{
    auto* p = new QThreadPool;
    p->setObjectName(QString::fromLatin1(name));
    p->setMaxThreadCount(threads);
    g_pools[slot] = p;
    static const bool registered = [] {
        qAddPostRoutine(finishJobsAtQuit);
        return true;
    }();
    (void)registered;
    return p;
}

} // namespace

QThreadPool& workerPool()
{
    static QThreadPool* const pool = [] {
        QThreadPool* p = makePool(0, "fragscope workers", std::max(2, QThread::idealThreadCount()));
        keepThreads(*p);
        return p;
    }();
    return *pool;
}

QThreadPool& longJobPool()
{
    static QThreadPool* const pool = makePool(1, "fragscope long jobs", 8);
    return *pool;
}

QThreadPool& picturePool()
{
    static QThreadPool* const pool = [] {
        QThreadPool* p = makePool(2, "fragscope pictures", 1);
        keepThreads(*p);
        return p;
    }();
    return *pool;
}

} // namespace fs::views
