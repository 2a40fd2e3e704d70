// A widget's tooltip from what lies under the mouse (heatmap, kernel lane).
#pragma once

#include <QEvent>
#include <QHelpEvent>
#include <QString>
#include <QToolTip>
#include <QWidget>

namespace fs::views {

// For a QEvent::ToolTip: shows describe(position), or hides the tooltip when that is empty, and
// returns true; any other event: false (the widget's own event() handles it).
template <class Describe> bool showToolTipFor(QWidget* w, QEvent* e, Describe&& describe)
{
    if (e->type() != QEvent::ToolTip) return false;
    auto* he = static_cast<QHelpEvent*>(e);
    const QString s = describe(he->pos());
    if (s.isEmpty())
        QToolTip::hideText();
    else
        QToolTip::showText(he->globalPos(), s, w);
    return true;
}

} // namespace fs::views
