#include "frame_strip_widget.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QToolTip>
#include <QVBoxLayout>

namespace fs::views {

FrameStripWidget::FrameStripWidget(QWidget* parent) : QWidget(parent)
{
    opts_.around = 1;
    opts_.report = false;
    opts_.metricLines = 2; // the pictures need the room; the tooltip lists every metric
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    auto* bar = new QHBoxLayout;
    hint_ = new QLabel(tr("Video frames (click one to select it)"), this);
    hint_->setWordWrap(true);
    flow_ = new QCheckBox(tr("Flow overlay"), this);
    flow_->setToolTip(tr("The optical-flow magnitude from the frame before, over each frame"));
    bar->addWidget(hint_, 1);
    bar->addWidget(flow_);
    lay->addLayout(bar);
    lay->addStretch(1);
    connect(flow_, &QCheckBox::toggled, this, &FrameStripWidget::setFlowOverlay);
    setMinimumHeight(140);
    setCursor(Qt::PointingHandCursor);
    setScene(nullptr);
}

QSize FrameStripWidget::sizeHint() const
{
    return {480, 180};
}

void FrameStripWidget::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    // Without a video the strip is hidden (File › Add video… adds one), so the diff and the
    // precursors below keep their room in the inspector's splitter.
    setVisible(scene_ && scene_->video);
    update();
}

void FrameStripWidget::setFrame(int64_t frame)
{
    if (frame == opts_.frame) return;
    opts_.frame = frame;
    update();
}

void FrameStripWidget::setFlowOverlay(bool on)
{
    opts_.flowOverlay = on;
    if (flow_->isChecked() != on) flow_->setChecked(on);
    update();
}

QRectF FrameStripWidget::stripRect() const
{
    const int top = hint_->geometry().bottom() + 2;
    return QRectF(0, top, width(), height() - top);
}

std::vector<render::FrameStripPanel> FrameStripWidget::panels() const
{
    if (!scene_ || !scene_->video || opts_.frame < 0) return {};
    return render::layoutFrameStrip(stripRect(), *scene_, opts_);
}

void FrameStripWidget::paintEvent(QPaintEvent*)
{
    if (!scene_ || !scene_->video || opts_.frame < 0) return;
    QPainter p(this);
    opts_.theme = palette().color(QPalette::Window).lightness() < 128 ? render::Theme::darkTheme()
                                                                      : render::Theme::light();
    opts_.theme.background = palette().color(QPalette::Window);
    render::paintFrameStrip(p, stripRect(), *scene_, opts_);
}

bool FrameStripWidget::event(QEvent* e)
{
    if (e->type() == QEvent::ToolTip && scene_) {
        const auto* he = static_cast<QHelpEvent*>(e);
        for (const auto& pn : panels())
            if (pn.panel.contains(he->pos())) {
                QStringList lines = {tr("frame %1").arg(pn.frame)};
                for (const QString& m : render::frameStripMetrics(*scene_, pn.frame))
                    lines << m;
                QToolTip::showText(he->globalPos(), lines.join('\n'), this);
                return true;
            }
        QToolTip::hideText();
        return true;
    }
    return QWidget::event(e);
}

void FrameStripWidget::mousePressEvent(QMouseEvent* e)
{
    for (const auto& pn : panels())
        if (pn.picture.contains(e->position())) {
            emit frameClicked(pn.frame);
            return;
        }
    QWidget::mousePressEvent(e);
}

} // namespace fs::views
