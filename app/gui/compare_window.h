// The GUI's compare mode: two sessions side by side (an actual run and its what-if replay, or two
// recordings). The figures are fs::alloc::compareSessions' (the analysis engine's), computed on a
// worker thread; this window only draws them: B's reserved bytes and fragmentation ratio overlaid
// on A's (the two plots share a linked x range), the summaries with B - A, and the per-frame (or
// per-instant) rows.
#pragma once

#include "core/alloc/compare.h"

#include <QWidget>
#include <memory>

class QCustomPlot;
class QLabel;
class QTableWidget;

namespace fs::gui {

class CompareWindow : public QWidget
{
    Q_OBJECT
public:
    CompareWindow(const QString& a, const QString& b, QWidget* parent = nullptr);
    // The comparison shown; null until it is computed (or when it failed).
    const alloc::Comparison* comparison() const { return c_.get(); }
    QCustomPlot* reservedPlot() const { return reserved_; }
    QCustomPlot* fragmentationPlot() const { return frag_; }
    QTableWidget* rowsTable() const { return rows_; }

signals:
    // Emitted once: ok, or the error ("FILE: problem").
    void loaded(bool ok, const QString& error);

private:
    void showComparison(std::shared_ptr<const alloc::Comparison> c);
    std::shared_ptr<const alloc::Comparison> c_;
    QLabel* status_ = nullptr;
    QTableWidget* summary_ = nullptr;
    QTableWidget* rows_ = nullptr;
    QCustomPlot* reserved_ = nullptr;
    QCustomPlot* frag_ = nullptr;
};

} // namespace fs::gui
