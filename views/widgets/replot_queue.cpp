#include "replot_queue.h"

#include <QPointer>
#include <QTimer>
#include <qcustomplot.h>

#include <algorithm>
#include <deque>

namespace fs::views {

namespace {

struct ReplotQueue
{
    std::deque<QPointer<QCustomPlot>> waiting;
    QTimer timer;

    ReplotQueue()
    {
        timer.setSingleShot(true);
        timer.setInterval(0);
        QObject::connect(&timer, &QTimer::timeout, [this] {
            redrawNext();
            if (!waiting.empty()) timer.start(); // the next one on a later turn
        });
    }
    void redrawNext()
    {
        while (!waiting.empty()) {
            const QPointer<QCustomPlot> p = waiting.front();
            waiting.pop_front();
            if (p) {
                p->replot(QCustomPlot::rpRefreshHint);
                return;
            }
        }
    }
};

// One per process, used from the GUI thread only; created on first use (a QTimer needs the
// application's thread).
ReplotQueue& queue()
{
    static ReplotQueue* const q = new ReplotQueue;
    return *q;
}

} // namespace

bool replotPending(const QCustomPlot* plot)
{
    const auto& w = queue().waiting;
    return plot && std::find(w.begin(), w.end(), plot) != w.end();
}

void queueReplot(QCustomPlot* plot)
{
    if (!plot || replotPending(plot)) return;
    ReplotQueue& q = queue();
    q.waiting.emplace_back(plot);
    if (!q.timer.isActive()) q.timer.start();
}

void flushReplots()
{
    ReplotQueue& q = queue();
    while (!q.waiting.empty())
        q.redrawNext();
    q.timer.stop();
}

int pendingReplots()
{
    return static_cast<int>(queue().waiting.size());
}

} // namespace fs::views
