#include "compare_window.h"

#include "core/format.h"

#include <QHeaderView>
#include <QLabel>
#include <QPointer>
#include <QSplitter>
#include <QTableWidget>
#include <QThread>
#include <QVBoxLayout>
#include <qcustomplot.h>

namespace fs::gui {

namespace {

QString bytes(uint64_t b)
{
    return QString::fromStdString(humanBytes(b));
}

QString signedBytes(int64_t d)
{
    return (d < 0 ? QStringLiteral("-") : QStringLiteral("+")) +
           bytes(static_cast<uint64_t>(d < 0 ? -d : d));
}

QString sideTitle(const alloc::SideSummary& s)
{
    QString t = QString::fromStdString(s.path);
    if (!s.label.empty()) t += QStringLiteral("  (") + QString::fromStdString(s.label) + ")";
    if (s.synthetic) t += QStringLiteral("  SYNTHETIC");
    return t;
}

QCustomPlot* makePlot(const QString& yLabel)
{
    auto* p = new QCustomPlot;
    p->yAxis->setLabel(yLabel);
    p->legend->setVisible(true);
    p->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
    p->axisRect()->setRangeZoom(Qt::Horizontal);
    p->axisRect()->setRangeDrag(Qt::Horizontal);
    p->setMinimumHeight(160);
    return p;
}

} // namespace

CompareWindow::CompareWindow(const QString& a, const QString& b, QWidget* parent)
    : QWidget(parent, Qt::Window)
{
    setWindowTitle(tr("Compare — %1 vs %2").arg(QFileInfo(a).fileName(), QFileInfo(b).fileName()));
    auto* lay = new QVBoxLayout(this);
    status_ = new QLabel(tr("Comparing…"));
    status_->setWordWrap(true);
    lay->addWidget(status_);
    auto* split = new QSplitter(Qt::Vertical);
    reserved_ = makePlot(tr("reserved (GiB)"));
    frag_ = makePlot(tr("fragmentation ratio F"));
    split->addWidget(reserved_);
    split->addWidget(frag_);
    summary_ = new QTableWidget(0, 4);
    summary_->setHorizontalHeaderLabels({tr("figure"), tr("A"), tr("B"), tr("B − A")});
    summary_->verticalHeader()->setVisible(false);
    summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(summary_);
    rows_ = new QTableWidget(0, 9);
    rows_->verticalHeader()->setVisible(false);
    rows_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(rows_);
    lay->addWidget(split, 1);
    // Linked zoom: the two plots always show the same x range.
    connect(reserved_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), frag_,
            [this](const QCPRange& r) {
                if (frag_->xAxis->range() == r) return;
                frag_->xAxis->setRange(r);
                frag_->replot();
            });
    connect(frag_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), reserved_,
            [this](const QCPRange& r) {
                if (reserved_->xAxis->range() == r) return;
                reserved_->xAxis->setRange(r);
                reserved_->replot();
            });
    resize(1100, 850);

    // The engine's work runs off the GUI thread; the result arrives as one immutable value.
    QPointer<CompareWindow> self(this);
    const std::string pa = a.toStdString(), pb = b.toStdString();
    QThread* worker = QThread::create([self, pa, pb] {
        std::shared_ptr<const alloc::Comparison> c;
        QString error;
        try {
            c = std::make_shared<alloc::Comparison>(alloc::compareSessions(pa, pb));
        } catch (const std::exception& e) {
            error = QString::fromStdString(e.what());
        }
        QMetaObject::invokeMethod(
            qApp,
            [self, c, error] {
                if (!self) return;
                if (c) {
                    self->showComparison(c);
                    emit self->loaded(true, {});
                } else {
                    self->status_->setText(tr("Cannot compare: %1").arg(error));
                    emit self->loaded(false, error);
                }
            },
            Qt::QueuedConnection);
    });
    connect(worker, &QThread::finished, worker, &QObject::deleteLater);
    worker->start();
}

void CompareWindow::showComparison(std::shared_ptr<const alloc::Comparison> cp)
{
    c_ = std::move(cp);
    const alloc::Comparison& c = *c_;
    QString status = tr("A: %1\nB: %2").arg(sideTitle(c.a), sideTitle(c.b));
    for (const auto& n : c.notes)
        status += "\n" + tr("note: %1").arg(QString::fromStdString(n));
    status_->setText(status);

    const alloc::SummaryDifference& d = c.difference;
    const QList<QStringList> sum = {
        {tr("peak reserved"), bytes(c.a.peakReserved), bytes(c.b.peakReserved),
         signedBytes(d.peakReserved)},
        {tr("final reserved"), bytes(c.a.finalReserved), bytes(c.b.finalReserved),
         signedBytes(d.finalReserved)},
        {tr("mean F"), QString::number(c.a.meanFragmentation, 'f', 3),
         QString::number(c.b.meanFragmentation, 'f', 3),
         QString::number(d.meanFragmentation, 'f', 3)},
        {tr("max F"), QString::number(c.a.maxFragmentation, 'f', 3),
         QString::number(c.b.maxFragmentation, 'f', 3),
         QString::number(d.maxFragmentation, 'f', 3)},
        {tr("smallest largest free block"), bytes(c.a.minLargestFree), bytes(c.b.minLargestFree),
         signedBytes(d.minLargestFree)},
        {tr("collapses"), c.a.collapsesKnown() ? QString::number(c.a.collapses) : tr("unknown"),
         c.b.collapsesKnown() ? QString::number(c.b.collapses) : tr("unknown"),
         c.a.collapsesKnown() && c.b.collapsesKnown() ? QString::number(d.collapses)
                                                      : QStringLiteral("–")},
        {tr("OOMs"), QString::number(c.a.ooms), QString::number(c.b.ooms), QString::number(d.ooms)},
    };
    summary_->setRowCount(static_cast<int>(sum.size()));
    for (int r = 0; r < sum.size(); ++r)
        for (int k = 0; k < 4; ++k)
            summary_->setItem(r, k, new QTableWidgetItem(sum[r][k]));
    summary_->resizeColumnsToContents();

    const QString key = c.byFrame ? tr("frame") : tr("s from start");
    rows_->setHorizontalHeaderLabels({key, tr("reserved A"), tr("reserved B"), tr("F A"), tr("F B"),
                                      tr("largest free A"), tr("largest free B"), tr("OOMs A/B"),
                                      tr("collapse A/B")});
    rows_->setRowCount(static_cast<int>(c.rows.size()));
    QVector<double> x, ra, rb, fa, fb;
    for (size_t i = 0; i < c.rows.size(); ++i) {
        const alloc::CompareRow& r = c.rows[i];
        const double kx = c.byFrame ? static_cast<double>(r.key) : static_cast<double>(r.key) / 1e9;
        x << kx;
        ra << static_cast<double>(r.a.reserved) / double(1ull << 30);
        rb << static_cast<double>(r.b.reserved) / double(1ull << 30);
        fa << r.a.fragmentation;
        fb << r.b.fragmentation;
        const QStringList cells = {c.byFrame ? QString::number(r.key) : QString::number(kx, 'f', 3),
                                   bytes(r.a.reserved),
                                   bytes(r.b.reserved),
                                   QString::number(r.a.fragmentation, 'f', 3),
                                   QString::number(r.b.fragmentation, 'f', 3),
                                   bytes(r.a.largestFree),
                                   bytes(r.b.largestFree),
                                   QStringLiteral("%1/%2").arg(r.a.ooms).arg(r.b.ooms),
                                   c.byFrame
                                       ? QStringLiteral("%1/%2").arg(r.a.collapsed ? "yes" : "-",
                                                                     r.b.collapsed ? "yes" : "-")
                                       : QString()};
        for (int k = 0; k < cells.size(); ++k)
            rows_->setItem(static_cast<int>(i), k, new QTableWidgetItem(cells[k]));
    }
    rows_->resizeColumnsToContents();

    auto draw = [&](QCustomPlot* p, const QVector<double>& ya, const QVector<double>& yb) {
        p->clearGraphs();
        p->addGraph();
        p->graph(0)->setName(QStringLiteral("A"));
        p->graph(0)->setPen(QPen(QColor(31, 119, 180), 2));
        p->graph(0)->setData(x, ya, true);
        p->addGraph();
        p->graph(1)->setName(QStringLiteral("B"));
        p->graph(1)->setPen(QPen(QColor(214, 39, 40), 2, Qt::DashLine));
        p->graph(1)->setData(x, yb, true);
        p->xAxis->setLabel(key);
        p->rescaleAxes();
        p->replot();
    };
    draw(reserved_, ra, rb);
    draw(frag_, fa, fb);
}

} // namespace fs::gui
