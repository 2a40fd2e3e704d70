#include "video_controller.h"

#include "core/versions.h"
#include "fragscope_version.h"

#if FRAGSCOPE_VIDEO
#include "core/video/module.h"
#endif

#include <QAction>
#include <QApplication>
#include <QFileDialog>
#include <QFileInfo>
#include <QMessageBox>
#include <QProgressDialog>

namespace fs::gui {

VideoController::VideoController(QWidget* window, ErrorReporter errors)
    : QObject(window), window_(window), errors_(std::move(errors))
{
    question_ = [this](const QString& title, const QString& text) {
        return QMessageBox::question(window_, title, text) == QMessageBox::Yes;
    };
    video_ = new QAction(tr("Add &video…"), this);
    video_->setShortcut(QKeySequence(tr("Ctrl+Shift+V")));
    video_->setStatusTip(tr("Score every frame of the generated video (optical flow, warp error, "
                            "flicker, SSIM) and keep its thumbnails in the session"));
    folder_ = new QAction(tr("Add video &frames folder…"), this);
    folder_->setStatusTip(tr("The same for a folder of numbered PNG/JPEG frames"));
    connect(video_, &QAction::triggered, this, [this] { choose(false); });
    connect(folder_, &QAction::triggered, this, [this] { choose(true); });
    update();
}

VideoController::~VideoController() = default; // the tracker stops the scoring, drops its result

QProgressDialog* VideoController::progressDialog() const
{
    return progress_;
}

void VideoController::setSession(const QString& path, std::shared_ptr<const render::Scene> scene)
{
    path_ = path;
    scene_ = std::move(scene);
    update();
}

void VideoController::update()
{
    if (!fs::videoBuilt())
        reason_ = QString::fromUtf8(fs::noVideoReason()) + QStringLiteral(".");
    else if (!scene_)
        reason_ = tr("Open a session first.");
    else if (scene_->live)
        reason_ = tr("A recording is still being written: add the video once it has stopped.");
    else if (scene_->frames.empty())
        reason_ = tr("This session has no frames ('frame N' markers or record_function "
                     "annotations): video frames have nothing to map to.");
    else if (running())
        reason_ = tr("A video is being scored.");
    else
        reason_.clear();
    for (QAction* a : {video_, folder_}) {
        a->setEnabled(reason_.isEmpty());
        a->setToolTip(reason_.isEmpty() ? a->statusTip() : reason_);
    }
}

void VideoController::choose(bool folder)
{
    if (!reason_.isEmpty()) {
        errors_(tr("Add video"), reason_);
        return;
    }
    const QString dir = QFileInfo(path_).absolutePath();
    const QString v =
        folder ? QFileDialog::getExistingDirectory(window_, tr("Folder of numbered frames"), dir)
               : QFileDialog::getOpenFileName(
                     window_, tr("Generated video"), dir,
                     tr("Videos (*.mp4 *.webm *.mkv *.avi *.mov *.gif);;All files (*)"));
    if (!v.isEmpty()) start(v);
}

void VideoController::start(const QString& video, int64_t perSessionFrame, int64_t offset,
                            bool replaceOthers)
{
#if FRAGSCOPE_VIDEO
    if (running() || path_.isEmpty()) return;
    video::AddVideoOptions o;
    o.session = path_.toStdString();
    o.video = video.toStdString();
    o.map = {perSessionFrame, offset};
    o.replaceOthers = replaceOthers;

    progress_ = new QProgressDialog(tr("Scoring %1…").arg(QFileInfo(video).fileName()),
                                    tr("Cancel"), 0, 0, window_);
    progress_->setWindowTitle(tr("Add video"));
    progress_->setAttribute(Qt::WA_DeleteOnClose);
    progress_->setMinimumDuration(0);
    progress_->setAutoClose(false);
    progress_->setAutoReset(false);
    connect(progress_, &QProgressDialog::canceled, this, &VideoController::cancel);
    progress_->show();

    struct Outcome
    {
        QString error, summary, question;
        int64_t suggestK = 0, suggestOffset = 0;
        bool conflict = false, cancelled = false;
    };
    jobs_->start(
        [this, o, video](const views::Job& job) mutable {
            o.analyze.cancel = job.cancelFlag();
            int last = -1;
            // Frames scored (of how many, when the video says), to the dialog and progress().
            o.analyze.progress = [this, &job, &last](int64_t done, int64_t total) {
                if (done == last) return;
                last = static_cast<int>(done);
                job.post([this, d = static_cast<int>(done), t = static_cast<int>(total)] {
                    if (progress_) {
                        progress_->setMaximum(t > 0 ? t : 0);
                        progress_->setValue(t > 0 ? std::min(d, t) : 0);
                        progress_->setLabelText(tr("Scoring frame %1%2…")
                                                    .arg(d)
                                                    .arg(t > 0 ? tr(" of %1").arg(t) : QString()));
                    }
                    emit progress(d, t);
                });
            };
            Outcome out;
            try {
                const video::AddVideoResult r = video::module().addVideo(o);
                out.summary =
                    tr("%1: %2 frames scored, %3 session frames; %4")
                        .arg(QFileInfo(video).fileName())
                        .arg(r.analysis.frames)
                        .arg(r.sessionMetrics.size())
                        .arg(r.breaks.empty() ? tr("no frame breaks warp_error_z > 6")
                                              : tr("%n frame(s) break warp_error_z > 6", nullptr,
                                                   static_cast<int>(r.breaks.size())));
            } catch (const video::Cancelled&) {
                out.cancelled = true;
            } catch (const video::Refused& e) {
                out.question = QString::fromStdString(e.what());
                out.conflict = e.kind() == video::Refused::Kind::Conflict;
                if (e.suggestion()) {
                    out.suggestK = e.suggestion()->perSessionFrame;
                    out.suggestOffset = e.suggestion()->offset;
                }
                if (!out.conflict && !e.suggestion()) out.error = out.question;
            } catch (const std::exception& e) {
                out.error = QString::fromStdString(e.what());
            }
            return out;
        },
        [this, video, o](const Outcome& out) {
            if (progress_) progress_->close();
            update();
            if (out.cancelled) {
                emit cancelled();
                return;
            }
            if (!out.question.isEmpty() && out.error.isEmpty()) {
                // Asked, then run again with the answer (nothing was written).
                const bool yes = question_(
                    tr("Add video"),
                    out.conflict
                        ? out.question + tr("\n\nReplace them with the video's values?")
                        : out.question +
                              tr("\n\nUse %1 video frame(s) per session frame?").arg(out.suggestK));
                if (!yes) {
                    emit cancelled();
                    return;
                }
                if (out.conflict)
                    start(video, o.map.perSessionFrame, o.map.offset, true);
                else
                    start(video, out.suggestK, out.suggestOffset, o.replaceOthers);
                return;
            }
            if (!out.error.isEmpty()) {
                emit failed(out.error);
                errors_(tr("Add video failed"), out.error);
                return;
            }
            emit added(path_, out.summary);
        });
    update(); // running() now: the action is disabled until the job ends
#else
    (void)video;
    (void)perSessionFrame;
    (void)offset;
    (void)replaceOthers;
    errors_(tr("Add video"), reason_);
#endif
}

void VideoController::cancel()
{
    jobs_->interrupt(); // the scoring stops at its next frame and says so
    if (progress_) progress_->setLabelText(tr("Cancelling…"));
}

} // namespace fs::gui
