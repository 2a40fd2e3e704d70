#include "plot_widgets.h"
#include "time_cursor.h"

#include "graphs_overlay.h"

#include "core/analysis/metrics.h"

#include <QPainter>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace fs::views {

namespace {

QCPItemRect* band(QCustomPlot* plot, QCPAxisRect* r, double x0, double x1, const QColor& fill,
                  const QPen& pen)
{
    auto* item = new QCPItemRect(plot);
    item->setClipAxisRect(r);
    item->setClipToAxisRect(true);
    for (auto* pos : {item->topLeft, item->bottomRight}) {
        pos->setAxisRect(r);
        pos->setAxes(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
        pos->setTypeX(QCPItemPosition::ptPlotCoords);
        pos->setTypeY(QCPItemPosition::ptAxisRectRatio);
    }
    item->topLeft->setCoords(x0, 0);
    item->bottomRight->setCoords(x1, 1);
    item->setBrush(fill);
    item->setPen(pen);
    item->setLayer(QStringLiteral("background"));
    return item;
}

// Every collapse band of one panel, drawn by one item: an item per band (QCPItemRect) cost
// about 5 µs each to make, so 21 ms of the GUI thread for the 1371 collapses of a 100 M-event
// run, and as much again at every replot. x ranges in plot coordinates; full panel height.
class BandsItem : public QCPAbstractItem
{
public:
    BandsItem(QCustomPlot* plot, QCPAxisRect* r, std::vector<std::pair<double, double>> bands,
              const QColor& fill)
        : QCPAbstractItem(plot), rect_(r), bands_(std::move(bands)), fill_(fill)
    {
        setClipAxisRect(r);
        setClipToAxisRect(true);
        setSelectable(false);
        setLayer(QStringLiteral("background"));
    }
    double selectTest(const QPointF&, bool, QVariant*) const override { return -1; }

protected:
    void draw(QCPPainter* painter) override
    {
        const QRect area = rect_->rect();
        const QCPAxis* x = rect_->axis(QCPAxis::atBottom);
        painter->setPen(Qt::NoPen);
        painter->setBrush(fill_);
        for (const auto& [a, b] : bands_) {
            double p0 = x->coordToPixel(a), p1 = x->coordToPixel(b);
            if (p1 < p0) std::swap(p0, p1);
            if (p1 < area.left() || p0 > area.right()) continue;
            // At least a pixel wide: a one-frame collapse of a long run stays visible.
            painter->drawRect(QRectF(p0, area.top(), std::max(1.0, p1 - p0), area.height()));
        }
    }

private:
    QCPAxisRect* rect_;
    std::vector<std::pair<double, double>> bands_;
    QColor fill_;
};

} // namespace

void applyPlotTheme(QCustomPlot* plot, bool dark)
{
    const QColor bg = dark ? QColor(32, 33, 36) : QColor(255, 255, 255);
    const QColor fg = dark ? QColor(225, 225, 225) : QColor(30, 30, 30);
    const QColor grid = dark ? QColor(60, 62, 66) : QColor(225, 225, 225);
    plot->setBackground(bg);
    for (auto* r : plot->axisRects()) {
        for (auto* ax : r->axes()) {
            ax->setBasePen(QPen(fg));
            ax->setTickPen(QPen(fg));
            ax->setSubTickPen(QPen(fg));
            ax->setTickLabelColor(fg);
            ax->setLabelColor(fg);
            ax->grid()->setPen(QPen(grid, 1, Qt::DotLine));
        }
        if (auto* leg = r->insetLayout()->elementCount()
                            ? qobject_cast<QCPLegend*>(r->insetLayout()->elementAt(0))
                            : nullptr) {
            leg->setBrush(QColor(bg.red(), bg.green(), bg.blue(), 210));
            leg->setTextColor(fg);
            leg->setBorderPen(QPen(grid));
        }
    }
}

// ---- timelines -------------------------------------------------------------------------------

TimelineWidget::TimelineWidget(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    plot_ = new QCustomPlot(this);
    plot_->setAutoAddPlottableToLegend(false); // each panel has its own legend
    // Thousands of points per panel: polylines drawn as such, not as antialiased polygons
    // (a replot runs on the GUI thread).
    plot_->setPlottingHint(QCP::phFastPolylines, true);
    // Collapse bands and the selection are axis-aligned rectangles: no antialiasing needed
    // (hundreds of bands a panel on a long run).
    plot_->setNotAntialiasedElements(QCP::aeItems);
    lay->addWidget(plot_);
    // The time cursor's own layer, buffered: moving the cursor repaints that layer only (a
    // full replot of a long run's panels takes tens of ms).
    plot_->addLayer(QStringLiteral("cursor"), plot_->layer(QStringLiteral("overlay")),
                    QCustomPlot::limAbove);
    plot_->layer(QStringLiteral("cursor"))->setMode(QCPLayer::lmBuffered);
    // A click sets the time cursor; a press on the cursor line drags it instead of the axis.
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        pressPos_ = e->position();
        if (!scene_ || rects_.empty() || e->button() != Qt::LeftButton) return;
        const QCPAxis* x = rects_.front()->axis(QCPAxis::atBottom);
        if (cursor_ != kNoTime && !(e->modifiers() & Qt::ControlModifier) &&
            std::fabs(x->coordToPixel(toX(cursor_)) - e->position().x()) <= 5) {
            scrubbing_ = true;
            plot_->setInteraction(QCP::iRangeDrag, false);
        }
    });
    connect(plot_, &QCustomPlot::mouseMove, this, [this](QMouseEvent* e) {
        if (scrubbing_) emit cursorRequested(toTime(e->position().x()));
    });
    connect(plot_, &QCustomPlot::mouseRelease, this, [this](QMouseEvent* e) {
        if (scrubbing_) {
            scrubbing_ = false;
            plot_->setInteraction(QCP::iRangeDrag, true);
            return;
        }
        if (scene_ && !rects_.empty() && e->button() == Qt::LeftButton &&
            !(e->modifiers() & Qt::ControlModifier) &&
            (e->position() - pressPos_).manhattanLength() < 4)
            emit cursorRequested(toTime(e->position().x()));
    });
    connect(plot_, &QCustomPlot::mousePress, this, [this](QMouseEvent* e) {
        if (!scene_ || rects_.empty() || e->button() != Qt::LeftButton ||
            !(e->modifiers() & Qt::ControlModifier))
            return;
        const double x = rects_.front()->axis(QCPAxis::atBottom)->pixelToCoord(e->position().x());
        const auto u =
            render::timeUnitFor(scene_->timeEnd() - scene_->timeBegin(), scene_->summary.timeAxis);
        emit timeClicked(scene_->timeBegin() + static_cast<int64_t>(x * u.divisor));
    });
    connect(plot_, &QCustomPlot::mouseDoubleClick, this, [this](QMouseEvent* e) {
        if (!scene_ || rects_.empty()) return;
        const double x = rects_.front()->axis(QCPAxis::atBottom)->pixelToCoord(e->position().x());
        const auto u =
            render::timeUnitFor(scene_->timeEnd() - scene_->timeBegin(), scene_->summary.timeAxis);
        emit timeClicked(scene_->timeBegin() + static_cast<int64_t>(x * u.divisor));
    });
}

int TimelineWidget::graphCount() const
{
    return plot_->graphCount();
}

void TimelineWidget::setDark(bool dark)
{
    dark_ = dark;
    rebuild();
}

double TimelineWidget::toX(int64_t t) const
{
    const auto u =
        render::timeUnitFor(scene_->timeEnd() - scene_->timeBegin(), scene_->summary.timeAxis);
    return static_cast<double>(t - scene_->timeBegin()) / u.divisor;
}

void TimelineWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    // A new scene starts on its whole span, not the old range: that may be in another unit (a
    // live recording grows from ms to s) or belong to another session. rebuild() deletes the
    // old axis rects with the layout.
    rects_.clear();
    rebuild();
}

void TimelineWidget::setGraphs(std::shared_ptr<const analysis::GraphsReport> graphs)
{
    graphs_ = std::move(graphs);
    rebuild();
}

void TimelineWidget::setSelection(const Selection& s)
{
    sel_ = s;
    if (rects_.empty()) return; // nothing drawn yet: rebuild() draws it
    // Only the selection band changes: the graphs and collapse bands stay (a rebuild of a long
    // run's panels took ~20 ms of the GUI thread, at every click).
    drawSelection();
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

void TimelineWidget::drawSelection()
{
    for (QCPAbstractItem* it : selectionItems_)
        plot_->removeItem(it);
    selectionItems_.clear();
    if (!scene_ || sel_.from == kNoTime || sel_.to == kNoTime) return;
    for (auto* r : rects_)
        selectionItems_.push_back(band(plot_, r, toX(sel_.from), toX(sel_.to),
                                       QColor(0, 160, 255, 45), QPen(QColor(0, 120, 255), 1.5)));
}

void TimelineWidget::setTimeRange(int64_t t0, int64_t t1)
{
    if (!scene_ || rects_.empty()) return;
    rects_.front()->axis(QCPAxis::atBottom)->setRange(toX(t0), toX(t1));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

std::pair<int64_t, int64_t> TimelineWidget::timeRange() const
{
    if (!scene_ || rects_.empty()) return {0, 0};
    const auto u =
        render::timeUnitFor(scene_->timeEnd() - scene_->timeBegin(), scene_->summary.timeAxis);
    const QCPRange r = rects_.front()->axis(QCPAxis::atBottom)->range();
    auto back = [&](double x) { return scene_->timeBegin() + static_cast<int64_t>(x * u.divisor); };
    return {back(r.lower), back(r.upper)};
}

void TimelineWidget::rebuild()
{
    QCPRange keep;
    const bool hadRange = !rects_.empty();
    if (hadRange) keep = rects_.front()->axis(QCPAxis::atBottom)->range();
    plot_->clearItems();
    selectionItems_.clear();
    cursorLines_.clear();
    cursorTexts_.clear();
    plot_->clearGraphs();
    plot_->plotLayout()->clear();
    rects_.clear();
    if (!scene_ || track_ < 0) {
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    const auto& ld = scene_->tracks[static_cast<size_t>(track_)];
    const auto u =
        render::timeUnitFor(scene_->timeEnd() - scene_->timeBegin(), scene_->summary.timeAxis);
    const QString xlabel = scene_->summary.timeAxis == TimeAxis::Ordinal
                               ? tr("event number (ordinal)")
                               : tr("time since start (%1)").arg(QString::fromUtf8(u.name));
    std::string metric;
    for (const auto& r : scene_->rules)
        if (metric.empty() && std::find(scene_->metricNames.begin(), scene_->metricNames.end(),
                                        r.metric) != scene_->metricNames.end())
            metric = r.metric;
    if (metric.empty() && !scene_->metricNames.empty()) metric = scene_->metricNames.front();
    replayLane_ = graphs_ && !graphs_->replays.empty();
    const int lane = metric.empty() ? 3 : 4; // the replay lane's panel, when there is one
    const int n = lane + (replayLane_ ? 1 : 0);
    auto* group = new QCPMarginGroup(plot_);
    for (int i = 0; i < n; ++i) {
        auto* r = new QCPAxisRect(plot_);
        plot_->plotLayout()->addElement(i, 0, r);
        r->setMarginGroup(QCP::msLeft | QCP::msRight, group);
        r->setRangeDrag(Qt::Horizontal);
        r->setRangeZoom(Qt::Horizontal);
        r->axis(QCPAxis::atBottom)->setLabel(i == n - 1 ? xlabel : QString());
        r->axis(QCPAxis::atBottom)->setTickLabels(i == n - 1);
        auto* leg = new QCPLegend;
        r->insetLayout()->addElement(leg, Qt::AlignTop | Qt::AlignLeft);
        leg->setLayer(QStringLiteral("legend"));
        QFont lf = font();
        lf.setPointSizeF(std::max(6.5, lf.pointSizeF() * 0.8));
        leg->setFont(lf);
        // One row per panel: panels are short, a column of entries would spill over the next.
        leg->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        leg->setWrap(0);
        leg->setRowSpacing(0);
        leg->setColumnSpacing(6);
        leg->setIconSize(16, 8);
        leg->setMargins(QMargins(4, 1, 4, 1));
        QFont tf = font();
        tf.setPointSizeF(std::max(6.5, tf.pointSizeF() * 0.85));
        for (auto* ax : r->axes()) {
            ax->setTickLabelFont(tf);
            ax->setLabelFont(tf);
        }
        r->axis(QCPAxis::atLeft)->ticker()->setTickCount(3);
        rects_.push_back(r);
    }
    for (size_t i = 0; i < rects_.size(); ++i)
        for (size_t j = 0; j < rects_.size(); ++j)
            if (i != j)
                connect(rects_[i]->axis(QCPAxis::atBottom),
                        qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
                        rects_[j]->axis(QCPAxis::atBottom),
                        qOverload<const QCPRange&>(&QCPAxis::setRange));
    plot_->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    // The engine's timeline of the track (Scene::tracks[].timeline): drawn as it is.
    static const analysis::Timeline kEmpty;
    const analysis::Timeline& tl = ld.timeline ? *ld.timeline : kEmpty;
    double maxBytes = 1;
    for (size_t i = 0; i < tl.time.size(); ++i)
        maxBytes = std::max({maxBytes, tl.reserved[i], tl.allocated[i]});
    const render::ByteUnit unit = render::byteAxisUnit(maxBytes);
    const double div = unit.div;
    auto addGraph = [&](QCPAxisRect* r, const QString& name, const QColor& c, bool second) {
        QCPGraph* g = plot_->addGraph(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
        g->setName(name);
        // The second series of a panel: thinner, not dashed. A dashed pen strokes every dash
        // of a jagged 1200-sample line: it made the replot ~4x slower (~100 instead of ~25 ms
        // on the GUI thread for a long run).
        g->setPen(QPen(c, second ? 1.0 : 1.6));
        if (auto* leg = qobject_cast<QCPLegend*>(r->insetLayout()->elementAt(0)))
            g->addToLegend(leg);
        return g;
    };
    QVector<double> x, res, alc, fre, big, fr, fe, ee;
    for (size_t i = 0; i < tl.time.size(); ++i) {
        x << toX(tl.time[i]);
        res << tl.reserved[i] / div;
        alc << tl.allocated[i] / div;
        fre << tl.freeInRegions[i] / div;
        big << tl.largestFragment[i] / div;
        fr << tl.fragmentationRatio[i];
        fe << tl.fragmentEntropy[i];
        ee << tl.eventEntropy[i];
    }
    addGraph(rects_[0], tr("reserved"), QColor(90, 90, 90), false)->setData(x, res, true);
    addGraph(rects_[0], tr("allocated"), QColor(31, 119, 180), false)->setData(x, alc, true);
    addGraph(rects_[0], tr("cached, unused (reserved − allocated)"), QColor(44, 160, 44), true)
        ->setData(x, fre, true);
    addGraph(rects_[0], tr("largest free block"), QColor(230, 120, 20), true)
        ->setData(x, big, true);
    rects_[0]->axis(QCPAxis::atLeft)->setLabel(QLatin1String(unit.name));
    rects_[0]->axis(QCPAxis::atLeft)->setRange(0, maxBytes / div * 1.08);
    addGraph(rects_[1],
             tr("fragmentation F = 1 − largest free / free (dashed: %1)")
                 .arg(analysis::kReferenceFragmentationRatio),
             QColor(214, 39, 40), false)
        ->setData(x, fr, true);
    rects_[1]->axis(QCPAxis::atLeft)->setLabel(tr("F"));
    rects_[1]->axis(QCPAxis::atLeft)->setRange(0, 1.05);
    addGraph(rects_[2], tr("fragment entropy (bits)"), QColor(148, 103, 189), false)
        ->setData(x, fe, true);
    addGraph(rects_[2],
             tr("event-size entropy (%1 s)").arg(static_cast<double>(tl.entropyWindowNs) / 1e9),
             QColor(255, 127, 14), true)
        ->setData(x, ee, true);
    rects_[2]->axis(QCPAxis::atLeft)->setLabel(tr("bits"));
    rects_[2]->axis(QCPAxis::atLeft)->setRange(0, analysis::maxSizeClassEntropyBits() * 1.04);
    auto hline = [&](QCPAxisRect* r, double y) {
        auto* l = new QCPItemStraightLine(plot_);
        l->setClipAxisRect(r);
        for (auto* pos : {l->point1, l->point2}) {
            pos->setAxisRect(r);
            pos->setAxes(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
        }
        l->point1->setCoords(0, y);
        l->point2->setCoords(1, y);
        l->setPen(QPen(render::collapseColor(), 1, Qt::DashLine));
    };
    hline(rects_[1], analysis::kReferenceFragmentationRatio);
    if (!metric.empty()) {
        QVector<double> mx, my;
        for (size_t i = 0; i < scene_->frames.size(); ++i) {
            auto it = scene_->frames[i].metrics.find(metric);
            const int64_t t = scene_->frameX(i);
            if (it != scene_->frames[i].metrics.end() && t != kNoTime) {
                mx << toX(t);
                my << it->second;
            }
        }
        QCPGraph* g =
            addGraph(rects_[3], QString::fromStdString(metric), QColor(23, 190, 207), false);
        g->setData(mx, my, true);
        // A disc per frame while they can be told apart; a long run's thousands are a line.
        if (mx.size() <= 600) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
        // Steps while frames are few; thousands as a line (QCustomPlot then samples it to the
        // pixels; a step line of 8,520 frames took ~0.3 s a replot).
        g->setLineStyle(mx.size() <= 600 ? QCPGraph::lsStepCenter : QCPGraph::lsLine);
        rects_[3]->axis(QCPAxis::atLeft)->setLabel(tr("score"));
        double lo = 0, hi = 0;
        for (double v : my) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        for (const auto& r : scene_->rules)
            if (r.metric == metric) {
                hline(rects_[3], r.threshold);
                hi = std::max(hi, r.threshold);
            }
        rects_[3]->axis(QCPAxis::atLeft)->setRange(lo, hi * 1.1 + 1e-9);
    }
    if (replayLane_) {
        QCPAxisRect* r = rects_[static_cast<size_t>(lane)];
        r->axis(QCPAxis::atLeft)->setLabel(tr("replays"));
        r->axis(QCPAxis::atLeft)->setTickLabels(false);
        r->axis(QCPAxis::atLeft)->setRange(0, 1);
        addReplayLane(plot_, r, graphs_, [this](int64_t t) { return toX(t); });
        plot_->plotLayout()->setRowStretchFactor(lane, 0.35); // a thin lane
    }
    // Collapse bands, frame selection, on every panel.
    QColor bandC = render::collapseColor();
    bandC.setAlpha(55);
    // Bands closer than 1/2000 of the run are merged: hundreds of collapses over a long run
    // would otherwise be hundreds of items per panel, each drawn at every replot.
    std::vector<std::pair<double, double>> bands;
    const double minGap = (toX(scene_->timeEnd()) - toX(scene_->timeBegin())) / 2000;
    for (const auto& c : scene_->collapses) {
        const auto* a = scene_->frame(c.firstFrame);
        const auto* b = scene_->frame(c.lastFrame);
        if (!a || !b || a->start == kNoTime || b->start == kNoTime) continue;
        const double x0 = toX(a->start), x1 = toX(b->end);
        if (!bands.empty() && x0 - bands.back().second < minGap)
            bands.back().second = std::max(bands.back().second, x1);
        else
            bands.emplace_back(x0, x1);
    }
    if (!bands.empty())
        for (auto* r : rects_)
            new BandsItem(plot_, r, bands, bandC);
    // OOMs: a red line on every panel (the bands' item at zero width draws one pixel).
    std::vector<std::pair<double, double>> oomLines;
    for (int64_t t : ooms_)
        oomLines.emplace_back(toX(t), toX(t));
    if (!oomLines.empty())
        for (auto* r : rects_)
            new BandsItem(plot_, r, oomLines, QColor(220, 30, 30, 190));
    drawSelection();
    placeCursor();
    applyPlotTheme(plot_, dark_);
    const double x1 = toX(scene_->timeEnd());
    rects_.front()
        ->axis(QCPAxis::atBottom)
        ->setRange(hadRange && keep.size() > 0 ? keep : QCPRange(0, x1 > 0 ? x1 : 1));
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

// ---- histogram -------------------------------------------------------------------------------

HistogramWidget::HistogramWidget(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    plot_ = new QCustomPlot(this);
    lay->addWidget(plot_);
}

void HistogramWidget::setDark(bool dark)
{
    dark_ = dark;
    rebuild();
}

void HistogramWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    snap_.reset();
    rebuild();
}

void HistogramWidget::setSelection(const Selection& s)
{
    sel_ = s; // the instant comes from the time cursor (setSnapshot)
}

void HistogramWidget::rebuild()
{
    plot_->clearPlottables();
    plot_->clearItems();
    cur_.clear();
    prev_.clear();
    if (!scene_ || track_ < 0) {
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    // The engine's state at the time cursor, and at the end of the frame before when the cursor
    // is at a frame's end (CursorWorker computes both off the GUI thread).
    if (!snap_ || snap_->scene != scene_ || !snap_->blocks) {
        at_ = kNoTime;
        plot_->replot(QCustomPlot::rpQueuedReplot);
        return;
    }
    at_ = snap_->time;
    const analysis::FrameInfo* f = snap_->previous ? scene_->frame(snap_->frame) : nullptr;
    cur_ = snap_->blocks->state.histogram.log2;
    const analysis::FrameInfo* p = f ? scene_->frame(snap_->previousFrame) : nullptr;
    if (p) prev_ = snap_->previous->histogram.log2;
    auto k = [](const analysis::HistogramBin& b) {
        return static_cast<int>(
            std::lround(std::log2(static_cast<double>(std::max<uint64_t>(1, b.lo)))));
    };
    int klo = 12, khi = 20;
    for (const auto* v : {&cur_, &prev_})
        for (const auto& b : *v) {
            klo = std::min(klo, k(b));
            khi = std::max(khi, k(b));
        }
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int e = klo; e <= khi; ++e)
        ticker->addTick(e, render::pow2Label(e));
    plot_->xAxis->setTicker(ticker);
    plot_->xAxis->setTickLabelRotation(-35);
    plot_->xAxis->setLabel(tr("free fragment size (log2 bins, lower bound)"));
    plot_->yAxis->setLabel(tr("fragments (count)"));
    auto* bars = new QCPBars(plot_->xAxis, plot_->yAxis);
    bars->setName(f ? tr("frame %1 (end)").arg(f->index)
                    : tr("at %1").arg(QString::fromStdString(render::formatTime(
                          at_ - scene_->timeBegin(), scene_->summary.timeAxis))));
    bars->setBrush(QColor(31, 119, 180));
    bars->setPen(Qt::NoPen);
    bars->setWidth(0.7);
    double maxC = 1;
    for (const auto& b : cur_) {
        bars->addData(k(b), static_cast<double>(b.count));
        maxC = std::max(maxC, static_cast<double>(b.count));
    }
    if (!prev_.empty()) {
        auto* pb = new QCPBars(plot_->xAxis, plot_->yAxis);
        pb->setName(tr("frame %1 (end), compare").arg(p->index));
        pb->setBrush(Qt::NoBrush);
        pb->setPen(QPen(QColor(255, 127, 14), 2));
        pb->setWidth(0.85);
        for (const auto& b : prev_) {
            pb->addData(k(b), static_cast<double>(b.count));
            maxC = std::max(maxC, static_cast<double>(b.count));
        }
    }
    plot_->xAxis->setRange(klo - 0.6, khi + 0.6);
    plot_->yAxis->setRange(0, maxC * 1.15);
    plot_->legend->setVisible(true);
    plot_->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    // The cluster ranges (docs/analysis.md) behind the bars.
    for (size_t i = 0; i < analysis::kClusterRanges.size(); ++i) {
        const analysis::ClusterRange& c = analysis::kClusterRanges[i];
        band(plot_, plot_->axisRect(), analysis::clusterFirstBin(c) - 0.5,
             c.hi ? analysis::clusterLastBin(c) + 0.5 : khi + 0.6, render::clusterColor(i),
             Qt::NoPen);
    }
    applyPlotTheme(plot_, dark_);
    plot_->replot(QCustomPlot::rpQueuedReplot);
}

// ---- memory map ------------------------------------------------------------------------------

MemMapWidget::MemMapWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumSize(240, 200);
}

void MemMapWidget::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    sel_ = {};
    snap_.reset();
    cacheValid_ = false;
    update();
}

void MemMapWidget::setSelection(const Selection& s)
{
    sel_ = s; // the instant comes from the time cursor (setSnapshot)
}

void MemMapWidget::setDark(bool dark)
{
    dark_ = dark;
    cacheValid_ = false;
    update();
}

void MemMapWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    if (!scene_ || track_ < 0) {
        p.fillRect(rect(), palette().window());
        return;
    }
    if (!snap_ || snap_->scene != scene_ || !snap_->blocks) {
        p.fillRect(rect(), palette().window());
        return;
    }
    if (!cacheValid_ || cache_.size() != size()) {
        render::RenderOptions o;
        o.track = track_;
        const analysis::FrameInfo* f = scene_->frame(snap_->frame);
        o.frame = f && f->end == snap_->time ? f->index : -1;
        o.at = snap_->time;
        o.memmap = &snap_->memmap;
        o.state = &snap_->blocks->state;
        o.title = false;
        o.theme = dark_ ? render::Theme::darkTheme() : render::Theme::light();
        cache_ = QImage(size(), QImage::Format_ARGB32_Premultiplied);
        QPainter cp(&cache_);
        render::paint(cp, QRectF(QPointF(0, 0), QSizeF(size())), *scene_, render::View::MemMap, o);
        cacheValid_ = true;
    }
    p.drawImage(0, 0, cache_);
}

// ---- kernels lane ----------------------------------------------------------------------------

KernelLaneWidget::KernelLaneWidget(QWidget* parent) : QWidget(parent)
{
    setMinimumHeight(90);
}

void KernelLaneWidget::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    sel_ = {};
    fetched_ = {0, -1};
    update();
}

void KernelLaneWidget::setSelection(const Selection& s)
{
    if (s.frame != sel_.frame) {
        shifted_.clear();
        if (scene_ && scene_->frame(s.frame))
            for (const auto& p : scene_->frameReport(s.frame).precursors)
                if (p.kind == analysis::PrecursorKind::KernelVariantShift && p.shift && p.score > 0)
                    shifted_ << QString::fromStdString(p.shift->variant);
    }
    sel_ = s;
    update();
}

QStringList KernelLaneWidget::newVariants() const
{
    // The engine's kernel summary of the frame: names that ran in no previous frame.
    QStringList out;
    if (!scene_ || !scene_->frame(sel_.frame)) return out;
    for (const auto& k : scene_->kernelsInFrame(sel_.frame))
        if (k.newInFrame) out << QString::fromStdString(k.name);
    return out;
}

void KernelLaneWidget::fetch(int64_t t0, int64_t t1)
{
    if (fetched_ == std::make_pair(t0, t1)) return;
    fetched_ = {t0, t1};
    kernels_.clear();
    launches_.clear();
    // Only a selected frame or range: the whole of a long run is millions of launches.
    if (sel_.frame < 0 && sel_.from == kNoTime) return;
    kernels_ = scene_->kernelSpans(t0, t1);
    launches_ = scene_->graphLaunches(t0, t1);
}

void KernelLaneWidget::paintEvent(QPaintEvent*)
{
    QPainter p(this);
    p.fillRect(rect(), palette().base());
    p.setPen(palette().text().color());
    if (!scene_) {
        return;
    }
    const analysis::FrameInfo* f = scene_->frame(sel_.frame);
    if (f && f->start == kNoTime) f = nullptr;
    const auto [t0, t1] = window();
    fetch(t0, t1);
    const QStringList fresh = newVariants();
    const QRectF lane = this->lane(), glane(110, 50, width() - 120, 14);
    p.drawText(QRectF(6, 4, width() - 12, 16), Qt::AlignLeft | Qt::AlignVCenter,
               f ? tr("frame %1: %2 kernel name(s)%3")
                       .arg(f->index)
                       .arg(f->distinctKernels)
                       .arg(fresh.isEmpty()
                                ? QString()
                                : tr("; NEW variant: %1").arg(fresh.join(QStringLiteral(", "))))
                 : tr("whole session (select a frame for its kernels)"));
    p.drawText(QRectF(6, lane.top(), 100, lane.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("kernels"));
    p.drawText(QRectF(6, glane.top(), 100, glane.height()), Qt::AlignLeft | Qt::AlignVCenter,
               tr("graph launches"));
    p.drawRect(lane);
    const double span = static_cast<double>(std::max<int64_t>(1, t1 - t0));
    auto X = [&](int64_t t) {
        return lane.left() + static_cast<double>(t - t0) / span * lane.width();
    };
    std::set<QString> freshSet(fresh.begin(), fresh.end());
    double lastX = -1;
    for (const auto& k : kernels_) {
        const double x0 = X(std::max(k.start, t0)), x1 = std::max(x0 + 1, X(std::min(k.end, t1)));
        if (x1 < lastX + 0.5) continue; // narrower than a pixel behind the previous one: merged
        lastX = x1;
        const QString name = QString::fromStdString(k.name);
        const bool isNew = freshSet.count(name) > 0;
        // A variant the engine reports as shifted: an orange mark above the kernel.
        if (shifted_.contains(name))
            p.fillRect(QRectF(x0, lane.top() - 4, std::max(2.0, x1 - x0), 4), QColor(240, 140, 20));
        p.fillRect(QRectF(x0, lane.top() + 2, x1 - x0, lane.height() - 4),
                   isNew ? render::collapseColor() : QColor(90, 140, 200));
    }
    for (const auto& g : launches_)
        p.fillRect(QRectF(X(std::max(g.start, t0)), glane.top(),
                          std::max(1.0, X(std::min(g.end, t1)) - X(std::max(g.start, t0))),
                          glane.height()),
                   QColor(120, 180, 90));
    // OOMs (red) and the time cursor (orange) across both lanes.
    for (int64_t t : ooms_)
        if (t >= t0 && t <= t1)
            p.fillRect(QRectF(X(t) - 0.5, lane.top() - 4, 1.5, glane.bottom() - lane.top() + 4),
                       QColor(220, 30, 30));
    if (cursor_ != kNoTime && cursor_ >= t0 && cursor_ <= t1)
        p.fillRect(QRectF(X(cursor_) - 0.75, lane.top() - 6, 1.5, glane.bottom() - lane.top() + 8),
                   QColor(255, 160, 20));
    p.setPen(palette().text().color());
    p.drawText(QRectF(110, 68, width() - 120, 16), Qt::AlignLeft | Qt::AlignVCenter,
               tr("%1 → %2   red: new variant, orange: variant shift")
                   .arg(QString::fromStdString(
                            render::formatTime(t0 - scene_->timeBegin(), scene_->summary.timeAxis)),
                        QString::fromStdString(render::formatTime(t1 - scene_->timeBegin(),
                                                                  scene_->summary.timeAxis))));
}

} // namespace fs::views
