#include "charts.h"

#include "scene_explore.h"

#include "core/analysis/history.h"
#include "core/analysis/metrics.h"
#include "core/analysis/serialize.h"

#include <QGuiApplication>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace fs::render {

namespace {

QCPItemRect* band(QCustomPlot& plot, QCPAxisRect* r, double x0, double x1, const QColor& fill,
                  const QPen& pen)
{
    auto* item = new QCPItemRect(&plot);
    item->setClipAxisRect(r);
    item->setClipToAxisRect(true);
    for (auto* pos : {item->topLeft, item->bottomRight})
        placeOnPanel(pos, r, true);
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
    BandsItem(QCustomPlot& plot, QCPAxisRect* r, std::vector<std::pair<double, double>> bands,
              const QColor& fill)
        : QCPAbstractItem(&plot), rect_(r), bands_(std::move(bands)), fill_(fill)
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

QColor replayColor(int64_t duration, int64_t lo, int64_t hi)
{
    double f = 0.5;
    if (hi > lo && lo > 0 && duration > 0)
        f = std::clamp(std::log(static_cast<double>(duration) / static_cast<double>(lo)) /
                           std::log(static_cast<double>(hi) / static_cast<double>(lo)),
                       0.0, 1.0);
    // Blue (short) through yellow to red (long).
    return QColor::fromHsvF(0.66 * (1.0 - f), 0.85, 0.9);
}

std::pair<int64_t, int64_t> replayColorRange(const analysis::GraphsReport& r)
{
    // From the engine's per-graph figures: the shortest median to the longest 99th percentile.
    int64_t lo = 0, hi = 0;
    for (const analysis::GraphInfo& g : r.graphs) {
        if (g.replay.count == 0) continue;
        lo = lo == 0 ? g.replay.p50 : std::min(lo, g.replay.p50);
        hi = std::max(hi, g.replay.p99);
    }
    return {std::max<int64_t>(lo, 1), std::max<int64_t>(hi, std::max<int64_t>(lo, 1) + 1)};
}

// Every replay of a report in one axis rect, each at least a pixel wide, coloured by duration
// (the longest replay wins a pixel column). One item, however many replays: a million replays
// cost one pass over the visible ones per replot.
class ReplayLaneItem : public QCPAbstractItem
{
public:
    ReplayLaneItem(QCustomPlot& plot, QCPAxisRect* r,
                   std::shared_ptr<const analysis::GraphsReport> report, const Scene& s)
        : QCPAbstractItem(&plot), rect_(r), report_(std::move(report))
    {
        setClipAxisRect(r);
        setClipToAxisRect(true);
        setSelectable(false);
        xs_.reserve(report_->replays.size());
        for (const analysis::GraphReplay& rp : report_->replays)
            xs_.push_back(timelineX(s, rp.start));
        range_ = replayColorRange(*report_);
    }
    double selectTest(const QPointF&, bool, QVariant*) const override { return -1; }

protected:
    void draw(QCPPainter* painter) override
    {
        const QRect area = rect_->rect();
        const QCPAxis* x = rect_->axis(QCPAxis::atBottom);
        const QCPRange vis = x->range();
        auto lo = std::lower_bound(xs_.begin(), xs_.end(), vis.lower);
        auto hi = std::upper_bound(xs_.begin(), xs_.end(), vis.upper);
        // The longest replay of each pixel column: the one worth seeing.
        std::vector<int64_t> column(static_cast<size_t>(std::max(area.width(), 1)), -1);
        for (auto it = lo; it != hi; ++it) {
            const size_t i = static_cast<size_t>(it - xs_.begin());
            const int px = static_cast<int>(x->coordToPixel(*it)) - area.left();
            if (px < 0 || px >= area.width()) continue;
            column[static_cast<size_t>(px)] =
                std::max(column[static_cast<size_t>(px)], report_->replays[i].duration());
        }
        painter->setPen(Qt::NoPen);
        for (size_t c = 0; c < column.size(); ++c) {
            if (column[c] < 0) continue;
            painter->setBrush(replayColor(column[c], range_.first, range_.second));
            painter->drawRect(QRectF(area.left() + static_cast<double>(c), area.top() + 2, 1.0,
                                     area.height() - 4));
        }
    }

private:
    QCPAxisRect* rect_;
    std::shared_ptr<const analysis::GraphsReport> report_;
    std::vector<double> xs_; // replays' starts in plot coordinates (ascending)
    std::pair<int64_t, int64_t> range_;
};

// A legend entry for what is not a plottable (the collapse bands, the OOM lines): a swatch and
// its name.
class SwatchLegendItem : public QCPAbstractLegendItem
{
public:
    SwatchLegendItem(QCPLegend* legend, QString name, QColor fill)
        : QCPAbstractLegendItem(legend), name_(std::move(name)), fill_(fill)
    {
    }

protected:
    void draw(QCPPainter* painter) override
    {
        painter->setFont(mFont);
        painter->setPen(QPen(mTextColor));
        const QSize icon = mParentLegend->iconSize();
        const QRect text =
            painter->fontMetrics().boundingRect(0, 0, 0, icon.height(), Qt::TextDontClip, name_);
        const int h = std::max(text.height(), icon.height());
        painter->drawText(mRect.x() + icon.width() + mParentLegend->iconTextPadding(), mRect.y(),
                          text.width(), h, Qt::TextDontClip, name_);
        painter->fillRect(QRect(mRect.topLeft() + QPoint(0, (h - icon.height()) / 2), icon), fill_);
    }
    QSize minimumOuterSizeHint() const override
    {
        const QSize icon = mParentLegend->iconSize();
        const QRect text =
            QFontMetrics(mFont).boundingRect(0, 0, 0, icon.height(), Qt::TextDontClip, name_);
        return QSize(icon.width() + mParentLegend->iconTextPadding() + text.width() +
                         mMargins.left() + mMargins.right(),
                     std::max(text.height(), icon.height()) + mMargins.top() + mMargins.bottom());
    }

private:
    QString name_;
    QColor fill_;
};

QFont smaller(const QFont& base, double k)
{
    QFont f = base;
    if (f.pixelSize() > 0)
        f.setPixelSize(std::max(9, static_cast<int>(std::lround(f.pixelSize() * k))));
    else
        f.setPointSizeF(std::max(6.5, f.pointSizeF() * k));
    return f;
}

// The bin index k of [2^k, 2^(k+1)): core's.
int log2Bin(const analysis::HistogramBin& b)
{
    return analysis::log2Bin(b.lo);
}

} // namespace

void applyPlotTheme(QCustomPlot& plot, const Theme& theme)
{
    plot.setBackground(theme.background);
    for (auto* r : plot.axisRects()) {
        for (auto* ax : r->axes()) {
            ax->setBasePen(QPen(theme.foreground));
            ax->setTickPen(QPen(theme.foreground));
            ax->setSubTickPen(QPen(theme.foreground));
            ax->setTickLabelColor(theme.foreground);
            ax->setLabelColor(theme.foreground);
            ax->grid()->setPen(QPen(theme.grid, 1, Qt::DotLine));
        }
        if (auto* leg = r->insetLayout()->elementCount()
                            ? qobject_cast<QCPLegend*>(r->insetLayout()->elementAt(0))
                            : nullptr) {
            QColor bg = theme.background;
            bg.setAlpha(210);
            leg->setBrush(bg);
            leg->setTextColor(theme.foreground);
            leg->setBorderPen(QPen(theme.grid));
        }
    }
}

void placeOnPanel(QCPItemPosition* pos, QCPAxisRect* panel, bool yAsPanelRatio)
{
    pos->setAxisRect(panel);
    pos->setAxes(panel->axis(QCPAxis::atBottom), panel->axis(QCPAxis::atLeft));
    pos->setTypeX(QCPItemPosition::ptPlotCoords);
    pos->setTypeY(yAsPanelRatio ? QCPItemPosition::ptAxisRectRatio : QCPItemPosition::ptPlotCoords);
}

QFont chartFont()
{
    // The application's font in pixels: a picture on any device (PNG, SVG at 72 dpi, PDF) has
    // the text of the screen.
    QFont f = QGuiApplication::font();
    if (f.pixelSize() <= 0)
        f.setPixelSize(std::max(9, static_cast<int>(std::lround(f.pointSizeF() * 96.0 / 72.0))));
    return f;
}

double timelineX(const Scene& s, int64_t t)
{
    const TimeUnit u = timeUnitFor(s.timeEnd() - s.timeBegin(), s.summary.timeAxis);
    return static_cast<double>(t - s.timeBegin()) / u.divisor;
}

int64_t timelineTime(const Scene& s, double x)
{
    const TimeUnit u = timeUnitFor(s.timeEnd() - s.timeBegin(), s.summary.timeAxis);
    return s.timeBegin() + static_cast<int64_t>(std::llround(x * u.divisor));
}

std::vector<QCPAbstractItem*>
addSelectionBand(QCustomPlot& plot, const std::vector<QCPAxisRect*>& panels, double x0, double x1)
{
    std::vector<QCPAbstractItem*> out;
    for (QCPAxisRect* r : panels)
        out.push_back(
            band(plot, r, x0, x1, QColor(0, 160, 255, 45), QPen(QColor(0, 120, 255), 1.5)));
    return out;
}

void setOomLines(QCustomPlot& plot, const std::vector<QCPAxisRect*>& panels, const Scene& s,
                 const std::vector<int64_t>& ooms, OomMarks& marks)
{
    for (QCPAbstractItem* it : marks.lines)
        plot.removeItem(it);
    marks.lines.clear();
    if (marks.entry) marks.legend->removeItem(marks.entry);
    marks.entry = nullptr;
    // A red line on every panel (the bands' item at zero width draws one pixel).
    const QColor oomC(220, 30, 30, 190);
    std::vector<std::pair<double, double>> lines;
    for (int64_t t : ooms)
        lines.emplace_back(timelineX(s, t), timelineX(s, t));
    if (lines.empty()) return;
    for (auto* r : panels)
        marks.lines.push_back(new BandsItem(plot, r, lines, oomC));
    if (marks.legend) {
        marks.entry = new SwatchLegendItem(marks.legend, QStringLiteral("OOM"), oomC);
        marks.legend->addItem(marks.entry);
    }
}

TimelinePlot buildTimeline(QCustomPlot& plot, const Scene& s, const TimelineChart& c)
{
    TimelinePlot out;
    plot.clearItems();
    plot.clearGraphs();
    plot.plotLayout()->clear();
    plot.setAutoAddPlottableToLegend(false); // each panel has its own legend
    // Thousands of points per panel: polylines drawn as such, not as antialiased polygons (on
    // screen a replot runs on the GUI thread).
    plot.setPlottingHint(QCP::phFastPolylines, true);
    // Collapse bands and the selection are axis-aligned rectangles: no antialiasing needed
    // (hundreds of bands a panel on a long run).
    plot.setNotAntialiasedElements(QCP::aeItems);
    if (c.track < 0 || c.track >= static_cast<int>(s.tracks.size())) {
        applyPlotTheme(plot, c.theme);
        return out;
    }
    const TrackEntry& ld = s.tracks[static_cast<size_t>(c.track)];
    const TimeUnit u = timeUnitFor(s.timeEnd() - s.timeBegin(), s.summary.timeAxis);
    const QString xlabel =
        s.summary.timeAxis == TimeAxis::Ordinal
            ? QStringLiteral("event number (ordinal)")
            : QStringLiteral("time since start (%1)").arg(QString::fromUtf8(u.name));
    // The frame metric with a collapse rule, else the first one.
    for (const auto& r : s.rules)
        if (out.metric.empty() &&
            std::find(s.metricNames.begin(), s.metricNames.end(), r.metric) != s.metricNames.end())
            out.metric = r.metric;
    if (out.metric.empty() && !s.metricNames.empty()) out.metric = s.metricNames.front();
    out.replayLane = c.graphs && !c.graphs->replays.empty();
    const int lane = out.metric.empty() ? 3 : 4; // the replay lane's panel, when there is one
    const int n = lane + (out.replayLane ? 1 : 0);
    const QFont legendFont = smaller(c.font, 0.8), tickFont = smaller(c.font, 0.85);
    auto* group = new QCPMarginGroup(&plot);
    for (int i = 0; i < n; ++i) {
        auto* r = new QCPAxisRect(&plot);
        plot.plotLayout()->addElement(i, 0, r);
        r->setMarginGroup(QCP::msLeft | QCP::msRight, group);
        r->setRangeDrag(Qt::Horizontal);
        r->setRangeZoom(Qt::Horizontal);
        r->axis(QCPAxis::atBottom)->setLabel(i == n - 1 ? xlabel : QString());
        r->axis(QCPAxis::atBottom)->setTickLabels(i == n - 1);
        auto* leg = new QCPLegend;
        r->insetLayout()->addElement(leg, Qt::AlignTop | Qt::AlignLeft);
        leg->setLayer(QStringLiteral("legend"));
        leg->setFont(legendFont);
        // One row per panel: panels are short, a column of entries would spill over the next.
        leg->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        leg->setWrap(0);
        leg->setRowSpacing(0);
        leg->setColumnSpacing(6);
        leg->setIconSize(16, 8);
        leg->setMargins(QMargins(4, 1, 4, 1));
        for (auto* ax : r->axes()) {
            ax->setTickLabelFont(tickFont);
            ax->setLabelFont(tickFont);
        }
        r->axis(QCPAxis::atLeft)->ticker()->setTickCount(3);
        out.panels.push_back(r);
    }
    // One time axis: a pan or zoom of one panel moves them all.
    for (size_t i = 0; i < out.panels.size(); ++i)
        for (size_t j = 0; j < out.panels.size(); ++j)
            if (i != j)
                QObject::connect(out.panels[i]->axis(QCPAxis::atBottom),
                                 qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
                                 out.panels[j]->axis(QCPAxis::atBottom),
                                 qOverload<const QCPRange&>(&QCPAxis::setRange));
    // The engine's timeline of the track (Scene::tracks[].timeline): drawn as it is.
    static const analysis::Timeline kEmpty;
    const analysis::Timeline& tl = ld.timeline ? *ld.timeline : kEmpty;
    double maxBytes = 1;
    for (size_t i = 0; i < tl.time.size(); ++i)
        maxBytes = std::max({maxBytes, tl.reserved[i], tl.allocated[i]});
    const ByteUnit unit = byteAxisUnit(maxBytes);
    const double div = unit.div;
    auto addGraph = [&](QCPAxisRect* r, const QString& name, const QColor& col, bool second) {
        QCPGraph* g = plot.addGraph(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
        g->setName(name);
        // The second series of a panel: thinner, not dashed. A dashed pen strokes every dash
        // of a jagged 1200-sample line: it made the replot ~4x slower (~100 instead of ~25 ms
        // on the GUI thread for a long run).
        g->setPen(QPen(col, second ? 1.0 : 1.6));
        if (auto* leg = qobject_cast<QCPLegend*>(r->insetLayout()->elementAt(0)))
            g->addToLegend(leg);
        return g;
    };
    QVector<double> x, res, alc, fre, big, fr, fe, ee;
    for (size_t i = 0; i < tl.time.size(); ++i) {
        x << timelineX(s, tl.time[i]);
        res << tl.reserved[i] / div;
        alc << tl.allocated[i] / div;
        fre << tl.freeInRegions[i] / div;
        big << tl.largestFragment[i] / div;
        fr << tl.fragmentationRatio[i];
        fe << tl.fragmentEntropy[i];
        ee << tl.eventEntropy[i];
    }
    const auto& P = out.panels;
    addGraph(P[0], QStringLiteral("reserved"), QColor(90, 90, 90), false)->setData(x, res, true);
    addGraph(P[0], QStringLiteral("allocated"), QColor(31, 119, 180), false)->setData(x, alc, true);
    // Pending frees are neither (docs/analysis.md "Pending frees").
    addGraph(P[0], QStringLiteral("cached, unused (reserved − allocated − pending frees)"),
             QColor(44, 160, 44), true)
        ->setData(x, fre, true);
    addGraph(P[0], QStringLiteral("largest free block"), QColor(230, 120, 20), true)
        ->setData(x, big, true);
    P[0]->axis(QCPAxis::atLeft)->setLabel(QLatin1String(unit.name));
    P[0]->axis(QCPAxis::atLeft)->setRange(0, maxBytes / div * 1.08);
    addGraph(P[1],
             QStringLiteral("fragmentation F = 1 − largest free / free (dashed: %1)")
                 .arg(analysis::kReferenceFragmentationRatio),
             QColor(214, 39, 40), false)
        ->setData(x, fr, true);
    P[1]->axis(QCPAxis::atLeft)->setLabel(QStringLiteral("F"));
    P[1]->axis(QCPAxis::atLeft)->setRange(0, 1.05);
    addGraph(P[2], QStringLiteral("fragment entropy (bits)"), QColor(148, 103, 189), false)
        ->setData(x, fe, true);
    addGraph(P[2],
             QStringLiteral("event-size entropy (%1)")
                 .arg(QString::fromStdString(
                     analysis::entropyWindowText(tl.entropyWindowNs, s.timeEnd() - s.timeBegin(),
                                                 s.summary.timeAxis == TimeAxis::Ordinal))),
             QColor(255, 127, 14), true)
        ->setData(x, ee, true);
    P[2]->axis(QCPAxis::atLeft)->setLabel(QStringLiteral("bits"));
    P[2]->axis(QCPAxis::atLeft)->setRange(0, analysis::maxSizeClassEntropyBits() * 1.04);
    auto hline = [&](QCPAxisRect* r, double y) {
        auto* l = new QCPItemStraightLine(&plot);
        l->setClipAxisRect(r);
        for (auto* pos : {l->point1, l->point2})
            placeOnPanel(pos, r, false);
        l->point1->setCoords(0, y);
        l->point2->setCoords(1, y);
        l->setPen(QPen(collapseColor(), 1, Qt::DashLine));
    };
    hline(P[1], analysis::kReferenceFragmentationRatio);
    if (!out.metric.empty()) {
        QVector<double> mx, my;
        for (size_t i = 0; i < s.frames.size(); ++i) {
            auto it = s.frames[i].metrics.find(out.metric);
            const int64_t t = s.frameX(i);
            if (it != s.frames[i].metrics.end() && t != kNoTime) {
                mx << timelineX(s, t);
                my << it->second;
            }
        }
        QCPGraph* g =
            addGraph(P[3], QString::fromStdString(out.metric), QColor(23, 190, 207), false);
        g->setData(mx, my, true);
        // A disc per frame while they can be told apart; a long run's thousands are a line.
        if (mx.size() <= 600) g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
        // Steps while frames are few; thousands as a line (QCustomPlot then samples it to the
        // pixels; a step line of 8,520 frames took ~0.3 s a replot).
        g->setLineStyle(mx.size() <= 600 ? QCPGraph::lsStepCenter : QCPGraph::lsLine);
        P[3]->axis(QCPAxis::atLeft)->setLabel(QStringLiteral("score"));
        double lo = 0, hi = 0;
        for (double v : my) {
            lo = std::min(lo, v);
            hi = std::max(hi, v);
        }
        for (const auto& r : s.rules)
            if (r.metric == out.metric) {
                hline(P[3], r.threshold);
                hi = std::max(hi, r.threshold);
            }
        P[3]->axis(QCPAxis::atLeft)->setRange(lo, hi * 1.1 + 1e-9);
    }
    if (out.replayLane) {
        QCPAxisRect* r = P[static_cast<size_t>(lane)];
        r->axis(QCPAxis::atLeft)->setLabel(QStringLiteral("replays"));
        r->axis(QCPAxis::atLeft)->setTickLabels(false);
        r->axis(QCPAxis::atLeft)->setRange(0, 1);
        new ReplayLaneItem(plot, r, c.graphs, s);
        plot.plotLayout()->setRowStretchFactor(lane, 0.35); // a thin lane
    }
    // Collapse bands on every panel. Bands closer than 1/2000 of the run are merged: hundreds of
    // collapses over a long run would otherwise be hundreds of rectangles per panel.
    QColor bandC = collapseColor();
    bandC.setAlpha(55);
    std::vector<std::pair<double, double>> bands;
    const double minGap = (timelineX(s, s.timeEnd()) - timelineX(s, s.timeBegin())) / 2000;
    for (const auto& col : s.collapses) {
        const auto* a = s.frame(col.firstFrame);
        const auto* b = s.frame(col.lastFrame);
        if (!a || !b || a->start == kNoTime || b->start == kNoTime) continue;
        const double x0 = timelineX(s, a->start), x1 = timelineX(s, b->end);
        if (!bands.empty() && x0 - bands.back().second < minGap)
            bands.back().second = std::max(bands.back().second, x1);
        else
            bands.emplace_back(x0, x1);
    }
    // Their legend goes on the last panel of figures (the metric's, which has one entry).
    auto* legend =
        qobject_cast<QCPLegend*>(P[static_cast<size_t>(lane - 1)]->insetLayout()->elementAt(0));
    if (!bands.empty()) {
        for (auto* r : P)
            new BandsItem(plot, r, bands, bandC);
        legend->addItem(new SwatchLegendItem(legend, QStringLiteral("collapsed frames"), bandC));
    }
    // A flight recording's gaps: nothing is known there (docs/capture.md "Flight recording").
    if (const auto gaps = analysis::unrecordedSpans(s.summary.windows, s.timeBegin(), s.timeEnd());
        !gaps.empty()) {
        std::vector<std::pair<double, double>> gapBands;
        for (const auto& [b, e] : gaps)
            gapBands.emplace_back(timelineX(s, b), timelineX(s, e));
        QColor gapC = unrecordedColor();
        gapC.setAlpha(90);
        for (auto* r : P)
            new BandsItem(plot, r, gapBands, gapC);
        legend->addItem(
            new SwatchLegendItem(legend, QStringLiteral("not recorded (flight recording)"), gapC));
    }
    out.ooms.legend = legend;
    setOomLines(plot, P, s, c.ooms, out.ooms);
    if (c.selFrom != kNoTime && c.selTo != kNoTime)
        out.selection = addSelectionBand(plot, P, timelineX(s, c.selFrom), timelineX(s, c.selTo));
    applyPlotTheme(plot, c.theme);
    const int64_t from = c.from == kNoTime ? s.timeBegin() : c.from;
    const int64_t to = c.to == kNoTime ? s.timeEnd() : c.to;
    const double x0 = timelineX(s, from), x1 = timelineX(s, to);
    P.front()->axis(QCPAxis::atBottom)->setRange(x0, x1 > x0 ? x1 : x0 + 1);
    return out;
}

HistogramChart histogramChart(const Scene& s, int64_t at, int64_t frame,
                              const analysis::State& state, int64_t previousFrame,
                              const analysis::State* prev)
{
    HistogramChart h;
    const analysis::FrameInfo* f = s.frame(frame);
    if (f && f->start == kNoTime) f = nullptr;
    h.current = state.histogram.log2;
    h.currentName = f ? QStringLiteral("frame %1 (end)").arg(f->index)
                      : QStringLiteral("at %1").arg(QString::fromStdString(
                            formatTime(at - s.timeBegin(), s.summary.timeAxis)));
    const analysis::FrameInfo* p = f && prev ? s.frame(previousFrame) : nullptr;
    if (p) {
        h.previous = prev->histogram.log2;
        h.previousName = QStringLiteral("frame %1 (end), compare").arg(p->index);
    }
    return h;
}

void buildHistogram(QCustomPlot& plot, const HistogramChart& h)
{
    plot.clearPlottables();
    plot.clearItems();
    int klo = 12, khi = 20; // at least 4 KiB .. 1 MiB so that pictures read the same every time
    for (const auto* v : {&h.current, &h.previous})
        for (const auto& b : *v) {
            klo = std::min(klo, log2Bin(b));
            khi = std::max(khi, log2Bin(b));
        }
    auto ticker = QSharedPointer<QCPAxisTickerText>::create();
    for (int e = klo; e <= khi; ++e)
        ticker->addTick(e, pow2Label(e));
    plot.xAxis->setTicker(ticker);
    plot.xAxis->setTickLabelRotation(-35);
    plot.xAxis->setLabel(QStringLiteral("free fragment size (log2 bins, lower bound)"));
    plot.yAxis->setLabel(QStringLiteral("fragments (count)"));
    for (QCPAxis* ax : {plot.xAxis, plot.yAxis}) {
        ax->setTickLabelFont(h.font);
        ax->setLabelFont(h.font);
    }
    plot.legend->setFont(h.font);
    auto* bars = new QCPBars(plot.xAxis, plot.yAxis);
    bars->setName(h.currentName);
    bars->setBrush(QColor(31, 119, 180));
    bars->setPen(Qt::NoPen);
    bars->setWidth(0.7);
    double maxC = 1;
    for (const auto& b : h.current) {
        bars->addData(log2Bin(b), static_cast<double>(b.count));
        maxC = std::max(maxC, static_cast<double>(b.count));
    }
    if (!h.previous.empty()) {
        auto* pb = new QCPBars(plot.xAxis, plot.yAxis);
        pb->setName(h.previousName);
        pb->setBrush(Qt::NoBrush);
        pb->setPen(QPen(QColor(255, 127, 14), 2));
        pb->setWidth(0.85);
        for (const auto& b : h.previous) {
            pb->addData(log2Bin(b), static_cast<double>(b.count));
            maxC = std::max(maxC, static_cast<double>(b.count));
        }
    }
    plot.xAxis->setRange(klo - 0.6, khi + 0.6);
    // Headroom for the legend (top right) above the tallest bar.
    plot.yAxis->setRange(0, maxC * 1.3);
    plot.legend->setVisible(true);
    plot.axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
    // The cluster ranges (docs/analysis.md) behind the bars, each named at its top (no legend
    // row: the names say what the shading is).
    for (size_t i = 0; i < analysis::kClusterRanges.size(); ++i) {
        const analysis::ClusterRange& cr = analysis::kClusterRanges[i];
        const double x0 = analysis::clusterFirstBin(cr) - 0.5;
        const double x1 = cr.hi ? analysis::clusterLastBin(cr) + 0.5 : khi + 0.6;
        band(plot, plot.axisRect(), x0, x1, clusterColor(i), Qt::NoPen);
        auto* name = new QCPItemText(&plot);
        name->setClipToAxisRect(true);
        name->position->setTypeX(QCPItemPosition::ptPlotCoords);
        name->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
        // Centred on a bounded range; the open one is named at its start.
        name->position->setCoords(cr.hi ? (x0 + x1) / 2 : x0 + 0.1, 0.01);
        name->setPositionAlignment((cr.hi ? Qt::AlignHCenter : Qt::AlignLeft) | Qt::AlignTop);
        name->setText(QString::fromUtf8(cr.label));
        name->setFont(smaller(h.font, 0.9));
        name->setColor(h.theme.muted);
        name->setLayer(QStringLiteral("background"));
    }
    applyPlotTheme(plot, h.theme);
}

} // namespace fs::render
