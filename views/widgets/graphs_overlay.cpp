#include "graphs_overlay.h"

#include <QPainter>

#include <algorithm>
#include <cmath>

namespace fs::views {

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
