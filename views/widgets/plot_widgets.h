// The QCustomPlot views: timelines on a shared time axis and the fragment-cluster histogram, as
// render/charts.h builds them (the plot an export draws), with the time cursor, selection and
// mouse on top.
#pragma once

#include "core/analysis/graphs.h"
#include "panel.h"
#include "render/charts.h"
#include "selection.h"

#include <QImage>
#include <QWidget>
#include <memory>

class QCustomPlot;
class QCPAxisRect;
class QCPAbstractItem;
class QCPItemStraightLine;
class QCPItemText;

namespace fs::views {

struct CursorSnapshot;

class TimelineWidget : public QWidget
{
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void setSelection(const Selection& s);
    // Shows [t0, t1] (session time) on the shared axis.
    void setTimeRange(int64_t t0, int64_t t1);
    // The range shown (session time); {0, 0} without a scene.
    std::pair<int64_t, int64_t> timeRange() const;
    QCustomPlot* plot() const { return plot_; }
    int graphCount() const;
    void setDark(bool dark);
    // The time cursor: a line on every panel (its own buffered layer: moving it replots that
    // layer only) and the engine's values at it (CursorSnapshot) in each panel's corner.
    void setCursor(int64_t t);
    void setCursorValues(const CursorSnapshot& s);
    QStringList cursorValues() const; // the panels' readouts, top to bottom
    void setOoms(std::vector<int64_t> times);
    // The CUDA graph replays as a lane below the panels (render/charts.h); null: none.
    void setGraphs(std::shared_ptr<const analysis::GraphsReport> graphs);
    const std::shared_ptr<const analysis::GraphsReport>& graphs() const { return graphs_; }
    bool hasReplayLane() const { return replayLane_; }

signals:
    void timeClicked(int64_t t);
    void cursorRequested(qint64 t); // a click, or a drag of the cursor line

private:
    void rebuild();
    void placeCursor();
    int64_t toTime(double pixelX) const;
    int64_t cursor_ = kNoTime;
    std::vector<QCPItemStraightLine*> cursorLines_;
    std::vector<QCPItemText*> cursorTexts_;
    QStringList cursorText_; // the last snapshot's readouts (a rebuild makes new items)
    std::vector<int64_t> ooms_;
    bool scrubbing_ = false;
    QPointF pressPos_;
    void drawSelection(); // the selection band on every panel, replacing the last one
    double toX(int64_t t) const;
    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    QCustomPlot* plot_ = nullptr;
    std::vector<QCPAxisRect*> rects_;
    std::vector<QCPAbstractItem*> selectionItems_;
    render::OomMarks oomMarks_;
    bool graphsPending_ = false; // setGraphs: a rebuild is posted
    Selection sel_;
    bool dark_ = false;
    std::shared_ptr<const analysis::GraphsReport> graphs_;
    bool replayLane_ = false;
    std::string metric_; // the ruled frame metric's panel (render::TimelinePlot::metric)
};

class HistogramWidget : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit HistogramWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void showScene(std::shared_ptr<const render::Scene> scene, int track) override
    {
        setScene(std::move(scene), track);
    }
    Follows follows() const override { return Follows::Track; }
    bool needsCompleteScene() const override { return true; }
    void setSelection(const Selection& s);
    // Fragments shown now (frame end or instant) and the comparison frame's.
    // The engine's log2 bins drawn (State::histogram.log2 at the instant, and at frame f-1).
    const std::vector<analysis::HistogramBin>& current() const { return cur_; }
    const std::vector<analysis::HistogramBin>& previous() const { return prev_; }
    int64_t shownAt() const { return at_; }
    QCustomPlot* plot() const { return plot_; }
    void setDark(bool dark);
    // The state at the time cursor (the engine's, from the CursorWorker).
    void setSnapshot(std::shared_ptr<const CursorSnapshot> s);

private:
    void rebuild();
    std::shared_ptr<const render::Scene> scene_;
    std::shared_ptr<const CursorSnapshot> snap_;
    int track_ = -1;
    QCustomPlot* plot_ = nullptr;
    std::vector<analysis::HistogramBin> cur_, prev_;
    int64_t at_ = kNoTime;
    Selection sel_;
    bool dark_ = false;
};

// Memory map at the selected frame's end (or the session end), painted by fragscope_render.
class MemMapWidget : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit MemMapWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void showScene(std::shared_ptr<const render::Scene> scene, int track) override
    {
        setScene(std::move(scene), track);
    }
    Follows follows() const override { return Follows::Track; }
    bool needsCompleteScene() const override { return true; }
    void setSelection(const Selection& s);
    void setDark(bool dark);
    void setSnapshot(std::shared_ptr<const CursorSnapshot> s); // the map at the time cursor
    int64_t shownAt() const;                                   // kNoTime before the first snapshot

protected:
    void paintEvent(QPaintEvent*) override;

private:
    std::shared_ptr<const render::Scene> scene_;
    std::shared_ptr<const CursorSnapshot> snap_;
    int track_ = -1;
    Selection sel_;
    bool dark_ = false;
    // The last painting: redrawn only when what it shows changes.
    QImage cache_;
    bool cacheValid_ = false;
};

// Kernels and graph launches of the selected frame as a lane, with new kernel variants marked.
class KernelLaneWidget : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit KernelLaneWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene);
    void showScene(std::shared_ptr<const render::Scene> scene, int) override
    {
        setScene(std::move(scene));
    }
    Follows follows() const override { return Follows::Session; }
    void setSelection(const Selection& s);
    QStringList newVariants() const;
    // Kernels the engine reports as a kernel-variant shift in the selected frame.
    QStringList shiftedVariants() const { return shifted_; }
    void fetch(int64_t t0, int64_t t1); // the engine's kernels of the window, once per window
    void setCursor(int64_t t);
    void setOoms(std::vector<int64_t> times);
    QString describeAt(const QPointF& pt) const; // the kernel or launch under pt (tooltip)

signals:
    void cursorRequested(qint64 t);

protected:
    void paintEvent(QPaintEvent*) override;
    bool event(QEvent* e) override;
    void mousePressEvent(QMouseEvent* e) override;
    void mouseMoveEvent(QMouseEvent* e) override;

private:
    std::pair<int64_t, int64_t> window() const; // the time range the lane shows
    QRectF lane() const;
    int64_t cursor_ = kNoTime;
    std::vector<int64_t> ooms_;
    std::shared_ptr<const render::Scene> scene_;
    Selection sel_;
    QStringList shifted_;
    std::pair<int64_t, int64_t> fetched_{0, -1};
    std::vector<analysis::KernelSpan> kernels_;
    std::vector<analysis::GraphLaunchSpan> launches_;
};

} // namespace fs::views
