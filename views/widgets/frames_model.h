// Frames table: one row per frame with its metrics and allocator figures at frame end. Thin:
// resetData() takes the whole scene; nothing here touches SQLite.
#pragma once

#include "render/scene.h"

#include <QAbstractTableModel>
#include <QCache>
#include <QPixmap>
#include <memory>

namespace fs::views {

class FramesModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    // Thumbnail: the video frame (`metrics compute`); empty without a video. Views show it after
    // Index (QHeaderView::moveSection) and hide it when the session holds no video.
    enum Columns {
        Index,
        Start,
        Duration,
        Collapsed,
        LargestFree,
        Fragments,
        Ratio,
        Thumbnail,
        FirstMetric
    };
    enum Roles { FrameIndexRole = Qt::UserRole + 1, CollapsedRole, SortRole };

    explicit FramesModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void resetData(std::shared_ptr<const render::Scene> scene, int track);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    // Row of frame f, or -1.
    int rowOf(int64_t frame) const;
    bool hasThumbnails() const;
    // Height of the thumbnails (DecorationRole of the Thumbnail column), in pixels.
    void setThumbnailHeight(int px);

private:
    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    std::vector<const analysis::State*> atEnd_;       // the engine's figures at each frame's end
    std::vector<const analysis::Collapse*> collapse_; // each row's collapse (null: none)
    int thumbHeight_ = 36;
    mutable QCache<int64_t, QPixmap> thumbs_{400}; // by session frame, scaled: decoded once
};

} // namespace fs::views
