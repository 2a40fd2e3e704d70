#include "graphs_panel.h"

#include "plot_widgets.h"
#include "replot_queue.h"

#include "core/alloc/graph_sharing.h"
#include "core/alloc/replay.h"
#include "core/analysis/graphs_text.h"
#include "core/format.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <cmath>

namespace fs::views {

namespace {

// A scatter of more points than this shows every k-th replay (the title says how many).
constexpr size_t kMaxScatterPoints = 20000;

QString bytes(uint64_t b)
{
    return QString::fromStdString(humanBytes(b));
}

QString duration(double ns)
{
    return QString::fromStdString(analysis::durationText(ns));
}

} // namespace

// ---- model -----------------------------------------------------------------------------------

void GraphsModel::resetData(std::shared_ptr<const analysis::GraphsReport> r)
{
    beginResetModel();
    r_ = std::move(r);
    endResetModel();
}

int GraphsModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !r_ ? 0 : static_cast<int>(r_->graphs.size());
}

int GraphsModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant GraphsModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal || role != Qt::DisplayRole) return {};
    switch (section) {
    case Graph:
        return tr("graph");
    case Device:
        return tr("dev");
    case Captures:
        return tr("captures");
    case Recaptures:
        return tr("re-captures");
    case Pool:
        return tr("pool");
    case PoolBytes:
        return tr("pool bytes");
    case PoolPeak:
        return tr("pool peak");
    case Replays:
        return tr("replays");
    case P50:
        return tr("p50");
    case P99:
        return tr("p99");
    case Max:
        return tr("max");
    case Jitter:
        return tr("jitter");
    case RhoF:
        return tr("ρ(duration, F) (n)");
    default:
        return {};
    }
}

QVariant GraphsModel::data(const QModelIndex& index, int role) const
{
    if (!r_ || !index.isValid() || index.row() >= rowCount()) return {};
    const analysis::GraphInfo& g = r_->graphs[static_cast<size_t>(index.row())];
    const analysis::PoolInfo* p = r_->poolOf(g);
    const bool any = g.replay.count > 0;
    if (role == RawRole) {
        switch (index.column()) {
        case Graph:
            return QString::fromStdString(g.name);
        case Device:
            return static_cast<qulonglong>(g.device);
        case Captures:
            return static_cast<qlonglong>(g.captures.size());
        case Recaptures:
            return static_cast<qlonglong>(g.recaptures.size());
        case Pool:
            return g.poolKnown() ? QVariant(static_cast<qulonglong>(g.pool)) : QVariant();
        case PoolBytes:
            return static_cast<qulonglong>(p ? p->reservedBytes : 0);
        case PoolPeak:
            return static_cast<qulonglong>(p ? p->peakReservedBytes : 0);
        case Replays:
            return static_cast<qlonglong>(g.replay.count);
        case P50:
            return static_cast<qlonglong>(g.replay.p50);
        case P99:
            return static_cast<qlonglong>(g.replay.p99);
        case Max:
            return static_cast<qlonglong>(g.replay.max);
        case Jitter:
            return g.replay.jitter;
        case RhoF:
            return g.vsFragmentation.spearman;
        default:
            return {};
        }
    }
    if (role == Qt::TextAlignmentRole)
        return index.column() == Graph || index.column() == Pool
                   ? QVariant(Qt::AlignLeft | Qt::AlignVCenter)
                   : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role == Qt::ToolTipRole && index.column() == Pool)
        return tr("pool source: %1").arg(QString::fromLatin1(poolSourceName(g.poolSource)));
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
    case Graph:
        return QString::fromStdString(g.name);
    case Device:
        return g.device;
    case Captures:
        return static_cast<qlonglong>(g.captures.size());
    case Recaptures:
        return static_cast<qlonglong>(g.recaptures.size());
    case Pool:
        return QString::fromStdString(analysis::graphPoolLabel(g));
    case PoolBytes:
        return p ? bytes(p->reservedBytes) : QStringLiteral("-");
    case PoolPeak:
        return p ? bytes(p->peakReservedBytes) : QStringLiteral("-");
    case Replays:
        return static_cast<qlonglong>(g.replay.count);
    case P50:
        return any ? duration(static_cast<double>(g.replay.p50)) : QStringLiteral("-");
    case P99:
        return any ? duration(static_cast<double>(g.replay.p99)) : QStringLiteral("-");
    case Max:
        return any ? duration(static_cast<double>(g.replay.max)) : QStringLiteral("-");
    case Jitter:
        return g.replay.count > 1 ? duration(g.replay.jitter) : QStringLiteral("-");
    case RhoF:
        return g.vsFragmentation.n >= 3 ? QStringLiteral("%1 (%2)")
                                              .arg(g.vsFragmentation.spearman, 0, 'f', 3)
                                              .arg(g.vsFragmentation.n)
                                        : QStringLiteral("- (%1)").arg(g.vsFragmentation.n);
    default:
        return {};
    }
}

// ---- panel -----------------------------------------------------------------------------------

GraphsPanel::GraphsPanel(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(2, 2, 2, 2);
    summary_ = new QLabel(this);
    summary_->setWordWrap(true);
    summary_->setTextInteractionFlags(Qt::TextSelectableByMouse);
    lay->addWidget(summary_);
    auto* split = new QSplitter(Qt::Vertical, this);
    model_ = new GraphsModel(this);
    table_ = new QTableView(split);
    table_->setModel(model_);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->verticalHeader()->hide();
    table_->verticalHeader()->setDefaultSectionSize(20);
    // Column widths from the rows in view and 200 around them (Qt's default, 1,000, took ~45 ms
    // of the GUI thread for a long run's 8,520 graphs; the rows share one format).
    table_->horizontalHeader()->setResizeContentsPrecision(200);
    scatter_ = new QCustomPlot(split);
    scatter_->setMinimumHeight(140);
    scatter_->plotLayout()->insertRow(0);
    title_ = new QCPTextElement(scatter_, QString());
    scatter_->plotLayout()->addElement(0, 0, title_);
    split->addWidget(table_);
    split->addWidget(scatter_);
    lay->addWidget(split, 1);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) { selectGraph(cur.isValid() ? cur.row() : -1); });
    summary_->setText(tr("Open a session to see its CUDA graphs and memory pools."));
}

GraphsPanel::~GraphsPanel() = default; // the tracker cancels a running analysis

void GraphsPanel::setScene(std::shared_ptr<const render::Scene> scene)
{
    scene_ = std::move(scene);
    const void* engine = scene_ ? scene_->engine.get() : nullptr;
    if (engine == engine_) return; // new rules or the complete scene: the same graphs
    engine_ = engine;
    jobs_->cancel();
    show(nullptr);
    if (!scene_ || !scene_->engine) return;
    if (scene_->live) {
        summary_->setText(tr("Recording: the graphs are analysed when the recording ends."));
        return;
    }
    summary_->setText(tr("Analysing graphs and pools…"));
    jobs_->start(
        [eng = scene_->engine](const Job& job) -> std::shared_ptr<const analysis::GraphsReport> {
            const auto lock = eng->readLock();
            return std::make_shared<analysis::GraphsReport>(
                alloc::graphsReport(*eng, job.cancelFlag()));
        },
        [this](std::shared_ptr<const analysis::GraphsReport> r) { show(std::move(r)); },
        [this](const QString& error) {
            summary_->setText(tr("Graphs could not be analysed: %1").arg(error));
        });
}

void GraphsPanel::show(std::shared_ptr<const analysis::GraphsReport> r)
{
    report_ = std::move(r);
    selected_ = -1;
    model_->resetData(report_);
    if (report_) {
        fitColumns();
        QString text =
            QString::fromStdString(analysis::graphsSummaryText(summarize(*report_))).trimmed();
        text.remove(QStringLiteral("\n  details: fragscope graphs FILE"));
        summary_->setText(text.isEmpty() ? tr("No CUDA graph and no private pool.") : text);
    }
    drawScatter();
    emit reportReady(report_);
    emit poolOutlined({});
    if (report_ && !report_->graphs.empty()) table_->selectRow(0);
}

void GraphsPanel::fitColumns()
{
    fitPending_ = !table_->isVisible();
    if (!fitPending_) table_->resizeColumnsToContents();
}

void GraphsPanel::showEvent(QShowEvent* e)
{
    QWidget::showEvent(e);
    if (fitPending_) fitColumns();
}

void GraphsPanel::selectGraph(int row)
{
    if (!report_ || row < 0 || row >= static_cast<int>(report_->graphs.size())) row = -1;
    if (row == selected_ && row >= 0) return;
    selected_ = row;
    if (row >= 0 && table_->currentIndex().row() != row) table_->selectRow(row); // comes back
    drawScatter();
    PoolOutline o;
    if (row >= 0) {
        const analysis::GraphInfo& g = report_->graphs[static_cast<size_t>(row)];
        if (const analysis::PoolInfo* p = report_->poolOf(g)) {
            o.device = p->device;
            o.level = p->level;
            o.regions = p->regions;
        }
    }
    emit poolOutlined(o);
}

void GraphsPanel::setDark(bool dark)
{
    dark_ = dark;
    drawScatter();
}

void GraphsPanel::drawScatter()
{
    scatter_->clearGraphs();
    QString title = tr("select a graph: its replays' durations against F at their start");
    if (report_ && selected_ >= 0) {
        const auto g = static_cast<uint32_t>(selected_);
        const analysis::GraphInfo& gi = report_->graphs[g];
        size_t n = 0;
        for (const analysis::GraphReplay& rp : report_->replays)
            n += rp.graph == g && !std::isnan(rp.fragmentation) ? 1 : 0;
        const size_t every = std::max<size_t>(1, (n + kMaxScatterPoints - 1) / kMaxScatterPoints);
        QVector<double> x, y;
        size_t k = 0;
        for (const analysis::GraphReplay& rp : report_->replays) {
            if (rp.graph != g || std::isnan(rp.fragmentation)) continue;
            if (k++ % every != 0) continue;
            x << rp.fragmentation;
            y << static_cast<double>(rp.duration()) / 1e6;
        }
        QCPGraph* gr = scatter_->addGraph();
        gr->setLineStyle(QCPGraph::lsNone);
        gr->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssDisc, 4));
        gr->setPen(QPen(QColor(31, 119, 180, 160)));
        gr->setData(x, y);
        scatter_->rescaleAxes();
        scatter_->xAxis->setRange(0, 1);
        const QCPRange yr = scatter_->yAxis->range();
        scatter_->yAxis->setRange(0, std::max(yr.upper * 1.05, 1e-3));
        title = tr("%1: replay duration vs F at start — Spearman ρ %2, n %3%4")
                    .arg(QString::fromStdString(gi.name))
                    .arg(gi.vsFragmentation.spearman, 0, 'f', 3)
                    .arg(gi.vsFragmentation.n)
                    .arg(every > 1 ? tr(" (every %1th shown)").arg(every) : QString());
    }
    scatter_->xAxis->setLabel(tr("fragmentation F at replay start"));
    scatter_->yAxis->setLabel(tr("replay duration (ms)"));
    title_->setText(title);
    render::applyPlotTheme(*scatter_, dark_ ? render::Theme::darkTheme() : render::Theme::light());
    queueReplot(scatter_);
}

} // namespace fs::views
