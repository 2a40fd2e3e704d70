#include "frames_model.h"

#include <QBrush>
#include <QColor>

namespace fs::views {

void FramesModel::resetData(std::shared_ptr<const render::Scene> scene, int level)
{
    beginResetModel();
    scene_ = std::move(scene);
    level_ = level;
    atEnd_.clear();
    if (scene_ && level_ >= 0 && level_ < static_cast<int>(scene_->levels.size()))
        for (const auto& f : scene_->frames)
            atEnd_.push_back(scene_->levels[static_cast<size_t>(level_)].stateAt(f.end));
    endResetModel();
}

int FramesModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !scene_ ? 0 : static_cast<int>(scene_->frames.size());
}

int FramesModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() || !scene_ ? 0
                                       : FirstMetric + static_cast<int>(scene_->metricNames.size());
}

int FramesModel::rowOf(int64_t frame) const
{
    if (!scene_) return -1;
    for (size_t i = 0; i < scene_->frames.size(); ++i)
        if (scene_->frames[i].index == frame) return static_cast<int>(i);
    return -1;
}

QVariant FramesModel::data(const QModelIndex& index, int role) const
{
    if (!scene_ || !index.isValid() || index.row() >= rowCount() || index.column() >= columnCount())
        return {};
    const auto& f = scene_->frames[static_cast<size_t>(index.row())];
    const bool haveState = static_cast<size_t>(index.row()) < atEnd_.size();
    const render::StateSample st =
        haveState ? atEnd_[static_cast<size_t>(index.row())] : render::StateSample{};
    const TimeAxis ax = scene_->summary.timeAxis;
    if (role == FrameIndexRole) return QVariant::fromValue<qlonglong>(f.index);
    if (role == CollapsedRole) return f.collapsed;
    if (role == Qt::BackgroundRole && f.collapsed) return QBrush(QColor(220, 40, 40, 90));
    if (role == Qt::ToolTipRole && f.collapsed) {
        const render::Collapse* c = scene_->collapseOf(f.index);
        return c ? QString::fromStdString("collapse " + std::to_string(c->firstFrame) + "–" +
                                          std::to_string(c->lastFrame) + ": " + c->reason)
                 : QVariant();
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() == Collapsed ? QVariant(Qt::AlignCenter)
                                           : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    const int c = index.column();
    if (role == SortRole) {
        switch (c) {
        case Index:
            return QVariant::fromValue<qlonglong>(f.index);
        case Start:
            return QVariant::fromValue<qlonglong>(f.start);
        case Duration:
            return QVariant::fromValue<qlonglong>(f.end - f.start);
        case Collapsed:
            return f.collapsed;
        case LargestFree:
            return st.largestFragment;
        case Fragments:
            return st.fragmentCount;
        case Ratio:
            return st.fragRatio;
        default:
            break;
        }
    }
    if (role != Qt::DisplayRole && role != SortRole) return {};
    switch (c) {
    case Index:
        return QVariant::fromValue<qlonglong>(f.index);
    case Start:
        return QString::fromStdString(render::formatTime(f.start - scene_->timeBegin(), ax));
    case Duration:
        return QString::fromStdString(render::formatTime(f.end - f.start, ax));
    case Collapsed:
        return f.collapsed ? QStringLiteral("COLLAPSE") : QString();
    case LargestFree:
        return QString::fromStdString(render::formatBytes(st.largestFragment));
    case Fragments:
        return static_cast<qlonglong>(st.fragmentCount);
    case Ratio:
        return QString::number(st.fragRatio, 'f', 3);
    default: {
        const auto& name = scene_->metricNames[static_cast<size_t>(c - FirstMetric)];
        auto it = f.metrics.find(name);
        if (it == f.metrics.end()) return {};
        return role == SortRole ? QVariant(it->second)
                                : QVariant(QString::number(it->second, 'g', 4));
    }
    }
}

QVariant FramesModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole || !scene_ || section < 0 ||
        section >= columnCount())
        return {};
    switch (section) {
    case Index:
        return QStringLiteral("frame");
    case Start:
        return QStringLiteral("start");
    case Duration:
        return QStringLiteral("duration");
    case Collapsed:
        return QStringLiteral("state");
    case LargestFree:
        return QStringLiteral("largest free (end)");
    case Fragments:
        return QStringLiteral("fragments (end)");
    case Ratio:
        return QStringLiteral("F (end)");
    default:
        return QString::fromStdString(
            scene_->metricNames[static_cast<size_t>(section - FirstMetric)]);
    }
}

} // namespace fs::views
