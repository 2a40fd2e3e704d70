// The report's correlations (docs/analysis.md "Correlations", "Many comparisons"): one row per
// allocator figure and frame metric pair with n, Pearson r and Spearman rho of the values, and
// the test's figures (the changes' r, lag, n_eff, p, q); only q < 0.05 is marked significant.
// Below, the chosen pair's scatter: one point per frame and the least-squares line
// (Engine::correlationPoints). The engine computes every number; the widget only draws them, and
// asks for them when it is first shown (a long run's pairs cost a pass over its frames, which a
// user who never opens the tab should not wait for), on a worker: the pass and the engine's lock
// stay off the GUI thread.
#pragma once

#include "core/analysis/types.h"
#include "panel.h"

#include <QWidget>
#include <memory>
#include <optional>

class QCPTextElement;
class QCustomPlot;
class QLabel;
class QTreeWidget;

namespace fs::render {
struct Scene;
}

namespace fs::views {

class JobTracker;

class CorrelationTable : public QWidget, public Panel
{
    Q_OBJECT
public:
    enum Columns {
        AllocatorMetric,
        FrameMetric,
        N,
        Q, // the test's figures first: a narrow dock shows what decides
        P,
        NEff,
        ChangeR,
        Lag,
        Pearson,
        Spearman,
        Significant,
        ColumnCount
    };
    explicit CorrelationTable(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene);
    void showScene(std::shared_ptr<const render::Scene> scene, int) override
    {
        setScene(std::move(scene));
    }
    Follows follows() const override { return Follows::Session; }
    bool needsCompleteScene() const override { return true; }
    QTreeWidget* tree() const { return tree_; }
    QCustomPlot* scatter() const { return scatter_; }
    void setDark(bool dark);
    // Computing the pairs or the current pair's points.
    bool busy() const;

protected:
    void showEvent(QShowEvent* e) override;

private:
    void fill(); // asks the engine for the pairs
    void showPairs(const std::vector<analysis::Correlation>& pairs);
    void requestScatter(); // asks for the current row's points
    void drawScatter();    // points_ (none: the empty plot)
    std::shared_ptr<const render::Scene> scene_;
    JobTracker* pairJobs_ = nullptr;
    JobTracker* pointJobs_ = nullptr;
    std::optional<analysis::CorrelationPoints> points_; // the current row's
    bool filled_ = false;
    bool dark_ = false;
    QTreeWidget* tree_ = nullptr;
    QLabel* note_ = nullptr;
    QCustomPlot* scatter_ = nullptr;
    QCPTextElement* title_ = nullptr;
};

} // namespace fs::views
