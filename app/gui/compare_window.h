// The GUI's compare mode: two sessions side by side (a what-if replay against the replay under the
// recorded settings, the model against the real run, or two recordings), optionally with a third
// drawn thin beside them (the real run beside two replays). The figures are
// fs::analysis::compareSessions' (the analysis engine's), computed on a worker thread with both
// sessions' scenes; this window only draws them: A's and B's heatmaps side by side, B's reserved
// bytes and fragmentation ratio overlaid on A's as steps, the summaries with B - A, and the
// per-frame (or per-instant) rows. A session ends where its data ends. The heatmaps and the
// plots zoom and pan together, in one time unit (compare_axis.h says how their axes line up). A
// what-if run (setWhatIf) shows what B is compared with and its fidelity verdict above
// everything: a replay is the model's, never a measurement, and its collapses are not its own.
#pragma once

#include "compare_axis.h"
#include "core/alloc/whatif.h"
#include "core/analysis/compare.h"
#include "render/render.h"
#include "widgets/jobs.h"

#include <QWidget>
#include <memory>

class QCustomPlot;
class QCPRange;
class QLabel;
class QPushButton;
class QTableWidget;

namespace fs::views {
class HeatmapWidget;
}

namespace fs::gui {

class CompareWindow : public QWidget
{
    Q_OBJECT
public:
    // a, b: anything File › Open takes (a session, or a trace imported for viewing first);
    // `reference`: a third drawn as a thin curve on the plots and in the summary ("" for none).
    // What cannot be read is reported (loaded(false, "FILE: problem")) and nothing else shown.
    CompareWindow(const QString& a, const QString& b, QWidget* parent = nullptr,
                  const QString& reference = {});
    // B is the replay `r` wrote: its fidelity verdict is shown, and B can be saved.
    void setWhatIf(std::shared_ptr<const alloc::WhatIfResult> r);
    const alloc::WhatIfResult* whatIf() const { return whatIf_.get(); }
    // The comparison shown; null until it is computed (or when it failed).
    const analysis::Comparison* comparison() const { return c_.get(); }
    // A against the reference (its rows' b side is the reference's curve); null without one.
    const analysis::Comparison* referenceComparison() const { return ref_.get(); }
    // A, B, B - A of the summaries, and the reference's (when there is one).
    QTableWidget* summaryTable() const { return summary_; }
    // The time unit of the plots (when not by frame) and of both heatmaps.
    QString timeUnit() const { return QString::fromUtf8(unit_.name); }
    QCustomPlot* reservedPlot() const { return reserved_; }
    QCustomPlot* fragmentationPlot() const { return frag_; }
    QTableWidget* rowsTable() const { return rows_; }
    // Bytes by call site at each run's allocated peak, B − A, largest growth first.
    QTableWidget* callSitesTable() const { return callSites_; }
    views::HeatmapWidget* heatmapA() const { return heat_[0]; }
    views::HeatmapWidget* heatmapB() const { return heat_[1]; }
    QLabel* titleA() const { return title_[0]; }
    QLabel* titleB() const { return title_[1]; }
    QLabel* fidelityLabel() const { return fidelity_; }
    const CompareAxis& axis(int side) const { return axis_[side]; }
    // The scene a side's heatmap draws (null until loaded).
    std::shared_ptr<const render::Scene> scene(int side) const { return scene_[side]; }
    // One line per fidelity fact (complete or not, reproduced or not, and why), as shown.
    static QString fidelityText(const alloc::Fidelity& f);

signals:
    // Emitted once: ok, or the error ("FILE: problem").
    void loaded(bool ok, const QString& error);

private:
    struct Loaded;
    void showComparison(std::shared_ptr<const Loaded> l);
    void showTitles();
    void heatmapMoved(int side, const render::Viewport& vp);
    void plotMoved(const QCPRange& r);
    void saveB();

    QString pathB_;
    std::shared_ptr<const analysis::Comparison> c_, ref_;
    render::TimeUnit unit_{"s", 1e9};
    QWidget* body_ = nullptr; // everything under the status line (hidden when nothing loads)
    std::shared_ptr<const render::Scene> scene_[2];
    std::shared_ptr<const alloc::WhatIfResult> whatIf_;
    CompareAxis axis_[2];
    bool linking_ = false;
    QLabel* status_ = nullptr;
    // Loads both sessions and compares them (a closed window drops the result).
    views::JobTracker* jobs_ =
        new views::JobTracker(this, views::JobTracker::Mode::Replace, &views::longJobPool());
    QLabel* fidelity_ = nullptr;
    QLabel* title_[2] = {nullptr, nullptr};
    views::HeatmapWidget* heat_[2] = {nullptr, nullptr};
    QPushButton* save_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QTableWidget* rows_ = nullptr;
    QTableWidget* callSites_ = nullptr;
    QCustomPlot* reserved_ = nullptr;
    QCustomPlot* frag_ = nullptr;
};

} // namespace fs::gui
