#include "time_cursor.h"

#include "render/scene_explore.h"

#include <QElapsedTimer>

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
    // Block attributes (tag, stream, call site) are read once per track, apart: the first
    // snapshots come without them rather than after them.
    const bool haveAttributes = render::attributesReady(*scene, track);
    if (!haveAttributes && !attributes_->busy() && render::canExplore(*scene))
        attributes_->start([scene, track](const Job&) { render::loadAttributes(*scene, track); },
                           [this] { emit attributesLoaded(); });
    snapshots_->start(
        [scene = std::move(scene), track, t, selectedFrame, haveAttributes](const Job&) {
            QElapsedTimer clock;
            clock.start();
            auto snap = std::make_shared<CursorSnapshot>();
            const render::Scene& s = *scene;
            snap->scene = scene;
            snap->track = track;
            snap->time = t;
            snap->blocks = render::blocksAt(s, track, t, haveAttributes);
            snap->memmap = s.memmap(track, t, 7);
            const analysis::FrameInfo* f = s.frame(selectedFrame);
            if (!f || f->start == kNoTime || f->end != t) f = s.frameAt(t);
            if (f) {
                snap->frame = f->index;
                const analysis::FrameInfo* p = s.frame(f->index - 1);
                if (p && p->start != kNoTime && f->end == t) {
                    snap->previousFrame = p->index;
                    snap->previous = s.stateAt(track, p->end);
                }
            }
            snap->computeMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
            return std::shared_ptr<const CursorSnapshot>(std::move(snap));
        },
        [this](std::shared_ptr<const CursorSnapshot> snap) { emit ready(std::move(snap)); });
}

} // namespace fs::views
