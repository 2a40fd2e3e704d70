// Top call sites (Explorer::callSites): allocations grouped by call site, tag, stream or pool,
// at the time cursor (the run up to it), over the selected range or the whole run, like Tracy's
// memory call-stack tree: bytes held, allocations, and the holes their frees left. The panel
// also switches the heatmap's colouring to the same grouping. Computed on a worker, newest
// request wins.
#pragma once

#include "core/analysis/explore.h"
#include "jobs.h"
#include "render/scene.h"

#include <QAbstractTableModel>
#include <QWidget>

#include <memory>

class QCheckBox;
class QComboBox;
class QLabel;
class QTableView;

namespace fs::views {

class CallSiteModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { Site, Held, Share, Live, Allocations, Allocated, Holes, HoleBytes, ColumnCount };
    enum Role { SortRole = Qt::UserRole + 1, DetailRole };
    explicit CallSiteModel(QObject* parent = nullptr);
    void resetData(std::shared_ptr<const analysis::CallSiteTable> t);
    const analysis::CallSiteTable* table() const { return t_.get(); }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;

private:
    std::shared_ptr<const analysis::CallSiteTable> t_;
};

class CallSitesPanel : public QWidget
{
    Q_OBJECT
public:
    enum class Range { UpToCursor, Selection, WholeRun };
    explicit CallSitesPanel(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    // The cursor and the selected time range (kNoTime: none); recomputes when they matter.
    void setCursor(int64_t t);
    void setSelectionRange(int64_t from, int64_t to);
    void setRange(Range r);
    void setGroupBy(analysis::GroupBy g);
    // The user's category rules (settings file, docs/settings.md), read once by the window, the
    // same rules the heatmap's colouring by category uses.
    void setCategoryRules(std::vector<analysis::CategoryRule> rules);
    void setColourHeatmap(bool on); // the heatmap coloured by the grouping (colouringChanged)
    analysis::GroupBy groupBy() const;
    CallSiteModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    bool busy() const { return jobs_->busy(); }
    double lastMs() const { return lastMs_; } // the last table's computing time
    QString status() const;

signals:
    // The heatmap should colour by this grouping (Occupancy: off).
    void colouringChanged(fs::analysis::Colouring c);
    // A row was activated: a search that finds its allocations ("file.py:12", "tag:x"), empty
    // when the grouping has none (stream, pool).
    void searchRequested(const QString& query);

protected:
    void showEvent(QShowEvent* e) override;

private:
    void refresh();
    void start();
    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    std::vector<analysis::CategoryRule> categoryRules_;
    int64_t cursor_ = kNoTime, selFrom_ = kNoTime, selTo_ = kNoTime;
    QComboBox* group_ = nullptr;
    QComboBox* range_ = nullptr;
    QCheckBox* colour_ = nullptr;
    QLabel* status_ = nullptr;
    QTableView* table_ = nullptr;
    CallSiteModel* model_ = nullptr;
    // One table at a time; the newest request waits and an older waiting one is dropped.
    JobTracker* jobs_ = new JobTracker(this, JobTracker::Mode::Serial);
    bool stale_ = false;
    double lastMs_ = 0;
};

} // namespace fs::views
