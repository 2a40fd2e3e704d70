// File › Add video… and File › Add video frames folder…: scores the generated video of the open
// session on a worker thread with video::addVideo (the same code as `fragscope metrics
// compute`), with progress and Cancel, then asks the window to reload the session so that every
// view shows the video's metrics and frames. A frame map that does not fit, or metrics of the
// same names from another source, are put to the user as a question (the --map that fits, or
// replacing them) and the work runs again with the answer. Unavailable, with the reason as the
// actions' tooltip, without OpenCV, without a session, while recording or while one runs.
#pragma once

#include "render/scene.h"
#include "widgets/jobs.h"

#include <QObject>
#include <QPointer>
#include <QString>

#include <functional>
#include <memory>

class QAction;
class QProgressDialog;
class QWidget;

namespace fs::gui {

class VideoController : public QObject
{
    Q_OBJECT
public:
    using ErrorReporter = std::function<void(const QString& title, const QString& text)>;
    // Asks a yes/no question; tests replace it (the default is a modal QMessageBox).
    using Question = std::function<bool(const QString& title, const QString& text)>;
    VideoController(QWidget* window, ErrorReporter errors);
    ~VideoController() override;
    QAction* addVideoAction() const { return video_; }
    QAction* addFolderAction() const { return folder_; }
    void setQuestion(Question q) { question_ = std::move(q); }
    void setSession(const QString& path, std::shared_ptr<const render::Scene> scene);
    QString disabledReason() const { return reason_; }
    // Scores `video` (a file or a folder of frames) against the open session; perSessionFrame
    // and offset: the frame map (analysis::FrameMap).
    void start(const QString& video, int64_t perSessionFrame = 1, int64_t offset = 0,
               bool replaceOthers = false);
    void cancel();
    bool running() const { return jobs_->busy(); }
    QProgressDialog* progressDialog() const;

signals:
    void progress(int done, int total);
    // The session now holds the video: the window reloads it.
    void added(const QString& sessionPath, const QString& summary);
    void failed(const QString& message);
    void cancelled();

private:
    void update();
    void choose(bool folder);

    QWidget* window_;
    ErrorReporter errors_;
    Question question_;
    QAction* video_ = nullptr;
    QAction* folder_ = nullptr;
    QString path_;
    std::shared_ptr<const render::Scene> scene_;
    QString reason_;
    QPointer<QProgressDialog> progress_;
    // The scoring, on the long-job pool; closing the window drops its result.
    views::JobTracker* jobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Serial, &views::longJobPool());
};

} // namespace fs::gui
