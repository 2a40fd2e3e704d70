// One frame of a `fragscope ab` study in every run side by side (docs/ab.md "In the GUI"): the
// study's thumbnails, each framed red when broken and green when back to normal, with the run's
// PSNR and SSIM to the baseline's frame and its state, and (for a report) a title with the
// verdict and its reason. Drawn once here for the GUI's study view and `fragscope export frames
// STUDY_DIR`; every figure and word is core/study's.
#pragma once

#include "core/study/ab_study.h"
#include "render.h"

#include <QRectF>
#include <QSize>
#include <QString>

class QPainter;

namespace fs::render {

struct StudyStripOptions
{
    int64_t frame = -1; // the video frame shown in every run
    bool report = true; // a title and the verdict's reason (export); off in the GUI
    Theme theme = Theme::light();
};

// The collapse of the study that frame f belongs to (null when none).
const study::CollapseJudgement* studyCollapseAt(const study::Study& s, int64_t frame);
void paintStudyStrip(QPainter& p, const QRectF& rect, const study::Study& s, const QString& folder,
                     const StudyStripOptions& o);
// A size that shows the thumbnails at their stored size (small ones enlarged).
QSize studyStripSize(const study::Study& s, const QString& folder, const StudyStripOptions& o);
// Writes the strip to PNG, SVG or PDF (by the extension); false with a message on error.
bool exportStudyStrip(const QString& path, QSize size, const study::Study& s, const QString& folder,
                      const StudyStripOptions& o, QString* error);

} // namespace fs::render
