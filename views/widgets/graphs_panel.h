// The Graphs panel (docs/gui.md "Graphs"): the CUDA graphs of the session with their pools,
// replays and re-captures, the sharing what-if in one line, and for the selected graph its
// replays' durations against the fragmentation at their start. Every figure is the engine's
// (fs::alloc::graphsReport, the call `fragscope graphs` makes), computed on a worker.
#pragma once

#include "graphs_overlay.h"
#include "jobs.h"
#include "panel.h"
#include "render/render.h"

#include <QAbstractTableModel>
#include <QWidget>

#include <atomic>
#include <memory>

class QCustomPlot;
class QCPTextElement;
class QLabel;
class QTableView;

namespace fs::views {

class GraphsModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column {
        Graph,
        Device,
        Captures,
        Recaptures,
        Pool,
        PoolBytes,
        PoolPeak,
        Replays,
        P50,
        P99,
        Max,
        Jitter,
        RhoF,
        ColumnCount
    };
    // The raw figure behind a cell (bytes, ns, counts; rho as double), for sorting and tests.
    enum Roles { RawRole = Qt::UserRole + 1 };
    using QAbstractTableModel::QAbstractTableModel;
    void resetData(std::shared_ptr<const analysis::GraphsReport> r);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const analysis::GraphsReport> r_;
};

class GraphsPanel : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit GraphsPanel(QWidget* parent = nullptr);
    ~GraphsPanel() override;
    // Computes the report for a new engine (a scene with the same engine keeps the last one).
    void setScene(std::shared_ptr<const render::Scene> scene);
    void showScene(std::shared_ptr<const render::Scene> scene, int) override
    {
        setScene(std::move(scene));
    }
    Follows follows() const override { return Follows::Session; }
    std::shared_ptr<const analysis::GraphsReport> report() const { return report_; }
    bool busy() const { return jobs_->busy(); }
    GraphsModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    QCustomPlot* scatter() const { return scatter_; }
    QLabel* summary() const { return summary_; }
    void selectGraph(int row);
    int selectedGraph() const { return selected_; }
    void setDark(bool dark);

protected:
    void showEvent(QShowEvent* e) override;

signals:
    // A new report (null while a new one is computed).
    void reportReady(std::shared_ptr<const fs::analysis::GraphsReport> report);
    // The selected graph's pool, outlined on the heatmap (empty: none).
    void poolOutlined(const fs::views::PoolOutline& outline);

private:
    // Column widths once the table is shown: sized while hidden, Qt measures every row.
    void fitColumns();
    bool fitPending_ = false;
    void show(std::shared_ptr<const analysis::GraphsReport> r);
    void drawScatter();

    std::shared_ptr<const render::Scene> scene_;
    const void* engine_ = nullptr; // the engine the report is (being) computed for
    std::shared_ptr<const analysis::GraphsReport> report_;
    JobTracker* jobs_ = new JobTracker(this); // a new engine's report replaces the old one's
    int selected_ = -1;
    bool dark_ = false;
    GraphsModel* model_ = nullptr;
    QTableView* table_ = nullptr;
    QLabel* summary_ = nullptr;
    QCustomPlot* scatter_ = nullptr;
    QCPTextElement* title_ = nullptr;
};

} // namespace fs::views
