#include "precursor_model.h"

namespace fs::views {

void PrecursorModel::resetData(std::vector<analysis::Precursor> rows, int64_t timeBegin,
                               TimeAxis axis)
{
    beginResetModel();
    rows_ = std::move(rows);
    timeBegin_ = timeBegin;
    axis_ = axis;
    endResetModel();
}

int PrecursorModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
}

int PrecursorModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant PrecursorModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount() || index.column() >= ColumnCount) return {};
    const auto& p = rows_[static_cast<size_t>(index.row())];
    if (role == TimeRole) return QVariant::fromValue<qlonglong>(p.time);
    if (role == AllocIdRole) return QVariant::fromValue<qlonglong>(p.allocationId);
    if (role == Qt::ToolTipRole) return QString::fromStdString(p.description);
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
    case Rank:
        return index.row() + 1;
    case Time:
        return QString::fromStdString(render::formatTime(p.time - timeBegin_, axis_));
    case Kind:
        return QString::fromLatin1(analysis::precursorKindName(p.kind));
    case What:
        return QString::fromStdString(p.description);
    // The engine scores a precursor by the bytes of allocator state it changed.
    case Score:
        return QString::fromStdString(render::formatBytes(p.score));
    default:
        return {};
    }
}

QVariant PrecursorModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"#", "time", "kind", "event", "effect"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

} // namespace fs::views
