// The ranks view's frames table: one row per frame number, one column per rank (collapsed, OOM,
// both, or absent), then which ranks collapsed, the first rank to collapse, the ranks with an
// OOM and the first of them. Thin: resetData() takes the engine's RankRun
// (core/analysis/ranks.h); nothing here computes a figure.
#pragma once

#include "core/analysis/ranks.h"

#include <QAbstractTableModel>
#include <memory>

namespace fs::views {

class RankFramesModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    // Columns: Frame, then one per rank (FirstRank + i), then the summary columns.
    enum Columns { Frame = 0, FirstRank = 1 };
    enum Roles { FrameIndexRole = Qt::UserRole + 1, RankRole };

    explicit RankFramesModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void resetData(std::shared_ptr<const analysis::RankRun> run);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    int rowOf(int64_t frame) const; // -1 when no rank has the frame
    // The summary columns, after the ranks'.
    int collapsedRanksColumn() const { return FirstRank + ranks(); }
    int firstCollapseColumn() const { return collapsedRanksColumn() + 1; }
    int oomRanksColumn() const { return collapsedRanksColumn() + 2; }
    int firstOomColumn() const { return collapsedRanksColumn() + 3; }

private:
    int ranks() const { return run_ ? static_cast<int>(run_->ranks.size()) : 0; }
    QVariant rankCell(const analysis::RankFrame& f, int rank, int role) const;
    std::shared_ptr<const analysis::RankRun> run_;
};

} // namespace fs::views
