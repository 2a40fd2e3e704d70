// The ranks view: several sessions or snapshots of one job as one run (fragscope-gui A B C…,
// File › Open ranks…). Each rank's heatmap is a lane, the lanes stacked and time aligned (zoom
// or pan one and the others follow on the shared axis); the reserved memory of every rank is
// overlaid on one plot with each rank's collapse onsets and OOMs; a summary table gives each
// rank's own figures and the headline names the first rank to collapse and to hit an OOM; the
// frames table has a column per rank. Every figure is fs::analysis::analyseRanks' (the engine's):
// this window loads the scenes on a worker, and only draws. Files of different jobs are refused
// with the engine's reason; the Align box can then show them anyway ("none").
#pragma once

#include "core/analysis/ranks.h"
#include "render/scene.h"
#include "widgets/jobs.h"

#include <QStringList>
#include <QWidget>
#include <memory>
#include <vector>

class QComboBox;
class QCustomPlot;
class QCPRange;
class QLabel;
class QScrollArea;
class QTableView;
class QTableWidget;
class QVBoxLayout;

namespace fs::views {
class HeatmapWidget;
class RankFramesModel;
} // namespace fs::views

namespace fs::gui {

class RanksWindow : public QWidget
{
    Q_OBJECT
public:
    explicit RanksWindow(const QStringList& files, QWidget* parent = nullptr);
    ~RanksWindow() override;

    // What is shown; null until loaded (or when the files were refused).
    std::shared_ptr<const analysis::RankRun> run() const { return run_; }
    // Lines the loaded ranks up again under another mode (the Align box does this).
    void setAlignMode(analysis::RankAlignMode mode);
    // Zooms every lane and the plot to frame f on the shared axis, selects its row, and scrolls
    // the lane of the frame's first rank to collapse (else to hit an OOM) into view.
    void selectFrame(int64_t frame);
    // The shared time window shown (the reference rank's clock). The lanes follow it within the
    // span every rank covers.
    std::pair<int64_t, int64_t> sharedWindow() const { return {t0_, t1_}; }
    // fragscope-gui --screenshots DIR A B…: waits for the load, then renders the view offscreen
    // (whole run, then zoomed on the first rank's collapse or OOM) into DIR; the paths written.
    // On a refusal or a bad file, nothing is written and `error` says why.
    QStringList writeScreenshots(const QString& dir, QString& error);

    QLabel* headline() const { return headline_; }
    QLabel* status() const { return status_; }
    QComboBox* alignBox() const { return align_; }
    QTableWidget* summaryTable() const { return summary_; }
    QTableView* framesTable() const { return framesView_; }
    views::RankFramesModel* framesModel() const { return frames_; }
    QCustomPlot* reservedPlot() const { return plot_; }
    const std::vector<views::HeatmapWidget*>& lanes() const { return lanes_; }

signals:
    // After each load or re-alignment: ok, or the reason ("FILE: problem", or why the files
    // cannot be one job's ranks).
    void loaded(bool ok, const QString& error);

private:
    struct Loaded;
    void start(analysis::RankAlignMode mode);
    void present(std::shared_ptr<const Loaded> l);
    void fail(const QString& error);
    void buildLanes();
    void fillSummary();
    void fillPlot();
    void setWindow(int64_t t0, int64_t t1, int from); // from: the lane that moved, -1 none
    int64_t sharedBegin() const;

    QStringList files_;
    std::vector<std::shared_ptr<const render::Scene>> fileScenes_; // in the files' order
    std::vector<std::shared_ptr<const render::Scene>> scenes_;     // by rank, once lined up
    std::shared_ptr<const analysis::RankRun> run_;
    int64_t t0_ = 0, t1_ = 1;
    int64_t commonBegin_ = 0, commonEnd_ = 0; // the span every rank covers (shared axis)
    bool linking_ = false;
    // Loads the rank files and lines them up (one at a time).
    views::JobTracker* jobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Serial, &views::longJobPool());
    QLabel* headline_ = nullptr;
    QLabel* status_ = nullptr;
    QComboBox* align_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QCustomPlot* plot_ = nullptr;
    QVBoxLayout* lanesLayout_ = nullptr;
    QScrollArea* lanesScroll_ = nullptr;
    std::vector<views::HeatmapWidget*> lanes_;
    std::vector<QLabel*> laneTitles_;
    views::RankFramesModel* frames_ = nullptr;
    QTableView* framesView_ = nullptr;
};

// File › Open ranks…: asks for the files of a job's ranks and opens them in a RanksWindow.
void openRanksDialog(QWidget* parent);

} // namespace fs::gui
