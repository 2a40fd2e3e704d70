#include "compare_window.h"

#include "core/format.h"
#include "core/import/open_input.h"
#include "core/settings/settings.h"
#include "widgets/heatmap_widget.h"

#include <QFileDialog>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSplitter>
#include <QTableWidget>
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
    return QString::fromStdString(signedHumanBytes(d));
}

QString sideTitle(const analysis::SideSummary& s)
{
    QString t = QString::fromStdString(s.path);
    if (!s.label.empty()) t += QStringLiteral("  (") + QString::fromStdString(s.label) + ")";
    if (s.synthetic) t += QStringLiteral("  SYNTHETIC");
    return t;
}

// The heading over a side's heatmap: a what-if replay is named by its label, never as a run.
QString heatmapTitle(const char* side, const analysis::SideSummary& s)
{
    const QString file = QFileInfo(QString::fromStdString(s.path)).fileName();
    if (s.whatIf)
        return QStringLiteral("<b>%1</b>: %2<br><i>computed by fragscope's allocator model, not "
                              "measured</i>")
            .arg(QLatin1String(side), QString::fromStdString(s.label).toHtmlEscaped());
    QString t = QStringLiteral("<b>%1</b>: %2").arg(QLatin1String(side), file.toHtmlEscaped());
    if (!s.label.empty())
        t += QStringLiteral("<br>%1").arg(QString::fromStdString(s.label).toHtmlEscaped());
    else if (s.synthetic)
        t += QStringLiteral("<br><i>synthetic session</i>");
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
    p->setMinimumHeight(140);
    // The legend beside the plot, not over it: any corner of the plot may hold data.
    auto* side = new QCPLayoutGrid;
    p->plotLayout()->addElement(0, 1, side);
    p->axisRect()->insetLayout()->take(p->legend);
    side->addElement(0, 0, p->legend);
    side->addElement(1, 0, new QCPLayoutElement(p)); // keeps the legend at the top
    side->setRowStretchFactor(0, 0.001);
    side->setMargins(QMargins(0, 0, 6, 0));
    p->plotLayout()->setColumnStretchFactor(1, 0.001);
    return p;
}

// The scene's track the comparison is about (its device and level), else the default one.
int levelOf(const render::Scene& s, const analysis::SideSummary& side)
{
    for (size_t i = 0; i < s.tracks.size(); ++i)
        if (s.tracks[i].device == side.device && s.tracks[i].level == side.level)
            return static_cast<int>(i);
    return s.defaultTrack();
}

CompareAxis axisOf(const analysis::Comparison& c, const render::Scene& s, double divisor)
{
    if (!c.byFrame) return CompareAxis::byTime(s.timeBegin(), divisor);
    std::vector<std::pair<int64_t, int64_t>> knots;
    for (const analysis::FrameInfo& f : s.frames)
        if (f.end > f.start) knots.emplace_back(f.index, f.end);
    return CompareAxis::byFrame(std::move(knots), s.timeBegin(), divisor);
}

// A what-if replay's frames carry the recorded run's metrics: its collapses are not its own, so
// its heatmap draws no collapse bands or collapsed-frame colours.
std::shared_ptr<const render::Scene>
withoutBorrowedCollapses(std::shared_ptr<const render::Scene> s)
{
    if (!s->summary.meta.count("whatif.source") || s->collapses.empty()) return s;
    auto own = std::make_shared<render::Scene>(*s);
    own->collapses.clear();
    return own;
}

// What File › Open takes, A or B may be: a session as it is, any trace imported for viewing
// first (the same path as Open: beside the input or in the cache, reused while unchanged).
std::string sessionOf(const std::string& input)
{
    if (!import::needsImportForViewing(input)) return input;
    import::ViewImportOptions vo;
    try {
        vo.framePattern = settings::loadUser().framePattern; // as Open finds frames
    } catch (const std::exception&) {
        // A broken settings file: the default pattern (the rules editor reports the file).
    }
    return import::importForViewing(input, vo).session;
}

} // namespace

struct CompareWindow::Loaded
{
    analysis::Comparison c;
    std::shared_ptr<const analysis::Comparison> ref; // A against the reference
    std::shared_ptr<const render::Scene> scene[2];
    std::string session[2]; // A's and B's sessions (an input imported for viewing: its session)
    analysis::CallSiteComparison sites; // bytes by call site at each run's allocated peak
};

CompareWindow::CompareWindow(const QString& a, const QString& b, QWidget* parent,
                             const QString& reference)
    : QWidget(parent, Qt::Window), pathB_(b)
{
    setWindowTitle(tr("Compare — %1 vs %2").arg(QFileInfo(a).fileName(), QFileInfo(b).fileName()));
    auto* lay = new QVBoxLayout(this);
    fidelity_ = new QLabel;
    fidelity_->setWordWrap(true);
    fidelity_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    fidelity_->setVisible(false);
    lay->addWidget(fidelity_);
    auto* top = new QHBoxLayout;
    status_ = new QLabel(tr("Comparing…"));
    status_->setWordWrap(true);
    status_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    top->addWidget(status_, 1);
    save_ = new QPushButton(tr("Save what-if session as…"));
    save_->setVisible(false);
    connect(save_, &QPushButton::clicked, this, &CompareWindow::saveB);
    top->addWidget(save_, 0, Qt::AlignTop);
    lay->addLayout(top);

    auto* split = new QSplitter(Qt::Vertical);
    body_ = split;
    // A's and B's heatmaps side by side.
    auto* maps = new QSplitter(Qt::Horizontal);
    for (int k = 0; k < 2; ++k) {
        auto* box = new QWidget;
        auto* v = new QVBoxLayout(box);
        v->setContentsMargins(0, 0, 0, 0);
        title_[k] = new QLabel(k == 0 ? tr("<b>A</b>") : tr("<b>B</b>"));
        title_[k]->setWordWrap(true);
        v->addWidget(title_[k]);
        heat_[k] = new views::HeatmapWidget;
        heat_[k]->setMinimumSize(320, 260);
        v->addWidget(heat_[k], 1);
        maps->addWidget(box);
        connect(heat_[k], &views::HeatmapWidget::viewportChanged, this,
                [this, k](const render::Viewport& vp) { heatmapMoved(k, vp); });
    }
    split->addWidget(maps);
    reserved_ = makePlot(tr("reserved (GiB)"));
    frag_ = makePlot(tr("fragmentation ratio F"));
    split->addWidget(reserved_);
    split->addWidget(frag_);
    summary_ = new QTableWidget(0, reference.isEmpty() ? 4 : 5);
    summary_->setHorizontalHeaderLabels(
        {tr("figure"), tr("A"), tr("B"), tr("B − A"), tr("real run (measured)")});
    summary_->verticalHeader()->setVisible(false);
    summary_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(summary_);
    rows_ = new QTableWidget(0, 9);
    rows_->verticalHeader()->setVisible(false);
    rows_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(rows_);
    // Bytes by call site at each run's allocated peak (compareCallSites), largest growth first.
    callSites_ = new QTableWidget(0, 4);
    callSites_->setHorizontalHeaderLabels(
        {tr("call site (at each peak)"), tr("A"), tr("B"), tr("B − A")});
    callSites_->verticalHeader()->setVisible(false);
    callSites_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(callSites_);
    split->setSizes({440, 140, 140, 130, 150, 120});
    lay->addWidget(split, 1);
    // Linked zoom: the two plots always show the same x range, and the heatmaps follow it.
    connect(reserved_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), frag_,
            [this](const QCPRange& r) {
                if (frag_->xAxis->range() != r) {
                    frag_->xAxis->setRange(r);
                    frag_->replot();
                }
                plotMoved(r);
            });
    connect(frag_->xAxis, qOverload<const QCPRange&>(&QCPAxis::rangeChanged), reserved_,
            [this](const QCPRange& r) {
                if (reserved_->xAxis->range() == r) return;
                reserved_->xAxis->setRange(r);
                reserved_->replot();
            });
    resize(1280, 1040);

    // The engine's work runs off the GUI thread; the result arrives as one immutable value.
    const std::string pa = a.toStdString(), pb = b.toStdString(), pr = reference.toStdString();
    jobs_->start(
        [pa, pb, pr](const views::Job& job) {
            // Stops between its steps once cancelled (a cancelled job delivers nothing), so that
            // quitting during a long load waits for one step at most.
            auto r = std::make_shared<Loaded>();
            r->session[0] = sessionOf(pa);
            r->session[1] = sessionOf(pb);
            const std::string& sa = r->session[0];
            const std::string& sb = r->session[1];
            r->scene[0] = withoutBorrowedCollapses(render::loadScene(sa));
            if (job.cancelled()) return std::shared_ptr<const Loaded>();
            r->scene[1] = withoutBorrowedCollapses(render::loadScene(sb));
            if (job.cancelled()) return std::shared_ptr<const Loaded>();
            r->c = analysis::compareSessions(sa, sb, 100, r->scene[0]->engine, r->scene[1]->engine);
            if (job.cancelled()) return std::shared_ptr<const Loaded>();
            r->sites = analysis::compareCallSites(r->scene[0]->engine, r->scene[1]->engine);
            if (!pr.empty())
                r->ref = std::make_shared<const analysis::Comparison>(
                    analysis::compareSessions(sa, sessionOf(pr), 100, r->scene[0]->engine));
            return std::shared_ptr<const Loaded>(std::move(r));
        },
        [this](std::shared_ptr<const Loaded> l) {
            showComparison(l);
            emit loaded(true, {});
        },
        [this](const QString& error) {
            // Nothing to show but why: no empty panes, no bare headers.
            status_->setText(tr("<b>Cannot compare</b>: %1").arg(error.toHtmlEscaped()));
            body_->setVisible(false);
            save_->setVisible(false);
            emit loaded(false, error);
        });
}

QString CompareWindow::fidelityText(const alloc::Fidelity& f)
{
    QStringList out;
    out << tr("<b>What-if replay: B is computed by fragscope's allocator model, not measured.</b>");
    out << tr("Trace: %1 — %2.")
               .arg(f.complete ? tr("complete") : tr("<b>incomplete</b>"),
                    QString::fromStdString(f.completeNote).toHtmlEscaped());
    // One statement about fidelity, computed in core (a partial trace is never "reproduced").
    out << tr("Fidelity of the replay under the recorded settings (%1): <b>%2</b>.")
               .arg(QString::fromStdString(f.recordedConf).toHtmlEscaped(),
                    QString::fromStdString(f.summary).toHtmlEscaped());
    for (const alloc::DeviceFidelity& d : f.devices)
        out << tr("Device %1, replay vs real run: segments %2 vs %3 (%4), addresses matched %5 of "
                  "%6, final reserved %7 vs %8, peak %9 vs %10, final layout %11.")
                   .arg(d.device)
                   .arg(d.replaySegmentSizes.size())
                   .arg(d.realSegmentSizes.size())
                   .arg(d.firstSegmentMismatch < 0 ? tr("sizes equal") : tr("sizes differ"))
                   .arg(d.addressesMatched)
                   .arg(d.allocations)
                   .arg(bytes(d.replayFinalReserved), bytes(d.realFinalReserved),
                        bytes(d.replayPeakReserved), bytes(d.realPeakReserved),
                        d.finalLayoutEqual ? tr("equal") : tr("differs"));
    if (f.pendingFrees + f.pendingFreesBeforeTrace > 0)
        out << tr("Frees waiting on stream events: %1 replayed at their completion, %2 began "
                  "before the trace.")
                   .arg(f.pendingFrees)
                   .arg(f.pendingFreesBeforeTrace);
    out << tr("Verdict: %1.").arg(QString::fromStdString(f.verdict).toHtmlEscaped());
    return out.join(QStringLiteral("<br>"));
}

void CompareWindow::setWhatIf(std::shared_ptr<const alloc::WhatIfResult> r)
{
    whatIf_ = std::move(r);
    if (!whatIf_) return;
    const alloc::Fidelity& f = whatIf_->fidelity;
    const QString file = QFileInfo(QString::fromStdString(whatIf_->session)).fileName();
    // With other settings than the recorded ones, A is the replay under the recorded settings:
    // B - A is the setting's effect, model against model, and the real run is drawn beside them.
    const bool vsRecorded = whatIf_->runs.size() > 1;
    setWindowTitle(
        (vsRecorded ? tr("What-if replay of %1 — against the replay under the recorded settings")
                    : tr("What-if replay of %1 — the model against the real run"))
            .arg(file));
    QString text = fidelityText(f);
    if (vsRecorded)
        text = tr("<b>A is the replay under the recorded settings, B the what-if: B − A is the "
                  "setting's effect (model against model); the real run is the thin grey "
                  "curve.</b><br>Compared: %1.<br>")
                   .arg(QString::fromStdString(f.banner).toHtmlEscaped()) +
               text;
    fidelity_->setText(text);
    // Reproduced: a calm frame; else a warning colour, so a guess is never read as a replay.
    fidelity_->setStyleSheet(
        f.reproduced && f.complete
            ? QStringLiteral("QLabel { background: #e8f3e8; border: 1px solid #7fb07f; padding: "
                             "6px; color: #1e1e1e; }")
            : QStringLiteral("QLabel { background: #fff3d6; border: 1px solid #d9a441; padding: "
                             "6px; color: #1e1e1e; }"));
    fidelity_->setVisible(true);
    save_->setVisible(true);
}

void CompareWindow::saveB()
{
    const QString to = QFileDialog::getSaveFileName(this, tr("Save what-if session"), {},
                                                    tr("fragscope sessions (*.fragscope)"));
    if (to.isEmpty()) return;
    QFile::remove(to);
    if (!QFile::copy(pathB_, to)) status_->setText(tr("Cannot write %1").arg(to));
}

void CompareWindow::heatmapMoved(int side, const render::Viewport& vp)
{
    if (linking_ || !scene_[0] || !scene_[1] || heat_[0]->track() < 0 || heat_[1]->track() < 0)
        return; // a session without a track has no heatmap to follow
    linking_ = true;
    const double x0 = axis_[side].toX(vp.t0), x1 = axis_[side].toX(vp.t1);
    const int other = 1 - side;
    // Time through the plots' x; addresses as the same fraction of each side's whole axis.
    const render::Viewport ws = render::fullViewport(*scene_[side], heat_[side]->track());
    const render::Viewport fo = render::fullViewport(*scene_[other], heat_[other]->track());
    auto frac = [&](double y) { return ws.y1 > ws.y0 ? (y - ws.y0) / (ws.y1 - ws.y0) : 0.0; };
    render::Viewport o;
    o.t0 = axis_[other].toTime(x0);
    o.t1 = axis_[other].toTime(x1);
    o.y0 = fo.y0 + frac(vp.y0) * (fo.y1 - fo.y0);
    o.y1 = fo.y0 + frac(vp.y1) * (fo.y1 - fo.y0);
    heat_[other]->setViewport(o);
    reserved_->xAxis->setRange(x0, x1);
    reserved_->replot();
    linking_ = false;
}

void CompareWindow::plotMoved(const QCPRange& r)
{
    if (linking_ || !scene_[0] || !scene_[1]) return;
    linking_ = true;
    for (int k = 0; k < 2; ++k) {
        if (heat_[k]->track() < 0) continue;
        render::Viewport vp = heat_[k]->viewport();
        vp.t0 = axis_[k].toTime(r.lower);
        vp.t1 = axis_[k].toTime(r.upper);
        heat_[k]->setViewport(vp);
    }
    linking_ = false;
}

void CompareWindow::showComparison(std::shared_ptr<const Loaded> l)
{
    c_ = std::shared_ptr<const analysis::Comparison>(l, &l->c);
    ref_ = l->ref;
    pathB_ = QString::fromStdString(l->session[1]);
    const analysis::Comparison& c = *c_;
    const analysis::Comparison* ref = ref_.get();
    QString status = tr("A: %1\nB: %2").arg(sideTitle(c.a), sideTitle(c.b));
    if (ref) status += "\n" + tr("real run (thin grey): %1").arg(sideTitle(ref->b));
    for (const auto& n : c.notes)
        status += "\n" + tr("note: %1").arg(QString::fromStdString(n));
    status_->setText(status);

    // One time unit for both sides: the one for the longer session.
    const int64_t span = std::max(l->scene[0]->timeEnd() - l->scene[0]->timeBegin(),
                                  l->scene[1]->timeEnd() - l->scene[1]->timeBegin());
    unit_ = render::timeUnitFor(span, l->scene[0]->summary.timeAxis);

    const analysis::SummaryFigures &sa = c.a.figures, &sb = c.b.figures;
    const analysis::SummaryFigures* sr = ref ? &ref->b.figures : nullptr; // the real run's
    const analysis::SummaryDelta& d = c.difference.figures;
    auto fixed4 = [](double v) { return QString::number(v, 'f', 4); };
    auto collapses = [](const analysis::SideSummary& x) {
        return x.collapsesKnown() ? QString::number(x.collapses) : tr("unknown");
    };
    // figure, A, B, B - A, the reference's.
    const QList<QStringList> sum = {
        {tr("peak reserved"), bytes(sa.peakReservedBytes), bytes(sb.peakReservedBytes),
         signedBytes(d.peakReservedBytes), sr ? bytes(sr->peakReservedBytes) : QString()},
        {tr("peak allocated"), bytes(sa.peakAllocatedBytes), bytes(sb.peakAllocatedBytes),
         signedBytes(d.peakAllocatedBytes), sr ? bytes(sr->peakAllocatedBytes) : QString()},
        {tr("final reserved"), bytes(sa.finalReservedBytes), bytes(sb.finalReservedBytes),
         signedBytes(d.finalReservedBytes), sr ? bytes(sr->finalReservedBytes) : QString()},
        {tr("mean F"), fixed4(sa.meanFragmentationRatio), fixed4(sb.meanFragmentationRatio),
         fixed4(d.meanFragmentationRatio), sr ? fixed4(sr->meanFragmentationRatio) : QString()},
        {tr("max F"), fixed4(sa.maxFragmentationRatio), fixed4(sb.maxFragmentationRatio),
         fixed4(d.maxFragmentationRatio), sr ? fixed4(sr->maxFragmentationRatio) : QString()},
        {tr("smallest largest free block"), bytes(sa.minLargestFreeBytes),
         bytes(sb.minLargestFreeBytes), signedBytes(d.minLargestFreeBytes),
         sr ? bytes(sr->minLargestFreeBytes) : QString()},
        {tr("most fragments"), QString::number(sa.maxFragmentCount),
         QString::number(sb.maxFragmentCount), QString::number(d.maxFragmentCount),
         sr ? QString::number(sr->maxFragmentCount) : QString()},
        {tr("collapses"), collapses(c.a), collapses(c.b),
         c.a.collapsesKnown() && c.b.collapsesKnown() ? QString::number(c.difference.collapses)
                                                      : QStringLiteral("–"),
         ref ? collapses(ref->b) : QString()},
        {tr("OOMs"), QString::number(c.a.ooms), QString::number(c.b.ooms),
         QString::number(c.difference.ooms), ref ? QString::number(ref->b.ooms) : QString()},
    };
    summary_->setRowCount(static_cast<int>(sum.size()));
    for (int r = 0; r < sum.size(); ++r)
        for (int k = 0; k < summary_->columnCount(); ++k)
            summary_->setItem(r, k, new QTableWidgetItem(sum[r][k]));
    summary_->resizeColumnsToContents();

    const QString key =
        c.byFrame ? tr("frame") : tr("time from start (%1)").arg(QString::fromUtf8(unit_.name));
    auto xOf = [&](int64_t k) {
        return c.byFrame ? static_cast<double>(k) : static_cast<double>(k) / unit_.divisor;
    };
    rows_->setHorizontalHeaderLabels({key, tr("reserved A"), tr("reserved B"), tr("F A"), tr("F B"),
                                      tr("largest free A"), tr("largest free B"), tr("OOMs A/B"),
                                      tr("collapse A/B")});
    rows_->setRowCount(static_cast<int>(c.rows.size()));
    auto collapse = [](const analysis::SideSummary& x, const analysis::PointFigures& p) {
        return !x.collapsesKnown() ? QStringLiteral("?") : p.collapsed ? tr("yes") : tr("-");
    };
    // A session with no data at a row (past its end, a frame it lacks) shows none there: a gap
    // in its curve (NaN), "–" in the table.
    auto gib = [](const analysis::PointFigures& p) {
        return p.present ? static_cast<double>(p.reserved) / double(1ull << 30) : qQNaN();
    };
    auto ratio = [](const analysis::PointFigures& p) {
        return p.present ? p.fragmentation : qQNaN();
    };
    auto cell = [](const analysis::PointFigures& p, const QString& text) {
        return p.present ? text : QStringLiteral("–");
    };
    QVector<double> x, ra, rb, fa, fb;
    for (size_t i = 0; i < c.rows.size(); ++i) {
        const analysis::CompareRow& r = c.rows[i];
        x << xOf(r.key);
        ra << gib(r.a);
        rb << gib(r.b);
        fa << ratio(r.a);
        fb << ratio(r.b);
        const QStringList cells = {
            c.byFrame ? QString::number(r.key) : QString::number(xOf(r.key), 'f', 3),
            cell(r.a, bytes(r.a.reserved)),
            cell(r.b, bytes(r.b.reserved)),
            cell(r.a, QString::number(r.a.fragmentation, 'f', 3)),
            cell(r.b, QString::number(r.b.fragmentation, 'f', 3)),
            cell(r.a, bytes(r.a.largestFree)),
            cell(r.b, bytes(r.b.largestFree)),
            QStringLiteral("%1/%2").arg(cell(r.a, QString::number(r.a.ooms)),
                                        cell(r.b, QString::number(r.b.ooms))),
            c.byFrame ? QStringLiteral("%1/%2").arg(collapse(c.a, r.a), collapse(c.b, r.b))
                      : QString()};
        for (int k = 0; k < cells.size(); ++k)
            rows_->setItem(static_cast<int>(i), k, new QTableWidgetItem(cells[k]));
    }
    rows_->resizeColumnsToContents();
    const analysis::CallSiteComparison& sites = l->sites;
    callSites_->setRowCount(static_cast<int>(sites.rows.size()));
    for (size_t i = 0; i < sites.rows.size(); ++i) {
        const analysis::CallSiteDelta& r = sites.rows[i];
        const QStringList cells = {QString::fromStdString(r.site), bytes(r.aBytes), bytes(r.bBytes),
                                   signedBytes(r.deltaBytes)};
        for (int k = 0; k < cells.size(); ++k)
            callSites_->setItem(static_cast<int>(i), k, new QTableWidgetItem(cells[k]));
    }
    callSites_->resizeColumnsToContents();
    QVector<double> xr, rr, fr; // the reference's own rows
    if (ref)
        for (const analysis::CompareRow& r : ref->rows) {
            xr << xOf(r.key);
            rr << gib(r.b);
            fr << ratio(r.b);
        }

    // Reserved bytes and F change in steps: each value holds until the next row.
    auto draw = [&](QCustomPlot* p, const QVector<double>& ya, const QVector<double>& yb,
                    const QVector<double>& yr) {
        p->clearGraphs();
        auto add = [&](const QString& name, const QPen& pen, const QVector<double>& xs,
                       const QVector<double>& ys) {
            QCPGraph* g = p->addGraph();
            g->setName(name);
            g->setPen(pen);
            g->setLineStyle(QCPGraph::lsStepLeft);
            g->setData(xs, ys, true);
        };
        add(QStringLiteral("A"), QPen(QColor(31, 119, 180), 2), x, ya);
        add(QStringLiteral("B"), QPen(QColor(214, 39, 40), 2, Qt::DashLine), x, yb);
        if (ref) add(tr("real run (measured)"), QPen(QColor(110, 110, 110), 1), xr, yr);
        p->xAxis->setLabel(key);
        p->rescaleAxes();
        p->yAxis->scaleRange(1.1, p->yAxis->range().center()); // lines off the frame's edges
        p->replot();
    };
    linking_ = true; // the heatmaps are not there yet: nothing to follow
    draw(reserved_, ra, rb, rr);
    draw(frag_, fa, fb, fr);
    linking_ = false;

    const analysis::SideSummary* side[2] = {&c.a, &c.b};
    for (int k = 0; k < 2; ++k) {
        scene_[k] = l->scene[k];
        axis_[k] = axisOf(c, *scene_[k], unit_.divisor);
        title_[k]->setText(heatmapTitle(k == 0 ? "A" : "B", *side[k]));
        heat_[k]->setLinked(span);
    }
    // A first (B follows through the link), then B's own fit is overridden by the link.
    heat_[1]->setScene(scene_[1], levelOf(*scene_[1], c.b));
    heat_[0]->setScene(scene_[0], levelOf(*scene_[0], c.a));
}

} // namespace fs::gui
