#include "time_cursor.h"

#include "render/scene_explore.h"
#include "worker_pool.h"
#include "worker_priority.h"

#include <QCoreApplication>
#include <QElapsedTimer>
#include <QPointer>

namespace fs::views {

CursorWorker::CursorWorker(QObject* parent) : QObject(parent) {}
CursorWorker::~CursorWorker() = default;

int64_t CursorWorker::defaultTime(const render::Scene& s)
{
    // The end of the last timed frame (at the session end a run has often freed everything),
    // else the session end: where the histogram and memory map were drawn before the cursor.
    for (auto it = s.frames.rbegin(); it != s.frames.rend(); ++it)
        if (it->start != kNoTime) return it->end;
    return s.timeEnd();
}

void CursorWorker::request(std::shared_ptr<const render::Scene> scene, int track, int64_t t,
                           int64_t selectedFrame)
{
    if (!scene || track < 0 || t == kNoTime) return;
    Request r{std::move(scene), track, t, selectedFrame};
    if (running_) {
        pending_ = std::move(r); // newest wins: an older pending request is dropped
        return;
    }
    start(std::move(r));
}

void CursorWorker::start(Request r)
{
    running_ = true;
    QPointer<CursorWorker> self(this);
    // Block attributes (tag, stream, call site) are read once per track, apart: the first
    // snapshots come without them rather than after them.
    const bool haveAttributes = render::attributesReady(*r.scene, r.track);
    if (!haveAttributes && !loadingAttributes_ && render::canExplore(*r.scene)) {
        loadingAttributes_ = true;
        workerPool().start([self, scene = r.scene, track = r.track] {
            lowerWorkerPriority();
            render::loadAttributes(*scene, track);
            QMetaObject::invokeMethod(
                qApp,
                [self] {
                    if (!self) return;
                    self->loadingAttributes_ = false;
                    emit self->attributesLoaded();
                },
                Qt::QueuedConnection);
        });
    }
    workerPool().start([self, r, haveAttributes] {
        lowerWorkerPriority();
        QElapsedTimer clock;
        clock.start();
        auto snap = std::make_shared<CursorSnapshot>();
        const render::Scene& s = *r.scene;
        snap->scene = r.scene;
        snap->track = r.track;
        snap->time = r.t;
        snap->blocks = render::blocksAt(s, r.track, r.t, haveAttributes);
        snap->memmap = s.memmap(r.track, r.t, 7);
        const analysis::FrameInfo* f = s.frame(r.frame);
        if (!f || f->start == kNoTime || f->end != r.t) f = s.frameAt(r.t);
        if (f) {
            snap->frame = f->index;
            const analysis::FrameInfo* p = s.frame(f->index - 1);
            if (p && p->start != kNoTime && f->end == r.t) {
                snap->previousFrame = p->index;
                snap->previous = s.stateAt(r.track, p->end);
            }
        }
        snap->computeMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        QMetaObject::invokeMethod(
            qApp,
            [self, snap] {
                if (!self) return;
                self->running_ = false;
                if (self->pending_) {
                    Request next = std::move(*self->pending_);
                    self->pending_.reset();
                    self->start(std::move(next));
                }
                emit self->ready(snap);
            },
            Qt::QueuedConnection);
    });
}

} // namespace fs::views
