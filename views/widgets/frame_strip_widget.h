// The collapse inspector's frames you can see: the video frames f-1, f and f+1 of the selected
// frame, large, with their metrics and collapse marks, optionally the flow magnitude over them
// (render::paintFrameStrip). Clicking one selects that frame.
#pragma once

#include "render/frame_strip.h"

#include <QWidget>

#include <memory>

class QCheckBox;
class QLabel;

namespace fs::views {

class FrameStripWidget : public QWidget
{
    Q_OBJECT
public:
    explicit FrameStripWidget(QWidget* parent = nullptr);
    void setScene(std::shared_ptr<const render::Scene> scene);
    void setFrame(int64_t frame);
    int64_t frame() const { return opts_.frame; }
    void setFlowOverlay(bool on);
    bool flowOverlay() const { return opts_.flowOverlay; }
    // The panels as last painted (for tests and hit testing).
    std::vector<render::FrameStripPanel> panels() const;
    QSize sizeHint() const override;

signals:
    void frameClicked(int64_t frame);

protected:
    bool event(QEvent* e) override;
    void paintEvent(QPaintEvent*) override;
    void mousePressEvent(QMouseEvent*) override;

private:
    QRectF stripRect() const;
    std::shared_ptr<const render::Scene> scene_;
    render::FrameStripOptions opts_;
    QCheckBox* flow_ = nullptr;
    QLabel* hint_ = nullptr;
};

} // namespace fs::views
