// The time cursor: one instant shared by every view (docs/gui.md "Time cursor"). Clicking or
// dragging on a time axis moves it; the views that show an instant (histogram, memory map,
// state readout, block list) follow through a CursorWorker, which asks the engine on a worker
// thread (newest request wins) and hands back one whole snapshot.
#pragma once

#include "jobs.h"
#include "render/scene.h"

#include <QObject>

#include <memory>
#include <optional>

namespace fs::views {

class TimeCursor : public QObject
{
    Q_OBJECT
public:
    explicit TimeCursor(QObject* parent = nullptr) : QObject(parent) {}
    int64_t time() const { return t_; }
    bool isSet() const { return t_ != kNoTime; }
    void setTime(int64_t t)
    {
        if (t == t_) return;
        t_ = t;
        emit moved(t_);
    }

signals:
    void moved(qint64 t); // kNoTime when cleared

private:
    int64_t t_ = kNoTime;
};

// What the views show at the cursor, computed off the GUI thread.
struct CursorSnapshot
{
    std::shared_ptr<const render::Scene> scene;
    int track = -1;
    int64_t time = kNoTime;
    std::optional<analysis::BlocksAt> blocks; // state, blocks and fragments (the engine's)
    analysis::MemmapRaster memmap;
    // The frame the instant ends (the selected frame when the cursor is at its end) or lies
    // in, and the end of the frame before it: the histogram's comparison.
    int64_t frame = -1;
    int64_t previousFrame = -1;
    std::optional<analysis::State> previous;
    double computeMs = 0; // on the worker
};

class CursorWorker : public QObject
{
    Q_OBJECT
public:
    explicit CursorWorker(QObject* parent = nullptr);
    ~CursorWorker() override;
    // Computes the snapshot at t; while one is computed, the newest request waits and the
    // others are dropped. selectedFrame: the frame selected in the views (-1: none).
    void request(std::shared_ptr<const render::Scene> scene, int track, int64_t t,
                 int64_t selectedFrame);
    bool busy() const { return snapshots_->busy() || attributes_->busy(); }
    static int64_t defaultTime(const render::Scene& s); // where a new session's cursor starts

signals:
    void ready(std::shared_ptr<const fs::views::CursorSnapshot> snapshot);
    // The block attributes (tags, streams, call sites) of a track were read: a new request
    // gets them.
    void attributesLoaded();

private:
    // One snapshot at a time; the newest request waits, and each finished one is shown (a
    // dragged cursor shows the states on its way).
    JobTracker* snapshots_ = new JobTracker(this, JobTracker::Mode::Follow);
    JobTracker* attributes_ = new JobTracker(this, JobTracker::Mode::Serial);
};

} // namespace fs::views
