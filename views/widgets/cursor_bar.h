// The state readout above the heatmap: the time cursor's instant and frame, the engine's state
// there (reserved, allocated, cached but unused, largest free block, F) and the honest headline
// (F beside the free share; "fragmented" only when both say so), with the buttons that step the
// cursor and the Jump-to menu.
#pragma once

#include "core/analysis/explore.h"

#include <QWidget>

class QLabel;
class QMenu;
class QHBoxLayout;

namespace fs::views {

struct CursorSnapshot;

class CursorBar : public QWidget
{
    Q_OBJECT
public:
    explicit CursorBar(QWidget* parent = nullptr);
    // Tool buttons for the actions (stepping), then a "Jump to" button with the menu.
    void setActions(const QList<QAction*>& actions, QMenu* jump);
    void setSnapshot(const CursorSnapshot& s, const analysis::FragmentedRule& rule, bool stateOnly);
    void setMessage(const QString& text);
    QString text() const;     // the readout, as plain text
    QString headline() const; // the verdict line
    bool fragmented() const { return fragmented_; }

private:
    QHBoxLayout* buttons_ = nullptr;
    QLabel* readout_ = nullptr;
    QLabel* verdict_ = nullptr;
    bool fragmented_ = false;
};

} // namespace fs::views
