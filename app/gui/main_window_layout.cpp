// MainWindow: layout presets (View › Layout, Reset layout), the room of sessions without frames
// or kernels, and a complete dark theme (docs/gui.md "Layout").
#include "main_window.h"

#include <QApplication>
#include <QDockWidget>
#include <QStyle>

namespace fs::gui {

namespace {
QDockWidget* dockNamed(const QMainWindow* w, const char* name)
{
    return w->findChild<QDockWidget*>(QLatin1String(name));
}
} // namespace

void MainWindow::adaptLayout()
{
    // Every PyTorch snapshot has no frames and no kernels: the frames table, the collapse
    // inspector and the kernel lane would be empty panels on half the window. Hide them (View
    // reopens them) and bring the block list and call sites forward; show them again for a
    // session that has them.
    for (const QString& name : hiddenForSession_)
        if (auto* d = findChild<QDockWidget*>(name)) d->show();
    hiddenForSession_.clear();
    if (!scene_) return;
    const bool noFrames = scene_->frames.empty();
    const bool noKernels = scene_->summary.kernels == 0;
    auto hide = [this](const char* name) {
        QDockWidget* d = dockNamed(this, name);
        if (!d || d->isHidden()) return;
        d->hide();
        hiddenForSession_ << QString::fromLatin1(name);
    };
    if (noFrames) {
        hide("framesDock");
        hide("inspectorDock");
    }
    if (noKernels) hide("kernelsDock");
    if (noFrames || noKernels) {
        for (const char* n : {"blocksDock", "callSitesDock", "detailsDock"})
            if (auto* d = dockNamed(this, n)) d->raise();
    } else {
        for (const char* n : {"framesDock", "kernelsDock", "inspectorDock"})
            if (auto* d = dockNamed(this, n)) d->raise();
    }
}

void MainWindow::applyLayout(Layout l)
{
    restoreState(defaultLayout_);
    hiddenForSession_.clear();
    for (auto* d : findChildren<QDockWidget*>())
        d->show();
    QDockWidget* insp = dockNamed(this, "inspectorDock");
    QDockWidget* hist = dockNamed(this, "histogramDock");
    QDockWidget* frames = dockNamed(this, "framesDock");
    QDockWidget* timeline = dockNamed(this, "timelineDock");
    switch (l) {
    case Layout::Default:
        if (scene_) adaptLayout();
        break;
    case Layout::InspectorFirst:
        // The collapse inspector's answer gets the room: the right column wide and tall, the
        // timelines lower.
        insp->raise();
        frames->raise();
        resizeDocks({insp, frames}, {width() * 45 / 100, width() * 20 / 100}, Qt::Horizontal);
        resizeDocks({insp, hist}, {height() * 62 / 100, height() * 20 / 100}, Qt::Vertical);
        resizeDocks({timeline}, {height() * 22 / 100}, Qt::Vertical);
        break;
    case Layout::Explore:
        for (const char* n : {"blocksDock", "callSitesDock", "detailsDock"})
            if (auto* d = dockNamed(this, n)) d->raise();
        if (auto* b = dockNamed(this, "blocksDock")) {
            resizeDocks({b}, {width() * 34 / 100}, Qt::Horizontal);
            if (auto* c = dockNamed(this, "callSitesDock"))
                resizeDocks({b, c}, {height() * 30 / 100, height() * 30 / 100}, Qt::Vertical);
        }
        break;
    }
}

void MainWindow::applyPalette(bool dark)
{
    // The whole window dark, not only the plots: the widgets' palette too (Fusion draws every
    // widget from the palette).
    if (!dark) {
        QApplication::setPalette(originalPalette_);
        return;
    }
    QPalette p;
    const QColor window(37, 38, 41), base(28, 29, 32), text(225, 225, 225);
    p.setColor(QPalette::Window, window);
    p.setColor(QPalette::WindowText, text);
    p.setColor(QPalette::Base, base);
    p.setColor(QPalette::AlternateBase, QColor(44, 45, 49));
    p.setColor(QPalette::ToolTipBase, QColor(50, 52, 56));
    p.setColor(QPalette::ToolTipText, text);
    p.setColor(QPalette::PlaceholderText, QColor(140, 140, 140));
    p.setColor(QPalette::Text, text);
    p.setColor(QPalette::Button, QColor(48, 49, 53));
    p.setColor(QPalette::ButtonText, text);
    p.setColor(QPalette::BrightText, QColor(255, 90, 90));
    p.setColor(QPalette::Light, QColor(70, 72, 76));
    p.setColor(QPalette::Midlight, QColor(58, 60, 64));
    p.setColor(QPalette::Mid, QColor(44, 45, 49));
    p.setColor(QPalette::Dark, QColor(20, 20, 22));
    p.setColor(QPalette::Shadow, QColor(0, 0, 0));
    p.setColor(QPalette::Highlight, QColor(42, 110, 190));
    p.setColor(QPalette::HighlightedText, QColor(255, 255, 255));
    p.setColor(QPalette::Link, QColor(110, 170, 255));
    p.setColor(QPalette::Disabled, QPalette::Text, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::WindowText, QColor(120, 120, 120));
    p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(120, 120, 120));
    QApplication::setPalette(p);
}

} // namespace fs::gui
