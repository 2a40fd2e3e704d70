#include "precursor_model.h"

#include "core/analysis/serialize.h"

#include <QColor>

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
    // The row's own fields (a shift's family, variant, shares, first frame, preceding
    // allocation) and the score's factors, for the inspector's detail line and the tooltip.
    if (role == DetailRole || role == Qt::ToolTipRole) {
        std::string detail = p.shift ? analysis::kernelShiftText(*p.shift) : std::string();
        detail += analysis::evidenceText(p);
        if (role == DetailRole) return QString::fromStdString(detail);
        return QString::fromStdString(detail.empty() ? p.description
                                                     : p.description + "\n\n" + detail);
    }
    // Background rows (what happens in every healthy frame) are drawn muted.
    if (role == Qt::ForegroundRole && p.background) return QColor(Qt::gray);
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
    // A kernel-variant shift: the variant's share of its family's calls, healthy frames -> f.
    case Shift:
        if (!p.shift) return {};
        return QStringLiteral("%1 % → %2 %")
            .arg(100 * p.shift->shareBefore, 0, 'f', 1)
            .arg(100 * p.shift->shareAfter, 0, 'f', 1);
    // The engine's evidence score: closeness x novelty x effect, 0..1 (docs/analysis.md).
    case Score:
        return QString::number(p.score, 'f', 3);
    default:
        return {};
    }
}

QVariant PrecursorModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    static const char* names[] = {"#", "time", "kind", "event", "share of calls", "evidence"};
    return section >= 0 && section < ColumnCount ? QString::fromLatin1(names[section]) : QVariant();
}

} // namespace fs::views
