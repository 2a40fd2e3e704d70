// The VA heatmap: time × compacted address, painted by fragscope_render. Wheel zooms around the
// cursor (time; Ctrl: address), drag pans, Shift+drag or right-drag box-zooms, F fits, arrows pan,
// +/- zoom. A coarse raster is drawn at once and a full-resolution one follows from a worker.
#pragma once

#include "graphs_overlay.h"
#include "render/render.h"
#include "selection.h"

#include <QImage>
#include <QWidget>

#include <atomic>
#include <memory>

namespace fs::views {

class HeatmapWidget : public QWidget
{
    Q_OBJECT
public:
    explicit HeatmapWidget(QWidget* parent = nullptr);
    ~HeatmapWidget() override;
    void setScene(std::shared_ptr<const render::Scene> scene, int level);
    void setLevel(int level);
    int level() const { return level_; }
    const render::Viewport& viewport() const { return vp_; }
    void setViewport(render::Viewport vp);
    void fit();
    // Shows [a, b] with a margin, keeping the address range.
    void zoomToTime(int64_t a, int64_t b);
    void setSelection(const Selection& s);
    const Selection& selection() const { return sel_; }
    QRectF plotArea() const;
    bool isRefined() const { return refined_; }
    void setDark(bool dark);
    // Maps a point in the widget to (time, compacted address); false outside the plot.
    bool toData(const QPointF& pt, int64_t& t, double& y) const;
    // Outlines a pool's regions (the Graphs panel's selected graph); empty: none.
    void setPoolOutline(const PoolOutline& o);
    const PoolOutline& poolOutline() const { return outline_; }
    QString describeAt(const QPointF& pt) const;

signals:
    void viewportChanged(const fs::render::Viewport& vp);
    void allocationClicked(int64_t allocId);
    void refinedChanged();
    void rasterShown(); // an image (preview, coarse or exact) was put on screen

protected:
    void paintEvent(QPaintEvent*) override;
    void wheelEvent(QWheelEvent*) override;
    void mousePressEvent(QMouseEvent*) override;
    void mouseMoveEvent(QMouseEvent*) override;
    void mouseReleaseEvent(QMouseEvent*) override;
    void keyPressEvent(QKeyEvent*) override;
    void resizeEvent(QResizeEvent*) override;
    bool event(QEvent* e) override;

private:
    render::RenderOptions options() const;
    render::Viewport clamp(render::Viewport vp) const;
    void requestRaster();
    void startRaster();
    void zoomAround(double fx, double fy, double factorT, double factorY);
    QImage placeholder() const;

    std::shared_ptr<const render::Scene> scene_;
    int level_ = -1;
    render::Viewport vp_;
    QImage raster_;
    render::Viewport rasterVp_; // the viewport raster_ was computed for
    bool refined_ = false;
    bool rasterBusy_ = false;
    bool rasterPending_ = false; // the viewport or scene changed while a job ran
    std::shared_ptr<std::atomic<bool>> cancel_;
    Selection sel_;
    bool dark_ = false;
    PoolOutline outline_;
    // Mouse state.
    QPointF pressPos_;
    render::Viewport pressVp_;
    bool dragging_ = false;
    bool boxing_ = false;
    QRectF box_;
};

} // namespace fs::views
