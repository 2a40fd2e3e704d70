// The frames you can see: the video's thumbnails of session frames N-K … N+K side by side, with
// their video metrics and collapse marks (the engine's), optionally the flow magnitude over them.
// Drawn once here for `fragscope export frames` and the collapse inspector's frame strip.
#pragma once

#include "render.h"

#include <QImage>
#include <QRectF>
#include <QSize>

#include <cstdint>
#include <vector>

namespace fs::render {

struct FrameStripOptions
{
    int64_t frame = -1; // the session frame in the middle
    int around = 1;     // frames each side
    bool flowOverlay = false;
    bool report = true;   // a title, a subtitle and a legend (export); off in the inspector
    int metricLines = -1; // metric lines under each frame (-1: every metric shown)
    Theme theme = Theme::light();
};

struct FrameStripPanel
{
    int64_t frame = -1;      // session frame
    int64_t videoFrame = -1; // the video frame shown (-1: the session frame has none)
    QRectF panel;            // the whole panel: picture and captions
    QRectF picture;
};

// The session frames N - around … N + around that the session has, and where each goes.
std::vector<FrameStripPanel> layoutFrameStrip(const QRectF& rect, const Scene& s,
                                              const FrameStripOptions& o);
void paintFrameStrip(QPainter& p, const QRectF& rect, const Scene& s, const FrameStripOptions& o);
// The caption of a frame: its metrics as "name value", in the order the strip lists them.
std::vector<QString> frameStripMetrics(const Scene& s, int64_t frame);
// A size that shows the thumbnails at their stored size.
QSize frameStripSize(const Scene& s, const FrameStripOptions& o);
// Writes the strip to PNG, SVG or PDF (by the extension); false with a message on error.
bool exportFrameStrip(const QString& path, QSize size, const Scene& s, const FrameStripOptions& o,
                      QString* error);

// A video frame's thumbnail, decoded (null when the session has none).
QImage videoThumbnail(const Scene& s, int64_t videoFrame);
// Its flow magnitude as a translucent colour ramp, 0 (clear) to fullScalePx (opaque red) in video
// pixels, at `size` (null when it has none: the first frame).
QImage flowOverlayImage(const Scene& s, int64_t videoFrame, QSize size, double fullScalePx);

} // namespace fs::render
