#include "frames_model.h"

#include "render/frame_strip.h"

#include <QBrush>
#include <QColor>

#include <algorithm>

namespace fs::views {

void FramesModel::resetData(std::shared_ptr<const render::Scene> scene, int track)
{
    beginResetModel();
    if (!scene_ || !scene || scene_->video != scene->video) thumbs_.clear();
    scene_ = std::move(scene);
    track_ = track;
    atEnd_.clear();
    // Each row's collapse, looked up once: the proxy's sort asks data() ~200k times for a long
    // run. Frames are in index order and collapses are disjoint runs of frames, so one walk
    // over both, collapses by first frame, finds them (Scene::collapseOf per row walks every
    // collapse: ~20 ms of the GUI thread at 28,368 frames and 1371 collapses).
    collapse_.clear();
    if (scene_) {
        std::vector<const analysis::Collapse*> cs;
        for (const auto& c : scene_->collapses)
            cs.push_back(&c);
        std::sort(cs.begin(), cs.end(),
                  [](const auto* a, const auto* b) { return a->firstFrame < b->firstFrame; });
        size_t c = 0;
        for (const auto& f : scene_->frames) {
            while (c < cs.size() && cs[c]->lastFrame < f.index)
                ++c;
            collapse_.push_back(c < cs.size() && cs[c]->firstFrame <= f.index ? cs[c] : nullptr);
        }
    }
    if (scene_ && track_ >= 0 && track_ < static_cast<int>(scene_->tracks.size())) {
        const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
        for (const auto& f : scene_->frames) {
            const analysis::State* st = nullptr;
            for (const auto& fa : f.allocator)
                if (fa.device == ld.device && fa.level == ld.level) st = &fa.atEnd;
            // Null for a frame without a time range, and on a pool's entry: the per-frame
            // figures are the whole track's.
            atEnd_.push_back(ld.pool ? nullptr : st);
        }
    }
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

bool FramesModel::hasThumbnails() const
{
    return scene_ && scene_->video;
}

void FramesModel::setThumbnailHeight(int px)
{
    if (px == thumbHeight_) return;
    thumbHeight_ = px;
    thumbs_.clear();
    if (rowCount() > 0)
        emit dataChanged(index(0, Thumbnail), index(rowCount() - 1, Thumbnail),
                         {Qt::DecorationRole});
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
    const analysis::State* st = static_cast<size_t>(index.row()) < atEnd_.size()
                                    ? atEnd_[static_cast<size_t>(index.row())]
                                    : nullptr;
    const bool timed = f.start != kNoTime;
    const analysis::Collapse* collapse = static_cast<size_t>(index.row()) < collapse_.size()
                                             ? collapse_[static_cast<size_t>(index.row())]
                                             : nullptr;
    const bool collapsed = collapse != nullptr;
    const TimeAxis ax = scene_->summary.timeAxis;
    if (role == FrameIndexRole) return QVariant::fromValue<qlonglong>(f.index);
    if (role == CollapsedRole) return collapsed;
    if (role == Qt::BackgroundRole && collapsed) return QBrush(QColor(220, 40, 40, 90));
    if (role == Qt::ToolTipRole && collapsed) {
        return QString::fromStdString("collapse " + std::to_string(collapse->firstFrame) + "–" +
                                      std::to_string(collapse->lastFrame) + ": " +
                                      render::Scene::reason(*collapse));
    }
    if (role == Qt::ToolTipRole && !timed)
        return QStringLiteral("this frame has metrics but no time range in the session");
    if (role == Qt::TextAlignmentRole)
        return index.column() == Collapsed ? QVariant(Qt::AlignCenter)
                                           : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    const int c = index.column();
    if (c == Thumbnail) {
        if (role != Qt::DecorationRole || !scene_->video) return {};
        if (const QPixmap* cached = thumbs_.object(f.index)) return *cached;
        const QImage img = render::videoThumbnail(*scene_, scene_->video->shownFrame(f.index));
        if (img.isNull()) return {};
        auto* pm = new QPixmap(
            QPixmap::fromImage(img.scaledToHeight(thumbHeight_, Qt::SmoothTransformation)));
        const QPixmap out = *pm;
        thumbs_.insert(f.index, pm);
        return out;
    }
    if (role == SortRole) {
        switch (c) {
        case Index:
            return QVariant::fromValue<qlonglong>(f.index);
        case Start:
            return QVariant::fromValue<qlonglong>(f.start);
        case Duration:
            return QVariant::fromValue<qlonglong>(timed ? f.end - f.start : -1);
        case Collapsed:
            return collapsed;
        case LargestFree:
            return st ? QVariant::fromValue<qulonglong>(st->largestFreeFragmentBytes) : QVariant();
        case Fragments:
            return st ? QVariant::fromValue<qlonglong>(st->fragmentCount) : QVariant();
        case Ratio:
            return st ? QVariant(st->fragmentationRatio) : QVariant();
        default:
            break;
        }
    }
    if (role != Qt::DisplayRole && role != SortRole) return {};
    switch (c) {
    case Index:
        return QVariant::fromValue<qlonglong>(f.index);
    case Start:
        return timed ? QString::fromStdString(render::formatTime(f.start - scene_->timeBegin(), ax))
                     : QStringLiteral("—");
    case Duration:
        return timed ? QString::fromStdString(render::formatTime(f.end - f.start, ax))
                     : QStringLiteral("—");
    case Collapsed:
        return collapsed ? QStringLiteral("COLLAPSE") : QString();
    case LargestFree:
        return st ? QString::fromStdString(
                        render::formatBytes(static_cast<double>(st->largestFreeFragmentBytes)))
                  : QString();
    case Fragments:
        return st ? QVariant(static_cast<qlonglong>(st->fragmentCount)) : QVariant(QString());
    case Ratio:
        return st ? QString::number(st->fragmentationRatio, 'f', 3) : QString();
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
    case Thumbnail:
        return QStringLiteral("video");
    default:
        return QString::fromStdString(
            scene_->metricNames[static_cast<size_t>(section - FirstMetric)]);
    }
}

} // namespace fs::views
