// Frames table: one row per frame with its metrics and allocator figures at frame end. Thin:
// resetData() takes the whole scene; nothing here touches SQLite.
#pragma once

#include "render/scene.h"

#include <QAbstractTableModel>
#include <memory>

namespace fs::views {

class FramesModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Columns { Index, Start, Duration, Collapsed, LargestFree, Fragments, Ratio, FirstMetric };
    enum Roles { FrameIndexRole = Qt::UserRole + 1, CollapsedRole, SortRole };

    explicit FramesModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}
    void resetData(std::shared_ptr<const render::Scene> scene, int level);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role) const override;
    QVariant headerData(int section, Qt::Orientation o, int role) const override;
    // Row of frame f, or -1.
    int rowOf(int64_t frame) const;

private:
    std::shared_ptr<const render::Scene> scene_;
    int level_ = -1;
    std::vector<const analysis::State*> atEnd_;       // the engine's figures at each frame's end
    std::vector<const analysis::Collapse*> collapse_; // each row's collapse (null: none)
};

} // namespace fs::views
