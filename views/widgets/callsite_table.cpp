#include "callsite_table.h"

#include "render/scene_explore.h"

#include <QCheckBox>
#include <QComboBox>
#include <QElapsedTimer>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSortFilterProxyModel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>

namespace fs::views {

namespace {
QString bytes(uint64_t b)
{
    return QString::fromStdString(render::formatBytes(static_cast<double>(b)));
}
} // namespace

CallSiteModel::CallSiteModel(QObject* parent) : QAbstractTableModel(parent) {}

void CallSiteModel::resetData(std::shared_ptr<const analysis::CallSiteTable> t)
{
    beginResetModel();
    t_ = std::move(t);
    endResetModel();
}

int CallSiteModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() || !t_ ? 0 : static_cast<int>(t_->rows.size());
}

int CallSiteModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant CallSiteModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole) {
        switch (section) {
        case Held:
            return tr("Bytes of its blocks live at the end of the range (the cursor)");
        case Share:
            return tr("Share of every live block's bytes at the end of the range");
        case Allocations:
            return tr("Allocations made in the range");
        case Holes:
            return tr("Frees in the range after which the block's space lay between two live "
                      "blocks: fragments left behind");
        case HoleBytes:
            return tr("Size of those fragments right after each free");
        default:
            return {};
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (section) {
    case Site:
        return t_ ? QString::fromUtf8(analysis::groupByName(t_->by)) : tr("call site");
    case Held:
        return tr("held");
    case Share:
        return tr("% held");
    case Live:
        return tr("live blocks");
    case Allocations:
        return tr("allocations");
    case Allocated:
        return tr("allocated");
    case Holes:
        return tr("holes left");
    case HoleBytes:
        return tr("hole bytes");
    }
    return {};
}

QVariant CallSiteModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || !t_ || index.row() >= rowCount()) return {};
    const analysis::CallSiteRow& r = t_->rows[static_cast<size_t>(index.row())];
    const double share =
        t_->heldBytes == 0 ? 0.0
                           : static_cast<double>(r.heldBytes) / static_cast<double>(t_->heldBytes);
    if (role == DetailRole) return QString::fromStdString(r.detail);
    if (role == Qt::ToolTipRole)
        return QString::fromStdString(r.detail.empty() ? r.label : r.detail);
    if (role == Qt::TextAlignmentRole)
        return index.column() == Site ? QVariant() : QVariant(Qt::AlignRight | Qt::AlignVCenter);
    if (role == SortRole) {
        switch (index.column()) {
        case Site:
            return QString::fromStdString(r.label);
        case Held:
        case Share:
            return static_cast<qulonglong>(r.heldBytes);
        case Live:
            return static_cast<qlonglong>(r.liveBlocks);
        case Allocations:
            return static_cast<qlonglong>(r.allocations);
        case Allocated:
            return static_cast<qulonglong>(r.allocatedBytes);
        case Holes:
            return static_cast<qlonglong>(r.holes);
        case HoleBytes:
            return static_cast<qulonglong>(r.holeBytes);
        }
    }
    if (role != Qt::DisplayRole) return {};
    switch (index.column()) {
    case Site:
        return QString::fromStdString(r.label);
    case Held:
        return bytes(r.heldBytes);
    case Share:
        return QStringLiteral("%1 %").arg(share * 100, 0, 'f', 1);
    case Live:
        return QString::number(r.liveBlocks);
    case Allocations:
        return QString::number(r.allocations);
    case Allocated:
        return bytes(r.allocatedBytes);
    case Holes:
        return QString::number(r.holes);
    case HoleBytes:
        return bytes(r.holeBytes);
    }
    return {};
}

CallSitesPanel::CallSitesPanel(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    auto* top = new QHBoxLayout;
    group_ = new QComboBox(this);
    group_->addItem(tr("call site"), int(analysis::GroupBy::CallSite));
    group_->addItem(tr("tag"), int(analysis::GroupBy::Tag));
    group_->addItem(tr("stream"), int(analysis::GroupBy::Stream));
    group_->addItem(tr("pool"), int(analysis::GroupBy::Pool));
    group_->addItem(tr("memory category"), int(analysis::GroupBy::Category));
    range_ = new QComboBox(this);
    range_->addItem(tr("run up to the cursor"), int(Range::UpToCursor));
    range_->addItem(tr("selected range"), int(Range::Selection));
    range_->addItem(tr("whole run"), int(Range::WholeRun));
    colour_ = new QCheckBox(tr("colour the heatmap"), this);
    colour_->setToolTip(tr("Colour the heatmap's blocks by this grouping (top entries, legend on "
                           "the heatmap) instead of by occupancy"));
    top->addWidget(new QLabel(tr("by"), this));
    top->addWidget(group_);
    top->addWidget(new QLabel(tr("over"), this));
    top->addWidget(range_);
    top->addWidget(colour_);
    top->addStretch(1);
    lay->addLayout(top);
    status_ = new QLabel(this);
    status_->setWordWrap(true);
    lay->addWidget(status_);
    model_ = new CallSiteModel(this);
    auto* proxy = new QSortFilterProxyModel(this);
    proxy->setSourceModel(model_);
    proxy->setSortRole(CallSiteModel::SortRole);
    table_ = new QTableView(this);
    table_->setModel(proxy);
    table_->setSortingEnabled(true);
    table_->sortByColumn(CallSiteModel::Held, Qt::DescendingOrder);
    table_->setSelectionBehavior(QAbstractItemView::SelectRows);
    table_->setSelectionMode(QAbstractItemView::SingleSelection);
    table_->verticalHeader()->hide();
    table_->verticalHeader()->setDefaultSectionSize(20);
    table_->setMinimumHeight(60); // a dock tab must not claim the timelines' height
    table_->setWordWrap(false);
    // A call site's label starts with its file:line (two sites of one function differ there):
    // a long one loses its end, never its line.
    table_->setTextElideMode(Qt::ElideRight);
    table_->horizontalHeader()->setStretchLastSection(false);
    lay->addWidget(table_, 1);
    auto colouring = [this] {
        if (!colour_->isChecked()) return analysis::Colouring::Occupancy;
        switch (groupBy()) {
        case analysis::GroupBy::Tag:
            return analysis::Colouring::Tag;
        case analysis::GroupBy::Stream:
            return analysis::Colouring::Stream;
        case analysis::GroupBy::Pool:
            return analysis::Colouring::Pool;
        case analysis::GroupBy::Category:
            return analysis::Colouring::Category;
        default:
            return analysis::Colouring::CallSite;
        }
    };
    connect(group_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this, colouring] {
        refresh();
        if (colour_->isChecked()) emit colouringChanged(colouring());
    });
    connect(range_, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] { refresh(); });
    connect(colour_, &QCheckBox::toggled, this,
            [this, colouring] { emit colouringChanged(colouring()); });
    connect(table_, &QTableView::activated, this, [this, proxy](const QModelIndex& i) {
        const QModelIndex s = proxy->mapToSource(i);
        const auto* t = model_->table();
        if (!t || s.row() >= static_cast<int>(t->rows.size())) return;
        const analysis::CallSiteRow& r = t->rows[static_cast<size_t>(s.row())];
        if (t->by == analysis::GroupBy::CallSite && !r.detail.empty())
            emit searchRequested(QString::fromStdString(r.detail));
        else if (t->by == analysis::GroupBy::Tag && r.label != "(no tag)")
            emit searchRequested(QStringLiteral("tag:") + QString::fromStdString(r.label));
    });
}

analysis::GroupBy CallSitesPanel::groupBy() const
{
    return static_cast<analysis::GroupBy>(group_->currentData().toInt());
}

void CallSitesPanel::setGroupBy(analysis::GroupBy g)
{
    group_->setCurrentIndex(group_->findData(int(g)));
}

void CallSitesPanel::setCategoryRules(std::vector<analysis::CategoryRule> rules)
{
    categoryRules_ = std::move(rules);
    if (groupBy() == analysis::GroupBy::Category) refresh();
}

void CallSitesPanel::setColourHeatmap(bool on)
{
    colour_->setChecked(on);
}

void CallSitesPanel::setRange(Range r)
{
    range_->setCurrentIndex(range_->findData(int(r)));
}

QString CallSitesPanel::status() const
{
    return status_->text();
}

void CallSitesPanel::setScene(std::shared_ptr<const render::Scene> scene, int track)
{
    scene_ = std::move(scene);
    track_ = track;
    model_->resetData(nullptr);
    refresh();
}

void CallSitesPanel::showEvent(QShowEvent* e)
{
    QWidget::showEvent(e);
    if (stale_) refresh();
}

void CallSitesPanel::setCursor(int64_t t)
{
    if (t == cursor_) return;
    cursor_ = t;
    if (static_cast<Range>(range_->currentData().toInt()) == Range::UpToCursor) refresh();
}

void CallSitesPanel::setSelectionRange(int64_t from, int64_t to)
{
    if (from == selFrom_ && to == selTo_) return;
    selFrom_ = from;
    selTo_ = to;
    if (static_cast<Range>(range_->currentData().toInt()) == Range::Selection) refresh();
}

void CallSitesPanel::refresh()
{
    // A hidden panel (a tab behind another) computes when shown: over a long run the first
    // table replays every event once.
    if (!isVisible()) {
        stale_ = true;
        jobs_->cancel(); // what the running job finds is for the old request
        return;
    }
    stale_ = false;
    start();
}

void CallSitesPanel::start()
{
    if (!scene_ || track_ < 0 || !render::canExplore(*scene_)) {
        jobs_->cancel();
        status_->setText(scene_ ? tr("Reading the session…") : tr("No session."));
        return;
    }
    const Range r = static_cast<Range>(range_->currentData().toInt());
    int64_t from = scene_->timeBegin() - 1, to = scene_->timeEnd();
    if (r == Range::UpToCursor && cursor_ != kNoTime) to = cursor_;
    if (r == Range::Selection) {
        if (selFrom_ == kNoTime || selTo_ == kNoTime) {
            jobs_->cancel();
            status_->setText(tr("Select a frame or a time range first (or choose another range)."));
            model_->resetData(nullptr);
            return;
        }
        from = selFrom_;
        to = selTo_;
    }
    status_->setText(tr("Computing…"));
    struct Result
    {
        decltype(render::callSites(*scene_, track_, from, to, groupBy())) table;
        double ms = 0;
    };
    const auto scene = scene_;
    jobs_->start(
        [scene, track = track_, from, to, by = groupBy(), rules = categoryRules_](const Job&) {
            QElapsedTimer clock;
            clock.start();
            Result out{render::callSites(*scene, track, from, to, by, rules), 0};
            out.ms = static_cast<double>(clock.nsecsElapsed()) / 1e6;
            return out;
        },
        [this, scene](Result res) {
            if (scene_ != scene) return;
            lastMs_ = res.ms;
            auto& t = res.table;
            if (!t) {
                status_->setText(tr("No call sites for this track."));
                model_->resetData(nullptr);
                return;
            }
            const bool noStacks = t->by == analysis::GroupBy::CallSite && !t->stacksRecorded;
            status_->setText(
                (noStacks ? tr("This session recorded no call stacks: group by tag, "
                               "stream or pool instead. ")
                          : QString()) +
                tr("%n group(s), %1 held at %2 · computed in %3 ms", "", int(t->rows.size()))
                    .arg(bytes(t->heldBytes),
                         QString::fromStdString(render::formatTime(t->to - scene->timeBegin(),
                                                                   scene->summary.timeAxis)))
                    .arg(res.ms, 0, 'f', 0));
            model_->resetData(std::make_shared<const analysis::CallSiteTable>(std::move(*t)));
            // Figures sized to their contents; the call site keeps at least 40 % of the width
            // (a long label loses its end).
            QTableView* tv = table_;
            tv->resizeColumnsToContents();
            tv->setColumnWidth(CallSiteModel::Site,
                               std::max(tv->columnWidth(CallSiteModel::Site) > 0 ? 160 : 0,
                                        std::min(tv->columnWidth(CallSiteModel::Site),
                                                 tv->viewport()->width() * 45 / 100)));
        },
        [this](const QString& why) { status_->setText(tr("Cannot compute: %1").arg(why)); });
}

} // namespace fs::views
