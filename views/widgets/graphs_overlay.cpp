#include "graphs_overlay.h"

#include <QPainter>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace fs::views {

namespace {

class ReplayLaneItem : public QCPAbstractItem
{
public:
    ReplayLaneItem(QCustomPlot* plot, QCPAxisRect* r,
                   std::shared_ptr<const analysis::GraphsReport> report,
                   const std::function<double(int64_t)>& toX)
        : QCPAbstractItem(plot), rect_(r), report_(std::move(report))
    {
        setClipAxisRect(r);
        setClipToAxisRect(true);
        setSelectable(false);
        xs_.reserve(report_->replays.size());
        for (const analysis::GraphReplay& rp : report_->replays)
            xs_.push_back(toX(rp.start));
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

} // namespace

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

void addReplayLane(QCustomPlot* plot, QCPAxisRect* rect,
                   std::shared_ptr<const analysis::GraphsReport> r,
                   const std::function<double(int64_t)>& toX)
{
    new ReplayLaneItem(plot, rect, std::move(r), toX);
}

void paintPoolOutline(QPainter& p, const QRectF& plot, const render::Viewport& vp,
                      const render::TrackEntry& ld, int64_t sessionEnd, const PoolOutline& o)
{
    if (o.empty() || ld.device != o.device || ld.level != o.level || ld.pool) return;
    const double span = static_cast<double>(vp.t1 - vp.t0);
    const double ySpan = vp.y1 - vp.y0;
    if (span <= 0 || ySpan <= 0) return;
    auto px = [&](int64_t t) {
        return plot.left() + (static_cast<double>(t - vp.t0) / span) * plot.width();
    };
    auto py = [&](double y) { return plot.bottom() - (y - vp.y0) / ySpan * plot.height(); };
    p.save();
    p.setClipRect(plot);
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(QColor(255, 0, 200), 1.5));
    for (const analysis::PoolRegion& r : o.regions) {
        const double y0 = ld.addressToY(r.address);
        if (y0 < 0) continue;
        const double y1 = y0 + static_cast<double>(r.size);
        const int64_t end = r.destroyNs == analysis::kAlive ? sessionEnd : r.destroyNs;
        QRectF box(QPointF(px(r.createNs), py(y1)), QPointF(px(end), py(y0)));
        box = box.normalized();
        box.setWidth(std::max(box.width(), 1.0));
        box.setHeight(std::max(box.height(), 1.0));
        p.drawRect(box);
    }
    p.restore();
}

} // namespace fs::views
