#include "rank_frames_model.h"

#include <QBrush>
#include <QColor>
#include <algorithm>

namespace fs::views {

namespace {

QString rankList(const std::vector<int>& ranks)
{
    QStringList out;
    for (int r : ranks)
        out << QString::number(r);
    return out.join(QStringLiteral(", "));
}

bool has(const std::vector<int>& v, int x)
{
    return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

void RankFramesModel::resetData(std::shared_ptr<const analysis::RankRun> run)
{
    beginResetModel();
    run_ = std::move(run);
    endResetModel();
}

int RankFramesModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !run_ ? 0 : static_cast<int>(run_->frames.size());
}

int RankFramesModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() || !run_ ? 0 : FirstRank + ranks() + 4;
}

int RankFramesModel::rowOf(int64_t frame) const
{
    if (!run_) return -1;
    const auto& fr = run_->frames;
    const auto it =
        std::lower_bound(fr.begin(), fr.end(), frame,
                         [](const analysis::RankFrame& f, int64_t v) { return f.frame < v; });
    return it != fr.end() && it->frame == frame ? static_cast<int>(it - fr.begin()) : -1;
}

QVariant RankFramesModel::rankCell(const analysis::RankFrame& f, int rank, int role) const
{
    const bool present = has(f.ranks, rank);
    const bool collapsed = has(f.collapsedRanks, rank);
    const bool oom = has(f.oomRanks, rank);
    const bool first = f.firstCollapseRank == rank || f.firstOomRank == rank;
    if (role == Qt::DisplayRole) {
        if (!present) return QStringLiteral("—");
        QStringList s;
        if (collapsed) s << tr("collapse");
        if (oom) s << QStringLiteral("OOM");
        QString t = s.join(QStringLiteral(" + "));
        if (first && !t.isEmpty()) t += QStringLiteral(" ★");
        return t;
    }
    if (role == Qt::BackgroundRole && (collapsed || oom))
        return QBrush(first ? QColor(220, 40, 40, 150) : QColor(220, 40, 40, 70));
    if (role == Qt::ToolTipRole && present)
        return tr("rank %1, frame %2: %3%4")
            .arg(rank)
            .arg(f.frame)
            .arg(collapsed ? tr("collapsed") : tr("no collapse"), oom ? tr(", OOM") : QString())
            .arg(first ? tr(" (first of the ranks)") : QString());
    return {};
}

QVariant RankFramesModel::data(const QModelIndex& index, int role) const
{
    if (!run_ || !index.isValid() || index.row() >= rowCount()) return {};
    const analysis::RankFrame& f = run_->frames[static_cast<size_t>(index.row())];
    const int c = index.column();
    if (role == FrameIndexRole) return QVariant::fromValue<qlonglong>(f.frame);
    if (c >= FirstRank && c < FirstRank + ranks()) {
        const int rank = run_->ranks[static_cast<size_t>(c - FirstRank)].rank;
        if (role == RankRole) return rank;
        return rankCell(f, rank, role);
    }
    if (role == Qt::TextAlignmentRole)
        return QVariant::fromValue(Qt::AlignRight | Qt::AlignVCenter);
    if (role != Qt::DisplayRole) return {};
    auto rankText = [](int r) { return r < 0 ? QString() : QString::number(r); };
    if (c == Frame) return QVariant::fromValue<qlonglong>(f.frame);
    if (c == collapsedRanksColumn()) return rankList(f.collapsedRanks);
    if (c == firstCollapseColumn()) return rankText(f.firstCollapseRank);
    if (c == oomRanksColumn()) return rankList(f.oomRanks);
    if (c == firstOomColumn()) return rankText(f.firstOomRank);
    return {};
}

QVariant RankFramesModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole || !run_) return {};
    if (section == Frame) return tr("Frame");
    if (section >= FirstRank && section < FirstRank + ranks())
        return tr("Rank %1").arg(run_->ranks[static_cast<size_t>(section - FirstRank)].rank);
    if (section == collapsedRanksColumn()) return tr("Collapsed ranks");
    if (section == firstCollapseColumn()) return tr("First to collapse");
    if (section == oomRanksColumn()) return tr("OOM ranks");
    if (section == firstOomColumn()) return tr("First OOM");
    return {};
}

} // namespace fs::views
