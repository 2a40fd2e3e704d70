#include "correlation_table.h"

#include "views/render/scene.h"

#include "core/analysis/serialize.h"

#include <QHeaderView>
#include <QLabel>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <cmath>

namespace fs::views {

namespace {
QString num(double v, char format, int precision)
{
    return std::isnan(v) ? QStringLiteral("–") : QString::number(v, format, precision);
}
} // namespace

CorrelationTable::CorrelationTable(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(2, 2, 2, 2);
    note_ = new QLabel(this);
    note_->setWordWrap(true);
    lay->addWidget(note_);
    tree_ = new QTreeWidget(this);
    tree_->setColumnCount(ColumnCount);
    tree_->setHeaderLabels({tr("allocator figure"), tr("frame metric"), tr("n"), tr("Pearson r"),
                            tr("p"), tr("q"), tr("Spearman ρ"), tr("p"), tr("q"),
                            tr("significant")});
    tree_->setRootIsDecorated(false);
    tree_->setSortingEnabled(false);
    tree_->header()->setStretchLastSection(true);
    lay->addWidget(tree_, 1);
    setScene(nullptr);
}

void CorrelationTable::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    filled_ = false;
    tree_->clear();
    note_->setText(tr("Per-frame correlations between allocator figures and frame metrics."));
    if (isVisible()) fill();
}

void CorrelationTable::showEvent(QShowEvent* e)
{
    QWidget::showEvent(e);
    if (!filled_) fill();
}

void CorrelationTable::fill()
{
    // The first look has no engine records yet: the complete scene follows and fills the table.
    if (!scene_ || !scene_->engine || (scene_->firstLook && !scene_->recordsReady())) return;
    filled_ = true;
    const std::vector<analysis::Correlation> pairs = scene_->correlations();
    for (const analysis::Correlation& c : pairs) {
        const bool sig = analysis::significant(c);
        auto* it = new QTreeWidgetItem(
            tree_,
            {QString::fromStdString(c.allocatorMetric), QString::fromStdString(c.frameMetric),
             QString::number(c.n), num(c.pearson, 'f', 3), num(c.pearsonP, 'g', 3),
             num(c.pearsonQ, 'g', 3), num(c.spearman, 'f', 3), num(c.spearmanP, 'g', 3),
             num(c.spearmanQ, 'g', 3), sig ? tr("yes") : QString()});
        for (int col = N; col < ColumnCount; ++col)
            it->setTextAlignment(col, Qt::AlignRight | Qt::AlignVCenter);
        if (sig)
            for (int col = 0; col < ColumnCount; ++col) {
                QFont f = it->font(col);
                f.setBold(true);
                it->setFont(col, f);
            }
    }
    for (int col = 0; col < Significant; ++col)
        tree_->resizeColumnToContents(col);
    note_->setText(
        pairs.empty()
            ? tr("No correlations: the session has no per-frame metrics, or fewer than 3 frames.")
            : tr("%1 pairs tested (n ≥ 3). q: Benjamini–Hochberg over these %1 pairs; only q < "
                 "%2 is significant (bold). A small p alone is not: with this many pairs some "
                 "are small by chance.")
                  .arg(pairs.size())
                  .arg(analysis::kSignificanceLevel));
}

} // namespace fs::views
