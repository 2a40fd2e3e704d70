// The session's OOMs with the engine's diagnosis (docs/analysis.md "OOM diagnosis"): one row per
// OOM (time, device, request, cause), the selected one's figures, reason and suggestion below.
// Activating a row drives every view like a collapse: its frame, its instant marked.
#pragma once

#include "panel.h"

#include <QWidget>
#include <cstdint>
#include <memory>

class QLabel;
class QTreeWidget;

namespace fs::render {
struct Scene;
}

namespace fs::views {

class OomList : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit OomList(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene);
    void showScene(std::shared_ptr<const render::Scene> scene, int) override
    {
        setScene(std::move(scene));
    }
    Follows follows() const override { return Follows::Session; }
    bool needsCompleteScene() const override { return true; }
    QTreeWidget* tree() const { return tree_; }
    int count() const;

signals:
    void oomActivated(int64_t time);

private:
    void showDetails(int row);
    std::shared_ptr<const render::Scene> scene_;
    QTreeWidget* tree_ = nullptr;
    QLabel* details_ = nullptr;
    struct Rows;
    std::shared_ptr<Rows> rows_;
};

} // namespace fs::views
