// Loads sessions on a worker thread (fragscope_render::loadScene) and hands the whole, immutable
// Scene back on the GUI thread. A trace that is not a session is first imported on the same
// worker, with progress and cancel (core/import/open_input.h: beside the input or in the cache
// directory, reused while the input is unchanged). Newest request wins: load() cancels whatever is
// running, and a cancelled or superseded job's result is dropped, so the window keeps showing what
// it had.
#pragma once

#include "render/live_scene.h"
#include "render/scene.h"
#include "widgets/jobs.h"

#include <QObject>
#include <QString>
#include <QThreadPool>

#include <atomic>
#include <memory>

namespace fs::gui {

class SessionLoader : public QObject
{
    Q_OBJECT
public:
    explicit SessionLoader(QObject* parent = nullptr);
    ~SessionLoader() override;
    void load(const QString& path);
    // A live refresh (render::LiveScene::refresh) of a file a recording is still writing; the
    // window shows no progress for it and keeps its view state.
    void refresh(std::shared_ptr<render::LiveScene> live, const QString& path);
    // Rules the next loads evaluate on the worker (the user's saved rules).
    void setRules(std::vector<analysis::CollapseRule> rules) { rules_ = std::move(rules); }
    // Allocations from which a session without its stored index is previewed (previewed());
    // analysis::kPreviewFromAllocations unless set (tests preview their small fixtures).
    void setPreviewFrom(int64_t allocations) { previewFrom_ = allocations; }
    void cancel();
    bool busy() const { return busy_; }
    // Whether the running (or else the last) job is a live refresh.
    bool live() const { return live_; }
    // Blocks until no job runs (tests, shutdown).
    void wait();

signals:
    void started(const QString& path);
    void progress(int percent, const QString& stage);
    // Staged results: the summary as soon as it is read, long before the scene.
    void summaryRead(const QString& path, const fs::SessionSummary& summary);
    // A session read without its stored index: the heatmap's level-of-detail picture of its
    // default track (render::previewScene, no engine), as soon as the allocation records are
    // read; loaded() follows with the first look.
    void previewed(const QString& path, std::shared_ptr<const fs::render::Scene> preview);
    // path: the session file (for a trace opened directly, the session it was imported into).
    // The scene is a first look (Scene::firstLook): timelines, frames, collapses and the
    // heatmap can be drawn; completed() follows with the same engine once the allocation
    // records are read and the OOMs diagnosed (busy() until then). A live refresh emits only
    // loaded(), with a complete scene.
    void loaded(const QString& path, std::shared_ptr<const fs::render::Scene> scene);
    void completed(const QString& path, std::shared_ptr<const fs::render::Scene> scene);
    // A trace (PyTorch snapshot, Kineto trace, nsys export) was imported into session, or an
    // earlier import of the same unchanged input was reused; loaded() follows.
    void imported(const QString& input, const QString& session, bool reused);
    void failed(const QString& path, const QString& message);
    void cancelled(const QString& path);

private:
    void start(const QString& path, std::shared_ptr<render::LiveScene> live);

    QThreadPool pool_;
    views::JobTracker* jobs_ = nullptr; // on pool_: a new load cancels the one running
    QString path_;
    bool busy_ = false;
    bool live_ = false;
    std::vector<analysis::CollapseRule> rules_;
    int64_t previewFrom_ = analysis::kPreviewFromAllocations;
};

} // namespace fs::gui
