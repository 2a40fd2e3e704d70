// The QCustomPlot views: timelines on a shared time axis and the fragment-cluster histogram.
#pragma once

#include "core/analysis/graphs.h"
#include "render/render.h"
#include "selection.h"

#include <QImage>
#include <QWidget>
#include <memory>

class QCustomPlot;
class QCPAxisRect;
class QCPAbstractItem;

namespace fs::views {

class TimelineWidget : public QWidget
{
    Q_OBJECT
public:
    explicit TimelineWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int level);
    void setSelection(const Selection& s);
    // Shows [t0, t1] (session time) on the shared axis.
    void setTimeRange(int64_t t0, int64_t t1);
    // The range shown (session time); {0, 0} without a scene.
    std::pair<int64_t, int64_t> timeRange() const;
    QCustomPlot* plot() const { return plot_; }
    int graphCount() const;
    void setDark(bool dark);
    // The CUDA graph replays as a lane below the panels (graphs_overlay.h); null: none.
    void setGraphs(std::shared_ptr<const analysis::GraphsReport> graphs);
    bool hasReplayLane() const { return replayLane_; }

signals:
    void timeClicked(int64_t t);

private:
    void rebuild();
    void drawSelection(); // the selection band on every panel, replacing the last one
    double toX(int64_t t) const;
    std::shared_ptr<const render::Scene> scene_;
    int level_ = -1;
    QCustomPlot* plot_ = nullptr;
    std::vector<QCPAxisRect*> rects_;
    std::vector<QCPAbstractItem*> selectionItems_;
    Selection sel_;
    bool dark_ = false;
    std::shared_ptr<const analysis::GraphsReport> graphs_;
    bool replayLane_ = false;
};

class HistogramWidget : public QWidget
{
    Q_OBJECT
public:
    explicit HistogramWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int level);
    void setSelection(const Selection& s);
    // Fragments shown now (frame end or instant) and the comparison frame's.
    // The engine's log2 bins drawn (State::histogram.log2 at the instant, and at frame f-1).
    const std::vector<analysis::HistogramBin>& current() const { return cur_; }
    const std::vector<analysis::HistogramBin>& previous() const { return prev_; }
    int64_t shownAt() const { return at_; }
    QCustomPlot* plot() const { return plot_; }
    void setDark(bool dark);

private:
    void rebuild();
    std::shared_ptr<const render::Scene> scene_;
    int level_ = -1;
    QCustomPlot* plot_ = nullptr;
    std::vector<analysis::HistogramBin> cur_, prev_;
    int64_t at_ = kNoTime;
    Selection sel_;
    bool dark_ = false;
};

// Memory map at the selected frame's end (or the session end), painted by fragscope_render.
class MemMapWidget : public QWidget
{
    Q_OBJECT
public:
    explicit MemMapWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene, int level);
    void setSelection(const Selection& s);
    void setDark(bool dark);

protected:
    void paintEvent(QPaintEvent*) override;

private:
    std::shared_ptr<const render::Scene> scene_;
    int level_ = -1;
    Selection sel_;
    bool dark_ = false;
    // The last painting: the engine is asked again only when what it shows changes.
    QImage cache_;
    bool cacheValid_ = false;
};

// Kernels and graph launches of the selected frame as a lane, with new kernel variants marked.
class KernelLaneWidget : public QWidget
{
    Q_OBJECT
public:
    explicit KernelLaneWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene);
    void setSelection(const Selection& s);
    QStringList newVariants() const;
    // Kernels the engine reports as a kernel-variant shift in the selected frame.
    QStringList shiftedVariants() const { return shifted_; }
    void fetch(int64_t t0, int64_t t1); // the engine's kernels of the window, once per window

protected:
    void paintEvent(QPaintEvent*) override;

private:
    std::shared_ptr<const render::Scene> scene_;
    Selection sel_;
    QStringList shifted_;
    std::pair<int64_t, int64_t> fetched_{0, -1};
    std::vector<analysis::KernelSpan> kernels_;
    std::vector<analysis::GraphLaunchSpan> launches_;
};

void applyPlotTheme(QCustomPlot* plot, bool dark);

} // namespace fs::views
