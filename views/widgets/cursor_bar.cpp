#include "cursor_bar.h"

#include "render/scene.h"
#include "time_cursor.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QTextDocument>
#include <QToolButton>
#include <QVBoxLayout>

namespace fs::views {

namespace {
QString bytes(uint64_t b)
{
    return QString::fromStdString(render::formatBytes(static_cast<double>(b)));
}
} // namespace

CursorBar::CursorBar(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QHBoxLayout(this);
    lay->setContentsMargins(4, 2, 4, 2);
    buttons_ = new QHBoxLayout;
    buttons_->setSpacing(2);
    lay->addLayout(buttons_);
    auto* text = new QVBoxLayout;
    text->setSpacing(0);
    // Wrapped, never wider than the heatmap: a long readout must not widen the window.
    readout_ = new QLabel(this);
    readout_->setTextFormat(Qt::RichText);
    readout_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    readout_->setWordWrap(true);
    readout_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    verdict_ = new QLabel(this);
    verdict_->setTextFormat(Qt::RichText);
    verdict_->setWordWrap(true);
    verdict_->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    text->addWidget(readout_);
    text->addWidget(verdict_);
    lay->addLayout(text, 1);
    setMessage(tr("No session."));
}

void CursorBar::setActions(const QList<QAction*>& actions, QMenu* jump)
{
    for (QAction* a : actions) {
        auto* b = new QToolButton(this);
        b->setDefaultAction(a);
        b->setAutoRaise(true);
        buttons_->addWidget(b);
    }
    if (jump) {
        auto* b = new QToolButton(this);
        b->setText(tr("Jump to"));
        b->setToolTip(tr("Go to max F, peak reserved, the smallest largest free block, an OOM or "
                         "a collapse (Go menu)"));
        b->setMenu(jump);
        b->setPopupMode(QToolButton::InstantPopup);
        b->setAutoRaise(true);
        buttons_->addWidget(b);
    }
}

void CursorBar::setMessage(const QString& text)
{
    readout_->setText(text.toHtmlEscaped());
    verdict_->clear();
    fragmented_ = false;
}

void CursorBar::setSnapshot(const CursorSnapshot& s, const analysis::FragmentedRule& rule,
                            bool stateOnly)
{
    if (!s.scene || !s.blocks) {
        setMessage(tr("Reading the session…"));
        return;
    }
    const render::Scene& sc = *s.scene;
    const analysis::State& st = s.blocks->state;
    const analysis::Headline h = analysis::headline(st, rule);
    fragmented_ = h.fragmented;
    QString when =
        QString::fromStdString(render::formatTime(s.time - sc.timeBegin(), sc.summary.timeAxis));
    if (stateOnly)
        when = tr("end state (the only instant this snapshot records)");
    else if (s.frame >= 0)
        when += tr(" · frame %1").arg(s.frame);
    const analysis::BlockCounts n = analysis::countRows(s.blocks->rows);
    // Pending frees are neither allocated nor free (docs/analysis.md "Pending frees"): their
    // bytes beside the free ones, and F once they complete where it differs.
    QString pending;
    if (st.pendingFreeBlocks > 0) {
        pending = tr(" · pending free %1 (%2 blocks, waiting on other streams)")
                      .arg(bytes(st.pendingFreeBytes))
                      .arg(st.pendingFreeBlocks);
        if (st.fragmentationRatioOncePendingComplete != st.fragmentationRatio)
            pending += tr(" · F once they complete %1")
                           .arg(st.fragmentationRatioOncePendingComplete, 0, 'f', 2);
    }
    readout_->setText(
        tr("<b>%1</b> · reserved %2 · allocated %3 · cached, unused %4 (%5 % of reserved) · "
           "largest free %6 · <b>F %7</b>%8 · %9 blocks, %10 free fragments")
            .arg(when.toHtmlEscaped(), bytes(st.reservedBytes), bytes(st.allocatedBytes),
                 bytes(st.freeBytes))
            .arg(h.freeShare * 100, 0, 'f', h.freeShare < 0.01 && h.freeShare > 0 ? 2 : 0)
            .arg(bytes(st.largestFreeFragmentBytes))
            .arg(st.fragmentationRatio, 0, 'f', 2)
            .arg(pending)
            .arg(n.blocks)
            .arg(n.fragments));
    verdict_->setText(
        QStringLiteral("<span style='color:%1'>%2</span>")
            .arg(h.fragmented ? QStringLiteral("#d02020") : palette().text().color().name(),
                 QString::fromStdString(h.text).toHtmlEscaped()));
}

QString CursorBar::text() const
{
    QTextDocument d;
    d.setHtml(readout_->text());
    return d.toPlainText();
}

QString CursorBar::headline() const
{
    QTextDocument d;
    d.setHtml(verdict_->text());
    return d.toPlainText();
}

} // namespace fs::views
