#include "correlation_table.h"

#include "jobs.h"
#include "plot_widgets.h"
#include "replot_queue.h"
#include "views/render/render.h"
#include "views/render/scene.h"

#include "core/analysis/metrics.h"
#include "core/analysis/serialize.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTreeWidget>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <qcustomplot.h>

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
    tree_->setHeaderLabels({tr("allocator figure"), tr("frame metric"), tr("n"), tr("q"), tr("p"),
                            tr("n_eff"), tr("changes r"), tr("lag"), tr("Pearson r"),
                            tr("Spearman ρ"), tr("significant")});
    tree_->headerItem()->setToolTip(
        Q, tr("Benjamini–Hochberg q over the pairs shown; significant when under 0.05"));
    tree_->headerItem()->setToolTip(
        P, tr("the test's p: frame-to-frame changes, effective sample size, Bonferroni over "
              "two lags and two coefficients (docs/analysis.md \"Correlations\")"));
    tree_->headerItem()->setToolTip(Pearson,
                                    tr("of the values themselves: what the scatter draws"));
    tree_->headerItem()->setToolTip(
        ChangeR, tr("the test's coefficient of the frame-to-frame changes at its lag: Pearson r, "
                    "or Spearman ρ where marked ρ"));
    tree_->headerItem()->setToolTip(Lag, tr("frames by which the allocator figure leads"));
    tree_->headerItem()->setToolTip(
        NEff, tr("Bartlett's effective number of independent changes (autocorrelation)"));
    tree_->setRootIsDecorated(false);
    tree_->setSortingEnabled(false);
    tree_->header()->setStretchLastSection(true);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(tree_);
    scatter_ = new QCustomPlot(split);
    scatter_->setMinimumHeight(160);
    scatter_->plotLayout()->insertRow(0);
    title_ = new QCPTextElement(scatter_, QString());
    scatter_->plotLayout()->addElement(0, 0, title_);
    split->addWidget(scatter_);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    lay->addWidget(split, 1);
    pairJobs_ = new JobTracker(this);
    pointJobs_ = new JobTracker(this);
    connect(tree_, &QTreeWidget::currentItemChanged, this, [this] { requestScatter(); });
    setScene(nullptr);
}

void CorrelationTable::setDark(bool dark)
{
    dark_ = dark;
    drawScatter();
}

bool CorrelationTable::busy() const
{
    return pairJobs_->busy() || pointJobs_->busy();
}

void CorrelationTable::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    filled_ = false;
    pairJobs_->cancel();
    pointJobs_->cancel();
    points_.reset();
    tree_->clear();
    note_->setText(tr("Per-frame correlations between allocator figures and frame metrics."));
    drawScatter();
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
    pairJobs_->start([scene = scene_](const Job&) { return scene->correlations(); },
                     [this](const std::vector<analysis::Correlation>& pairs) { showPairs(pairs); });
}

void CorrelationTable::showPairs(const std::vector<analysis::Correlation>& pairs)
{
    for (const analysis::Correlation& c : pairs) {
        const bool sig = analysis::significant(c);
        auto* it = new QTreeWidgetItem(
            tree_,
            {QString::fromStdString(c.allocatorMetric), QString::fromStdString(c.frameMetric),
             QString::number(c.n), num(c.q, 'g', 3), num(c.p, 'g', 3), num(c.nEff, 'f', 1),
             std::isnan(c.p)
                 ? QString()
                 : (c.changeSpearman ? QStringLiteral("ρ ") : QString()) + num(c.changeR, 'f', 3),
             std::isnan(c.p) ? QString() : QString::number(c.lag), num(c.pearson, 'f', 3),
             num(c.spearman, 'f', 3), sig ? tr("yes") : QString()});
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
    // The strongest pair first in the scatter: the smallest q (ties: the first row; untested
    // pairs only when nothing was tested).
    int best = -1;
    for (size_t i = 0; i < pairs.size(); ++i)
        if (pairs[i].n >= 3 && (best < 0 || pairs[i].q < pairs[size_t(best)].q ||
                                (std::isnan(pairs[size_t(best)].q) && !std::isnan(pairs[i].q))))
            best = static_cast<int>(i);
    if (best >= 0) tree_->setCurrentItem(tree_->topLevelItem(best));
    note_->setText(
        pairs.empty()
            ? tr("No correlations: the session has no per-frame metrics, or fewer than 3 frames.")
            : tr("%1 pairs. Test: %3 (per-frame series drift, so the frame-to-frame changes "
                 "are tested, with the effective sample size n_eff). Only q < %2 is significant "
                 "(bold).")
                  .arg(pairs.size())
                  .arg(analysis::kSignificanceLevel)
                  .arg(QString::fromStdString(pairs.empty()
                                                  ? std::string()
                                                  : analysis::correlationTestName(pairs.front()))));
}

void CorrelationTable::requestScatter()
{
    points_.reset();
    const QTreeWidgetItem* it = tree_->currentItem();
    if (!scene_ || !scene_->engine || !it) {
        pointJobs_->cancel();
        drawScatter();
        return;
    }
    // The previous pair stays drawn until this one's points arrive.
    pointJobs_->start([scene = scene_, a = it->text(AllocatorMetric).toStdString(),
                       m = it->text(FrameMetric).toStdString()](
                          const Job&) { return scene->correlationPoints(a, m); },
                      [this](analysis::CorrelationPoints p) {
                          points_ = std::move(p);
                          drawScatter();
                      });
}

void CorrelationTable::drawScatter()
{
    scatter_->clearGraphs();
    scatter_->clearItems();
    QString title = tr("select a pair: one point per frame");
    QString xLabel = tr("allocator figure"), yLabel = tr("frame metric");
    const QTreeWidgetItem* it = tree_->currentItem();
    if (points_ && it) {
        const analysis::CorrelationPoints& p = *points_;
        const render::ByteUnit unit =
            p.xInBytes && !p.x.empty()
                ? render::byteAxisUnit(*std::max_element(p.x.begin(), p.x.end()))
                : render::ByteUnit{};
        const double div = unit.div;
        QVector<double> x, y(p.y.begin(), p.y.end());
        for (double v : p.x)
            x << v / div;
        QCPGraph* pts = scatter_->addGraph();
        pts->setName(tr("frames"));
        pts->setLineStyle(QCPGraph::lsNone);
        pts->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 5));
        pts->setPen(QPen(QColor(31, 119, 180, 190)));
        pts->setData(x, y, /*alreadySorted=*/false);
        if (!x.isEmpty()) {
            const auto [lo, hi] = std::minmax_element(x.begin(), x.end());
            QCPGraph* line = scatter_->addGraph();
            line->setName(tr("least squares"));
            line->setPen(QPen(QColor(214, 39, 40), 1.5));
            // The engine's line is in the figure's own unit (x * div).
            line->setData({*lo, *hi}, {p.line.slope * *lo * div + p.line.intercept,
                                       p.line.slope * *hi * div + p.line.intercept});
        }
        scatter_->rescaleAxes();
        for (QCPAxis* ax : {scatter_->xAxis, scatter_->yAxis}) {
            const QCPRange r = ax->range();
            const double pad = r.size() > 0 ? r.size() * 0.05 : 0.5;
            ax->setRange(r.lower - pad, r.upper + pad);
        }
        xLabel = p.xInBytes ? QStringLiteral("%1 (%2)").arg(it->text(AllocatorMetric),
                                                            QLatin1String(unit.name))
                            : it->text(AllocatorMetric);
        yLabel = it->text(FrameMetric);
        title = tr("%1 frames — Pearson r %2, Spearman ρ %3; test p %4 (n_eff %5)")
                    .arg(p.stats.n)
                    .arg(num(p.stats.pearson, 'f', 3))
                    .arg(num(p.stats.spearman, 'f', 3))
                    .arg(num(p.stats.p, 'g', 3))
                    .arg(num(p.stats.nEff, 'f', 1));
    }
    scatter_->xAxis->setLabel(xLabel);
    scatter_->yAxis->setLabel(yLabel);
    title_->setText(title);
    render::applyPlotTheme(*scatter_, dark_ ? render::Theme::darkTheme() : render::Theme::light());
    queueReplot(scatter_);
}

} // namespace fs::views
