// The VA heatmap: time × compacted address, painted by fragscope_render. Wheel zooms around the
// mouse (time; Ctrl: address), drag pans, Shift+drag or right-drag box-zooms, F fits, arrows pan,
// +/- zoom. A coarse raster is drawn at once and a full-resolution one follows from a worker.
// A click sets the time cursor (an orange line); dragging the line, or along the time axis
// below the plot, scrubs it. The blocks can be coloured by call site, tag, stream or pool, or
// search matches highlighted (HeatmapStyle, legend in the corner); a pool's track shows that
// pool only. OOMs are marked under the time axis.
#pragma once

#include "core/analysis/explore.h"
#include "graphs_overlay.h"
#include "jobs.h"
#include "panel.h"
#include "render/render.h"
#include "selection.h"

#include <QImage>
#include <QTimer>
#include <QWidget>

#include <atomic>
#include <memory>

namespace fs::views {

class HeatmapWidget : public QWidget, public Panel
{
    Q_OBJECT
public:
    explicit HeatmapWidget(QWidget* parent = nullptr);
    ~HeatmapWidget() override;
    static constexpr double kLegendWidth = 250; // the colouring legend's column (pixels)
    void setScene(std::shared_ptr<const render::Scene> scene, int track);
    void showScene(std::shared_ptr<const render::Scene> scene, int track) override
    {
        setScene(std::move(scene), track);
    }
    Follows follows() const override { return Follows::Track; }
    void setTrack(int track);
    int track() const { return track_; }
    const std::shared_ptr<const render::Scene>& scene() const { return scene_; }
    const QString& note() const { return note_; }
    const render::Viewport& viewport() const { return vp_; }
    void setViewport(render::Viewport vp);
    void fit();
    // Shows [a, b] with a margin, keeping the address range.
    void zoomToTime(int64_t a, int64_t b);
    void setSelection(const Selection& s);
    const Selection& selection() const { return sel_; }
    QRectF plotArea() const;
    // Whether the full-resolution picture is on screen (not a stand-in: pictureAwaited).
    bool isRefined() const { return refined_ && !pictureAwaited(); }
    // Whether the picture under the overlay on screen was painted by a raster's worker (false:
    // by paintEvent, as after a change no worker ran for); a test's window on where it is done.
    bool baseFromWorker() const { return baseFromWorker_; }
    // How many times paintEvent painted that picture itself (the GUI thread's share); a test's
    // window on the same.
    int basesPaintedHere() const { return basesPaintedHere_; }
    // Whether a picture painted on a worker is awaited (the one before stays on screen).
    bool pictureAwaited() const;
    void setDark(bool dark);
    // A view linked to another (the compare window): it shows exactly the time range it is
    // given, past the session's ends too (no data is drawn there), and reads time in the unit
    // for a span of `unitSpan` ns (0: its own span's).
    void setLinked(int64_t unitSpan);
    int64_t unitSpan() const { return unitSpan_; }
    // Maps a point in the widget to (time, compacted address); false outside the plot.
    bool toData(const QPointF& pt, int64_t& t, double& y) const;
    // Outlines a pool's regions (the Graphs panel's selected graph); empty: none.
    void setPoolOutline(const PoolOutline& o);
    const PoolOutline& poolOutline() const { return outline_; }
    QString describeAt(const QPointF& pt) const;

    // ---- time cursor, styles, marks (docs/gui.md "Time cursor") ----
    void setTimeCursor(int64_t t);
    int64_t timeCursor() const { return cursor_; }
    void setStyle(const analysis::HeatmapStyle& style);
    const analysis::HeatmapStyle& style() const { return style_; }
    const std::vector<analysis::LegendEntry>& legend() const { return legend_; }
    void setOoms(std::vector<int64_t> times);
    // A free fragment to outline at the cursor (size 0: none).
    void setFragmentHighlight(uint64_t address, uint64_t size);
    // A line over the plot saying what the picture is (a snapshot without a trace).
    void setNote(const QString& note);
    // Widens the view when [t0, t1] x the block's addresses is not all in it (a block's life).
    void showSpan(int64_t t0, int64_t t1, uint64_t address, uint64_t size);
    double timeToX(int64_t t) const;

signals:
    void cursorRequested(qint64 t);
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
    void zoomAround(double fx, double fy, double factorT, double factorY);
    // The picture for the plot now: the raster when it is of the current viewport, else the
    // last one moved and scaled to where its viewport lies in the current one.
    QImage pictureForView() const;

    std::shared_ptr<const render::Scene> scene_;
    int track_ = -1;
    render::Viewport vp_;
    QImage raster_;
    render::Viewport rasterVp_; // the viewport raster_ was computed for
    bool refined_ = false;
    // One raster job at a time; a newer request stops the running job's full-resolution pass
    // and waits; every image a job makes is shown.
    JobTracker* rasterJobs_ = new JobTracker(this, JobTracker::Mode::Follow);
    Selection sel_;
    bool dark_ = false;
    PoolOutline outline_;
    bool linked_ = false;
    int64_t unitSpan_ = 0;
    // Mouse state.
    QPointF pressPos_;
    render::Viewport pressVp_;
    bool dragging_ = false;
    bool boxing_ = false;
    QRectF box_;
    bool scrubbing_ = false;
    int64_t cursor_ = kNoTime;
    analysis::HeatmapStyle style_;
    std::vector<analysis::LegendEntry> legend_; // of the raster on screen
    std::vector<QColor> legendColours_;
    std::vector<int64_t> ooms_;
    uint64_t fragAddress_ = 0, fragSize_ = 0;
    QString note_;
    void paintOverlay(QPainter& p);
    // The picture under the overlay (raster, frames, collapses, axes, pool outline) painted
    // once into `base_` (setScene drops it), then copied: the many repaints that change only the
    // overlay (the time cursor, OOM marks, a box being drawn, the views around it updating) cost a
    // copy instead of thousands of frame boundaries and address labels each, on the GUI thread.
    struct BaseKey
    {
        render::RenderOptions options; // the track, viewport, selection, theme, legend
        render::Viewport rasterVp;
        qint64 raster = 0; // QImage::cacheKey of raster_
        QSize size;
        double dpr = 1;
        uint64_t generation = 0; // baseGeneration_
        bool operator==(const BaseKey&) const = default;
    };
    BaseKey baseKey() const;
    // What the base image is painted from, copied so that the raster's worker can paint it
    // beside the raster (a new raster would otherwise cost a base paint on the GUI thread:
    // 20-50 ms at full screen on a long run).
    struct BaseInputs
    {
        BaseKey key; // key.raster is filled in when the image is shown
        QRect rect;
        QRectF plot;
        render::Viewport vp;
        PoolOutline outline;
        std::vector<int64_t> ooms;
    };
    BaseInputs baseInputs() const;
    // Paints the base image of `in` with `picture` in the plot (a raster of in.vp, or the
    // placeholder); safe on a worker thread.
    static QImage paintBase(const render::Scene& scene, const BaseInputs& in,
                            const QImage& picture);
    QImage base_;
    BaseKey baseKey_;
    bool baseFromWorker_ = false;
    int basesPaintedHere_ = 0;
    // Pictures that change without the user's hand on the view (a new scene, its OOM marks, a
    // pool outline, a raster whose worker painted around it with inputs changed since) are
    // painted on a worker too: until one comes (kAwaitMs at most), paintEvent shows `standIn_`
    // (the picture it replaces, or the background) instead of painting one on the GUI thread
    // (13-40 ms there at open, while the loader's workers take both cores of a small machine).
    static constexpr int kAwaitMs = 1000;
    JobTracker* baseJobs_ = new JobTracker(this, JobTracker::Mode::Replace, &picturePool());
    QTimer* awaitTimer_ = new QTimer(this); // running while a picture is awaited
    QImage standIn_;
    void awaitPicture(QImage standIn);
    void endAwait();
    // Paints the base of the current inputs on a worker (around the raster of the current
    // viewport, or the last one stretched onto it), the picture on screen kept meanwhile.
    void paintBaseBeside();
    bool paintStandIn(QPainter& p);
    // Takes a picture a worker painted for `key` when it is still the one for the screen.
    bool takeBase(QImage base, const BaseKey& key);
    uint64_t baseGeneration_ = 0; // the pool outline or the OOMs changed
};

} // namespace fs::views
