// The thread pool every background job of the GUI runs on (rasters, the time cursor, call sites,
// search, graphs, rule changes, dropping an old scene).
#pragma once

#include <QSemaphore>
#include <QThread>
#include <QThreadPool>

#include <algorithm>
#include <memory>

namespace fs::views {

// Starts all of the pool's threads now, waits until they run, and keeps them for good. A job
// started later (on the GUI thread, while a session loads) then never starts a thread: that
// maps the thread's stack and waits for the process's memory-map lock, which the loader's page
// faults and madvise calls hold, for up to 20 ms on a loaded 2-core machine. Call it once, on an
// idle pool.
inline void keepThreads(QThreadPool& pool)
{
    pool.setExpiryTimeout(-1);
    const int n = pool.maxThreadCount();
    auto started = std::make_shared<QSemaphore>(0), go = std::make_shared<QSemaphore>(0);
    for (int i = 0; i < n; ++i)
        pool.start([started, go] {
            started->release(); // each job holds its thread until every one runs
            go->acquire();
        });
    started->acquire(n);
    go->release(n);
}

// Not QThreadPool::globalInstance(): Qt 6.4's raster engine splits a large fill or line draw
// over the global pool and waits for it on the GUI thread, so a job of seconds there froze a
// paint for as long (5.8 s in the heatmap's paint while a 10 M-allocation session loaded its
// rows). Created on first use and never destroyed. When the application object goes away (a
// post routine of its destructor, while QCoreApplication::instance() still answers) every
// JobTracker still alive is cancelled and every pool is waited for: a job left running
// there drew text or freed a scene while Qt's fonts and globals were torn down under it (a
// crash at exit, then a hang in the crash handler, under ASan).
QThreadPool& workerPool();

// Long single jobs of their own windows (a report, a what-if replay, a comparison, ranks, video
// scoring): apart from workerPool(), so that a replay of minutes leaves the views' two workers
// free. Waited for at exit as workerPool() is.
QThreadPool& longJobPool();

// Short picture jobs (the heatmap's picture around a raster it already has: 10-40 ms): one
// thread of their own, so that they never wait behind a raster or a replay of seconds on
// workerPool(). Waited for at exit as workerPool() is.
QThreadPool& picturePool();

} // namespace fs::views
