#include "block_list.h"

#include "render/render.h"
#include "render/scene.h"

#include <QCheckBox>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QTimer>
#include <QVBoxLayout>

#include <algorithm>
#include <numeric>

namespace fs::views {

QString formatDuration(int64_t ns, TimeAxis axis)
{
    return QString::fromStdString(render::formatTime(ns, axis));
}

BlockListModel::BlockListModel(QObject* parent) : QAbstractTableModel(parent) {}

void BlockListModel::resetData(std::vector<analysis::BlockRow> rows, int64_t at, int64_t timeBegin,
                               TimeAxis axis, Level level, bool withFree)
{
    beginResetModel();
    rows_ = std::move(rows);
    at_ = at;
    begin_ = timeBegin;
    axis_ = axis;
    level_ = level;
    showFree_ = withFree;
    const analysis::BlockCounts c = analysis::countRows(rows_);
    blocks_ = c.blocks;
    fragments_ = c.fragments;
    pending_ = c.pending;
    applyOrder();
    endResetModel();
}

void BlockListModel::setShowFree(bool on)
{
    if (on == showFree_) return;
    beginResetModel();
    showFree_ = on;
    applyOrder();
    endResetModel();
}

int BlockListModel::rowCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : static_cast<int>(order_.size());
}

int BlockListModel::columnCount(const QModelIndex& parent) const
{
    return parent.isValid() ? 0 : ColumnCount;
}

QVariant BlockListModel::headerData(int section, Qt::Orientation o, int role) const
{
    if (o != Qt::Horizontal) return {};
    if (role == Qt::ToolTipRole && section == Site)
        return tr("The innermost frame of the user's own code (allocator, dispatch, "
                  "torch::unwind and interpreter frames are skipped)");
    if (role == Qt::ToolTipRole && section == Age)
        return tr("How long the block has been live at the cursor");
    if (role != Qt::DisplayRole) return {};
    switch (section) {
    case Address:
        return tr("address");
    case Size:
        return tr("size");
    case Requested:
        return tr("requested");
    case Kind:
        return tr("kind");
    case Stream:
        return tr("stream");
    case Pool:
        return tr("pool");
    case Age:
        return tr("age");
    case Tag:
        return tr("tag");
    case Site:
        return tr("call site");
    }
    return {};
}

QVariant BlockListModel::data(const QModelIndex& index, int role) const
{
    if (!index.isValid() || index.row() >= rowCount()) return {};
    const analysis::BlockRow& b = row(index.row());
    switch (role) {
    case AllocIdRole:
        return static_cast<qlonglong>(b.id);
    case AddressRole:
        return static_cast<qulonglong>(b.address);
    case SizeRole:
        return static_cast<qulonglong>(b.size);
    case SinceRole:
        return static_cast<qlonglong>(b.since);
    case FreeRole:
        return b.free;
    case Qt::TextAlignmentRole:
        return index.column() == Size || index.column() == Requested || index.column() == Age
                   ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                   : QVariant();
    case Qt::ForegroundRole:
        return b.free      ? QVariant(QColor(40, 150, 60))
               : b.pending ? QVariant(render::pendingColor().darker(130))
                           : QVariant();
    case Qt::ToolTipRole:
        if (index.column() == Site && b.ghost && b.site.empty())
            return tr("Allocated before the snapshot's trace began (a ghost block): its stack "
                      "was not recorded");
        if (index.column() == Site) return QString::fromStdString(b.site);
        if (index.column() == Tag && !b.userMetadata.empty())
            return tr("user metadata: %1").arg(QString::fromStdString(b.userMetadata));
        if (b.pending)
            return tr("Freed by the program, still used by another stream: neither allocated "
                      "nor free (in no free fragment until the wait ends)");
        return {};
    case Qt::DisplayRole:
        break;
    default:
        return {};
    }
    switch (index.column()) {
    case Address:
        return QString::fromStdString(render::formatAddress(b.address));
    case Size:
        return QString::fromStdString(render::formatBytes(static_cast<double>(b.size)));
    case Requested:
        return b.free || b.pending || b.requested == 0
                   ? QString()
                   : QString::fromStdString(render::formatBytes(static_cast<double>(b.requested)));
    case Kind:
        return b.free      ? tr("free fragment")
               : b.pending ? tr("pending free")
                           : tr("block #%1").arg(b.id);
    case Stream:
        return b.free ? QString() : QString::number(b.stream);
    case Pool:
        return QString::fromStdString(analysis::poolLabel(b.pool, level_));
    case Age:
        return b.free ? QString() : formatDuration(at_ - b.since, axis_);
    case Tag: // the source's name, else the allocation's user_metadata (PyTorch snapshots)
        return QString::fromStdString(b.tag.empty() ? b.userMetadata : b.tag);
    case Site:
        return b.ghost && b.site.empty() ? tr("(ghost block)") : QString::fromStdString(b.site);
    }
    return {};
}

void BlockListModel::sort(int column, Qt::SortOrder order)
{
    emit layoutAboutToBeChanged();
    sortColumn_ = column;
    sortOrder_ = order;
    applyOrder();
    emit layoutChanged();
}

void BlockListModel::applyOrder()
{
    order_.clear();
    order_.reserve(rows_.size());
    for (size_t i = 0; i < rows_.size(); ++i)
        if (showFree_ || !rows_[i].free) order_.push_back(i);
    auto key = [&](const analysis::BlockRow& b, const analysis::BlockRow& c) -> int {
        auto cmp = [](auto x, auto y) { return x < y ? -1 : y < x ? 1 : 0; };
        switch (sortColumn_) {
        case Size:
            return cmp(b.size, c.size);
        case Requested:
            return cmp(b.requested, c.requested);
        case Kind:
            return cmp(b.free, c.free);
        case Stream:
            return cmp(b.stream, c.stream);
        case Pool:
            return cmp(b.pool, c.pool);
        case Age: // the oldest first when ascending; fragments last
            return cmp(b.free ? INT64_MAX : b.since, c.free ? INT64_MAX : c.since) * -1;
        case Tag:
            return b.tag.compare(c.tag);
        case Site:
            return b.site.compare(c.site);
        default:
            return cmp(b.address, c.address);
        }
    };
    std::stable_sort(order_.begin(), order_.end(), [&](size_t a, size_t b) {
        const int k = key(rows_[a], rows_[b]);
        if (k != 0) return sortOrder_ == Qt::AscendingOrder ? k < 0 : k > 0;
        return rows_[a].address < rows_[b].address;
    });
}

int BlockListModel::rowOfAllocation(int64_t id) const
{
    if (id < 0) return -1;
    for (size_t r = 0; r < order_.size(); ++r)
        if (rows_[order_[r]].id == id) return static_cast<int>(r);
    return -1;
}

QTableView* blockTable(BlockListModel* model, QWidget* parent)
{
    auto* t = new QTableView(parent);
    t->setModel(model);
    t->setSortingEnabled(true);
    t->setSelectionBehavior(QAbstractItemView::SelectRows);
    t->setSelectionMode(QAbstractItemView::SingleSelection);
    t->verticalHeader()->hide();
    t->verticalHeader()->setDefaultSectionSize(20);
    t->setMinimumHeight(60); // a dock tab must not claim the timelines' height
    t->horizontalHeader()->setStretchLastSection(true);
    // Column widths from the first 100 rows, not 1,000 (Qt's default): the cells are addresses,
    // sizes and kinds of like widths, and measuring 632 rows took ~40 ms of the GUI thread.
    t->horizontalHeader()->setResizeContentsPrecision(100);
    t->setWordWrap(false);
    t->setTextElideMode(Qt::ElideMiddle);
    return t;
}

BlockList::BlockList(QWidget* parent) : QWidget(parent)
{
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(4, 4, 4, 4);
    auto* top = new QHBoxLayout;
    head_ = new QLabel(tr("No session."), this);
    head_->setWordWrap(true);
    free_ = new QCheckBox(tr("free fragments"), this);
    free_->setChecked(true);
    free_->setToolTip(tr("List the free fragments between the blocks too"));
    top->addWidget(head_, 1);
    top->addWidget(free_);
    lay->addLayout(top);
    model_ = new BlockListModel(this);
    table_ = blockTable(model_, this);
    table_->sortByColumn(BlockListModel::Address, Qt::AscendingOrder);
    lay->addWidget(table_, 1);
    connect(free_, &QCheckBox::toggled, model_, &BlockListModel::setShowFree);
    connect(table_->selectionModel(), &QItemSelectionModel::currentRowChanged, this,
            [this](const QModelIndex& cur) {
                if (syncing_ || !cur.isValid()) return;
                const analysis::BlockRow& b = model_->row(cur.row());
                if (b.free || b.pending) // a range, not an allocation
                    emit fragmentSelected(b.address, b.size);
                else
                    emit blockSelected(b.id);
            });
}

void BlockList::setRows(std::vector<analysis::BlockRow> rows, int64_t at, int64_t timeBegin,
                        TimeAxis axis, Level level, const QString& headline)
{
    // Keep the selected block selected when it is still listed (the cursor moved).
    const QModelIndex cur = table_->currentIndex();
    const int64_t keep = cur.isValid() ? model_->row(cur.row()).id : -1;
    syncing_ = true;
    const bool firstRows = model_->rowCount() == 0;
    model_->resetData(std::move(rows), at, timeBegin, axis, level, free_->isChecked());
    head_->setText(headline);
    if (keep >= 0) selectAllocation(keep);
    if (firstRows) {
        // On a turn of its own, not in the one that brings the cursor's histogram, timelines
        // and memory map.
        QTimer::singleShot(0, this, [this] {
            for (int c : {BlockListModel::Address, BlockListModel::Size, BlockListModel::Requested,
                          BlockListModel::Kind, BlockListModel::Stream, BlockListModel::Pool,
                          BlockListModel::Age})
                table_->resizeColumnToContents(c);
            table_->setColumnWidth(BlockListModel::Tag, 110);
        });
    }
    syncing_ = false;
}

void BlockList::setMessage(const QString& text)
{
    syncing_ = true;
    model_->resetData({}, 0, 0, TimeAxis::Nanoseconds, Level::Framework, free_->isChecked());
    head_->setText(text);
    syncing_ = false;
}

void BlockList::selectAllocation(int64_t id)
{
    const int r = model_->rowOfAllocation(id);
    if (r < 0) return;
    const bool was = syncing_;
    syncing_ = true;
    const QModelIndex i = model_->index(r, 0);
    table_->selectionModel()->setCurrentIndex(i, QItemSelectionModel::ClearAndSelect |
                                                     QItemSelectionModel::Rows);
    table_->scrollTo(i);
    syncing_ = was;
}

QString BlockList::headline() const
{
    return head_->text();
}

} // namespace fs::views
