// The study view (docs/ab.md "In the GUI"): a `fragscope ab` study folder opened with
// `fragscope-gui STUDY_DIR` or File › Open (its study.json). Every run's metric curves overlaid
// with the baseline's collapses marked, the collapses with their verdicts, and the selected
// collapse's frame in every run side by side (the study's thumbnails) with its PSNR and SSIM to
// the baseline's. Every figure and verdict is core/study's (readStudy judges); this only draws.
#pragma once

#include "core/study/ab_study.h"

#include <QString>
#include <QStringList>
#include <QWidget>

class QComboBox;
class QCustomPlot;
class QLabel;
class QTableWidget;

namespace fs::gui {

class StudyStripWidget;

class StudyWindow : public QWidget
{
    Q_OBJECT
public:
    explicit StudyWindow(const QString& folder, QWidget* parent = nullptr);

    // The study folder `path` names (the folder itself, or its study.json); empty when it is no
    // study.
    static QString studyFolder(const QString& path);
    // Opens a study window (deleted on close) when path is a study; false otherwise.
    static bool openIfStudy(const QString& path);

    bool ok() const { return error_.isEmpty(); }
    const QString& error() const { return error_; }
    const study::Study& study() const { return study_; }
    // Shows collapse i (its row, its frame in every run, its verdict).
    void selectCollapse(int i);
    void setMetric(const QString& name);
    // fragscope-gui --screenshots DIR STUDY_DIR: the view with each collapse selected, as PNG.
    QStringList writeScreenshots(const QString& dir);

    QTableWidget* collapsesTable() const { return collapses_; }
    QCustomPlot* plot() const { return plot_; }
    QLabel* verdictLabel() const { return verdict_; }
    QComboBox* metricBox() const { return metric_; }
    int framesShown() const { return framesShown_; }

private:
    void build();
    void fillCollapses();
    void fillPlot();
    void fillFrames(int64_t frame);

    QString folder_;
    QString error_;
    study::Study study_;
    int current_ = -1;
    int framesShown_ = 0;
    QLabel* headline_ = nullptr;
    QComboBox* metric_ = nullptr;
    QCustomPlot* plot_ = nullptr;
    QTableWidget* collapses_ = nullptr;
    QLabel* verdict_ = nullptr;
    StudyStripWidget* strip_ = nullptr;
};

} // namespace fs::gui
