// The GUI's compare mode: two sessions side by side (an actual run and its what-if replay, or two
// recordings). The figures are fs::analysis::compareSessions' (the analysis engine's), computed on
// a worker thread with both sessions' scenes; this window only draws them: A's and B's heatmaps
// side by side, B's reserved bytes and fragmentation ratio overlaid on A's, the summaries with
// B - A, and the per-frame (or per-instant) rows. The heatmaps and the plots zoom and pan
// together (compare_axis.h says how their axes line up). A what-if run (setWhatIf) shows its
// fidelity verdict above everything: B is the model's replay, never a measurement.
#pragma once

#include "compare_axis.h"
#include "core/alloc/whatif.h"
#include "core/analysis/compare.h"
#include "render/render.h"

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
    CompareWindow(const QString& a, const QString& b, QWidget* parent = nullptr);
    // B is the replay `r` wrote: its fidelity verdict is shown, and B can be saved.
    void setWhatIf(std::shared_ptr<const alloc::WhatIfResult> r);
    const alloc::WhatIfResult* whatIf() const { return whatIf_.get(); }
    // The comparison shown; null until it is computed (or when it failed).
    const analysis::Comparison* comparison() const { return c_.get(); }
    QCustomPlot* reservedPlot() const { return reserved_; }
    QCustomPlot* fragmentationPlot() const { return frag_; }
    QTableWidget* rowsTable() const { return rows_; }
    QTableWidget* summaryTable() const { return summary_; } // A, B, B - A of the summaries
    views::HeatmapWidget* heatmapA() const { return heat_[0]; }
    views::HeatmapWidget* heatmapB() const { return heat_[1]; }
    QLabel* titleA() const { return title_[0]; }
    QLabel* titleB() const { return title_[1]; }
    QLabel* fidelityLabel() const { return fidelity_; }
    const CompareAxis& axis(int side) const { return axis_[side]; }
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
    std::shared_ptr<const analysis::Comparison> c_;
    std::shared_ptr<const render::Scene> scene_[2];
    std::shared_ptr<const alloc::WhatIfResult> whatIf_;
    CompareAxis axis_[2];
    bool linking_ = false;
    QLabel* status_ = nullptr;
    QLabel* fidelity_ = nullptr;
    QLabel* title_[2] = {nullptr, nullptr};
    views::HeatmapWidget* heat_[2] = {nullptr, nullptr};
    QPushButton* save_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QTableWidget* rows_ = nullptr;
    QCustomPlot* reserved_ = nullptr;
    QCustomPlot* frag_ = nullptr;
};

} // namespace fs::gui
