// The main window's video parts (issue 22): File › Add video…, the video frames in the collapse
// inspector, the frames table's thumbnail column.
#include "main_window.h"
#include "video_controller.h"

#include "widgets/frame_strip_widget.h"
#include "widgets/frames_model.h"
#include "widgets/panels.h"

#include <QHeaderView>
#include <QMenu>
#include <QSortFilterProxyModel>
#include <QStatusBar>
#include <QTableView>

namespace fs::gui {

void MainWindow::buildVideo(QMenu* file)
{
    video_ = new VideoController(
        this, [this](const QString& title, const QString& text) { reportError_(title, text); });
    file->addAction(video_->addVideoAction());
    file->addAction(video_->addFolderAction());

    strip_ = new views::FrameStripWidget(this);
    inspector_->insertPanel(strip_);
    connect(strip_, &views::FrameStripWidget::frameClicked, this, [this](int64_t f) {
        if (scene_) selection_->selectFrame(*scene_, f);
    });
    connect(selection_, &views::SelectionModel::changed, strip_,
            [this](const views::Selection& s) { strip_->setFrame(s.frame); });
    connect(this, &MainWindow::sceneReplaced, this, &MainWindow::showVideo);
    // The thumbnail column after the frame number, shown when the session holds a video; a
    // reset model (a new scene, another track) forgets both.
    connect(framesProxy_, &QAbstractItemModel::modelReset, this, [this] {
        const bool thumbs = framesModel_->hasThumbnails();
        QHeaderView* h = framesView_->horizontalHeader();
        if (h->visualIndex(views::FramesModel::Thumbnail) > 1)
            h->moveSection(h->visualIndex(views::FramesModel::Thumbnail), 1);
        framesView_->setColumnHidden(views::FramesModel::Thumbnail, !thumbs);
        framesView_->verticalHeader()->setDefaultSectionSize(thumbs ? 40 : 20);
        framesModel_->setThumbnailHeight(36);
    });
    connect(video_, &VideoController::added, this,
            [this](const QString& session, const QString& summary) {
                statusBar()->showMessage(summary, 15000);
                reselectFrame_ = selection_->current().frame;
                openFile(session); // every view takes the video's metrics and frames
            });
}

void MainWindow::showVideo()
{
    video_->setSession(path_, scene_);
    strip_->setScene(scene_);
    strip_->setFrame(selection_->current().frame);
    if (reselectFrame_ >= 0 && scene_ && !scene_->firstLook && scene_->frame(reselectFrame_)) {
        const int64_t f = reselectFrame_;
        reselectFrame_ = -1;
        selection_->selectFrame(*scene_, f);
    }
}

} // namespace fs::gui
