// fragscope-gui's main window: dockable, restorable views over one loaded Scene, all driven by
// one SelectionModel.
#pragma once

#include "core/analysis/explore.h"
#include "core/analysis/report.h"
#include "render/render.h"
#include "session_loader.h"
#include "widgets/jobs.h"
#include "widgets/panel.h"
#include "widgets/selection.h"

#include <QMainWindow>
#include <QPalette>
#include <QPointer>
#include <QProcess>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

class QComboBox;
class QLabel;
class QProgressBar;
class QPushButton;
class QTableView;
class QSortFilterProxyModel;
class QMenu;
class QTimer;

namespace fs::views {
class BlockList;
class CallSitesPanel;
class CursorBar;
class CursorWorker;
class SearchPanel;
class TimeCursor;
struct CursorSnapshot;
class HeatmapWidget;
class TimelineWidget;
class HistogramWidget;
class MemMapWidget;
class KernelLaneWidget;
class FramesModel;
class CollapseInspector;
class AllocationDetails;
class OomList;
class CorrelationTable;
class GraphsPanel;
class FrameStripWidget;
} // namespace fs::views

namespace fs::gui {

class CompareWindow;
class ReportWindow;
class WhatIfController;
class VideoController;

class MainWindow : public QMainWindow
{
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    ~MainWindow() override;

    void openFile(const QString& path);
    // File › Compare with…: a and b are anything Open takes. The window opens at once; what
    // cannot be read is reported (through the error reporter) and the window closes.
    CompareWindow* compareWith(const QString& a, const QString& b);
    // Records process pid into out through `fragscope attach` (File › Attach… after its dialogs).
    // While it runs the views refresh from the growing file every kLiveRefreshMs; when it ends
    // (stopRecording, or the process exits) the finished session is opened.
    bool startRecording(qint64 pid, const QString& out);
    bool recording() const { return !attachProc_.isNull(); }
    void stopRecording();
    // Marks this moment in the recorded process (`fragscope mark PID`): a flight recorder writes
    // a window around it, a whole recording keeps it as a marker.
    void markRecording();
    static constexpr int kLiveRefreshMs = 400;
    // How errors reach the user; tests replace it to avoid modal dialogs.
    using ErrorReporter = std::function<void(const QString& title, const QString& text)>;
    void setErrorReporter(ErrorReporter r) { reportError_ = std::move(r); }

    std::shared_ptr<const render::Scene> scene() const { return scene_; }
    SessionLoader* loader() const { return loader_; }
    // Loading, or a new scene's timelines and frames table not drawn yet (setTrack stages them).
    bool busy() const;
    views::SelectionModel* selection() const { return selection_; }
    views::HeatmapWidget* heatmap() const { return heatmap_; }
    views::TimelineWidget* timeline() const { return timeline_; }
    views::HistogramWidget* histogram() const { return histogram_; }
    views::MemMapWidget* memmap() const { return memmap_; }
    views::CollapseInspector* inspector() const { return inspector_; }
    views::CorrelationTable* correlationTable() const { return correlations_; }
    views::AllocationDetails* details() const { return details_; }
    views::KernelLaneWidget* kernels() const { return kernels_; }
    views::GraphsPanel* graphsPanel() const { return graphs_; }
    // Every panel (widgets/panel.h) that takes the open scene, in the order they take it.
    const std::vector<views::Panel*>& panels() const { return panels_; }
    QTableView* framesView() const { return framesView_; }
    views::FramesModel* framesModel() const { return framesModel_; }
    int track() const { return track_; }
    WhatIfController* whatIf() const { return whatIf_; }
    QString statusText() const;
    // Current state as render options (export dialog, report, screenshots).
    render::RenderOptions renderOptions(render::View v) const;
    bool exportView(render::View v, const QString& path, QSize size, QString* error) const;
    // Writes heatmap/timeline/histogram/memmap images into dir now, and report.txt (the text
    // `fragscope report` prints) once a worker has computed it: reportExported says when.
    bool exportReport(const QString& dir, QString* error);
    // View › Report…: the report of the open session in a window of its own (null: none open).
    ReportWindow* showReport();
    // --screenshots: renders the window in several states into dir; returns the files written.
    QStringList writeScreenshots(const QString& dir);
    void setDark(bool dark);
    bool isDark() const { return dark_; }

    // ---- time cursor, block list, call sites, search (main_window_cursor.cpp) ----
    views::TimeCursor* timeCursor() const { return cursor_; }
    views::BlockList* blockList() const { return blockList_; }
    views::CallSitesPanel* callSites() const { return callSites_; }
    views::SearchPanel* searchPanel() const { return search_; }
    views::CursorBar* cursorBar() const { return cursorBar_; }
    // The snapshot the views show (null before the first).
    std::shared_ptr<const views::CursorSnapshot> cursorSnapshot() const { return snapshot_; }
    void setCursorTime(int64_t t); // clamped to the session
    void stepEvent(int dir);       // previous (< 0) or next allocator event of the track
    void stepFrame(int dir);
    enum class Jump {
        MaxRatio,
        PeakReserved,
        MinLargest,
        NextOom,
        PreviousOom,
        NextCollapse,
        PreviousCollapse
    };
    bool jump(Jump j); // false when the session has no such moment (or not computed yet)
    const std::optional<analysis::JumpTargets>& jumpTargets() const { return jumps_; }
    bool stateOnly() const { return stateOnly_; }
    // View › Layout (main_window_layout.cpp).
    enum class Layout { Default, InspectorFirst, Explore };
    void applyLayout(Layout l);
    // --screenshots: gui-cursor.png (the cursor at max F, the block list) and gui-callsites.png
    // (top call sites, the heatmap coloured by call site); shot(name) settles and saves.
    void exploreScreenshots(const std::function<void(const QString&)>& shot);
    VideoController* video() const { return video_; }
    views::FrameStripWidget* frameStrip() const { return strip_; }

signals:
    // A live refresh reached the views (events committed so far).
    void liveUpdated(qint64 events);
    // The views show the state at the cursor (its snapshot arrived).
    void cursorShown(qint64 t);
    // scene() is another one (opened, reloaded, new rules, a live refresh, the complete scene).
    void sceneReplaced();
    // exportReport's report.txt was written (error empty) or could not be.
    void reportExported(const QString& path, const QString& error);

protected:
    void closeEvent(QCloseEvent*) override;
    void dragEnterEvent(QDragEnterEvent*) override;
    void dropEvent(QDropEvent*) override;

private:
    void buildDocks();
    void buildMenus();
    void setScene(const QString& path, std::shared_ptr<const render::Scene> scene);
    void replaceScene(std::shared_ptr<const render::Scene> scene, bool keepView);
    // The heatmap leaves a loader's preview (SessionLoader::previewed); restore: back to the
    // scene the other views show (a load that failed or was cancelled).
    void endPreview(bool restore);
    void onSelection(const views::Selection& s);
    // staged: the heatmap and the cheap views now, the timelines and the frames table on later
    // turns of the event loop (a new scene's first look: at once they held it ~55 ms).
    void setTrack(int track, bool staged = false);
    void fillTrackBox(); // the track selector from scene_->tracks
    void addRecent(const QString& path);
    void rebuildRecentMenu();
    void showExportDialog();
    void exportReportDialog();
    void importDialog();
    void attachDialog();
    void refreshLive();
    void showLive(const QString& path, std::shared_ptr<const render::Scene> scene);
    void editRules();
    void showShortcuts();
    void showAbout();
    void updateStatus();
    void applyRules(const std::vector<analysis::CollapseRule>& rules);
    // Explore (main_window_cursor.cpp): the heatmap under the cursor bar; docks; Go menu; what
    // a new scene, track, selection or complete scene changes for them.
    QWidget* buildCentral();
    void buildExploreDocks();
    void buildExploreMenus();
    void exploreScene(bool keepView);
    void exploreLevel();
    void exploreSelection(const views::Selection& s);
    void exploreCompleted();
    bool exploreBusy() const; // a cursor snapshot, call-site table or search still computing
    void onCursorMoved(int64_t t);
    void onSnapshot(std::shared_ptr<const views::CursorSnapshot> s);
    void updateHeatmapStyle();
    void fillOomMenu();
    // Layout (main_window_layout.cpp): sessions without frames or kernels give the frames
    // table, inspector and kernel lane's room to the block list and call sites; the palette.
    void adaptLayout();
    void applyPalette(bool dark);
    // main_window_video.cpp: File › Add video…, the inspector's video frames, the thumbnails.
    void buildVideo(QMenu* file);
    void showVideo();
    analysis::ReportOptions reportOptions() const; // the settings file's (burst gap, window)

    SessionLoader* loader_ = nullptr;
    views::SelectionModel* selection_ = nullptr;
    std::shared_ptr<const render::Scene> scene_;
    QString path_;
    int track_ = -1;
    bool dark_ = false;
    ErrorReporter reportError_;

    views::HeatmapWidget* heatmap_ = nullptr;
    views::TimelineWidget* timeline_ = nullptr;
    views::HistogramWidget* histogram_ = nullptr;
    views::MemMapWidget* memmap_ = nullptr;
    views::KernelLaneWidget* kernels_ = nullptr;
    views::CollapseInspector* inspector_ = nullptr;
    views::AllocationDetails* details_ = nullptr;
    views::OomList* oomList_ = nullptr;
    views::CorrelationTable* correlations_ = nullptr;
    views::GraphsPanel* graphs_ = nullptr; // CUDA graphs and pools (graphs_panel.h)
    // The panels above that take every scene (widgets/panel.h), in the order they take it: the
    // heatmap first (it sets the viewport the others follow).
    std::vector<views::Panel*> panels_;
    views::FramesModel* framesModel_ = nullptr;
    QSortFilterProxyModel* framesProxy_ = nullptr;
    QTableView* framesView_ = nullptr;
    QComboBox* trackBox_ = nullptr;
    QLabel* healthLabel_ = nullptr;
    QLabel* syntheticLabel_ = nullptr;
    QLabel* axisLabel_ = nullptr;
    QProgressBar* progress_ = nullptr;
    QPushButton* cancelButton_ = nullptr;
    QMenu* recentMenu_ = nullptr;
    QAction* backAction_ = nullptr;
    QAction* stopRecordingAction_ = nullptr;
    QAction* markRecordingAction_ = nullptr;
    QPointer<QProcess> attachProc_; // `fragscope attach` while recording
    QString recordingPath_;
    std::shared_ptr<render::LiveScene> live_; // the recording's scene, refreshed in increments
    qint64 recordingPid_ = 0;
    QTimer* liveTimer_ = nullptr;
    QLabel* liveLabel_ = nullptr;
    QAction* forwardAction_ = nullptr;
    WhatIfController* whatIf_ = nullptr; // File › What-if replay…
    VideoController* video_ = nullptr;   // File › Add video…
    views::FrameStripWidget* strip_ = nullptr;
    int64_t reselectFrame_ = -1; // selected again once a reload after adding a video is in
    bool syncing_ = false;
    bool previewing_ = false;      // the heatmap shows a loader's preview, not scene_
    uint64_t levelGeneration_ = 0; // a staged setTrack's later steps run only if it is current
    int stagesPending_ = 0;
    views::JobTracker* rulesJobs_ = new views::JobTracker(this); // the newest rules win
    views::JobTracker* reportJobs_ = // File › Export report's text report
        new views::JobTracker(this, views::JobTracker::Mode::Replace, &views::longJobPool());

    views::TimeCursor* cursor_ = nullptr;
    views::CursorWorker* cursorWorker_ = nullptr;
    views::CursorBar* cursorBar_ = nullptr;
    views::BlockList* blockList_ = nullptr;
    views::CallSitesPanel* callSites_ = nullptr;
    views::SearchPanel* search_ = nullptr;
    std::shared_ptr<const views::CursorSnapshot> snapshot_;
    std::optional<analysis::JumpTargets> jumps_;
    views::JobTracker* jumpJobs_ = new views::JobTracker(this); // the jump targets of a track
    bool stateOnly_ = false;
    int64_t shownFrame_ = -1;       // the selection's frame the cursor last followed
    int64_t shownMarker_ = kNoTime; // ... and its marked instant
    analysis::Colouring colourBy_ = analysis::Colouring::Occupancy;
    std::vector<analysis::CategoryRule> categoryRules_; // the settings file's (heatmap colouring)
    QString highlight_; // the search whose matches the heatmap highlights
    analysis::FragmentedRule fragmentedRule_;
    QMenu* jumpMenu_ = nullptr;
    QMenu* oomMenu_ = nullptr;
    QList<QAction*> jumpActions_; // by Jump
    QByteArray defaultLayout_;
    QStringList hiddenForSession_; // docks adaptLayout() hid (it shows them again)
    QPalette originalPalette_;
};

} // namespace fs::gui
