// The block list: every live block and free fragment of the track (or the selected pool) at
// the time cursor, as the engine lists them (Explorer::blocksAt), sortable by any column. The
// model sorts itself (a proxy would ask data() a million times for a long list).
#pragma once

#include "core/analysis/explore.h"
#include "core/events.h"

#include <QAbstractTableModel>
#include <QWidget>

#include <memory>
#include <vector>

class QCheckBox;
class QLabel;
class QTableView;

namespace fs::views {

class BlockListModel : public QAbstractTableModel
{
    Q_OBJECT
public:
    enum Column { Address, Size, Requested, Kind, Stream, Pool, Age, Tag, Site, ColumnCount };
    enum Role { AllocIdRole = Qt::UserRole + 1, AddressRole, SizeRole, SinceRole, FreeRole };
    explicit BlockListModel(QObject* parent = nullptr);
    // rows: the engine's rows; at: the instant (ages are at - since); withFree: list fragments.
    void resetData(std::vector<analysis::BlockRow> rows, int64_t at, int64_t timeBegin,
                   TimeAxis axis, Level level, bool withFree = true);
    void setShowFree(bool on);
    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation o, int role = Qt::DisplayRole) const override;
    void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;
    const analysis::BlockRow& row(int r) const { return rows_[order_[static_cast<size_t>(r)]]; }
    int rowOfAllocation(int64_t id) const; // -1 when not listed
    int64_t blocks() const { return blocks_; }
    int64_t fragments() const { return fragments_; }
    int64_t pending() const { return pending_; }

private:
    void applyOrder();
    std::vector<analysis::BlockRow> rows_;
    std::vector<size_t> order_; // shown rows (fragments left out unless showFree_), sorted
    bool showFree_ = true;
    int sortColumn_ = Address;
    Qt::SortOrder sortOrder_ = Qt::AscendingOrder;
    int64_t at_ = 0, begin_ = 0;
    TimeAxis axis_ = TimeAxis::Nanoseconds;
    Level level_ = Level::Framework;
    int64_t blocks_ = 0, fragments_ = 0, pending_ = 0;
};

// A sortable table of a BlockListModel as the block list and the search show it: whole rows,
// one at a time, addresses elided in the middle, and no claim on the timelines' height.
QTableView* blockTable(BlockListModel* model, QWidget* parent);

class BlockList : public QWidget
{
    Q_OBJECT
public:
    explicit BlockList(QWidget* parent = nullptr);
    BlockListModel* model() const { return model_; }
    QTableView* table() const { return table_; }
    // headline: what the rows are ("412 blocks and 71 free fragments at 1.228 s").
    void setRows(std::vector<analysis::BlockRow> rows, int64_t at, int64_t timeBegin, TimeAxis axis,
                 Level level, const QString& headline);
    void setMessage(const QString& text); // no rows: why (no session, only an end state, ...)
    void selectAllocation(int64_t id);    // scrolls to it when listed
    QString headline() const;

signals:
    void blockSelected(qint64 allocId);
    void fragmentSelected(quint64 address, quint64 size);

private:
    QLabel* head_ = nullptr;
    QCheckBox* free_ = nullptr;
    QTableView* table_ = nullptr;
    BlockListModel* model_ = nullptr;
    bool syncing_ = false;
};

// "12.5 ms", "3.2 s": an age or a duration on the session's axis.
QString formatDuration(int64_t ns, TimeAxis axis);

} // namespace fs::views
