// The thread pool every background job of the GUI runs on (rasters, the time cursor, call sites,
// search, graphs, rule changes, dropping an old scene).
#pragma once

#include <QThread>
#include <QThreadPool>

#include <algorithm>

namespace fs::views {

// Not QThreadPool::globalInstance(): Qt 6.4's raster engine splits a large fill or line draw
// over the global pool and waits for it on the GUI thread, so a job of seconds there froze a
// paint for as long (5.8 s in the heatmap's paint while a 10 M-allocation session loaded its
// rows). Created once, never destroyed: a job still running at exit is not waited for, as
// before.
inline QThreadPool& workerPool()
{
    static QThreadPool* const pool = [] {
        auto* p = new QThreadPool;
        p->setObjectName(QStringLiteral("fragscope workers"));
        p->setMaxThreadCount(std::max(2, QThread::idealThreadCount()));
        return p;
    }();
    return *pool;
}

// Long single jobs of their own windows (a report, a what-if replay, a comparison, ranks, video
// scoring): apart from workerPool(), so that a replay of minutes leaves the views' two workers
// free.
inline QThreadPool& longJobPool()
{
    static QThreadPool* const pool = [] {
        auto* p = new QThreadPool;
        p->setObjectName(QStringLiteral("fragscope long jobs"));
        p->setMaxThreadCount(8);
        return p;
    }();
    return *pool;
}

} // namespace fs::views
