// The collapse inspector's precursor list for one frame, ranked (thin model over a value).
#pragma once

#include "render/scene.h"

#include <QAbstractTableModel>

namespace fs::views {

class PrecursorModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Columns { Rank, Time, Kind, What, Shift, Score, ColumnCount };
    enum Roles { TimeRole = Qt::UserRole + 1, AllocIdRole, DetailRole };

    explicit PrecursorModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void resetData(std::vector<analysis::Precursor> rows, int64_t timeBegin, TimeAxis axis);
    const std::vector<analysis::Precursor>& rows() const { return rows_; }
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;

private:
    std::vector<analysis::Precursor> rows_;
    int64_t timeBegin_ = 0;
    TimeAxis axis_ = TimeAxis::Nanoseconds;
};

} // namespace fs::views
